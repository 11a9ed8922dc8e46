"""The text-level half of reading pairs: the delimiter, the columns and pandas' C parser.

``choose_delimiter``, ``check_header`` (the column cap), ``resolve_columns`` (``column_warnings`` names a role
more than one column could fill; ``check_one_role_per_column`` refuses a column given two roles) and
``read_csv`` (the records it skips as malformed read from its warnings). Every failure the user can cause is a
``DataError`` (``MissingColumnsError`` when a role has no column).
"""

from __future__ import annotations

import csv
import io
import re
import threading
import warnings
from contextlib import contextmanager
from typing import Callable

import pandas as pd

from core.data import limits
from core.data.limits import DataError, clip, over_column_limit

ROLES = ("question1", "question2", "is_duplicate")

# Header names per role, compared lower-cased and stripped; the first present wins (column_warnings names others).
ROLE_ALIASES = {
    "question1": ("question1", "q1", "sentence1", "text1"),
    "question2": ("question2", "q2", "sentence2", "text2"),
    "is_duplicate": ("is_duplicate", "label", "labels", "duplicate"),
}
DELIMITERS = (",", "\t", ";", "|")

_SKIPPED_RECORD = re.compile(r"Skipping line (\d+)")
_WARNING_CAPTURE_LOCK = threading.Lock()
_MALFORMED_HEAD_LINES = 30  # malformed lines at a file's head that may be mistakes, not a wrong format
_DELIMITER_NAMES = {",": "comma", "\t": "tab", ";": "semicolon", "|": "pipe"}


class MissingColumnsError(DataError):
    """A role's column is not in the header; ``header`` (the names as written) lets a caller offer them
    to the user, who then names the columns in a ``columns`` mapping."""

    def __init__(self, message: str, header: list[str]):
        super().__init__(message)
        self.header = list(header)


def choose_delimiter(head: str, columns: dict[str, str] | None) -> str:
    """The delimiter that splits the header into a known column set; else the most frequent one."""
    headers = {delimiter: header_fields(head, delimiter) for delimiter in DELIMITERS}
    resolving = [delimiter for delimiter, header in headers.items()
                 if header is not None and not _match_columns(header, columns)[1]]
    if resolving:  # max keeps the first of a tie, in DELIMITERS order
        return max(resolving, key=lambda delimiter: len(headers[delimiter]))
    first_line = (head.lstrip("\r\n").splitlines() or [""])[0]
    return max(DELIMITERS, key=first_line.count)


def header_fields(head_text: str, delimiter: str) -> list[str] | None:
    try:
        return next(csv.reader(io.StringIO(head_text.lstrip("\r\n")), delimiter=delimiter), None)
    except csv.Error:  # e.g. a header field beyond csv's size limit: not a header we can use
        return None


def _match_columns(header: list[str], columns: dict[str, str] | None) -> tuple[dict[str, int], list[str]]:
    """Role -> position in `header`, and the roles that could not be found."""
    positions = {role: found[0] for role, found in _role_candidates(header, columns).items() if found}
    return positions, [role for role in ROLES if role not in positions]


def _role_candidates(header: list[str], columns: dict[str, str] | None) -> dict[str, list[int]]:
    """Role -> every header position that names it, the one used first: for a role ``columns`` maps, the columns
    named exactly so, else so ignoring case and surrounding spaces; for another, its ROLE_ALIASES in order, each
    alias's columns left to right. (pandas reads the header as data, so repeated names arrive as written.)"""
    explicit = columns or {}
    unknown = sorted(set(explicit) - set(ROLES))
    if unknown:
        raise DataError(f"unknown role(s) in columns mapping: {', '.join(unknown)}; roles are {', '.join(ROLES)}")
    normalised = [name.strip().lower() for name in header]

    def named(names: list[str], wanted: str) -> list[int]:
        return [position for position, name in enumerate(names) if name == wanted]

    candidates = {}
    for role in ROLES:
        if role in explicit:
            wanted = str(explicit[role])
            candidates[role] = named(header, wanted) or named(normalised, wanted.strip().lower())
        else:
            candidates[role] = [position for alias in ROLE_ALIASES[role] for position in named(normalised, alias)]
    return candidates


def column_warnings(header: list[str], columns: dict[str, str] | None) -> list[str]:
    """One line per role that more than one column could fill (a repeated header name, or two aliases of one
    role), naming the column used. (A column given two roles is an error: ``check_one_role_per_column``.)"""
    lines = []
    for role, found in _role_candidates(header, columns).items():
        if len(found) < 2:
            continue
        used, ignored = found[0], "the other is ignored" if len(found) == 2 else "the others are ignored"
        if len({header[position].strip().lower() for position in found}) == 1:
            numbers = ", ".join(str(position + 1) for position in sorted(found))
            lines.append(f"header {_quote(header[used])} appears {len(found)} times (columns {numbers}); "
                         f"{role} is read from column {used + 1}, {ignored}")
        else:
            named = [f"{position + 1} {_quote(header[position])}" for position in sorted(found)]
            lines.append(f"columns {', '.join(named[:-1])} and {named[-1]} {'both' if len(found) == 2 else 'all'} "
                         f"name {role}; {role} is read from column {used + 1} {_quote(header[used])}, {ignored}")
    return lines


def check_one_role_per_column(header: list[str], positions: dict[str, int], name: str,
                              first_values: Callable[[int], list[str]]) -> None:
    """A DataError when two roles resolved to one column (named so by ``columns``, or found so): the pair
    would compare a question with itself, or learn from its own text. ``first_values(position)`` gives
    the column's first values for the message."""
    for position in sorted(set(positions.values())):
        roles = [role for role, used in positions.items() if used == position]
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


def check_field_counts(head: str, delimiter: str, header: list[str], name: str) -> None:
    """A DataError when most whole lines of ``head`` hold more fields than the header: pandas skips such lines
    one by one, at a cost that grows with the square of their number, and the file is not what it seems."""
    try:
        lines = list(csv.reader(io.StringIO(head.lstrip("\r\n")), delimiter=delimiter))[1:-1]
    except csv.Error:
        return
    longer = sum(len(fields) > len(header) for fields in lines)
    if longer > _MALFORMED_HEAD_LINES and longer * 2 > len(lines):
        raise DataError(f"{name}: {longer:,} of its first {len(lines):,} lines have more fields than the header's "
                        f"{len(header):,}; is it {_DELIMITER_NAMES[delimiter]}-separated text?")


def resolve_columns(header: list[str], columns: dict[str, str] | None, name: str,
                    required: tuple[str, ...] = ROLES) -> dict[str, int]:
    """Role -> header position of every role found; a DataError when one of ``required`` is missing."""
    positions, missing = _match_columns(header, columns)
    missing = [role for role in missing if role in required]
    if missing:
        explicit = columns or {}
        wanted = [f"{role} (mapped to {clip(explicit[role])!r})" if role in explicit else role for role in missing]
        found = ", ".join("(blank)" if not column.strip() else clip(column) for column in header[:10])
        more = f", … ({len(header) - 10:,} more)" if len(header) > 10 else ""
        raise MissingColumnsError(f"{name}: missing column(s) for {', '.join(wanted)}; found columns: {found}{more} "
                                  "(expected question1, question2, is_duplicate or an alias such as q1/q2/label)",
                                  header)
    return positions


def read_csv(stream, delimiter: str, encoding: str, dtype, nrows: int | None = None, chunksize: int | None = None):
    """pandas' C parser as every reader of pairs uses it. header=None makes the header line fix the expected
    field count: with header=0 a row with extra fields loses them silently instead of being skipped."""
    return pd.read_csv(stream, sep=delimiter, header=None, index_col=False, dtype=dtype, keep_default_na=False,
                       engine="c", on_bad_lines="warn", compression=None, encoding=encoding, quotechar='"',
                       doublequote=True, skip_blank_lines=True, nrows=nrows, chunksize=chunksize)


@contextmanager
def parse_errors(name: str, delimiter: str, skipped: list[int]):
    """Around a pandas read: the records it skipped go into ``skipped``; what it trips over in user data
    becomes a DataError carrying pandas' own (line-numbered) explanation. UnicodeDecodeError passes:
    it is how a parse finds the text is not UTF-8."""
    # catch_warnings swaps process-wide state: the lock keeps two loads (two Streamlit sessions) apart.
    with _WARNING_CAPTURE_LOCK, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except (UnicodeDecodeError, DataError):
            raise
        except pd.errors.EmptyDataError:
            raise DataError(f"{name}: the file is empty") from None
        except Exception as error:  # noqa: BLE001 - whatever pandas trips over in user data is the user's
            delimited = f"{_DELIMITER_NAMES[delimiter]}-separated text"
            raise DataError(f"could not parse {name} as {delimited}: {error}") from error
        finally:
            skipped.extend(int(number) for w in caught for number in _SKIPPED_RECORD.findall(str(w.message)))
