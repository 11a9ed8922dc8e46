"""A user's file as bounded text: a path, bytes or an upload in; checked facts and UTF-8 streams out.

``scan_text`` reads the source once, keeping only its head: gzip inflates a block per read, and every byte it
gives counts against ``limits.input_limit`` (a bomb is refused as it passes the limit, never held). The start
decides what the file is (UTF-32, empty and binary files refused; UTF-16 found); the rest is checked as it
streams by (lines, damaged gzip or UTF-16, valid UTF-8 or cp1252). ``TextFacts.stream`` reads it again, as
bounded, as UTF-8 for pandas. Every failure is a ``DataError``.
"""
from __future__ import annotations

import codecs
import functools
import gzip
import io
import os
import stat
import zlib
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

import numpy as np

from core.data import limits
from core.data.limits import DataError, input_limit, over_input_limit, over_line_limit

BLOCK_BYTES = 1 << 20  # the most one read takes from the source, or inflates from a gzip stream
HEADER_SNIFF_BYTES = 65536  # the start of the text that delimiter, header and empty checks look at
_PREFIX_BYTES = 4 * HEADER_SNIFF_BYTES  # raw text decided on before the rest is read (UTF-16 doubles it)
_UPLOAD_NAME = "<upload>"
_GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"  # a Parquet file's first and last four bytes
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF32_BOMS = (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")  # checked first: UTF-32 LE's starts with UTF-16 LE's
_UTF16_BOMS = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}
_UTF16_SNIFF_BYTES = 4096
# BOM-less UTF-16 has at least this many ASCII units (a text byte beside a NUL) in one byte order, and more than
# twice as many as in the other: a header line alone has more, random bytes about one per 700 units. BOM-less
# UTF-32 (refused) has as many, making half its 4-byte units.
_UTF16_MIN_ASCII_UNITS = 8
_TEXT_BYTES = np.isin(np.arange(256), [9, 10, 13, *range(32, 127)])
_BINARY_SNIFF_BYTES = 8192
# Real text has essentially no control bytes besides tab/newline/form feed; random binary has ~11 %.
_BINARY_SHARE = 0.10
_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 12, 13)) + b"\x7f"
_CP1252_UNDEFINED = (b"\x81", b"\x8d", b"\x8f", b"\x90", b"\x9d")  # latin-1 maps them; cp1252 does not


@dataclass
class TextFacts:
    """What ``scan_text`` found: enough to read the source again as UTF-8 text."""

    name: str  # the file name, or "<upload>"
    utf16: str | None  # "utf-16-le" / "utf-16-be" when the bytes are UTF-16, else None
    head: bytes  # the first HEADER_SNIFF_BYTES of the text as UTF-8 (UTF-16 re-encoded), BOM dropped
    utf8: bool  # every byte decodes as UTF-8 (always True for UTF-16, which is re-encoded)
    cp1252: bool  # no byte that cp1252 leaves undefined
    _blocks: Callable[[], Iterator[bytes]]  # a fresh pass over the expanded bytes, counted

    def chunks(self, encoding: str = "utf-8") -> Iterator[bytes]:
        """The text as UTF-8 blocks, a leading BOM dropped: UTF-16, or else ``encoding`` ("cp1252",
        "latin-1"), re-encoded; UTF-8 bytes come as they are, valid or not."""
        return _as_utf8(self._blocks(), self.utf16 or encoding, self.name)

    def stream(self, encoding: str = "utf-8") -> io.BufferedReader:
        """``chunks(encoding)`` as a binary file object, for pandas; close it when done."""
        return io.BufferedReader(_ChunkStream(self.chunks(encoding)), BLOCK_BYTES)


def scan_text(source, max_bytes: int | None = None) -> TextFacts:
    """Read ``source`` once, bounded (see the module docstring), and say what it is; ``max_bytes``
    replaces ``input_limit()``'s default. Raises ``DataError`` for a file no reader can use."""
    limit = input_limit(max_bytes)
    name, open_raw = _open_source(source, limit)
    blocks = functools.partial(_text_blocks, open_raw, name, limit)
    stream = blocks()
    prefix = _take(stream, _PREFIX_BYTES)
    utf16 = _utf16_codec(prefix, name)
    head = b"".join(_as_utf8(iter([prefix]), utf16 or "utf-8", name, final=False))[:HEADER_SNIFF_BYTES]
    if not head.strip():
        raise DataError(f"{name}: the file is empty")
    sample = head[:_BINARY_SNIFF_BYTES]
    if b"\x00" in sample or len(sample) - len(sample.translate(None, _CONTROL_BYTES)) > _BINARY_SHARE * len(sample):
        if prefix.startswith(PARQUET_MAGIC):  # a questions file, not pairs
            raise DataError(f"{name} is a Parquet file; pairs are read from CSV/TSV text (Parquet is read as a "
                            "file of questions: dedup, suggest)")
        raise DataError(f"{name} looks like a binary file, not CSV/TSV text")
    rest = _chained(prefix, stream)
    utf8, cp1252 = _check_text(_decoded(rest, utf16, name) if utf16 else rest, name, utf16)
    return TextFacts(name, utf16, head, utf8, cp1252, blocks)


def read_text_bytes(source, max_bytes: int | None = None) -> tuple[bytes, str, str | None]:
    """All the text of ``source`` after ``scan_text``'s checks: gunzipped, UTF-16 re-encoded as UTF-8,
    without a BOM (other bytes as they are); the name to report it under; and the UTF-16 codec or None."""
    facts = scan_text(source, max_bytes)
    return b"".join(facts.chunks()), facts.name, facts.utf16


def _open_source(source, limit: int) -> tuple[str, Callable[[], BinaryIO]]:
    """The name to report ``source`` under, and a function opening its raw bytes afresh (seekable)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        return _UPLOAD_NAME, lambda: io.BytesIO(data)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if _check_regular_file(path) > limit:
            with _open_file(path) as raw:
                if raw.read(2) != _GZIP_MAGIC:  # plain text: its size says it all, without reading it
                    raise over_input_limit(path.name, limit, compressed=False)
        return path.name, lambda: _open_file(path)
    if hasattr(source, "read"):
        # An upload, perhaps read for a preview: from its start, once, within the limit (gzip only grows).
        if hasattr(source, "seek"):
            with suppress(OSError, ValueError):
                source.seek(0)
        content = source.read(limit + 1)
        content = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        name = getattr(source, "name", None)
        name = Path(name).name if isinstance(name, str) and name else _UPLOAD_NAME
        if len(content) > limit:
            raise over_input_limit(name, limit, compressed=False)
        return name, lambda: io.BytesIO(content)
    raise TypeError(f"source must be a path, bytes or a binary file object, not {type(source).__name__}")


def _check_regular_file(path: Path) -> int:
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


def _text_blocks(open_raw: Callable[[], BinaryIO], name: str, limit: int) -> Iterator[bytes]:
    """A pass over the text of a fresh ``open_raw()`` in blocks of at most BLOCK_BYTES, gunzipped when it starts
    with gzip's magic bytes (every member), counted: past ``limit`` bytes, or where the gzip stream is cut short or
    damaged, it is a DataError. gzip inflates only what one read asks for, so a bomb is never expanded whole."""
    count = 0
    try:
        with open_raw() as raw:
            compressed = raw.read(2) == _GZIP_MAGIC
            raw.seek(0)
            with (gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw) as text:
                while block := text.read(BLOCK_BYTES):
                    count += len(block)
                    if count > limit:
                        raise over_input_limit(name, limit, compressed)
                    yield block
    except EOFError:  # gzip's word for a stream that ends inside a member
        raise DataError(f"{name}: the gzip data is truncated or damaged") from None
    except (gzip.BadGzipFile, zlib.error) as error:
        raise DataError(f"{name} starts like a gzip file but cannot be decompressed ({error})") from None
    except OSError as error:  # the disk's, not the data's
        raise DataError(f"cannot read {name}: {error.strerror or error}") from None


def _utf16_codec(prefix: bytes, name: str) -> str | None:
    """The UTF-16 codec of text starting with ``prefix`` (by BOM, else by the NULs of its ASCII characters), or
    None. UTF-32 (by BOM, or by three NULs beside most ASCII bytes) is a DataError."""
    if prefix.startswith(_UTF32_BOMS):
        raise DataError(f"{name} is UTF-32 text, which is not supported; save it as UTF-8")
    if prefix[:2] in _UTF16_BOMS:
        return _UTF16_BOMS[prefix[:2]]
    sample = prefix[:_UTF16_SNIFF_BYTES]
    if b"\x00" not in sample:  # the common case, decided without numpy
        return None
    ascii_units = {}  # (unit width, place of the text byte in it) -> units of an ASCII byte beside NULs
    for width, place in ((4, 0), (4, 3), (2, 0), (2, 1)):
        units = np.frombuffer(sample[: len(sample) // width * width], dtype=np.uint8).reshape(-1, width)
        nuls = (np.delete(units, place, axis=1) == 0).all(axis=1)
        ascii_units[width, place] = np.count_nonzero(nuls & _TEXT_BYTES[units[:, place]])
    if max(ascii_units[4, 0], ascii_units[4, 3]) >= max(_UTF16_MIN_ASCII_UNITS, len(sample) // 4 / 2):
        raise DataError(f"{name} looks like UTF-32 text, which is not supported; save it as UTF-8")
    little, big = ascii_units[2, 0], ascii_units[2, 1]
    if little >= _UTF16_MIN_ASCII_UNITS and little > 2 * big:
        return "utf-16-le"
    if big >= _UTF16_MIN_ASCII_UNITS and big > 2 * little:
        return "utf-16-be"
    return None


def _as_utf8(blocks: Iterator[bytes], codec: str, name: str, final: bool = True) -> Iterator[bytes]:
    """``blocks`` of ``codec`` text as UTF-8 blocks, a leading BOM dropped (UTF-16 drops its own and one more).
    Text that does not decode is a DataError naming the byte where it fails (counted from the start)."""
    if codec == "utf-8":
        return _without_bom(blocks)
    if codec.startswith("utf-16"):
        return _without_bom((text.encode("utf-8") for text in _decoded(blocks, codec, name, final)), boms=2)
    return (text.encode("utf-8") for text in _decoded(_without_bom(blocks), codec, name, final))


def _decoded(blocks: Iterator[bytes], codec: str, name: str, final: bool = True) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder(codec)()
    offset = start = 0  # bytes before the current block; where the failing decode began
    try:
        for block in blocks:
            start = offset - len(decoder.getstate()[0])
            offset += len(block)
            if text := decoder.decode(block):
                yield text
        start = offset - len(decoder.getstate()[0])
        if final and (text := decoder.decode(b"", final=True)):
            yield text
    except UnicodeDecodeError as error:
        raise DataError(f"{name} looks like UTF-16 but does not decode; save it as UTF-8 "
                        f"({error.reason} at byte {start + error.start})") from None


def _check_text(blocks: Iterator, name: str, utf16: str | None) -> tuple[bool, bool]:
    """Count the lines of ``blocks`` (bytes, or UTF-16's decoded text); say whether they are valid UTF-8 and
    have no byte cp1252 leaves undefined (UTF-16, re-encoded, is taken for both)."""
    validator = codecs.getincrementaldecoder("utf-8")()
    lines, utf8, cp1252 = 0, True, True
    newline, cr = ("\n", "\r") if utf16 else (b"\n", b"\r")
    for block in blocks:
        lines += block.count(newline) or block.count(cr)  # a lone CR ends a line too (old Mac files)
        if lines > limits.MAX_LINES:
            raise over_line_limit(name)
        if utf16:
            continue
        if utf8 and not (block.isascii() and not validator.getstate()[0]):
            try:
                validator.decode(block)
            except UnicodeDecodeError:
                utf8 = False
        cp1252 = cp1252 and not any(byte in block for byte in _CP1252_UNDEFINED)
    return utf8 and not validator.getstate()[0], cp1252  # bytes held at the end: a cut-off character


def _take(blocks: Iterator[bytes], size: int) -> bytes:
    """At least ``size`` bytes from the start of ``blocks`` (fewer only at its end)."""
    taken, count = [], 0
    for block in blocks:
        taken.append(block)
        count += len(block)
        if count >= size:
            break
    return b"".join(taken)


def _chained(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


def _without_bom(blocks: Iterator[bytes], boms: int = 1) -> Iterator[bytes]:
    start = _take(blocks, len(_UTF8_BOM) * boms)
    for _ in range(boms):
        start = start.removeprefix(_UTF8_BOM)
    return _chained(start, blocks)


class _ChunkStream(io.RawIOBase):
    """A readable raw stream over a generator of byte blocks, none empty (closing it closes the generator)."""

    def __init__(self, blocks: Iterator[bytes]):
        self._blocks = blocks
        self._block = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if not self._block:
            self._block = memoryview(next(self._blocks, b""))
        size = min(len(buffer), len(self._block))
        buffer[:size] = self._block[:size]
        self._block = self._block[size:]
        return size

    def close(self) -> None:
        self._blocks.close()
        super().close()
