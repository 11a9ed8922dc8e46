"""Question pairs read in chunks of rows: the one reader behind ``load_pairs`` and ``score``.

``PairReader(source)`` decides everything about a file before its first row: its bounded byte stream and
encoding (``core.data.text_source``), the delimiter, the header (parsed by pandas itself, held to the column
cap), and the roles (``is_duplicate`` optional when asked; never two roles in one column). Iterating it then
yields ``PairChunk``s of at most ``chunk_rows`` records parsed by pandas' C engine: the chunk's rows (every
column), its questions cleaned, its labels parsed (``core.data.labels``), and the records pandas skipped as
malformed. A caller keeps only what it needs of each chunk, so memory follows the chunk, not the file. Every
field kept as text is held to ``MAX_FIELD_CHARS``. Every failure is a ``DataError``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import pandas as pd

from core.data import limits
from core.data.labels import FALSE_LABELS, TRUE_LABELS, normalise_label_map, parse_labels
from core.data.limits import DataError
from core.data.parsing import (
    ROLES,
    check_field_counts,
    check_header,
    check_one_role_per_column,
    choose_delimiter,
    column_warnings,
    header_fields,
    parse_errors,
    read_csv,
    resolve_columns,
)
from core.data.text_source import HEAD_BYTES, open_text

__all__ = ["CHUNK_ROWS", "FALSE_LABELS", "TRUE_LABELS", "PairChunk", "PairReader", "PairsHead", "record_line"]
CHUNK_ROWS = 100_000  # records parsed at a time: a few tens of MB of frame for Quora-sized rows
_WHOLE_FILE = 1 << 62  # chunk size of a parse read only for what pandas reports


@dataclass
class PairsHead:
    """What a reader found before the first row."""

    name: str  # file name, or "<upload>"
    delimiter: str  # "," "\t" ";" or "|"
    encoding: str  # "utf-8", "cp1252", "latin-1", "utf-16-le" or "utf-16-be"
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


class _Reencoded(Exception):
    """The text did not decode as UTF-8 further on; the source now holds the encoding to read it by."""


class PairReader:
    """A pairs file checked up to its header (``head``); iterate it for its ``PairChunk``s, as often as
    needed (each pass reads the source again)."""

    def __init__(self, source, columns: dict[str, str] | None = None, *, labels_required: bool = True,
                 all_text: bool = False, chunk_rows: int = CHUNK_ROWS, max_bytes: int | None = None,
                 label_map: dict | None = None):
        """``all_text``: every column kept as written (score writes them back, and the caps are checked on a
        pass of their own first, so that no row is scored of a file then refused); otherwise only the
        questions are forced to text and the rest is typed by pandas (faster; only they are kept).
        ``label_map``: value -> 1 or 0 (``core.data.labels.normalise_label_map``); the labels are then
        read by it alone."""
        if chunk_rows < 1:
            raise ValueError(f"chunk_rows must be at least 1, got {chunk_rows}")
        self.label_map = normalise_label_map(label_map)
        self._text = text = open_text(source, max_bytes)
        self._chunk_rows, self._all_text = chunk_rows, all_text
        self._dtype = str if all_text else None  # None: typed by pandas, questions checked per chunk
        self.reencoded = False  # the encoding changed after the first chunk (see __iter__)
        name = text.name
        self._delimiter = delimiter = choose_delimiter(text.head, columns)
        sniffed = header_fields(text.head, delimiter) or []
        check_header(sniffed, name, at_least=len(text.head.encode()) >= HEAD_BYTES)  # before pandas sees it
        header = self._first_rows(1)[0]
        check_header(header, name)
        check_field_counts(text.head, delimiter, header, name)
        required = ROLES if labels_required else ROLES[:2]
        positions = resolve_columns(header, columns, name, required)
        check_one_role_per_column(header, positions, name,
                                  lambda position: [row[position] for row in self._first_rows(4)[1:]])
        self._text_questions = {positions["question1"]: str, positions["question2"]: str}
        self.head = PairsHead(name, delimiter, text.encoding, header, positions, column_warnings(header, columns))
        if all_text:
            text.check_caps()

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
        """pandas' parse of the bounded stream in frames of ``chunk_rows`` records (the header, row 0 of the
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
            if stream.error is not None:
                raise stream.error from None
            raise
        except UnicodeDecodeError as error:
            failed = error.object if isinstance(error.object, bytes) else b""
            text.not_decoded(error, stream.count - len(failed))
            if hasattr(self, "head"):
                self.head.encoding = text.encoding
            raise _Reencoded from None
        finally:
            stream.close()

    def __iter__(self) -> Iterator[PairChunk]:
        dtype, start, skipped_so_far, done = self._dtype, 0, [], 0  # done: chunks yielded
        while True:
            try:
                for number, (frame, skipped) in enumerate(self._parse(dtype)):
                    if number < done:  # yielded before the restart below: same records, same chunks
                        continue
                    if dtype is None and not self._questions_parsed_as_text(frame):
                        break
                    rows = frame.iloc[1:] if number == 0 else frame  # row 0 of the first chunk is the header
                    skipped_so_far.extend(skipped)
                    chunk = self._chunk(rows, start, np.asarray(sorted(set(skipped)), dtype=np.int64),
                                        np.asarray(sorted(set(skipped_so_far)), dtype=np.int64))
                    start += len(rows)
                    done += 1
                    yield chunk
                else:
                    return
                # pandas typed a chunk of questions as numbers ("007" -> 7): only a text parse keeps them
                # verbatim. Asking for text up front costs twice the parse, and this is rare, so the common
                # case keeps the fast parse and this one parses again, skipping the chunks already given
                # (chunks are cut by records, whatever the types).
                dtype = self._text_questions
            except _Reencoded:  # read again in the encoding found, from the chunks not yet given
                self.reencoded = self.reencoded or done > 0

    def _questions_parsed_as_text(self, frame: pd.DataFrame) -> bool:
        # Labels need no such check: parse_labels reads numbers and text alike.
        return all(pd.api.types.is_string_dtype(frame.iloc[:, self.head.positions[role]])
                   for role in ("question1", "question2"))

    def _chunk(self, rows: pd.DataFrame, start: int, skipped: np.ndarray, skipped_so_far: np.ndarray) -> PairChunk:
        positions = self.head.positions
        self._check_fields(rows, start, skipped_so_far)
        question1 = _clean_questions(rows.iloc[:, positions["question1"]])
        question2 = _clean_questions(rows.iloc[:, positions["question2"]])
        labels = readable = values = None
        if "is_duplicate" in positions:
            labels, readable, values = parse_labels(rows.iloc[:, positions["is_duplicate"]], self.label_map)
        rows = rows.set_axis(self.head.header, axis=1).reset_index(drop=True)
        return PairChunk(rows, start, skipped, question1.reset_index(drop=True), question2.reset_index(drop=True),
                         labels, readable, values)

    def _check_fields(self, rows: pd.DataFrame, start: int, skipped: np.ndarray) -> None:
        """``MAX_FIELD_CHARS`` on every field kept as text."""
        positions = self.head.positions
        kept = range(rows.shape[1]) if self._all_text else (positions["question1"], positions["question2"])
        for column in kept:
            lengths = rows.iloc[:, column].str.len().to_numpy(dtype=float, na_value=0)
            if lengths.size and lengths.max() > limits.MAX_FIELD_CHARS:
                row = int(np.argmax(lengths > limits.MAX_FIELD_CHARS))
                raise limits.over_field_limit(self.head.name, record_line(start + row, skipped), int(lengths[row]))

    def skipped_up_to(self, rows: int) -> np.ndarray:
        """Record numbers pandas skips before it has read ``rows`` data rows.

        Asked of pandas itself (a parse of just that prefix): its skip numbers count blank lines but
        not embedded newlines, so they cannot be compared with a data row's position.
        """
        skipped: list[int] = []
        for _, found in self._parse(str, nrows=rows + 1, chunk_rows=_WHOLE_FILE):
            skipped.extend(found)
        return np.asarray(sorted(set(skipped)), dtype=np.int64)


def _clean_questions(column: pd.Series) -> pd.Series:
    return column.fillna("").str.strip()


def record_line(position: int, skipped: np.ndarray) -> int:
    """File record number of data row `position`, stepping over records pandas skipped."""
    line = position + 2
    while True:
        shifted = position + 2 + int(np.searchsorted(skipped, line, side="right"))
        if shifted == line:
            return line
        line = shifted
