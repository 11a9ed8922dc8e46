"""The vocabulary files a model folder holds, read as untrusted input.

Every file is read through ``core.saving.files`` (a regular file inside the folder, at most
``VOCAB_MAX_BYTES``), so a FIFO or ``/dev/zero`` in its place is refused at once, and its size is
checked against config.json's ``vocab_size`` (the embedding table's rows) before a list of it is built.
What comes out is words and ids only: nothing a file says is ever run (no pattern, no normaliser).
"""
from __future__ import annotations

from pathlib import Path

from core.saving.files import VOCAB_MAX_BYTES, parse_json, read_regular_file

WORD_TOKENIZER_FILE = "tokenizer.json"  # a word-token model's tokenizer: our pipeline and its vocabulary
LEGACY_WORD_VOCAB_FILE = "word_vocab.txt"  # what word-token models saved before: one word per line
WORDPIECE_VOCAB_FILE = "vocab.txt"


def read_vocab_file(path: Path, folder: Path | None) -> bytes:
    """A vocabulary file's bytes: a regular file (inside ``folder`` when given) of at most
    ``VOCAB_MAX_BYTES``; ModelLoadError (a ValueError) otherwise, FileNotFoundError when missing."""
    return read_regular_file(path, VOCAB_MAX_BYTES, folder)


def check_line_count(data: bytes, vocab_size: int | None, path: Path) -> None:
    """Refuse a vocabulary with far more lines than ``vocab_size`` before any list of it is built."""
    if vocab_size is None:
        return
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    if lines > vocab_size + 1:
        raise ValueError(f"{path} has {lines:,} lines, but config.json says vocab_size {vocab_size:,}")


def check_vocab_size(entries: int, vocab_size: int | None, path: Path) -> None:
    if vocab_size is not None and entries != vocab_size:
        raise ValueError(f"{path} has {entries:,} entries, but config.json says vocab_size {vocab_size:,}")


def word_vocab_from_lines(data: bytes, vocab_size: int | None, path: Path) -> list[str]:
    """The words of a legacy ``word_vocab.txt`` (one per line, id = position among the non-empty lines)."""
    check_line_count(data, vocab_size, path)
    vocab = [word for word in data.decode("utf-8").split("\n") if word != ""]
    check_vocab_size(len(vocab), vocab_size, path)
    return vocab


def word_vocab_from_json(data: bytes, vocab_size: int | None, path: Path) -> list[str]:
    """The words of a ``tokenizer.json``'s WordLevel vocabulary, in id order. Only ``model.vocab`` is
    read: the ids must be exactly 0..n-1 (no gap, no id twice), and n must be ``vocab_size`` when given.
    Everything else in the file (its normaliser, its patterns, its unknown token) is ignored."""
    document = parse_json(data, path)
    model = document.get("model") if isinstance(document, dict) else None
    if not isinstance(model, dict) or model.get("type") != "WordLevel":
        raise ValueError(f"{path} is not a WordLevel tokenizer (its model.type must be \"WordLevel\")")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):
        raise ValueError(f"{path}: model.vocab must be a JSON object of word -> id")
    check_vocab_size(len(vocab), vocab_size, path)
    words: list[str | None] = [None] * len(vocab)
    for word, index in vocab.items():
        if type(index) is not int or not 0 <= index < len(words) or words[index] is not None:
            raise ValueError(f"{path}: the vocabulary's ids must be exactly 0..{len(words) - 1}, each once "
                             f"(word {word[:40]!r} has id {str(index)[:40]})")
        words[index] = word
    return words  # every slot filled: n distinct ids in 0..n-1


def wordpiece_vocab(data: bytes) -> dict[str, int]:
    """token -> id as the Rust ``WordPiece.read_file`` builds it: one token per line (``\\n`` or
    ``\\r\\n``), trailing whitespace trimmed, id = line number, a repeated token keeping its last line."""
    text = data.decode("utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline after the last line starts no new line
    return {line.rstrip(_RUST_WHITESPACE): index for index, line in enumerate(lines)}


# Rust's char::is_whitespace (the Unicode White_Space property), which ``str::trim_end`` trims.
_RUST_WHITESPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
