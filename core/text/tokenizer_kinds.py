"""The two tokenizer kinds behind one interface, and the one a saved model folder's settings name.

Both share one small interface so the rest of the code never branches on the kind:
``encode(texts) -> TokenTable`` (ids padded to ``max_length`` plus true lengths), ``pad_id``,
``vocab_size``, ``save(folder)`` and ``to_dict()``. ``read_tokenizer(folder, config)`` rebuilds either one
from a saved model folder without executing anything from it.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from core.saving.files import ModelLoadError
from core.saving.model_folder import CONFIG_FILE
from core.text.word_tokenizer import WordTokenizer
from core.text.wordpiece_tokenizer import WordPieceTokenizer

Tokenizer = WordTokenizer | WordPieceTokenizer
TOKENIZER_KINDS = {WordTokenizer.kind: WordTokenizer, WordPieceTokenizer.kind: WordPieceTokenizer}


def read_tokenizer(folder: str | Path, config: dict, vocab_size: int | None = None) -> Tokenizer:
    """The tokenizer described by ``config["tokenizer"]`` (a ``to_dict()``), with its vocabulary file from
    ``folder`` (a regular file inside it, at most 64 MiB); ModelLoadError when the settings are not a tokenizer's,
    the file is missing or the tokenizer unusable, or when ``vocab_size`` is given and the vocabulary has another
    size. Nothing from the folder is executed."""
    folder = Path(folder)
    settings = config.get("tokenizer", {})
    if not isinstance(settings, Mapping):
        raise ModelLoadError(f"{folder / CONFIG_FILE}: tokenizer must be a JSON object")
    kind, max_length = settings.get("kind"), settings.get("max_length")
    try:
        if kind not in TOKENIZER_KINDS:
            raise ValueError(f"unknown tokenizer kind {kind!r}; expected one of {sorted(TOKENIZER_KINDS)}")
        if not isinstance(max_length, int) or not 1 <= max_length <= 4096:
            raise ValueError(f"tokenizer max_length must be an integer in 1..4096, got {max_length!r}")
        return TOKENIZER_KINDS[kind].load(folder, max_length=max_length, vocab_size=vocab_size,
                                          vocab_file=settings.get("vocab_file"))
    except ModelLoadError:
        raise
    except FileNotFoundError as error:
        raise ModelLoadError(f"{folder}: tokenizer file missing ({Path(error.filename or '?').name})") from None
    except Exception as error:  # tokenizers raises plain Exception
        raise ModelLoadError(f"{folder}: unusable tokenizer: {error}") from None
