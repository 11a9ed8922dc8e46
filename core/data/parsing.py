"""The byte-level half of reading pairs: a source in, a raw pandas frame (header kept as row 0) out.

``core.data.reading.load_pairs`` drives these steps and turns their frame into clean pairs:
``read_text_bytes`` (path, bytes or upload -> bytes, gunzipped, UTF-16 re-encoded as UTF-8, BOM
stripped, checked not empty or binary), ``choose_delimiter``, ``parse_any_encoding`` (UTF-8, else
cp1252 / latin-1, recording the records pandas skipped as malformed), ``resolve_columns`` (with
``column_warnings`` for header names that fit a role more than once) and ``skipped_up_to``. Every
failure the user can cause is a ``DataError``.
"""

from __future__ import annotations

import csv
import io
import os
import re
import threading
import warnings
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

ROLES = ("question1", "question2", "is_duplicate")

# Accepted header names per role, compared lower-cased and stripped; the first one present wins
# (LoadReport.warnings then names the others).
ROLE_ALIASES = {
    "question1": ("question1", "q1", "sentence1", "text1"),
    "question2": ("question2", "q2", "sentence2", "text2"),
    "is_duplicate": ("is_duplicate", "label", "duplicate"),
}
DELIMITERS = (",", "\t", ";", "|")

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
_HEADER_SNIFF_BYTES = 65536
# Real text has essentially no control bytes besides tab/newline/form feed; random binary has ~11 %.
_BINARY_CONTROL_SHARE = 0.10
_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 12, 13)) + b"\x7f"
_SKIPPED_RECORD = re.compile(r"Skipping line (\d+)")
_WARNING_CAPTURE_LOCK = threading.Lock()
_DELIMITER_NAMES = {",": "comma", "\t": "tab", ";": "semicolon", "|": "pipe"}


class DataError(ValueError):
    """The one exception for unusable input; the message names the problem for the user."""


def read_text_bytes(source) -> tuple[bytes, str, str | None]:
    """All bytes of the source, gunzipped (detected by magic bytes), UTF-16 re-encoded as UTF-8 and
    without a BOM; the name to report it under; and "utf-16-le" / "utf-16-be" when the bytes were
    UTF-16 (else None). Empty, binary or UTF-32 content is a DataError."""
    raw, name = _read_source(source)
    data = _inflate(raw, name) if raw[:2] == _GZIP_MAGIC else raw
    data, utf16 = _decode_utf16(data, name)
    data = data.removeprefix(_UTF8_BOM)
    head = data[:_HEADER_SNIFF_BYTES]
    if not head.strip():
        raise DataError(f"{name}: the file is empty")
    if _looks_binary(head[:_BINARY_SNIFF_BYTES]):
        raise DataError(f"{name} looks like a binary file, not CSV/TSV text")
    return data, name, utf16


def _read_source(source) -> tuple[bytes, str]:
    """All bytes of the source, and the name to report it under."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), _UPLOAD_NAME
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            return path.read_bytes(), path.name
        except FileNotFoundError:
            raise DataError(f"file not found: {path}") from None
        except IsADirectoryError:
            raise DataError(f"{path} is a directory, not a file") from None
        except OSError as error:
            raise DataError(f"cannot read {path}: {error.strerror or error}") from None
    if hasattr(source, "read"):
        if hasattr(source, "seek"):
            # An upload may already have been read once (e.g. for a preview); start over.
            try:
                source.seek(0)
            except (OSError, ValueError):
                pass
        content = source.read()
        if isinstance(content, str):
            content = content.encode("utf-8")
        name = getattr(source, "name", None)
        return bytes(content), (Path(name).name if isinstance(name, str) and name else _UPLOAD_NAME)
    raise TypeError(f"source must be a path, bytes or a binary file object, not {type(source).__name__}")


def _decode_utf16(data: bytes, name: str) -> tuple[bytes, str | None]:
    """UTF-16 (by BOM, or BOM-less by its NUL pattern) decoded and re-encoded as UTF-8, with the
    codec that read it; other bytes come back unchanged, with None."""
    if data.startswith(_UTF32_BOMS):
        raise DataError(f"{name} is UTF-32 text, which is not supported; save it as UTF-8")
    codec = next((codec for bom, codec in _UTF16_BOMS if data.startswith(bom)), None)
    bom_length = 0 if codec is None else 2
    if codec is None:
        codec = _utf16_without_bom(data[:_UTF16_SNIFF_BYTES], name)
        if codec is None:
            return data, None
    try:
        text = data[bom_length:].decode(codec)
    except UnicodeDecodeError as error:
        raise DataError(
            f"{name} looks like UTF-16 but does not decode; save it as UTF-8 "
            f"({error.reason} at byte {bom_length + error.start})"
        ) from None
    return text.encode("utf-8"), codec


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


def _inflate(raw: bytes, name: str) -> bytes:
    """Whole gzip content in one zlib pass (pandas' streaming gzip reader is ~30 % slower)."""
    members = []
    rest = raw
    try:
        while rest:
            inflater = zlib.decompressobj(wbits=31)
            members.append(inflater.decompress(rest))
            if not inflater.eof:
                raise DataError(f"{name}: the gzip data is truncated or damaged")
            rest = inflater.unused_data
            if not rest.strip(b"\x00"):  # gzip tolerates zero padding after the last member
                break
    except zlib.error as error:
        raise DataError(f"{name} starts like a gzip file but cannot be decompressed ({error})") from None
    return members[0] if len(members) == 1 else b"".join(members)


def choose_delimiter(data: bytes, columns: dict[str, str] | None) -> str:
    """The delimiter that splits the header into a known column set; else the most frequent one."""
    head_text = data[:_HEADER_SNIFF_BYTES].decode("utf-8", errors="replace")
    resolving = []
    for delimiter in DELIMITERS:
        header = _header_fields(head_text, delimiter)
        if header is not None and not _match_columns(header, columns)[1]:
            resolving.append((len(header), -DELIMITERS.index(delimiter), delimiter))
    if resolving:
        return max(resolving)[2]
    lines = head_text.lstrip("\r\n").splitlines()
    first_line = lines[0] if lines else ""
    counts = [(first_line.count(delimiter), -DELIMITERS.index(delimiter), delimiter) for delimiter in DELIMITERS]
    return max(counts)[2]


def _header_fields(head_text: str, delimiter: str) -> list[str] | None:
    try:
        return next(csv.reader(io.StringIO(head_text.lstrip("\r\n")), delimiter=delimiter), None)
    except csv.Error:  # e.g. a header field beyond csv's size limit: not a header we can use
        return None


def _match_columns(
    header: list[str], columns: dict[str, str] | None
) -> tuple[dict[str, int], list[str]]:
    """Role -> position in `header`, and the roles that could not be found."""
    candidates = _role_candidates(header, columns)
    positions = {role: found[0] for role, found in candidates.items() if found}
    return positions, [role for role in ROLES if role not in positions]


def _role_candidates(header: list[str], columns: dict[str, str] | None) -> dict[str, list[int]]:
    """Role -> every header position that names it, the one used first.

    A role the caller maps explicitly takes the columns named exactly so, else those named so
    ignoring case and surrounding spaces; any other role takes its aliases in ROLE_ALIASES order,
    each alias's columns left to right. The header row is read as data (header=None), so repeated
    names arrive as written, never renamed "question1.1" by pandas.
    """
    explicit = columns or {}
    unknown = sorted(set(explicit) - set(ROLES))
    if unknown:
        raise DataError(f"unknown role(s) in columns mapping: {', '.join(unknown)}; roles are {', '.join(ROLES)}")
    normalised = [name.strip().lower() for name in header]
    candidates: dict[str, list[int]] = {}
    for role in ROLES:
        if role in explicit:
            wanted = str(explicit[role])
            exact = [position for position, name in enumerate(header) if name == wanted]
            candidates[role] = exact or [
                position for position, name in enumerate(normalised) if name == wanted.strip().lower()
            ]
        else:
            candidates[role] = [
                position for alias in ROLE_ALIASES[role] for position, name in enumerate(normalised) if name == alias
            ]
    return candidates


def column_warnings(header: list[str], columns: dict[str, str] | None) -> list[str]:
    """One line per role that more than one column could fill (a repeated header name, or two
    aliases of one role), naming the column used; and one per column that fills two roles."""
    candidates = _role_candidates(header, columns)
    lines = []
    for role, found in candidates.items():
        if len(found) < 2:
            continue
        used = found[0]
        ignored = "the other is ignored" if len(found) == 2 else "the others are ignored"
        if len({header[position].strip().lower() for position in found}) == 1:
            numbers = ", ".join(str(position + 1) for position in sorted(found))
            lines.append(
                f"header {_quote(header[used])} appears {len(found)} times (columns {numbers}); "
                f"{role} is read from column {used + 1}, {ignored}"
            )
        else:
            named = [f"{position + 1} {_quote(header[position])}" for position in sorted(found)]
            listed = " and ".join(named) if len(named) == 2 else ", ".join(named[:-1]) + " and " + named[-1]
            lines.append(
                f"columns {listed} {'both' if len(found) == 2 else 'all'} name {role}; {role} is read "
                f"from column {used + 1} {_quote(header[used])}, {ignored}"
            )
    used_by: dict[int, list[str]] = {}
    for role, found in candidates.items():
        if found:
            used_by.setdefault(found[0], []).append(role)
    for position, roles in sorted(used_by.items()):
        if len(roles) > 1:
            lines.append(f"column {position + 1} {_quote(header[position])} is read as both {' and '.join(roles)}")
    return lines


def _quote(name: str, max_length: int = 40) -> str:
    name = name.strip()
    return f'"{name}"' if len(name) <= max_length else f'"{name[:max_length]}…"'


def resolve_columns(header: list[str], columns: dict[str, str] | None, name: str) -> dict[str, int]:
    positions, missing = _match_columns(header, columns)
    if missing:
        explicit = columns or {}
        wanted = [f"{role} (mapped to {explicit[role]!r})" if role in explicit else role for role in missing]
        raise DataError(
            f"{name}: missing column(s) for {', '.join(wanted)}; found columns: {_describe_header(header)} "
            "(expected question1, question2, is_duplicate or an alias such as q1/q2/label)"
        )
    return positions


def _describe_header(header: list[str], max_names: int = 20, max_length: int = 40) -> str:
    names = []
    for name in header[:max_names]:
        name = name.strip()
        names.append("(blank)" if not name else name if len(name) <= max_length else name[:max_length] + "…")
    if len(header) > max_names:
        names.append(f"… ({len(header) - max_names} more)")
    return ", ".join(names)


def parse_any_encoding(
    data: bytes, delimiter: str, name: str, dtype
) -> tuple[pd.DataFrame, list[int], str]:
    """Parse as UTF-8; if the bytes are not UTF-8, re-encode from cp1252 (else latin-1) and retry."""
    try:
        frame, skipped = _parse(data, delimiter, name, dtype)
        return frame, skipped, "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        text, encoding = data.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:  # cp1252 leaves five bytes undefined; latin-1 maps every byte
        text, encoding = data.decode("latin-1"), "latin-1"
    frame, skipped = _parse(text.encode("utf-8"), delimiter, name, dtype)
    return frame, skipped, encoding


def skipped_up_to(data: bytes, encoding: str, delimiter: str, name: str, rows: int) -> np.ndarray:
    """Record numbers pandas skips before it has read `rows` data rows.

    Asked of pandas itself (a parse of just that prefix): its skip numbers count blank lines but
    not embedded newlines, so they cannot be compared with a data row's position.
    """
    text = data if encoding == "utf-8" else data.decode(encoding).encode("utf-8")
    _, skipped = _parse(text, delimiter, name, dtype=str, nrows=rows + 1)  # + 1: the header row
    return np.asarray(skipped, dtype=np.int64)


def _parse(
    data: bytes, delimiter: str, name: str, dtype, nrows: int | None = None
) -> tuple[pd.DataFrame, list[int]]:
    """One C-engine parse with the header kept as row 0, plus the record numbers pandas skipped.

    header=None makes the header line fix the expected field count: with header=0 a first data row
    with extra fields silently switches pandas to an implicit index or truncation.
    """
    # catch_warnings swaps process-wide state; the lock keeps two loads (e.g. two Streamlit
    # sessions) from recording each other's skipped lines.
    with _WARNING_CAPTURE_LOCK, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            frame = pd.read_csv(
                io.BytesIO(data),
                sep=delimiter,
                header=None,
                index_col=False,
                dtype=dtype,
                keep_default_na=False,
                engine="c",
                on_bad_lines="warn",
                compression=None,
                encoding="utf-8",
                quotechar='"',
                doublequote=True,
                skip_blank_lines=True,
                nrows=nrows,
            )
        except UnicodeDecodeError:
            raise
        except pd.errors.EmptyDataError:
            raise DataError(f"{name}: the file is empty") from None
        except Exception as error:
            # Whatever the tokenizer or decompressor trips over in user data must reach the user
            # as a DataError carrying pandas' own (line-numbered) explanation.
            raise DataError(
                f"could not parse {name} as {_DELIMITER_NAMES[delimiter]}-separated text: {error}"
            ) from error
    skipped = sorted({int(number) for w in caught for number in _SKIPPED_RECORD.findall(str(w.message))})
    return frame, skipped
