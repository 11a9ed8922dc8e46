"""A user's file as bounded text: a path, bytes or an upload in; checked facts and UTF-8 streams out.

``scan_text(source)`` reads the source once without keeping it, through one reader, ``_CountedText``:
gzip (found by its magic bytes) is inflated by ``gzip.GzipFile`` one block per read, and every byte it
gives is counted against ``core.data.limits.input_limit`` *as it is expanded* (a bomb is refused when it
passes the limit, never held); lines are counted against ``MAX_LINES``. Its first block decides what
the file is before the rest is read: UTF-32 refused, UTF-16 (by BOM or by the NULs of its ASCII
characters) found, empty and binary files refused (a 1 GB file of NULs costs one block). The rest is
checked as it streams by: UTF-16 that does not decode, a truncated or damaged gzip stream (bad CRC
included), and whether the bytes are valid UTF-8 or cp1252 (the choice of encoding is the parser's).

``TextFacts.stream(encoding)`` then reads the source again as a binary stream of UTF-8 for pandas (a BOM
dropped, UTF-16 / cp1252 / latin-1 re-encoded), counted against the same limit, so a file that grew
between the two reads is still bounded. ``read_text_bytes`` is the whole text at once, for readers that
need it (question corpora). Every failure is a ``DataError``.
"""
from __future__ import annotations

import codecs
import gzip
import io
import os
import stat
import zlib
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
_UTF8_BOM = b"\xef\xbb\xbf"
# UTF-32 BOMs first: the UTF-32 LE one starts with the UTF-16 LE one.
_UTF32_BOMS = (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")
_UTF16_BOMS = ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
_UTF16_SNIFF_BYTES = 4096
# A BOM-less file is UTF-16 when at least this many 2-byte units of its start are ASCII text in one
# byte order (NUL high byte, printable / tab / CR / LF low byte) and more than twice as many as in
# the other order. One header line alone has more; random bytes have about one per 700 units.
# (BOM-less UTF-32 is refused on the same minimum, counted in 4-byte units.)
_UTF16_MIN_ASCII_UNITS = 8
_TEXT_BYTES = np.zeros(256, dtype=bool)
_TEXT_BYTES[[9, 10, 13, *range(32, 127)]] = True
_BINARY_SNIFF_BYTES = 8192
# Real text has essentially no control bytes besides tab/newline/form feed; random binary has ~11 %.
_BINARY_CONTROL_SHARE = 0.10
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

    def chunks(self, encoding: str | None = None) -> Iterator[bytes]:
        """The text as UTF-8 blocks: UTF-16 re-encoded, a leading BOM dropped, and re-encoded from
        ``encoding`` ("cp1252", "latin-1") when given; without it, other bytes come as they are."""
        if self.utf16:
            text = _decoded(self._blocks(), self.utf16, self.name, bom=True)
            return _without_prefix((piece.encode("utf-8") for piece in text), _UTF8_BOM)
        raw = _without_prefix(self._blocks(), _UTF8_BOM)
        if encoding in (None, "utf-8"):
            return raw
        return (piece.encode("utf-8") for piece in _decoded(raw, encoding, self.name, bom=False))

    def stream(self, encoding: str = "utf-8") -> io.BufferedReader:
        """``chunks(encoding)`` as a binary file object, for pandas; close it when done."""
        return io.BufferedReader(_ChunkStream(self.chunks(encoding)), BLOCK_BYTES)


def scan_text(source, max_bytes: int | None = None) -> TextFacts:
    """Read ``source`` once, bounded (see the module docstring), and say what it is; ``max_bytes``
    replaces ``input_limit()``'s default. Raises ``DataError`` for a file no reader can use."""
    limit = input_limit(max_bytes)
    name, open_raw = _open_source(source, limit)

    def blocks() -> Iterator[bytes]:
        return _text_blocks(open_raw, name, limit)

    stream = blocks()
    prefix = _take(stream, _PREFIX_BYTES)
    utf16 = _utf16_codec(prefix, name)
    if utf16:
        head = b"".join(p.encode("utf-8") for p in _decoded(iter([prefix]), utf16, name, bom=True, final=False))
    else:
        head = prefix
    head = head.removeprefix(_UTF8_BOM)[:HEADER_SNIFF_BYTES]
    if not head.strip():
        raise DataError(f"{name}: the file is empty")
    if _looks_binary(head[:_BINARY_SNIFF_BYTES]):
        raise DataError(f"{name} looks like a binary file, not CSV/TSV text")
    facts = TextFacts(name, utf16, head, True, True, blocks)
    rest = _chained(prefix, stream)
    if utf16:
        _count_lines((piece for piece in _decoded(rest, utf16, name, bom=True)), name)
    else:
        _check_bytes(rest, name, facts)
    return facts


def read_text_bytes(source, max_bytes: int | None = None) -> tuple[bytes, str, str | None]:
    """All the text of ``source`` after ``scan_text``'s checks: gunzipped, UTF-16 re-encoded as UTF-8,
    without a BOM (other bytes as they are); the name to report it under; and the UTF-16 codec or None."""
    facts = scan_text(source, max_bytes)
    return b"".join(facts.chunks()), facts.name, facts.utf16


# ---- the source's raw bytes --------------------------------------------------------------------
def _open_source(source, limit: int) -> tuple[str, Callable[[], BinaryIO]]:
    """The name to report ``source`` under, and a function opening its raw bytes afresh (seekable)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        return _UPLOAD_NAME, lambda: io.BytesIO(data)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if _check_regular_file(path) > limit:
            with _open_file(path) as raw:
                if not _starts_with_gzip(raw):  # plain text: its size says it all, without reading it
                    raise over_input_limit(path.name, limit, compressed=False)
        return path.name, lambda: _open_file(path)
    if hasattr(source, "read"):
        # An upload (already in memory, and perhaps read once for a preview): read from its start, once,
        # no more than the limit allows (a compressed file's raw bytes are never more than its text).
        if hasattr(source, "seek"):
            try:
                source.seek(0)
            except (OSError, ValueError):
                pass
        content = source.read(limit + 1)
        if isinstance(content, str):
            content = content.encode("utf-8")
        name = getattr(source, "name", None)
        name = Path(name).name if isinstance(name, str) and name else _UPLOAD_NAME
        if len(content) > limit:
            raise over_input_limit(name, limit, compressed=False)
        return name, _open_source(bytes(content), limit)[1]
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


def _starts_with_gzip(raw: BinaryIO) -> bool:
    magic = raw.read(len(_GZIP_MAGIC))
    raw.seek(0)
    return magic == _GZIP_MAGIC


# ---- expanded bytes: gzip inflated a block per read, everything counted ----------------------------
def _text_blocks(open_raw: Callable[[], BinaryIO], name: str, limit: int) -> Iterator[bytes]:
    """A pass over the text bytes of a fresh ``open_raw()``, in blocks of at most BLOCK_BYTES."""
    try:
        with open_raw() as raw, _CountedText(raw, name, limit) as text:
            while block := text.read(BLOCK_BYTES):
                yield block
    except OSError as error:  # the disk's, not the data's (gzip's own errors are DataErrors by now)
        raise DataError(f"cannot read {name}: {error.strerror or error}") from None


class _CountedText(io.RawIOBase):
    """The text bytes of ``raw``: gunzipped when it starts with gzip's magic bytes (every member, zero
    padding after the last tolerated), counted as they are read. Past ``limit`` bytes a read is a
    DataError: gzip inflates only what one read asks for, so a bomb is refused, never expanded whole.
    A stream cut short, a bad CRC or bytes that do not inflate are DataErrors too."""

    def __init__(self, raw: BinaryIO, name: str, limit: int):
        self._name, self._limit, self._count = name, limit, 0
        self._compressed = _starts_with_gzip(raw)
        self._text = gzip.GzipFile(fileobj=raw, mode="rb") if self._compressed else raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        size = self._readinto(buffer)
        self._count += size
        if self._count > self._limit:
            raise over_input_limit(self._name, self._limit, self._compressed)
        return size

    def _readinto(self, buffer) -> int:
        try:
            return self._text.readinto(buffer)
        except EOFError:  # gzip's word for a stream that ends inside a member
            raise DataError(f"{self._name}: the gzip data is truncated or damaged") from None
        except (gzip.BadGzipFile, zlib.error) as error:
            raise DataError(f"{self._name} starts like a gzip file but cannot be decompressed ({error})") from None

    def close(self) -> None:
        if self._compressed:
            self._text.close()  # the GzipFile only: the raw file is its opener's to close
        super().close()


# ---- what the text is ------------------------------------------------------------------------------
def _utf16_codec(prefix: bytes, name: str) -> str | None:
    """The UTF-16 codec of text starting with ``prefix`` (by BOM, else by its NUL pattern), or None.
    UTF-32 is a DataError."""
    if prefix.startswith(_UTF32_BOMS):
        raise DataError(f"{name} is UTF-32 text, which is not supported; save it as UTF-8")
    codec = next((codec for bom, codec in _UTF16_BOMS if prefix.startswith(bom)), None)
    return codec or _utf16_without_bom(prefix[:_UTF16_SNIFF_BYTES], name)


def _utf16_without_bom(sample: bytes, name: str) -> str | None:
    """"utf-16-le" / "utf-16-be" when `sample` reads as ASCII-rich UTF-16 in that byte order.
    ASCII-rich BOM-less UTF-32 (three NULs per character) is a DataError."""
    if b"\x00" not in sample:  # the common case, decided without numpy
        return None
    quads = np.frombuffer(sample[: len(sample) // 4 * 4], dtype=np.uint8).reshape(-1, 4)
    for text_byte, nul_bytes in ((0, [1, 2, 3]), (3, [0, 1, 2])):
        ascii_quads = np.count_nonzero((quads[:, nul_bytes] == 0).all(axis=1) & _TEXT_BYTES[quads[:, text_byte]])
        if ascii_quads >= _UTF16_MIN_ASCII_UNITS and 2 * ascii_quads >= len(quads):
            raise DataError(f"{name} looks like UTF-32 text, which is not supported; save it as UTF-8")
    units = np.frombuffer(sample[: len(sample) // 2 * 2], dtype=np.uint8).reshape(-1, 2)
    # ASCII text units per byte order: (low byte, high byte) is (text, NUL).
    little = int(np.count_nonzero((units[:, 1] == 0) & _TEXT_BYTES[units[:, 0]]))
    big = int(np.count_nonzero((units[:, 0] == 0) & _TEXT_BYTES[units[:, 1]]))
    if little >= _UTF16_MIN_ASCII_UNITS and little > 2 * big:
        return "utf-16-le"
    if big >= _UTF16_MIN_ASCII_UNITS and big > 2 * little:
        return "utf-16-be"
    return None


def _looks_binary(sample: bytes) -> bool:
    if b"\x00" in sample:
        return True
    control_count = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    return control_count > _BINARY_CONTROL_SHARE * len(sample)


def _decoded(blocks: Iterator[bytes], codec: str, name: str, bom: bool, final: bool = True) -> Iterator[str]:
    """``blocks`` decoded with ``codec`` as they come; a UTF-16 BOM (``bom``) skipped. Undecodable
    UTF-16 is a DataError naming the byte where it fails (counted from the file's start)."""
    decoder = codecs.getincrementaldecoder(codec)()
    offset = start = 0  # bytes of the file before the current block; where the failing decode began
    if bom:
        first = _take(blocks, 2)
        offset = 2 if first[:2] in (b"\xff\xfe", b"\xfe\xff") else 0
        blocks = _chained(first[offset:], blocks)
    try:
        for block in blocks:
            held = len(decoder.getstate()[0])
            start = offset - held
            offset += len(block)
            text = decoder.decode(block)
            if text:
                yield text
        if final:
            start = offset - len(decoder.getstate()[0])
            tail = decoder.decode(b"", final=True)
            if tail:
                yield tail
    except UnicodeDecodeError as error:
        raise DataError(f"{name} looks like UTF-16 but does not decode; save it as UTF-8 "
                        f"({error.reason} at byte {start + error.start})") from None


def _check_bytes(blocks: Iterator[bytes], name: str, facts: TextFacts) -> None:
    """Count the lines of non-UTF-16 text and note whether it is valid UTF-8 and cp1252."""
    validator = codecs.getincrementaldecoder("utf-8")()
    lines = 0
    for block in blocks:
        lines += block.count(b"\n") or block.count(b"\r")  # a lone CR ends a line too (old Mac files)
        if lines > limits.MAX_LINES:
            raise over_line_limit(name)
        if facts.utf8 and not (block.isascii() and not validator.getstate()[0]):
            try:
                validator.decode(block)
            except UnicodeDecodeError:
                facts.utf8 = False
        if facts.cp1252 and any(byte in block for byte in _CP1252_UNDEFINED):
            facts.cp1252 = False
    if facts.utf8:
        try:
            validator.decode(b"", final=True)
        except UnicodeDecodeError:
            facts.utf8 = False


def _count_lines(pieces: Iterator[str], name: str) -> None:
    lines = 0
    for piece in pieces:
        lines += piece.count("\n") or piece.count("\r")
        if lines > limits.MAX_LINES:
            raise over_line_limit(name)


# ---- small stream tools ------------------------------------------------------------------------
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


def _without_prefix(blocks: Iterator[bytes], prefix: bytes) -> Iterator[bytes]:
    start = _take(blocks, len(prefix)).removeprefix(prefix)
    return _chained(start, blocks)


class _ChunkStream(io.RawIOBase):
    """A readable raw stream over an iterator of byte blocks (closing it closes the iterator)."""

    def __init__(self, blocks: Iterator[bytes]):
        self._blocks = blocks
        self._block = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not len(self._block):
            block = next(self._blocks, None)
            if block is None:
                return 0
            self._block = memoryview(block)
        size = min(len(buffer), len(self._block))
        buffer[:size] = self._block[:size]
        self._block = self._block[size:]
        return size

    def close(self) -> None:
        close = getattr(self._blocks, "close", None)
        if close is not None:
            close()
        super().close()
