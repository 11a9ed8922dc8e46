"""Question pairs read in chunks of rows: the one reader behind ``load_pairs`` and ``score``.

``PairReader(source)`` decides everything about a file before its first row: the text is scanned and
bounded (``core.data.text_source``), the delimiter found, the header parsed by pandas itself and held to
the column cap, the roles resolved (``is_duplicate`` optional when asked; never two roles in one column),
and the encoding chosen (UTF-8 when the rows pandas parses decode as UTF-8, else cp1252, else latin-1,
the whole file one way). Iterating it then yields ``PairChunk``s of at most ``chunk_rows`` records: the
chunk's rows (every column), its questions cleaned, its labels parsed (``core.data.labels``, by a label
map when given), and the records pandas skipped as malformed. A caller keeps only
what it needs of each chunk, so memory follows the chunk, not the file. Every field kept as text is held
to ``MAX_FIELD_CHARS``. Every failure is a ``DataError``.
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
    _header_fields,
    check_header,
    check_one_role_per_column,
    choose_delimiter,
    column_warnings,
    parse_chunks,
    resolve_columns,
)
from core.data.text_source import HEADER_SNIFF_BYTES, scan_text

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


class PairReader:
    """A pairs file checked up to its header (``head``); iterate it for its ``PairChunk``s, as often as
    needed (each pass reads the source again)."""

    def __init__(self, source, columns: dict[str, str] | None = None, *, labels_required: bool = True,
                 all_text: bool = False, chunk_rows: int = CHUNK_ROWS, max_bytes: int | None = None,
                 label_map: dict | None = None):
        """``all_text``: every column kept as written (score writes them back); otherwise only the
        questions are forced to text and the rest is typed by pandas (faster; only they are kept).
        ``label_map``: value -> 1 or 0 (``core.data.labels.normalise_label_map``); the labels are then
        read by it alone."""
        if chunk_rows < 1:
            raise ValueError(f"chunk_rows must be at least 1, got {chunk_rows}")
        self.label_map = normalise_label_map(label_map)
        self._facts = facts = scan_text(source, max_bytes)
        self._chunk_rows = chunk_rows
        name = facts.name
        delimiter = choose_delimiter(facts.head, columns)
        head_text = facts.head.decode("utf-8", errors="replace")
        sniffed = _header_fields(head_text, delimiter) or []
        check_header(sniffed, name, at_least=len(facts.head) >= HEADER_SNIFF_BYTES)  # before pandas sees it
        encoding, header = self._header(delimiter, name)
        check_header(header, name)
        required = ROLES if labels_required else ROLES[:2]
        positions = resolve_columns(header, columns, name, required)
        check_one_role_per_column(header, positions, name,
                                  lambda position: self._first_values(encoding, delimiter, position))
        self._text_questions = {positions["question1"]: str, positions["question2"]: str}
        self._dtype = str if all_text else None  # None: typed by pandas, questions checked per chunk
        self._delimiter, self._encoding = delimiter, encoding
        if encoding == "utf-8" and not facts.utf8 and not self._parses_as_utf8():
            self._encoding = encoding = "cp1252" if facts.cp1252 else "latin-1"
        self._all_text = all_text
        self.head = PairsHead(name, delimiter, facts.utf16 or encoding, header, positions,
                              column_warnings(header, columns))

    def _header(self, delimiter: str, name: str) -> tuple[str, list[str]]:
        """(encoding, header names) from pandas' own parse of the first record: UTF-8 unless the
        header itself does not decode so."""
        for encoding in ("utf-8", self._fallback()):
            try:
                frames = [frame for frame, _ in self._parse(encoding, delimiter, name, str, nrows=1)]
            except UnicodeDecodeError:
                continue
            if not frames or frames[0].shape[0] == 0:
                raise DataError(f"{name}: the file is empty")
            return encoding, ["" if pd.isna(value) else str(value) for value in frames[0].iloc[0].tolist()]
        raise AssertionError("cp1252 / latin-1 text always decodes")

    def _first_values(self, encoding: str, delimiter: str, position: int, rows: int = 3) -> list[str]:
        """The first ``rows`` values of column ``position``, as text (for a message; none when they do
        not parse as ``encoding``, which is only the header's so far)."""
        try:
            frames = [frame for frame, _ in self._parse(encoding, delimiter, self._facts.name, str, nrows=rows + 1)]
        except (UnicodeDecodeError, DataError):
            return []
        return [] if not frames else frames[0].iloc[1:, position].fillna("").tolist()

    def _fallback(self) -> str:
        return "cp1252" if self._facts.cp1252 else "latin-1"

    def _parses_as_utf8(self) -> bool:
        """Whether the rows pandas parses decode as UTF-8 (a malformed line is skipped before its bytes
        are decoded), asked of a pass that keeps nothing: the file is not valid UTF-8 throughout."""
        try:
            for _ in self._parse("utf-8", self._delimiter, self._facts.name, self._dtype):
                pass
        except UnicodeDecodeError:
            return False
        return True

    def _parse(self, encoding: str, delimiter: str, name: str, dtype, nrows: int | None = None,
               chunk_rows: int | None = None) -> Iterator[tuple[pd.DataFrame, list[int]]]:
        stream = self._facts.stream(encoding)
        try:
            yield from parse_chunks(stream, delimiter, name, dtype, chunk_rows or self._chunk_rows, nrows)
        finally:
            stream.close()

    def __iter__(self) -> Iterator[PairChunk]:
        head, dtype = self.head, self._dtype
        start, skipped_so_far, done = 0, [], 0  # done: chunks yielded
        try:
            while True:
                for number, (frame, skipped) in enumerate(self._parse(self._encoding, head.delimiter, head.name,
                                                                      dtype)):
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
                # verbatim. Asking for text up front costs 2-4x the parse, and this is rare, so the
                # common case keeps the fast parse and this one parses again, skipping the chunks already
                # given (chunks are cut by records, whatever the types).
                dtype = self._text_questions
        except UnicodeDecodeError as error:  # only if the file changed since the encoding was chosen
            raise DataError(f"{head.name} changed while it was read ({error.reason})") from None

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
        for _, found in self._parse(self._encoding, self.head.delimiter, self.head.name, str, nrows=rows + 1,
                                    chunk_rows=_WHOLE_FILE):
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
