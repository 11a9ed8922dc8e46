"""The text-level half of reading pairs: the delimiter, the columns and the pandas parse.

``core.data.text_source`` turns a path, bytes or an upload into checked, bounded UTF-8 text;
``core.data.pair_chunks`` drives the steps here over it: ``choose_delimiter``, ``check_header`` (the
column cap), ``resolve_columns`` (with ``column_warnings`` for header names that fit a role more than
once, and ``check_one_role_per_column``, which refuses a column given two roles) and ``parse_chunks``
(pandas' C parser in chunks of rows, recording the records it skipped as malformed).
``parse_any_encoding`` parses text held whole (UTF-8, else cp1252 / latin-1), for question corpora.
Every failure the user can cause is a ``DataError``; a header that lacks a role's column, a
``MissingColumnsError`` carrying the header's names.
"""

from __future__ import annotations

import csv
import io
import re
import threading
import warnings
from contextlib import contextmanager
from typing import Callable, Iterator

import pandas as pd

from core.data import limits
from core.data.limits import DataError, clip, over_column_limit
from core.data.text_source import HEADER_SNIFF_BYTES

ROLES = ("question1", "question2", "is_duplicate")

# Accepted header names per role, compared lower-cased and stripped; the first one present wins
# (LoadReport.warnings then names the others).
ROLE_ALIASES = {
    "question1": ("question1", "q1", "sentence1", "text1"),
    "question2": ("question2", "q2", "sentence2", "text2"),
    "is_duplicate": ("is_duplicate", "label", "labels", "duplicate"),
}
DELIMITERS = (",", "\t", ";", "|")

_SKIPPED_RECORD = re.compile(r"Skipping line (\d+)")
_WARNING_CAPTURE_LOCK = threading.Lock()
_DELIMITER_NAMES = {",": "comma", "\t": "tab", ";": "semicolon", "|": "pipe"}


class MissingColumnsError(DataError):
    """A role's column is not in the header; ``header`` (the names as written) lets a caller offer them
    to the user, who then names the columns in a ``columns`` mapping."""

    def __init__(self, message: str, header: list[str]):
        super().__init__(message)
        self.header = list(header)


def choose_delimiter(data: bytes, columns: dict[str, str] | None) -> str:
    """The delimiter that splits the header into a known column set; else the most frequent one."""
    head_text = data[:HEADER_SNIFF_BYTES].decode("utf-8", errors="replace")
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
    aliases of one role), naming the column used. (A column that fills two roles is an error:
    ``check_one_role_per_column``.)"""
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
    return lines


def check_one_role_per_column(header: list[str], positions: dict[str, int], name: str,
                              first_values: Callable[[int], list[str]]) -> None:
    """A DataError when two roles resolved to one column (named so by ``columns``, or found so): the pair
    would compare a question with itself, or learn from its own text. ``first_values(position)`` gives
    the column's first values for the message."""
    used_by: dict[int, list[str]] = {}
    for role, position in positions.items():
        used_by.setdefault(position, []).append(role)
    for position, roles in sorted(used_by.items()):
        if len(roles) > 1:
            values = [value for value in dict.fromkeys(first_values(position)) if str(value).strip()][:3]
            shown = f" (values such as {', '.join(_quote(value) for value in values)})" if values else ""
            raise DataError(f"{name}: column {position + 1} {_quote(header[position])} is given two roles, "
                            f"{' and '.join(roles)}{shown}; each role needs a column of its own")


def _quote(name: str) -> str:
    return f'"{clip(name)}"'


def check_header(header: list[str], name: str, at_least: bool = False) -> None:
    """The column cap (``limits.MAX_COLUMNS``) and the field cap on the header's names; ``at_least``
    when ``header`` is only the start of a header line longer than the sniffed head."""
    if len(header) > limits.MAX_COLUMNS:
        raise over_column_limit(name, len(header), at_least)
    longest = max((len(field) for field in header), default=0)
    if longest > limits.MAX_FIELD_CHARS:
        raise limits.over_field_limit(name, 1, longest)


def resolve_columns(
    header: list[str], columns: dict[str, str] | None, name: str, required: tuple[str, ...] = ROLES
) -> dict[str, int]:
    """Role -> header position of every role found; a DataError when one of ``required`` is missing."""
    positions, missing = _match_columns(header, columns)
    missing = [role for role in missing if role in required]
    if missing:
        explicit = columns or {}
        wanted = [f"{role} (mapped to {clip(explicit[role])!r})" if role in explicit else role for role in missing]
        raise MissingColumnsError(
            f"{name}: missing column(s) for {', '.join(wanted)}; found columns: {_describe_header(header)} "
            "(expected question1, question2, is_duplicate or an alias such as q1/q2/label)",
            header,
        )
    return positions


def _describe_header(header: list[str], max_names: int = 10) -> str:
    names = ["(blank)" if not name.strip() else clip(name) for name in header[:max_names]]
    if len(header) > max_names:
        names.append(f"… ({len(header) - max_names:,} more)")
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


def parse_chunks(
    stream, delimiter: str, name: str, dtype, chunk_rows: int, nrows: int | None = None
) -> Iterator[tuple[pd.DataFrame, list[int]]]:
    """``_read_csv`` of a binary UTF-8 ``stream`` in frames of ``chunk_rows`` records (the header, row 0
    of the first), each with the record numbers pandas skipped as malformed while reading it (numbered
    from the file's start). The warning capture is held per chunk, not across the caller's work."""
    skipped: list[int] = []
    with _parse_errors(name, delimiter, skipped):
        reader = _read_csv(stream, delimiter, dtype, nrows=nrows, chunksize=chunk_rows)
    with reader:
        while True:
            with _parse_errors(name, delimiter, skipped):
                frame = next(reader, None)
            if frame is None:
                return
            yield frame, skipped
            skipped = []


def _parse(
    data: bytes, delimiter: str, name: str, dtype, nrows: int | None = None
) -> tuple[pd.DataFrame, list[int]]:
    """One parse of text held whole, with the header kept as row 0, plus the records pandas skipped."""
    skipped: list[int] = []
    with _parse_errors(name, delimiter, skipped):
        frame = _read_csv(io.BytesIO(data), delimiter, dtype, nrows=nrows)
    return frame, sorted(set(skipped))


def _read_csv(handle, delimiter: str, dtype, nrows: int | None = None, chunksize: int | None = None):
    """pandas' C parser as every reader of pairs uses it.

    header=None makes the header line fix the expected field count: with header=0 a first data row
    with extra fields silently switches pandas to an implicit index or truncation.
    """
    return pd.read_csv(
        handle,
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
        chunksize=chunksize,
    )


@contextmanager
def _parse_errors(name: str, delimiter: str, skipped: list[int]):
    """Around a pandas read: the records it skipped go into ``skipped``; what it trips over in user data
    becomes a DataError carrying pandas' own (line-numbered) explanation. UnicodeDecodeError passes:
    it is how a parse finds the text is not UTF-8."""
    # catch_warnings swaps process-wide state; the lock keeps two loads (e.g. two Streamlit
    # sessions) from recording each other's skipped lines.
    with _WARNING_CAPTURE_LOCK, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except (UnicodeDecodeError, DataError):
            raise
        except pd.errors.EmptyDataError:
            raise DataError(f"{name}: the file is empty") from None
        except Exception as error:  # noqa: BLE001 - whatever pandas trips over in user data is the user's
            raise DataError(
                f"could not parse {name} as {_DELIMITER_NAMES[delimiter]}-separated text: {error}"
            ) from error
        finally:
            skipped.extend(int(number) for w in caught for number in _SKIPPED_RECORD.findall(str(w.message)))
