"""Question pairs in, clean frame out: ``load_pairs`` and its ``LoadReport``, over ``PairReader``, the one reader
behind ``load_pairs``, ``score`` and the TF-IDF baseline: delimiter, header and roles settled before the first row,
then chunks parsed by pandas' C engine from ``core.data.limits``' bounded stream; dropped rows counted by reason
from masks, on their record's line (the header is line 1; records pandas skipped are stepped over).
"""
from __future__ import annotations

import csv
import io
import re
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

import numpy as np
import pandas as pd

from core.data import limits
from core.data.labels import LabelTally, label_value, normalise_label_map, parse_labels
from core.data.limits import DataError, clip
from core.data.limits import HEAD_BYTES, open_text

ROLES = ("question1", "question2", "is_duplicate")
GROUP = "group"  # the pairs frame's column of the groups a user named (train --group-column), read as text
# Header names per role, compared lower-cased and stripped; the first present wins (column_warnings names others).
ROLE_ALIASES = {
    "question1": ("question1", "q1", "sentence1", "text1"),
    "question2": ("question2", "q2", "sentence2", "text2"),
    "is_duplicate": ("is_duplicate", "label", "labels", "duplicate"),
}
DELIMITERS = (",", "\t", ";", "|")
EMPTY_QUESTION, UNREADABLE_LABEL, MALFORMED_LINE = "empty question", "unreadable label", "malformed line"
MAX_EXAMPLES = 20
CHUNK_ROWS = 100_000  # records parsed at a time: a few tens of MB of frame for Quora-sized rows
_SKIPPED_RECORD = re.compile(r"Skipping line (\d+)")
_WARNING_CAPTURE_LOCK = threading.Lock()
_MALFORMED_HEAD_LINES = 30  # malformed lines at a file's head that may be mistakes, not a wrong format
_DELIMITER_NAMES = {",": "comma", "\t": "tab", ";": "semicolon", "|": "pipe"}


class MissingColumnsError(DataError):
    """A role's column is not in the header; ``header`` (the names as written) lets a caller offer them."""

    def __init__(self, message: str, header: list[str]):
        super().__init__(message)
        self.header = list(header)


class NoHeaderRowError(MissingColumnsError):
    """The first row is data, not names: ``header`` holds its values, ``names`` the names suggested to read it by."""

    def __init__(self, name: str, first_row: list[str]):
        self.names = suggested_names(first_row)
        super().__init__(f"{name}: the file has no header row; name its columns with --names {','.join(self.names)}",
                         first_row)


@dataclass
class LoadReport:
    source: str  # file name, or "<upload>" for bytes / nameless file objects
    delimiter: str  # "," "\t" ";" or "|"
    columns: dict[str, str]  # role -> column name as found in the file
    rows_read: int  # data rows seen, including dropped rows and malformed lines
    rows_kept: int  # rows in the returned frame
    dropped: dict[str, int]  # reason -> count, only reasons that occurred
    examples: list[tuple[int, str]]  # first MAX_EXAMPLES (line number, reason) of dropped rows
    encoding: str = "utf-8"  # "utf-8", "cp1252", "latin-1", "utf-16-le" or "utf-16-be"
    names: list[str] | None = None  # the names given to a file without a header row (None: its header named them)
    # What loaded but may not be what was meant (a repeated header name, unread labels); not part of summary().
    warnings: list[str] = field(default_factory=list)
    label_map: dict[str, int] | None = None  # the label map the labels were read by (values lower-cased)
    # With unreadable labels: the label column's distinct values as text -> rows, most frequent first.
    label_values: dict[str, int] = field(default_factory=dict)
    label_warning: str | None = None  # the one of ``warnings`` on unreadable labels (the app words it its own way)

    def summary(self) -> str:
        text = f"kept {self.rows_kept:,} of {self.rows_read:,} rows"
        return text + ("; dropped " + describe_counts(self.dropped) if self.dropped else "")


# ---- the header: delimiter, columns and roles -------------------------------------------------------------

def choose_delimiter(head: str, columns: dict[str, str] | None, names: list[str] | None = None) -> str:
    """The delimiter that splits the header into a known column set (with ``names``: the first row into as many
    fields); else the most frequent one."""
    headers = {delimiter: header_fields(head, delimiter) for delimiter in DELIMITERS}
    resolving = [delimiter for delimiter, header in headers.items() if header is not None and (
        len(header) == len(names) if names else all(_role_candidates(header, columns).values()))]
    if resolving:  # max keeps the first of a tie, in DELIMITERS order
        return max(resolving, key=lambda delimiter: len(headers[delimiter]))
    first_line = (head.lstrip("\r\n").splitlines() or [""])[0]
    return max(DELIMITERS, key=first_line.count)


def header_fields(head_text: str, delimiter: str) -> list[str] | None:
    try:
        return next(csv.reader(io.StringIO(head_text.lstrip("\r\n")), delimiter=delimiter), None)
    except csv.Error:  # e.g. a header field beyond csv's size limit: not a header we can use
        return None


def _named(header: list[str], wanted: str) -> list[int]:
    """The positions of the columns named ``wanted`` exactly, else so ignoring case and surrounding spaces."""
    return ([position for position, name in enumerate(header) if name == wanted] or
            [position for position, name in enumerate(header) if name.strip().lower() == wanted.strip().lower()])


def _role_candidates(header: list[str], columns: dict[str, str] | None) -> dict[str, list[int]]:
    """Role -> every header position that names it, the one used first: for a role ``columns`` maps, ``_named``'s;
    for another, its ROLE_ALIASES in order (ignoring case and surrounding spaces)."""
    explicit = columns or {}
    normalised = [name.strip().lower() for name in header]
    return {role: _named(header, str(explicit[role])) if role in explicit else
            [position for alias in ROLE_ALIASES[role] for position, name in enumerate(normalised) if name == alias]
            for role in ROLES}


def column_warnings(header: list[str], columns: dict[str, str] | None) -> list[str]:
    """One line per role that more than one column could fill, naming the column used."""
    lines = []
    for role, found in _role_candidates(header, columns).items():
        if len(found) > 1:
            named = [f"{position + 1} {_quote(header[position])}" for position in sorted(found)]
            lines.append(f"columns {', '.join(named[:-1])} and {named[-1]} {'both' if len(found) == 2 else 'all'} "
                         f"name {role}; {role} is read from column {found[0] + 1} {_quote(header[found[0]])}, "
                         f"{'the other is' if len(found) == 2 else 'the others are'} ignored")
    return lines


def _is_value(field: str) -> bool:
    """A number or a label spelling: what a cell holds and a column's name never is."""
    try:
        float(field)
        return True
    except ValueError:
        return label_value(field) >= 0


def looks_like_data(row: list[str]) -> bool:
    """Whether a first row holds values rather than column names: a number or a label, or two sentences."""
    sentences = sum(len(field.split()) >= 4 or field.strip().endswith("?") for field in row)
    return any(_is_value(field) for field in row) or sentences >= 2


def suggested_names(row: list[str]) -> list[str]:
    """Names for a first row of data: is_duplicate for its last value, question1 and question2 for its two longest
    other fields (in order), columnN for the rest."""
    names = [f"column{position + 1}" for position in range(len(row))]
    label = next((position for position in reversed(range(len(row))) if _is_value(row[position])), None)
    texts = sorted(sorted((p for p in range(len(row)) if p != label), key=lambda p: -len(row[p]))[:2])
    for role, position in zip(("question1", "question2"), texts):
        names[position] = role
    if label is not None:
        names[label] = "is_duplicate"
    return names


def _quote(name: str) -> str:
    return f'"{clip(name)}"'


def check_header(header: list[str], name: str, at_least: bool = False) -> None:
    """The column and field caps on the header; ``at_least``: ``header`` is only the start of a longer line."""
    if len(header) > limits.MAX_COLUMNS:
        count = f"at least {len(header):,}" if at_least else f"{len(header):,}"
        raise DataError(f"{name}: the header has {count} columns; the limit is {limits.MAX_COLUMNS:,}")
    longest = max((len(field) for field in header), default=0)
    if longest > limits.MAX_FIELD_CHARS:
        raise limits.over_field_limit(name, 1, longest)


def _check_field_counts(head: str, delimiter: str, header: list[str], name: str) -> None:
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


def _resolve_columns(header: list[str], columns: dict[str, str] | None, name: str,
                     required: tuple[str, ...]) -> dict[str, int]:
    """Role -> header position of every role found; a MissingColumnsError when one of ``required`` is missing."""
    positions = {role: found[0] for role, found in _role_candidates(header, columns).items() if found}
    missing = [role for role in required if role not in positions]
    if missing:
        explicit = columns or {}
        wanted = [f"{role} (mapped to {clip(explicit[role])!r})" if role in explicit else role for role in missing]
        raise MissingColumnsError(f"{name}: missing column(s) for {', '.join(wanted)}; found columns: "
                                  f"{_listed(header)} (expected question1, question2, is_duplicate or an alias such "
                                  "as q1/q2/label)", header)
    return positions


def _listed(header: list[str]) -> str:
    """The first ten of ``header``'s names, for a message."""
    more = f", … ({len(header) - 10:,} more)" if len(header) > 10 else ""
    return ", ".join("(blank)" if not column.strip() else clip(column) for column in header[:10]) + more


def _check_one_role_per_column(header: list[str], positions: dict[str, int], name: str,
                               first_values: Callable[[int], list[str]]) -> None:
    """A DataError when two roles share one column: the pair would compare a question with itself, or learn from
    its own text. ``first_values(position)`` gives the column's first values for the message."""
    for position in sorted(set(positions.values())):
        roles = [role for role, used in positions.items() if used == position]
        if len(roles) > 1:
            values = [value for value in dict.fromkeys(first_values(position)) if str(value).strip()][:3]
            shown = f" (values such as {', '.join(_quote(value) for value in values)})" if values else ""
            raise DataError(f"{name}: column {position + 1} {_quote(header[position])} is given two roles, "
                            f"{' and '.join(roles)}{shown}; each role needs a column of its own")


# ---- pandas' C parser -------------------------------------------------------------------------------------

def read_csv(stream, delimiter: str, encoding: str, dtype, nrows: int | None = None, chunksize: int | None = None):
    """pandas' C parser as every reader uses it. header=None makes the header line fix the expected field count:
    with header=0 a row with extra fields loses them silently instead of being skipped."""
    return pd.read_csv(stream, sep=delimiter, header=None, index_col=False, dtype=dtype, keep_default_na=False,
                       engine="c", on_bad_lines="warn", compression=None, encoding=encoding, quotechar='"',
                       doublequote=True, skip_blank_lines=True, nrows=nrows, chunksize=chunksize)


@contextmanager
def parse_errors(name: str, delimiter: str, skipped: list[int]):
    """Around a pandas read: the records it skipped go into ``skipped``; what it trips over in user data becomes a
    DataError with pandas' own explanation. UnicodeDecodeError passes: it says the text is not UTF-8."""
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
            raise DataError(f"could not parse {name} as {_DELIMITER_NAMES[delimiter]}-separated text: {error}") from error
        finally:
            skipped.extend(int(number) for w in caught for number in _SKIPPED_RECORD.findall(str(w.message)))


# ---- the reader -------------------------------------------------------------------------------------------

@dataclass
class PairsHead:  # what a reader found before the first row
    name: str  # file name, or "<upload>"
    delimiter: str
    header: list[str]  # the header's names as written
    positions: dict[str, int]  # role -> header position (no "is_duplicate" when optional and absent)
    warnings: list[str] = field(default_factory=list)  # column_warnings: which of two candidates was used


@dataclass
class PairChunk:
    rows: pd.DataFrame  # the chunk's records, every column, with the header's names
    start: int  # position of its first row among all data rows (0-based)
    skipped: np.ndarray  # record numbers pandas skipped as malformed while reading this chunk
    question1: pd.Series  # stripped text, "" where empty or missing
    question2: pd.Series
    labels: np.ndarray | None  # (n,) int64 0/1 (0 where unreadable); None without a label column
    label_readable: np.ndarray | None  # (n,) bool
    label_values: dict[str, int] | None = None  # the label column's distinct values as text -> rows
    group: pd.Series | None = None  # the group column's stripped text, <NA> where empty; None without one


class _Reencoded(Exception):
    """The text did not decode as UTF-8 further on; the source now holds the encoding to read it by."""


class PairReader:
    """A pairs file checked up to its header (``head``); each pass over it reads the source again, in ``PairChunk``s.
    ``all_text``: every column kept as written (score writes them back), after a first pass over the caps and the
    encoding, so no row is scored of a file then refused. ``names``: the columns of a file without a header row."""

    def __init__(self, source, columns: dict[str, str] | None = None, *, labels_required: bool = True,
                 all_text: bool = False, chunk_rows: int = CHUNK_ROWS, max_bytes: int | None = None,
                 label_map: dict | None = None, names: list[str] | None = None, group_column: str | None = None):
        self.label_map = normalise_label_map(label_map)
        self.names = list(names) if names else None
        self._header_rows = 0 if self.names else 1  # records before the first data row
        self._text = text = open_text(source, max_bytes)
        self._chunk_rows, self._all_text = chunk_rows, all_text
        self._delimiter = delimiter = choose_delimiter(text.head, columns, self.names)
        sniffed = header_fields(text.head, delimiter) or []
        check_header(sniffed, text.name, at_least=len(text.head.encode()) >= HEAD_BYTES)  # before pandas sees it
        header = first = self._first_rows(1)[0]
        if self.names:
            if len(self.names) != len(first):
                raise DataError(f"{text.name}: {len(self.names)} names given for a first row of {len(first)} fields")
            header = self.names
        check_header(header, text.name)
        _check_field_counts(text.head, delimiter, header, text.name)
        try:
            positions = _resolve_columns(header, columns, text.name, ROLES if labels_required else ROLES[:2])
        except MissingColumnsError:
            if not self.names and looks_like_data(header):
                raise NoHeaderRowError(text.name, header) from None
            raise
        _check_one_role_per_column(header, positions, text.name, lambda position: [
            row[position] for row in self._first_rows(3 + self._header_rows)[self._header_rows:]])
        self._group = None if group_column is None else (_named(header, group_column) or [None])[0]
        if group_column is not None and self._group is None:
            raise DataError(f"{text.name}: no column {_quote(group_column)} to group the pairs by; its columns are: "
                            f"{_listed(header)}")
        self._text_questions = {positions["question1"]: str, positions["question2"]: str}
        self.head = PairsHead(text.name, delimiter, header, positions, column_warnings(header, columns))
        if all_text:
            text.check_caps()

    @property
    def encoding(self) -> str:
        return self._text.encoding

    def _first_rows(self, rows: int) -> list[list[str]]:
        """The first ``rows`` records (the header first) as text, as pandas parses them."""
        while True:
            try:
                frames = [frame for frame, _ in self._parse(str, nrows=rows)]
            except _Reencoded:
                continue
            if not frames or frames[0].shape[0] == 0:
                raise DataError(f"{self._text.name}: the file is empty")
            return frames[0].fillna("").astype(str).values.tolist()

    def _parse(self, dtype, nrows: int | None = None,
               chunk_rows: int | None = None) -> Iterator[tuple[pd.DataFrame, list[int]]]:
        """pandas' parse of the bounded stream in frames of ``chunk_rows`` records (the header is row 0 of the
        first), each with the record numbers pandas skipped as malformed while reading it."""
        text, skipped = self._text, []
        stream = text.stream()
        try:
            with parse_errors(text.name, self._delimiter, skipped):
                reader = read_csv(stream, self._delimiter, text.codec, dtype, nrows, chunk_rows or self._chunk_rows)
            with reader:
                while True:
                    with parse_errors(text.name, self._delimiter, skipped):
                        frame = next(reader, None)
                    if frame is None:
                        return
                    yield frame, skipped
                    skipped = []
        except DataError:
            if stream.error is not None:  # the cap or damage the stream met, not pandas' words for it
                raise stream.error from None
            raise
        except UnicodeDecodeError as error:
            failed = error.object if isinstance(error.object, bytes) else b""
            text.not_decoded(error, stream.count - len(failed))
            raise _Reencoded from None
        finally:
            stream.close()

    def __iter__(self) -> Iterator[PairChunk]:
        """The chunks; ``_Reencoded`` when the text turns out not to be UTF-8 (never with ``all_text``, whose first
        pass settled the encoding): the caller reads again."""
        dtype, start, skipped_so_far, done = (str if self._all_text else None), 0, [], 0  # done: chunks yielded
        while True:
            for number, (frame, skipped) in enumerate(self._parse(dtype)):
                if number < done:  # yielded before the restart below: same records, same chunks
                    continue
                if dtype is None and not all(pd.api.types.is_string_dtype(frame.iloc[:, position])
                                             for position in self._text_questions):
                    break
                rows = frame.iloc[self._header_rows:] if number == 0 else frame  # the header, if any
                skipped_so_far.extend(skipped)
                yield self._chunk(rows, start, np.unique(np.asarray(skipped, dtype=np.int64)),
                                  np.unique(np.asarray(skipped_so_far, dtype=np.int64)))
                start += len(rows)
                done += 1
            else:
                return
            # pandas typed questions as numbers ("007" -> 7): only a text parse keeps them verbatim. Asking for text
            # up front makes pandas' parse several times slower and this is rare, so this case parses again, skipping
            # the chunks already given (chunks are cut by records, whatever the types).
            dtype = self._text_questions

    def _chunk(self, rows: pd.DataFrame, start: int, skipped: np.ndarray, skipped_so_far: np.ndarray) -> PairChunk:
        positions = self.head.positions
        kept = range(rows.shape[1]) if self._all_text else (positions["question1"], positions["question2"])
        for column in kept:  # MAX_FIELD_CHARS on every field kept as text
            lengths = rows.iloc[:, column].str.len().to_numpy(dtype=float, na_value=0)
            if lengths.size and lengths.max() > limits.MAX_FIELD_CHARS:
                row = int(np.argmax(lengths > limits.MAX_FIELD_CHARS))
                raise limits.over_field_limit(self.head.name, self.line_of(start + row, skipped_so_far),
                                              int(lengths[row]))
        question1, question2 = (rows.iloc[:, positions[role]].fillna("").str.strip().reset_index(drop=True)
                                for role in ("question1", "question2"))
        labels = readable = values = None
        if "is_duplicate" in positions:
            labels, readable, values = parse_labels(rows.iloc[:, positions["is_duplicate"]], self.label_map)
        group = None if self._group is None else (
            rows.iloc[:, self._group].astype("string").str.strip().replace("", pd.NA).reset_index(drop=True))
        rows = rows.set_axis(self.head.header, axis=1).reset_index(drop=True)
        return PairChunk(rows, start, skipped, question1, question2, labels, readable, values, group)

    def skipped_up_to(self, rows: int) -> np.ndarray:
        """Record numbers pandas skips before it has read ``rows`` data rows, asked of pandas itself: its skip
        numbers count blank lines but not embedded newlines, so they cannot be compared with a row's position."""
        records = rows + self._header_rows
        skipped = [number for _, found in self._parse(str, nrows=records, chunk_rows=records) for number in found]
        return np.unique(np.asarray(skipped, dtype=np.int64))

    def line_of(self, position: int, skipped: np.ndarray) -> int:
        """``record_line`` of data row ``position`` in this file, with or without its header row."""
        return record_line(position, skipped, first=1 + self._header_rows)


def record_line(position: int, skipped: np.ndarray, first: int = 2) -> int:
    """File record number of data row `position` (row 0 on line ``first``), stepping over records pandas skipped."""
    line = position + first
    while True:
        shifted = position + first + int(np.searchsorted(skipped, line, side="right"))
        if shifted == line:
            return line
        line = shifted


# ---- load_pairs -------------------------------------------------------------------------------------------

def load_pairs(
    source, columns: dict[str, str] | None = None, max_rows: int | None = None, max_bytes: int | None = None,
    label_map: dict | None = None, names: list[str] | None = None, group_column: str | None = None,
) -> tuple[pd.DataFrame, LoadReport]:
    """(pairs, report) from a CSV/TSV/;/| file (plain or gzip), bytes or an upload: ``question1``, ``question2``,
    ``is_duplicate`` (int64 0/1) in file order; ``columns`` and ``label_map`` override header and label detection,
    ``names`` names the columns of a file without a header row; ``group_column``'s text is the frame's ``GROUP``
    column. ``DataError`` when no pairs come out or the columns cannot hold their roles."""
    reader = PairReader(source, columns, max_bytes=max_bytes, label_map=label_map, names=names,
                        group_column=group_column)
    while True:
        try:
            tally, question1, question2, labels, label_readable, skipped, group = _read(reader, max_rows)
            break
        except _Reencoded:  # not UTF-8: the whole file again, in the one encoding found
            continue
    head, name = reader.head, reader.head.name
    if len(question1) == 0 and not skipped.size:
        raise DataError(f"{name}: the file has a header but no rows")
    tally.refuse()

    empty_question = (question1 == "").to_numpy(dtype=bool) | (question2 == "").to_numpy(dtype=bool)
    unreadable_label = ~label_readable & ~empty_question  # a row is counted under one reason only
    keep = ~(empty_question | unreadable_label)
    rows_considered = len(question1)
    if max_rows is not None and np.count_nonzero(keep) > max_rows:
        rows_considered = int(np.flatnonzero(keep)[max_rows - 1]) + 1
        keep[rows_considered:] = False
        skipped = reader.skipped_up_to(rows_considered)
    dropped, examples = dropped_rows({EMPTY_QUESTION: empty_question[:rows_considered],
                                      UNREADABLE_LABEL: unreadable_label[:rows_considered]}, skipped,
                                     lambda row: reader.line_of(row, skipped))
    label_warning = tally.unreadable_warning(rows_considered)
    if not keep.any():
        raise DataError(f"{name}: no usable rows: dropped {describe_counts(dropped)}"
                        + (f"; {label_warning}" if label_warning else ""))
    report = LoadReport(
        source=name, delimiter=head.delimiter,
        columns={role: head.header[position] for role, position in head.positions.items()},
        rows_read=rows_considered + int(skipped.size), rows_kept=int(np.count_nonzero(keep)), dropped=dropped,
        examples=examples, encoding=reader.encoding, names=reader.names,
        warnings=head.warnings + ([label_warning] if label_warning else []), label_map=reader.label_map,
        label_values=tally.label_values() if label_warning else {}, label_warning=label_warning,
    )
    taken = (lambda column: column.reset_index(drop=True)) if keep.all() else (  # the usual case: no gather
        lambda column: column[keep].reset_index(drop=True))
    pairs = pd.DataFrame({"question1": taken(question1), "question2": taken(question2), "is_duplicate": labels[keep]})
    if group is not None:
        pairs[GROUP] = taken(group)
    return pairs, report


def _read(reader: PairReader, max_rows: int | None):
    """One pass over ``reader``'s chunks, keeping the questions, the labels and the records skipped, until more
    than ``max_rows`` usable rows are had (the rest of the file is never parsed)."""
    head = reader.head
    tally = LabelTally(head.name, head.header, head.positions, reader.label_map)
    chunks, kept_so_far = [], 0
    for chunk in reader:
        tally.add(chunk)
        chunks.append(replace(chunk, rows=None))  # only the three columns of each chunk are kept
        usable = (chunk.question1 != "").to_numpy(dtype=bool) & (chunk.question2 != "").to_numpy(dtype=bool)
        kept_so_far += int(np.count_nonzero(usable & chunk.label_readable))
        if max_rows is not None and kept_so_far > max_rows:
            break
    questions = [pd.concat([getattr(c, role) for c in chunks], ignore_index=True) for role in ROLES[:2]]
    labels = [np.concatenate([getattr(c, name) for c in chunks]) for name in ("labels", "label_readable")]
    group = None if chunks[0].group is None else pd.concat([c.group for c in chunks], ignore_index=True)
    return (tally, *questions, *labels, np.unique(np.concatenate([c.skipped for c in chunks])).astype(np.int64), group)


def dropped_rows(masks: dict[str, np.ndarray], skipped: np.ndarray, line_of) -> tuple[dict, list]:
    """(reason -> count, the first ``MAX_EXAMPLES`` (line, reason)) of what a read dropped: ``masks`` (reason ->
    (rows,) or (rows, cells) mask, its cells counted) and the malformed records ``skipped``; ``line_of(row)``."""
    counts = {reason: int(mask.sum()) for reason, mask in masks.items()} | {MALFORMED_LINE: int(skipped.size)}
    examples = [(int(line), MALFORMED_LINE) for line in skipped[:MAX_EXAMPLES]]
    for reason, mask in masks.items():
        rows = np.flatnonzero(mask if mask.ndim == 1 else mask.any(axis=1))[:MAX_EXAMPLES]
        examples += [(line_of(int(row)), reason) for row in rows]
    return {reason: count for reason, count in counts.items() if count}, sorted(examples)[:MAX_EXAMPLES]


def describe_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{count:,} {reason}{'' if count == 1 else 's'}" for reason, count in counts.items())


def normalise_questions(questions) -> np.ndarray:
    """Comparison key for question text: lower-cased, whitespace runs collapsed, stripped. (n,) object."""
    texts = questions.tolist() if hasattr(questions, "tolist") else list(questions)  # iterating Arrow is slow
    return np.array([" ".join(str(text).lower().split()) for text in texts], dtype=object)


def question_codes(pairs: pd.DataFrame) -> tuple[np.ndarray, int]:
    """An id per normalised text of question1 then question2 ((2n,) int64), and how many distinct texts there are."""
    codes, uniques = pd.factorize(np.concatenate([normalise_questions(pairs["question1"]),
                                                  normalise_questions(pairs["question2"])]))
    return codes, len(uniques)
