"""The caps on what one read of a user's file takes in, and ``DataError``, the one error that names them.

Every reader of ``core.data`` (pairs, whole or in chunks, and question corpora) is bounded the same way,
so every command and page accepts and refuses the same files:

- ``input_limit()`` bytes of text: a plain file's size, a compressed file's *expanded* size (a gzip
  bomb is counted as it inflates and refused when it passes the limit, never held whole). Default
  1 GiB, ``SIAMESE_LAB_MAX_INPUT_BYTES`` to change it; the app passes its upload limit instead.
- ``MAX_LINES`` lines, ``MAX_COLUMNS`` header columns and ``MAX_FIELD_CHARS`` characters per field.

Bytes and lines are counted as the stream is read (``load_pairs`` parses as it counts, holding at most the
cap's text; ``score`` and corpora count on a pass of their own first); columns are checked on the header
before the parse. A ``DataError`` message is one line of at most
``MAX_MESSAGE_CHARS`` characters, and ``clip`` cuts any text from the file it quotes: an error about a
file of 100,000 columns names a few of them, not all.
"""
from __future__ import annotations

import os

INPUT_LIMIT_VARIABLE = "SIAMESE_LAB_MAX_INPUT_BYTES"
DEFAULT_INPUT_LIMIT = 1 << 30  # 1 GiB of text: ~16 Quora training sets; far above what a CPU trains on
MAX_LINES = 10_000_000  # Quora's 2.3 M-pair test file 4 times over; each line costs a row in memory
MAX_COLUMNS = 1_000  # a pairs file needs 3; a wide export has dozens. 100,000 made pandas take minutes
MAX_FIELD_CHARS = 1_000_000  # one question or cell; tests keep a 100,000-character question whole
MAX_MESSAGE_CHARS = 500
CLIP_CHARS = 40  # characters of a column name or a value quoted in a message


class DataError(ValueError):
    """The one exception for unusable input; the message names the problem for the user, on one line."""

    def __init__(self, message: str = ""):
        super().__init__(one_line(message))


def input_limit(max_bytes: int | None = None) -> int:
    """The byte cap of a read: ``max_bytes`` when given, else ``SIAMESE_LAB_MAX_INPUT_BYTES``, else 1 GiB."""
    if max_bytes is not None:
        return int(max_bytes)
    text = os.environ.get(INPUT_LIMIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_INPUT_LIMIT
    try:
        value = int(text)
    except ValueError:
        raise DataError(f"{INPUT_LIMIT_VARIABLE} must be a whole number of bytes, got {clip(text)}") from None
    if value < 1:
        raise DataError(f"{INPUT_LIMIT_VARIABLE} must be at least 1, got {value}")
    return value


def size_text(size: int) -> str:
    """``size`` bytes for a message: "1 GiB", "200 MiB", "512 KiB", else "1,234 bytes"."""
    for unit, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit:,} {name}"
    return f"{size:,} bytes"


def over_input_limit(name: str, limit: int, compressed: bool) -> DataError:
    expanded = " once decompressed" if compressed else ""
    return DataError(f"{name} holds more than {size_text(limit)} of text{expanded}; the limit is "
                     f"{size_text(limit)} ({INPUT_LIMIT_VARIABLE} sets it)")


def over_line_limit(name: str) -> DataError:
    return DataError(f"{name} has more than {MAX_LINES:,} lines; the limit is {MAX_LINES:,}")


def over_column_limit(name: str, columns: int, at_least: bool = False) -> DataError:
    count = f"at least {columns:,}" if at_least else f"{columns:,}"
    return DataError(f"{name}: the header has {count} columns; the limit is {MAX_COLUMNS:,}")


def over_field_limit(name: str, line: int, length: int) -> DataError:
    return DataError(f"{name}: line {line:,} has a field of {length:,} characters; the limit is "
                     f"{MAX_FIELD_CHARS:,} per field")


def one_line(text) -> str:
    """``text`` with line breaks and other control characters escaped, cut to ``MAX_MESSAGE_CHARS``."""
    text = "".join(ch if ch.isprintable() or ch == " " else ascii(ch)[1:-1] for ch in str(text)[:2 * MAX_MESSAGE_CHARS])
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def clip(text, max_chars: int = CLIP_CHARS) -> str:
    """A column name or value from a file, as a message quotes it: stripped, one line, at most
    ``max_chars`` characters (then "…")."""
    text = one_line(str(text).strip())
    return text if len(text) <= max_chars else text[:max_chars] + "…"
