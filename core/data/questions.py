"""A corpus of questions in: ``load_questions(source) -> (questions, QuestionsReport)``.

Three shapes, told apart by the first line: a CSV/TSV whose header names a question column
(``QUESTION_ALIASES``): every non-empty cell, repeats kept (a repeated question is a duplicate to find); a pairs
file: the distinct questions of both columns (``corpus_questions``); anything else: one question per line. A
Parquet file is read by its column names the same way. The bytes go through ``core.data.parsing`` as pairs do
(the same encodings and caps), every failure is a ``DataError``, and empty questions are dropped and counted.
"""
from __future__ import annotations

import io
import re
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from core.data import limits
from core.data.limits import DataError
from core.data.pair_chunks import record_line
from core.data.parquet_table import parquet_bytes, parquet_header, parquet_text_columns
from core.data.parsing import (
    DELIMITERS,
    ROLE_ALIASES,
    _header_fields,
    check_header,
    parse_any_encoding,
)
from core.data.reading import (
    EMPTY_QUESTION,
    MALFORMED_LINE,
    MAX_EXAMPLES,
    describe_counts,
    normalise_questions,
)
from core.data.text_source import HEADER_SNIFF_BYTES, read_text_bytes

QUESTION_ALIASES = ("question", "text", "sentence", "title", "q")
COLUMN, PAIRS, LINES = "column", "pairs", "lines"  # the three shapes
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # only these end a line (str.splitlines also splits at \x1c, \u2028...)
_SINGLE_FIELD_SEPARATORS = ("\x1f", "\x1e", "\x1d", "\x1c")  # one-column CSV: a separator no question holds


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
    file_format: str = "text"  # "text" (plain lines, CSV or TSV) or "parquet"

    def summary(self) -> str:
        unit = "lines" if self.shape == LINES else "rows"
        text = f"kept {self.questions_kept:,} questions of {self.rows_read:,} {unit}"
        if self.dropped:
            text += "; dropped " + describe_counts(self.dropped)
        return text

    def to_dict(self) -> dict:
        report = asdict(self)
        report["examples"] = [list(example) for example in self.examples]
        return report


def corpus_questions(pairs: pd.DataFrame) -> list[str]:
    """The distinct questions of both columns in first-seen order (question1 before question2 within a
    row), stripped, each under its first spelling; empty texts are left out. "Distinct" is
    ``normalise_questions`` equality, the one definition the Data page counts with too."""
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
    """The one definition of "the same unordered pair": both texts under ``normalise_questions``, sorted.
    >>> pair_key("Why is the sky  blue?", "How far is the Moon?")
    ('how far is the moon?', 'why is the sky blue?')
    """
    return pair_keys([question1], [question2])[0]


def load_questions(source, max_bytes: int | None = None) -> tuple[list[str], QuestionsReport]:
    """Questions from a path, bytes or a binary file object (see the module's docstring for the shapes);
    ``max_bytes`` caps the text read instead of ``core.data.limits.input_limit()``'s default.

    Raises ``DataError`` when nothing usable is there (empty, binary, UTF-32, a header and no questions,
    only empty questions, an unparseable CSV, over a cap).
    """
    parquet = parquet_bytes(source, max_bytes)
    if parquet is not None:
        questions, report = _parquet(*parquet, max_bytes)
    else:
        data, name, utf16 = read_text_bytes(source, max_bytes)
        shape, delimiter, header = _shape(data)
        if header:
            check_header(header, name, at_least=len(data) > HEADER_SNIFF_BYTES)
        if shape == LINES:
            questions, report = _lines(data, name)
        elif shape == COLUMN and len(header) == 1:
            questions, report = _one_column(data, name, header)
        else:
            questions, report = _columns(data, name, shape, delimiter, header)
        if utf16:
            report.encoding = utf16
    name = report.source
    longest = max(map(len, questions), default=0)
    if longest > limits.MAX_FIELD_CHARS:
        raise DataError(f"{name}: a question of {longest:,} characters; the limit is {limits.MAX_FIELD_CHARS:,}")
    if not questions:
        if report.rows_read == 0:
            raise DataError(f"{name}: the file has a header but no questions")
        raise DataError(f"{name}: no usable questions: dropped {describe_counts(report.dropped)}")
    return questions, report


def _shape(data: bytes) -> tuple[str, str, list[str]]:
    """(shape, delimiter, header fields) from the first line."""
    head = data[:HEADER_SNIFF_BYTES].decode("utf-8", errors="replace")
    found = []
    for delimiter in DELIMITERS:
        header = _header_fields(head, delimiter)
        shape = _shape_of(header) if header else None
        if shape:
            found.append((len(header), shape, -DELIMITERS.index(delimiter), delimiter, header))
    if not found:
        return LINES, "", []
    _, shape, _, delimiter, header = max(found, key=lambda f: (f[0], f[1] == COLUMN, f[2]))
    return shape, delimiter, header


def _shape_of(header: list[str]) -> str | None:
    """COLUMN when the header names a question column, PAIRS when it names both questions of a pair, else None."""
    names = [name.strip().lower() for name in header]
    if any(alias in names for alias in QUESTION_ALIASES):
        return COLUMN
    if all(any(a in names for a in ROLE_ALIASES[role]) for role in ("question1", "question2")):
        return PAIRS
    return None


def _decode(data: bytes) -> tuple[str, str]:
    for encoding in ("utf-8", "cp1252"):
        try:
            return data.decode(encoding), encoding
        except UnicodeDecodeError:
            pass
    return data.decode("latin-1"), "latin-1"


def _lines(data: bytes, name: str) -> tuple[list[str], QuestionsReport]:
    text, encoding = _decode(data)
    lines = [line.strip() for line in _LINE_BREAK.split(text)]
    while lines and not lines[-1]:  # a trailing newline (or several) ends the file, it is no question
        lines.pop()
    grid = np.array(lines, dtype=object).reshape(-1, 1)
    return _grid_report(grid, name, LINES, [], "", np.zeros(0, np.int64), encoding, first_line=1)


def _one_column(data: bytes, name: str, header: list[str]) -> tuple[list[str], QuestionsReport]:
    """A CSV with one column: each record is one question (quoted fields unquoted, commas kept)."""
    text, encoding = _decode(data)
    separator = next((s for s in _SINGLE_FIELD_SEPARATORS if s not in text), None)
    if separator is None:
        raise DataError(f"{name}: cannot read it as one question per line (it holds every ASCII separator)")
    try:
        frame = pd.read_csv(io.StringIO(text), sep=separator, header=None, dtype=str, keep_default_na=False,
                            engine="c", quotechar='"', doublequote=True, skip_blank_lines=False)
    except Exception as error:  # noqa: BLE001 - whatever pandas trips over in user data is the user's to see
        raise DataError(f"could not parse {name} as one question per line: {error}") from None
    cells = frame.iloc[1:, 0].fillna("").astype(str).str.strip()
    while len(cells) and cells.iloc[-1] == "":
        cells = cells.iloc[:-1]
    grid = cells.to_numpy(dtype=object).reshape(-1, 1)
    return _grid_report(grid, name, COLUMN, [header[0]], "", np.zeros(0, np.int64), encoding, first_line=2)


def _question_positions(names: list[str], shape: str) -> list[int]:
    """The question column's position (COLUMN), or question1's and question2's (PAIRS), in lower-cased ``names``."""
    if shape == COLUMN:
        return [names.index(next(alias for alias in QUESTION_ALIASES if alias in names))]
    return [next(names.index(a) for a in ROLE_ALIASES[role] if a in names) for role in ("question1", "question2")]


def _parquet(data: bytes, name: str, max_bytes: int | None) -> tuple[list[str], QuestionsReport]:
    header = parquet_header(data, name)
    shape, names = _shape_of(header), [column.strip().lower() for column in header]
    if shape is None and len(header) == 1:  # one column, whatever its name: the questions
        shape, names = COLUMN, [QUESTION_ALIASES[0]]
    elif shape is None:
        raise DataError(f"{name}: no question column among {', '.join(header[:10])}; name one question (or "
                        f"{', '.join(QUESTION_ALIASES[1:])}), or question1 and question2")
    positions = _question_positions(names, shape)
    columns = parquet_text_columns(data, name, [header[p] for p in positions], max_bytes)
    grid = np.array([[text.strip() for text in column] for column in columns], dtype=object).T.reshape(-1, len(positions))
    report = _grid_report(grid, name, shape, [header[p] for p in positions], "", np.zeros(0, np.int64), "utf-8",
                          first_line=1)
    report[1].file_format = "parquet"
    return report


def _columns(data: bytes, name: str, shape: str, delimiter: str,
             header: list[str]) -> tuple[list[str], QuestionsReport]:
    positions = _question_positions([column.strip().lower() for column in header], shape)
    frame, skipped, encoding = parse_any_encoding(data, delimiter, name, dtype={p: str for p in positions})
    body = frame.iloc[1:]
    skipped = np.asarray(skipped, dtype=np.int64)
    cells = [body.iloc[:, p].fillna("").astype(str).str.strip().to_numpy(dtype=object) for p in positions]
    grid = np.stack(cells, axis=1) if cells else np.zeros((0, 1), dtype=object)  # (rows, 1 or 2)
    return _grid_report(grid, name, shape, [header[p] for p in positions], delimiter, skipped, encoding)


def _grid_report(grid: np.ndarray, name: str, shape: str, columns: list[str], delimiter: str, skipped: np.ndarray,
                 encoding: str, first_line: int | None = None) -> tuple[list[str], QuestionsReport]:
    """The questions of ``grid`` ((rows, 1) question cells or (rows, 2) pairs, stripped) and their report;
    ``skipped``: the malformed lines a CSV reader left out. Empty rows are reported by ``first_line`` + row
    (plain lines, one column, Parquet) or by their CSV line (``record_line``)."""
    empty = grid == ""  # (rows, columns)
    dropped = {EMPTY_QUESTION: int(empty.sum()), MALFORMED_LINE: int(skipped.size)}
    examples = [(int(line), MALFORMED_LINE) for line in skipped[:MAX_EXAMPLES]]
    examples += [(first_line + int(row) if first_line is not None else record_line(int(row), skipped),
                  EMPTY_QUESTION) for row in np.flatnonzero(empty.any(axis=1))[:MAX_EXAMPLES]]
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
    dropped = {reason: count for reason, count in dropped.items() if count}
    report = QuestionsReport(name, shape, columns, delimiter, int(grid.shape[0] + skipped.size), len(questions),
                             dropped, sorted(examples)[:MAX_EXAMPLES], encoding, warnings)
    return questions, report
