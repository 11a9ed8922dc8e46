"""A user's file as one bounded byte stream, and the encoding it is read by.

``open_text(source)`` takes a path, bytes or an upload. ``TextSource.stream()`` gives its bytes, gunzipped when
they start with gzip's magic (every member), as a binary file object for ``pandas.read_csv``: every byte it hands
on counts against ``limits.input_limit`` and every line against ``MAX_LINES``, so a gzip bomb is refused as it
inflates, never held; a damaged gzip stream is a ``DataError`` too.

The encoding comes from the BOM (UTF-8, UTF-16; UTF-32 is refused), else UTF-8, else ``charset_normalizer``:
it tells BOM-less UTF-16 (its NULs) from binary, and, once UTF-8 fails to decode, chooses between cp1252 and
latin-1 (which maps every byte, so the file always reads). Empty and binary files are refused from their head.
"""
from __future__ import annotations

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

from core.data import limits
from core.data.limits import DataError, input_limit, over_input_limit, over_line_limit

HEAD_BYTES = 65536  # the start of the text that encoding, delimiter, header and empty checks look at
UPLOAD_NAME = "<upload>"
GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"  # a Parquet file's first and last four bytes
# BOM -> (codec that reads past it, the encoding reported); UTF-32's first, as UTF-32 LE's starts with UTF-16 LE's.
_BOMS = ((b"\xff\xfe\x00\x00", None), (b"\x00\x00\xfe\xff", None), (b"\xef\xbb\xbf", ("utf-8-sig", "utf-8")),
         (b"\xff\xfe", ("utf-16", "utf-16-le")), (b"\xfe\xff", ("utf-16", "utf-16-be")))
_WIDE = ["utf_16_le", "utf_16_be", "utf_32_le", "utf_32_be"]  # what NULs in a text file can mean
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
        """All the text (a corpus of questions), in this encoding, else in the single-byte one it falls back to.
        Counted through once before it is held, so a file over a cap is refused without holding its text."""
        self.check_caps()
        with self.stream() as stream:
            data = stream.read()
        while True:  # ends: latin-1 decodes every byte, and UTF-16 that fails is a DataError
            try:
                return data.decode(self.codec)
            except UnicodeDecodeError as error:
                self.not_decoded(error)

    def check_caps(self) -> None:
        """Read through once, holding nothing: a ``DataError`` when the bytes or lines pass their caps."""
        with self.stream() as stream:
            while stream.read(1 << 20):
                pass

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
    """``source`` checked from its head: its name, encoding and first text. ``DataError`` when no reader can
    use it (missing, not a regular file, over the byte cap, empty, binary, UTF-32)."""
    limit = input_limit(max_bytes)
    name, open_raw = _open_source(source, limit)
    with _Bounded(open_raw(), name, limit) as stream:
        raw_head = stream.read(HEAD_BYTES)
    codec, encoding = _encoding(raw_head, name)
    head = raw_head.decode(codec, errors="replace")
    if not head.strip():
        raise DataError(f"{name}: the file is empty")
    sample = head[:_BINARY_SNIFF]
    if "\x00" in sample or sum(sample.count(c) for c in _CONTROL) > _BINARY_SHARE * len(sample):
        if raw_head.startswith(PARQUET_MAGIC):  # a questions file, not pairs
            raise DataError(f"{name} is a Parquet file; pairs are read from CSV/TSV text (Parquet is read as a "
                            "file of questions: dedup, suggest)")
        raise DataError(f"{name} looks like a binary file, not CSV/TSV text")
    return TextSource(name, codec, encoding, head.removeprefix("\ufeff"), raw_head, open_raw, limit)


def _encoding(head: bytes, name: str) -> tuple[str, str]:
    """(codec, reported encoding): by BOM; else UTF-16 when NULs say so (UTF-32 refused); else UTF-8 to start."""
    for bom, found in _BOMS:
        if head.startswith(bom):
            if found is None:
                raise DataError(f"{name} is UTF-32 text, which is not supported; save it as UTF-8")
            return found
    sample = head[:4096]
    if b"\x00" in sample:
        best = charset_normalizer.from_bytes(sample, cp_isolation=_WIDE).best()
        if best and best.encoding.startswith("utf_32"):
            raise DataError(f"{name} looks like UTF-32 text, which is not supported; save it as UTF-8")
        # a text file has a line break or a delimiter: random bytes read as UTF-16 have neither
        if best and any(mark in str(best) for mark in "\n\r,\t;|"):
            codec = best.encoding.replace("_", "-")
            return codec, codec
        # UTF-16 that does not decode (charset_normalizer drops it): the NULs beside its ASCII characters
        little, big = sample[1::2].count(0), sample[0::2].count(0)
        if max(little, big) > len(sample) // 4 and min(little, big) * 4 < max(little, big):
            codec = "utf-16-le" if little > big else "utf-16-be"
            return codec, codec
    return "utf-8", "utf-8"


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
            return self._counted(buffer)
        except DataError as error:  # kept: pandas may report a failed read in its own words
            self.error = error
            raise

    def _counted(self, buffer) -> int:
        try:
            size = self._inner.readinto(buffer)
        except EOFError:  # gzip's word for a stream that ends inside a member
            raise DataError(f"{self.name_}: the gzip data is truncated or damaged") from None
        except (gzip.BadGzipFile, zlib.error) as error:
            raise DataError(f"{self.name_} starts like a gzip file but cannot be decompressed ({error})") from None
        except OSError as error:  # the disk's, not the data's
            raise DataError(f"cannot read {self.name_}: {error.strerror or error}") from None
        self.count += size
        if self.count > self._limit:
            raise over_input_limit(self.name_, self._limit, self._compressed)
        block = bytes(memoryview(buffer)[:size])
        self._lines += block.count(b"\n") or block.count(b"\r")  # a lone CR ends a line too (old Mac files)
        if self._lines > limits.MAX_LINES:
            raise over_line_limit(self.name_)
        return size

    def read1(self, size: int = -1) -> bytes:  # TextIOWrapper reads by it, so ``count`` is what it took
        return self.read(size if size > 0 else io.DEFAULT_BUFFER_SIZE)

    def close(self) -> None:
        with suppress(Exception):
            self._inner.close()
        self._raw.close()
        super().close()


def _open_source(source, limit: int) -> tuple[str, Callable[[], BinaryIO]]:
    """The name to report ``source`` under, and a function opening its raw bytes afresh (seekable)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        return UPLOAD_NAME, lambda: io.BytesIO(data)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if check_regular_file(path) > limit:
            with _open_file(path) as raw:
                if raw.read(2) != GZIP_MAGIC:  # plain text: its size says it all, without reading it
                    raise over_input_limit(path.name, limit, compressed=False)
        return path.name, lambda: _open_file(path)
    if hasattr(source, "read"):
        # An upload, perhaps read for a preview: from its start, once, within the limit (gzip only grows).
        if hasattr(source, "seek"):
            with suppress(OSError, ValueError):
                source.seek(0)
        content = source.read(limit + 1)
        content = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        name = upload_name(source)
        if len(content) > limit:
            raise over_input_limit(name, limit, compressed=False)
        return name, lambda: io.BytesIO(content)
    raise TypeError(f"source must be a path, bytes or a binary file object, not {type(source).__name__}")


def upload_name(source) -> str:
    name = getattr(source, "name", None)
    return Path(name).name if isinstance(name, str) and name else UPLOAD_NAME


def check_regular_file(path: Path) -> int:
    """The size of ``path``, a regular file: a FIFO would block the read and a device never end it."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise DataError(f"file not found: {path}") from None
    except OSError as error:
        raise DataError(f"cannot read {path}: {error.strerror or error}") from None
    if stat.S_ISDIR(info.st_mode):
        raise DataError(f"{path} is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise DataError(f"{path} is not a regular file (a pipe, socket or device); save the data to a file")
    return info.st_size


def _open_file(path: Path) -> BinaryIO:
    """``path`` opened for reading, once the open file is known to be a regular file."""
    try:
        # O_NONBLOCK: a FIFO swapped in after the check opens at once instead of waiting for a writer.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise DataError(f"file not found: {path}") from None
    except OSError as error:
        raise DataError(f"cannot read {path}: {error.strerror or error}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DataError(f"{path} is not a regular file (a pipe, socket or device); save the data to a file")
    return io.FileIO(fd, "rb")
