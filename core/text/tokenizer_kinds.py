"""The two tokenizer kinds behind one interface (``encode(texts) -> TokenTable``, ``pad_id``, ``vocab_size``,
``save(folder)``, ``to_dict()``), and ``read_tokenizer``, which rebuilds the one a saved folder names without
executing anything from it."""
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
    """The tokenizer ``config["tokenizer"]`` (a ``to_dict()``) describes, its vocabulary read from ``folder``;
    ModelLoadError when the settings, the file or (given ``vocab_size``) the vocabulary's size are not right."""
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
