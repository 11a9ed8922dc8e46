"""The two tokenizer kinds behind one interface, and the one a saved model folder's settings name.

Both share one small interface so the rest of the code never branches on the kind:
``encode(texts) -> TokenTable`` (ids padded to ``max_length`` plus true lengths), ``pad_id``,
``vocab_size``, ``save(folder)`` and ``to_dict()``. ``tokenizer_from_dict(settings, folder)`` rebuilds
either one from a saved model folder without executing anything from it (``core.text.vocab_files``).
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


def tokenizer_from_dict(settings: dict, folder: Path, vocab_size: int | None = None) -> Tokenizer:
    """The tokenizer ``settings`` (a ``to_dict()``) describe, its vocabulary read from ``folder``; with
    ``vocab_size``, a vocabulary of any other size is refused (ValueError)."""
    if not isinstance(settings, dict):
        raise ValueError(f"tokenizer settings must be a mapping, got {type(settings).__name__}")
    kind = settings.get("kind")
    if kind not in TOKENIZER_KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; expected one of {sorted(TOKENIZER_KINDS)}")
    max_length = settings.get("max_length")
    if not isinstance(max_length, int) or not 1 <= max_length <= 4096:
        raise ValueError(f"tokenizer max_length must be an integer in 1..4096, got {max_length!r}")
    return TOKENIZER_KINDS[kind].load(Path(folder), max_length=max_length, vocab_size=vocab_size,
                                      vocab_file=settings.get("vocab_file"))


def read_tokenizer(folder: str | Path, config: dict, vocab_size: int | None = None):
    """The tokenizer described by ``config["tokenizer"]``, with its vocabulary file from ``folder``
    (a regular file inside it, at most 64 MiB); ModelLoadError when the file is missing or the
    tokenizer unusable, or when ``vocab_size`` is given and the vocabulary has another size."""
    folder = Path(folder)
    settings = config.get("tokenizer", {})
    if not isinstance(settings, Mapping):
        raise ModelLoadError(f"{folder / CONFIG_FILE}: tokenizer must be a JSON object")
    try:
        return tokenizer_from_dict(dict(settings), folder, vocab_size=vocab_size)
    except ModelLoadError:
        raise
    except FileNotFoundError as error:
        raise ModelLoadError(f"{folder}: tokenizer file missing ({Path(error.filename or '?').name})") from None
    except (ValueError, UnicodeDecodeError, Exception) as error:  # tokenizers raises plain Exception
        raise ModelLoadError(f"{folder}: unusable tokenizer: {error}") from None
