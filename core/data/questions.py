"""A corpus of questions in: ``load_questions(source) -> (questions, QuestionsReport)``. Three shapes, told apart by
the header: a question column (``QUESTION_ALIASES``), every non-empty cell, repeats kept (a repeated question is a
duplicate to find); a pairs file, the distinct questions of both columns; else one question per line (a Parquet
file: its only column). A Parquet file's text is held to the cap before it is decoded (a few hundred bytes can hold
a gigabyte of one string): by the footer's sizes, then per row group as dictionaries.
"""
from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from core.data import limits
from core.data.limits import DataError, over_input_limit
from core.data.reading import (DELIMITERS, EMPTY_QUESTION, ROLE_ALIASES, check_header, describe_counts, dropped_rows,
                               header_fields, normalise_questions, parse_errors, read_csv, record_line)
from core.data.limits import HEAD_BYTES, PARQUET_MAGIC, open_source, open_text

QUESTION_ALIASES = ("question", "text", "sentence", "title", "q")
COLUMN, PAIRS, LINES = "column", "pairs", "lines"  # the three shapes
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # only these end a line (str.splitlines also splits at \x1c, \u2028...)
_SINGLE_FIELD_SEPARATORS = ("\x1f", "\x1e", "\x1d", "\x1c")  # one-column CSV: a separator no question holds
_NONE = np.zeros(0, np.int64)  # no malformed records


@dataclass
class QuestionsReport:
    source: str  # file name, or "<upload>"
    shape: str  # "column", "pairs" or "lines"
    columns: list[str]  # the header names read (empty for plain lines)
    delimiter: str  # "," "\t" ";" "|" ("" for plain lines and one-column files)
    rows_read: int  # lines (plain text) or data records (CSV) seen, including dropped ones
    questions_kept: int  # questions returned
    dropped: dict[str, int]  # reason -> count of cells / lines dropped, only reasons that occurred
    examples: list[tuple[int, str]]  # first MAX_EXAMPLES (line number, reason)
    encoding: str = "utf-8"
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        unit = "lines" if self.shape == LINES else "rows"
        text = f"kept {self.questions_kept:,} questions of {self.rows_read:,} {unit}"
        return text + ("; dropped " + describe_counts(self.dropped) if self.dropped else "")


def corpus_questions(pairs: pd.DataFrame) -> list[str]:
    """The distinct questions (by ``normalise_questions``) of both columns in first-seen order, stripped, each
    under its first spelling; empty texts are left out."""
    texts = [str(text).strip() for pair in zip(pairs["question1"], pairs["question2"]) for text in pair]
    keys = normalise_questions(texts)
    seen: dict[str, str] = {}
    for key, text in zip(keys, texts):
        if text:
            seen.setdefault(key, text)
    return list(seen.values())


def pair_keys(questions1, questions2) -> list[tuple[str, str]]:
    """``pair_key`` of each pair (question1[i], question2[i]), each column normalised once."""
    firsts, seconds = normalise_questions(questions1), normalise_questions(questions2)
    return [(a, b) if a <= b else (b, a) for a, b in zip(firsts, seconds)]


def pair_key(question1: str, question2: str) -> tuple[str, str]:
    """The one definition of "the same unordered pair": both texts under ``normalise_questions``, sorted."""
    return pair_keys([question1], [question2])[0]


def load_questions(source, max_bytes: int | None = None) -> tuple[list[str], QuestionsReport]:
    """Questions from a path, bytes or a binary file object; ``max_bytes`` caps the text read instead of
    ``core.data.limits.input_limit()``. A ``DataError`` when nothing usable is there."""
    parquet = parquet_bytes(source, max_bytes)
    if parquet is not None:
        questions, report = _parquet(*parquet, max_bytes)
    else:
        read = open_text(source, max_bytes)
        text, name = read.text(), read.name
        shape, delimiter, header, positions = _shape(text)
        if header:
            check_header(header, name, at_least=len(text.encode()) > HEAD_BYTES)
        if shape == LINES:
            questions, report = _one_per_cell([line.strip() for line in _LINE_BREAK.split(text)], name, LINES, [], 1)
        elif shape == COLUMN and len(header) == 1:
            questions, report = _one_column(text, name, header)
        else:
            questions, report = _columns(text, name, shape, delimiter, header, positions)
        report.encoding = read.encoding
    name = report.source
    longest = max(map(len, questions), default=0)
    if longest > limits.MAX_FIELD_CHARS:
        raise DataError(f"{name}: a question of {longest:,} characters; the limit is {limits.MAX_FIELD_CHARS:,}")
    if not questions:
        if report.rows_read == 0:
            raise DataError(f"{name}: the file has a header but no questions")
        raise DataError(f"{name}: no usable questions: dropped {describe_counts(report.dropped)}")
    return questions, report


def _shape(text: str) -> tuple[str, str, list[str], list[int]]:
    """(shape, delimiter, header fields, the question columns' positions) from the first line."""
    head = text[:HEAD_BYTES].removeprefix("\ufeff")
    found = []
    for delimiter in DELIMITERS:
        header = header_fields(head, delimiter) or []
        if shape := _question_columns(header):
            found.append((len(header), shape[0] == COLUMN, -DELIMITERS.index(delimiter), delimiter, header, shape[1]))
    if not found:
        return LINES, "", [], []
    _, column, _, delimiter, header, positions = max(found)
    return COLUMN if column else PAIRS, delimiter, header, positions


def _question_columns(header: list[str]) -> tuple[str, list[int]] | None:
    """(COLUMN, the position of its question column) for a header that names one, (PAIRS, question1's and
    question2's) for one that names both questions of a pair, else None."""
    names = [name.strip().lower() for name in header]
    if found := [names.index(alias) for alias in QUESTION_ALIASES if alias in names]:
        return COLUMN, found[:1]
    pair = [next((names.index(alias) for alias in ROLE_ALIASES[role] if alias in names), None)
            for role in ("question1", "question2")]
    return None if None in pair else (PAIRS, pair)


def _one_per_cell(cells: list[str], name: str, shape: str, columns: list[str],
                  first_line: int) -> tuple[list[str], QuestionsReport]:
    while cells and not cells[-1]:  # a trailing newline (or several) ends the file, it is no question
        cells.pop()
    return _grid_report(np.array(cells, dtype=object).reshape(-1, 1), name, shape, columns, "", _NONE, first_line)


def _one_column(text: str, name: str, header: list[str]) -> tuple[list[str], QuestionsReport]:
    """A CSV with one column: each record is one question (quoted fields unquoted, commas kept)."""
    separator = next((s for s in _SINGLE_FIELD_SEPARATORS if s not in text), None)
    if separator is None:
        raise DataError(f"{name}: cannot read it as one question per line (it holds every ASCII separator)")
    try:
        frame = pd.read_csv(io.StringIO(text), sep=separator, header=None, dtype=str, keep_default_na=False,
                            engine="c", quotechar='"', doublequote=True, skip_blank_lines=False)
    except Exception as error:  # noqa: BLE001 - whatever pandas trips over in user data is the user's to see
        raise DataError(f"could not parse {name} as one question per line: {error}") from None
    return _one_per_cell(frame.iloc[1:, 0].fillna("").astype(str).str.strip().tolist(), name, COLUMN, [header[0]],
                         first_line=2)


def _parquet(data: bytes, name: str, max_bytes: int | None) -> tuple[list[str], QuestionsReport]:
    """The questions of a Parquet file; more text than the cap is refused before it is decoded."""
    import pyarrow as pa

    parquet = _parquet_file(data, name)
    header, limit = list(parquet.schema_arrow.names), limits.input_limit(max_bytes)
    if parquet.metadata.num_rows > limits.MAX_LINES or len(header) > limits.MAX_COLUMNS:
        raise DataError(f"{name} has {parquet.metadata.num_rows:,} rows and {len(header):,} columns; the limits are "
                        f"{limits.MAX_LINES:,} rows and {limits.MAX_COLUMNS:,} columns")
    found = _question_columns(header) or ((COLUMN, [0]) if len(header) == 1 else None)  # one column: the questions
    if found is None:
        raise DataError(f"{name}: no question column among {', '.join(header[:10])}; name one question (or "
                        f"{', '.join(QUESTION_ALIASES[1:])}), or question1 and question2")
    shape, columns = found[0], [header[p] for p in found[1]]
    nested = {column: kind for column in columns if pa.types.is_nested(kind := parquet.schema_arrow.field(column).type)}
    if nested:  # pyarrow would fail on them below with a bare KeyError
        raise DataError(f"could not read the column(s) {', '.join(nested)} of {name} as text: they hold "
                        f"{', '.join(map(str, nested.values()))} values")
    # As dictionaries: a string repeated on every row is held once, and its rows are counted, never expanded.
    parquet = _parquet_file(data, name, read_dictionary=columns)
    if stored_text_bytes(parquet.metadata, columns) > limit:
        raise over_input_limit(name, limit, compressed=True)
    texts: list[list[str]] = [[] for _ in columns]
    decoded = 0
    try:
        for group in range(parquet.num_row_groups):
            for part in _row_group_parts(parquet, data, group, columns, limit):
                decoded += sum(decoded_text_bytes(part.column(column)) for column in columns)
                if decoded > limit:
                    raise over_input_limit(name, limit, compressed=True)
                for values, column in zip(texts, columns):
                    values.extend(text.strip() for text in _as_text(part.column(column)))
    except DataError:
        raise
    except Exception as error:  # noqa: BLE001 - a column that cannot be text (a list, a struct) says why
        raise DataError(f"could not read the column(s) {', '.join(columns)} of {name} as text: {error}") from None
    grid = np.array(texts, dtype=object).T.reshape(-1, len(columns))
    return _grid_report(grid, name, shape, columns, "", _NONE, first_line=1)


def _columns(text: str, name: str, shape: str, delimiter: str, header: list[str],
             positions: list[int]) -> tuple[list[str], QuestionsReport]:
    found: list[int] = []
    with parse_errors(name, delimiter, found):
        frame = read_csv(io.StringIO(text.removeprefix("\ufeff")), delimiter, "utf-8", {p: str for p in positions})
    body = frame.iloc[1:]
    skipped = np.asarray(sorted(set(found)), dtype=np.int64)
    cells = [body.iloc[:, p].fillna("").astype(str).str.strip().to_numpy(dtype=object) for p in positions]
    grid = np.stack(cells, axis=1) if cells else np.zeros((0, 1), dtype=object)  # (rows, 1 or 2)
    return _grid_report(grid, name, shape, [header[p] for p in positions], delimiter, skipped)


def _grid_report(grid: np.ndarray, name: str, shape: str, columns: list[str], delimiter: str, skipped: np.ndarray,
                 first_line: int | None = None) -> tuple[list[str], QuestionsReport]:
    """The questions of ``grid`` ((rows, 1) question cells or (rows, 2) pairs, stripped) and their report;
    ``skipped``: the malformed lines a CSV reader left out. Empty rows are reported by ``first_line`` + row
    (Parquet) or by their CSV line (``record_line``)."""
    empty = grid == ""  # (rows, columns)
    dropped, examples = dropped_rows({EMPTY_QUESTION: empty}, skipped, lambda row: first_line + row
                                     if first_line is not None else record_line(row, skipped))
    warnings = []
    if grid.shape[1] == 1:
        questions = grid[~empty[:, 0], 0].tolist()
    else:
        pairs = pd.DataFrame({"question1": grid[:, 0], "question2": grid[:, 1]})
        questions = corpus_questions(pairs)
        repeated = int((~empty).sum()) - len(questions)
        if repeated:
            warnings.append(f"{repeated:,} repeated questions of the pairs were merged: each distinct question "
                            "is clustered once")
    report = QuestionsReport(name, shape, columns, delimiter, int(grid.shape[0] + skipped.size), len(questions),
                             dropped, examples, warnings=warnings)
    return questions, report


# ---- Parquet ----------------------------------------------------------------------------------------------

def parquet_bytes(source, max_bytes: int | None = None) -> tuple[bytes, str] | None:
    """(the bytes of ``source``, its name) when it is a Parquet file; None (having read four bytes) when it is not."""
    limit = limits.input_limit(max_bytes)
    name, open_raw = open_source(source, limit)
    with open_raw() as raw:
        if raw.read(4) != PARQUET_MAGIC:
            return None
        data = PARQUET_MAGIC + raw.read(max(limit - 3, 0))
    if len(data) > limit:
        raise over_input_limit(name, limit, compressed=False)
    return data, name


def _parquet_file(data: bytes, name: str, read_dictionary: list[str] | None = None):
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(io.BytesIO(data), read_dictionary=read_dictionary)
    except Exception as error:  # noqa: BLE001 - whatever pyarrow trips over in a user's file is theirs to see
        raise DataError(f"could not read {name} as Parquet: {error}") from None


def _row_group_parts(parquet, data: bytes, group: int, columns: list[str], limit: int):
    """Row group ``group`` of ``columns``: whole, its strings as dictionaries; else (no delta-encoded column reads as
    one) in batches of so few rows that their text stays under ``limit`` (no value is longer than the group)."""
    try:
        yield parquet.read_row_group(group, columns=columns)
        return
    except (NotImplementedError, OSError):  # pyarrow says "Not yet implemented" as either
        pass
    stored = stored_text_bytes(parquet.metadata, columns, groups=[group])
    plain = _parquet_file(data, "")  # no dictionaries asked for: what the batches are read through
    yield from plain.iter_batches(batch_size=max(1, limit // max(stored, 1)), row_groups=[group], columns=columns)


def stored_text_bytes(metadata, columns: list[str], groups=None) -> int:
    """The uncompressed bytes the footer gives ``columns`` (every leaf) in the row groups ``groups`` (default all)."""
    total = 0
    for group in range(metadata.num_row_groups) if groups is None else groups:
        row_group = metadata.row_group(group)
        total += sum(chunk.total_uncompressed_size for chunk in map(row_group.column, range(row_group.num_columns))
                     if any(f"{chunk.path_in_schema}.".startswith(column + ".") for column in columns))
    return total


def decoded_text_bytes(values) -> int:
    """The UTF-8 bytes ``values`` (a pyarrow column) take as text; a dictionary's rows count their entry's length."""
    import pyarrow as pa
    import pyarrow.compute as pc

    total = 0
    for chunk in getattr(values, "chunks", [values]):
        if pa.types.is_dictionary(chunk.type):
            lengths = pc.binary_length(chunk.dictionary.cast(pa.string())).fill_null(0).to_numpy()
            total += int(lengths[pc.drop_null(chunk.indices).to_numpy()].sum())
        else:
            total += int(pc.sum(pc.binary_length(chunk.cast(pa.string()))).as_py() or 0)
    return total


def _as_text(values) -> list[str]:
    import pyarrow as pa

    return ["" if value is None else value for value in values.cast(pa.string()).to_pylist()]
