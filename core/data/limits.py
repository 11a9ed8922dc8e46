"""What one read of a user's file takes in, the same for every reader of ``core.data``, and ``DataError``, the one
error that names it (one line): bytes of text (``input_limit()``, a compressed file's expanded size), lines, header
columns and characters per field.

``open_text(source)`` gives a ``TextSource`` whose ``stream()`` hands pandas the bytes, gunzipped when they start
with gzip's magic, each counted against the caps, so a gzip bomb is refused as it inflates, never held. The
encoding comes from the BOM (UTF-32 refused), else UTF-8, else ``charset_normalizer``'s pick of cp1252 or latin-1
once UTF-8 fails. Empty and binary files (UTF-16 without a BOM among them) are refused from their head.
"""
from __future__ import annotations

import codecs
import gzip
import io
import os
import stat
import zlib
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

import charset_normalizer


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
    if not text.isdecimal() or int(text) < 1:
        raise DataError(f"{INPUT_LIMIT_VARIABLE} must be a whole number of bytes, at least 1; got {clip(text)}")
    return int(text)


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


def over_field_limit(name: str, line: int, length: int) -> DataError:
    return DataError(f"{name}: line {line:,} has a field of {length:,} characters; the limit is "
                     f"{MAX_FIELD_CHARS:,} per field")


def one_line(text) -> str:
    """``text`` with line breaks and other control characters escaped, cut to ``MAX_MESSAGE_CHARS``."""
    text = "".join(ch if ch.isprintable() or ch == " " else ascii(ch)[1:-1] for ch in str(text)[:2 * MAX_MESSAGE_CHARS])
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def clip(text, max_chars: int = CLIP_CHARS) -> str:
    """A column name or value from a file as a message quotes it: stripped, one line, cut to ``max_chars``."""
    text = one_line(str(text).strip())
    return text if len(text) <= max_chars else text[:max_chars] + "…"


# ---- the bounded byte stream and its encoding ----------------------------------------------------------

HEAD_BYTES = 65536  # the start of the text that encoding, delimiter, header and empty checks look at
UPLOAD_NAME = "<upload>"
GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"  # a Parquet file's first and last four bytes
# BOM -> (codec that reads past it, the encoding reported); UTF-32's first, as UTF-32 LE's starts with UTF-16 LE's.
_BOMS = ((b"\xff\xfe\x00\x00", None), (b"\x00\x00\xfe\xff", None), (b"\xef\xbb\xbf", ("utf-8-sig", "utf-8")),
         (b"\xff\xfe", ("utf-16", "utf-16-le")), (b"\xfe\xff", ("utf-16", "utf-16-be")))
_SINGLE_BYTE = ["cp1252", "latin_1"]  # what a file that is not UTF-8 is read as
_BINARY_SNIFF = 8192
_BINARY_SHARE = 0.10  # real text has essentially no control characters besides tab, newlines and form feed
_CONTROL = {chr(c) for c in range(32) if chr(c) not in "\t\n\x0c\r"} | {"\x7f"}


@dataclass
class TextSource:
    name: str  # the file name, or "<upload>"
    codec: str  # what Python decodes it with ("utf-8-sig", "utf-16", "utf-16-le", "cp1252", ...)
    encoding: str  # as reported: "utf-8", "cp1252", "latin-1", "utf-16-le" or "utf-16-be"
    head: str  # the start of the text, decoded, BOM dropped
    _raw_head: bytes
    _open: Callable[[], BinaryIO]
    _limit: int

    def stream(self) -> BinaryIO:
        """The bytes afresh, bounded; close it when done."""
        return _Bounded(self._open(), self.name, self._limit)

    def text(self) -> str:
        """All the text (a corpus of questions), checked by ``check_caps`` before it is held."""
        self.check_caps()
        with self.stream() as stream:
            return stream.read().decode(self.codec)

    def check_caps(self) -> None:
        """Read through once, holding nothing: a ``DataError`` when the bytes or lines pass their caps; the
        encoding settled on the way (the single-byte one when UTF-8 fails)."""
        while True:  # ends: latin-1 decodes every byte, and UTF-16 that fails is a DataError
            decoder, done, block = codecs.getincrementaldecoder(self.codec)(), 0, b""
            try:
                with self.stream() as stream:
                    while block := stream.read(1 << 20):
                        decoder.decode(block)
                        done += len(block)
                    decoder.decode(b"", final=True)
                return
            except UnicodeDecodeError as error:  # error.object: the bytes held back from before, then ``block``
                self.not_decoded(error, done + len(block) - len(error.object))

    def not_decoded(self, error: UnicodeDecodeError, offset: int = 0) -> None:
        """After UTF-8 failed: the single-byte encoding to read by instead (``charset_normalizer``'s pick of the
        head and the bytes that failed, else latin-1). UTF-16 that fails is a ``DataError`` naming the byte
        (``offset``: where the bytes the decoder failed on start in the file)."""
        if self.codec.startswith("utf-16"):
            raise DataError(f"{self.name} looks like UTF-16 but does not decode; save it as UTF-8 "
                            f"({error.reason} at byte {offset + error.start})")
        if self.codec in _SINGLE_BYTE:  # the picked one failed further on
            self.codec = self.encoding = "latin-1"
            return
        sample = self._raw_head + (error.object if isinstance(error.object, bytes) else b"")
        best = charset_normalizer.from_bytes(sample, cp_isolation=_SINGLE_BYTE).best()
        self.codec = best.encoding if best else "latin_1"
        self.encoding = self.codec.replace("_", "-")


def open_text(source, max_bytes: int | None = None) -> TextSource:
    """``source`` checked from its head: its name, encoding and first text; a ``DataError`` when no reader can use
    it (missing, not a regular file, over the byte cap, empty, binary, UTF-32)."""
    limit = input_limit(max_bytes)
    name, open_raw = open_source(source, limit)
    with _Bounded(open_raw(), name, limit) as stream:
        raw_head = stream.read(HEAD_BYTES)
    found = next((found for bom, found in _BOMS if raw_head.startswith(bom)), ("utf-8", "utf-8"))
    if found is None:
        raise DataError(f"{name} is UTF-32 text, which is not supported; save it as UTF-8")
    codec, encoding = found
    head = raw_head.decode(codec, errors="replace")
    if not head.strip():
        raise DataError(f"{name}: the file is empty")
    sample = head[:_BINARY_SNIFF]
    if "\x00" in sample or sum(sample.count(c) for c in _CONTROL) > _BINARY_SHARE * len(sample):
        if raw_head.startswith(PARQUET_MAGIC):  # a questions file, not pairs
            raise DataError(f"{name} is a Parquet file; pairs are read from CSV/TSV text (Parquet is read as a "
                            "file of questions: dedup, suggest)")
        unmarked = " (UTF-16 text needs its byte-order mark; else save it as UTF-8)" if "\x00" in sample else ""
        raise DataError(f"{name} looks like a binary file, not CSV/TSV text{unmarked}")
    return TextSource(name, codec, encoding, head.removeprefix("\ufeff"), raw_head, open_raw, limit)


class _Bounded(io.RawIOBase):
    """``raw``'s bytes, gunzipped when they start with gzip's magic, counted against the byte and line caps."""

    def __init__(self, raw: BinaryIO, name: str, limit: int):
        self.name_, self._limit, self.count, self._lines = name, limit, 0, 0
        self.error: DataError | None = None  # the cap or damage that ended the stream
        self._raw = raw
        self._compressed = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        self._inner = gzip.GzipFile(fileobj=raw, mode="rb") if self._compressed else raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            size = self._inner.readinto(buffer)
        except EOFError:  # gzip's word for a stream that ends inside a member
            self.error = DataError(f"{self.name_}: the gzip data is truncated or damaged")
        except (gzip.BadGzipFile, zlib.error) as error:
            self.error = DataError(f"{self.name_} starts like a gzip file but cannot be decompressed ({error})")
        except OSError as error:  # the disk's, not the data's
            self.error = DataError(f"cannot read {self.name_}: {error.strerror or error}")
        else:
            self.count += size
            block = bytes(memoryview(buffer)[:size])
            self._lines += block.count(b"\n") or block.count(b"\r")  # a lone CR ends a line too (old Mac files)
            if self.count > self._limit:
                self.error = over_input_limit(self.name_, self._limit, self._compressed)
            elif self._lines > MAX_LINES:
                self.error = DataError(f"{self.name_} has more than {MAX_LINES:,} lines; the limit is {MAX_LINES:,}")
            else:
                return size
        raise self.error  # kept in ``error`` too: pandas may report a failed read in its own words

    def read1(self, size: int = -1) -> bytes:  # TextIOWrapper reads by it, so ``count`` is what it took
        return self.read(size if size > 0 else io.DEFAULT_BUFFER_SIZE)

    def close(self) -> None:
        with suppress(Exception):
            self._inner.close()
        self._raw.close()
        super().close()


def open_source(source, limit: int) -> tuple[str, Callable[[], BinaryIO]]:
    """The name to report ``source`` under, and a function opening its raw bytes afresh (seekable)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        return UPLOAD_NAME, lambda: io.BytesIO(data)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if check_regular_file(path) > limit:
            with _file_call(open, path, "rb") as raw:
                if raw.read(2) != GZIP_MAGIC:  # plain text: its size says it all, without reading it
                    raise over_input_limit(path.name, limit, compressed=False)
        return path.name, lambda: _file_call(open, path, "rb")
    if hasattr(source, "read"):
        # An upload, perhaps read for a preview: from its start, once, within the limit (gzip only grows).
        if hasattr(source, "seek"):
            with suppress(OSError, ValueError):
                source.seek(0)
        content = bytes(source.read(limit + 1))
        name = getattr(source, "name", None)
        name = Path(name).name if isinstance(name, str) and name else UPLOAD_NAME
        if len(content) > limit:
            raise over_input_limit(name, limit, compressed=False)
        return name, lambda: io.BytesIO(content)
    raise TypeError(f"source must be a path, bytes or a binary file object, not {type(source).__name__}")


def check_regular_file(path: Path) -> int:
    """The size of ``path``, a regular file: a FIFO would block the read and a device never end it."""
    info = _file_call(os.stat, path)
    if stat.S_ISDIR(info.st_mode):
        raise DataError(f"{path} is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise DataError(f"{path} is not a regular file (a pipe, socket or device); save the data to a file")
    return info.st_size


def _file_call(call, path: Path, *args):
    try:
        return call(path, *args)
    except FileNotFoundError:
        raise DataError(f"file not found: {path}") from None
    except OSError as error:
        raise DataError(f"cannot read {path}: {error.strerror or error}") from None
