"""A corpus of questions in: ``load_questions(source) -> (questions, QuestionsReport)``.

Three shapes are read, told apart by the first line:

- a CSV/TSV (``, \\t ; |``) whose header names a question column (``QUESTION_ALIASES``: question, text,
  sentence, title, q): every non-empty cell of that column, in file order, repeats kept (a repeated
  question is a duplicate to find);
- a pairs file (a header naming question1 and question2, or their aliases, as ``load_pairs`` reads
  them): the distinct questions of both columns in first-seen order, as ``corpus_questions``
  gives them (labels are not needed);
- anything else: plain text, one question per line (the first line is a question too).

A Parquet file (told by its first bytes, ``core.data.parquet_table``) is read by column names the same way: a
question column, else a pairs file's two columns, else its only column; ``file_format`` says "parquet".

The text is read as pairs are (``core.data.text_source``: path, bytes or upload; gzip; its encoding; binary and
empty files refused; the caps of ``core.data.limits`` on bytes, lines, columns and field length), and every
failure is a ``DataError``. Questions are
stripped; empty ones (blank lines, empty cells) are dropped and counted in the report, like malformed
records of a CSV.
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
from core.data.parsing import DELIMITERS, ROLE_ALIASES, check_header, header_fields, parse_errors, read_csv
from core.data.reading import (
    EMPTY_QUESTION,
    MALFORMED_LINE,
    MAX_EXAMPLES,
    describe_counts,
    normalise_questions,
)
from core.data.text_source import HEAD_BYTES, open_text

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
        read = open_text(source, max_bytes)
        text, name = read.text(), read.name
        shape, delimiter, header = _shape(text)
        if header:
            check_header(header, name, at_least=len(text.encode()) > HEAD_BYTES)
        if shape == LINES:
            questions, report = _lines(text, name)
        elif shape == COLUMN and len(header) == 1:
            questions, report = _one_column(text, name, header)
        else:
            questions, report = _columns(text, name, shape, delimiter, header)
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


def _shape(text: str) -> tuple[str, str, list[str]]:
    """(shape, delimiter, header fields) from the first line."""
    head = text[:HEAD_BYTES].removeprefix("\ufeff")
    found = []
    for delimiter in DELIMITERS:
        header = header_fields(head, delimiter)
        if not header:
            continue
        names = [name.strip().lower() for name in header]
        if any(alias in names for alias in QUESTION_ALIASES):
            found.append((len(header), COLUMN, -DELIMITERS.index(delimiter), delimiter, header))
        elif any(a in names for a in ROLE_ALIASES["question1"]) and any(a in names for a in ROLE_ALIASES["question2"]):
            found.append((len(header), PAIRS, -DELIMITERS.index(delimiter), delimiter, header))
    if not found:
        return LINES, "", []
    _, shape, _, delimiter, header = max(found, key=lambda f: (f[0], f[1] == COLUMN, f[2]))
    return shape, delimiter, header


def _examples(lines: np.ndarray, reason: str) -> list[tuple[int, str]]:
    return [(int(line), reason) for line in lines[:MAX_EXAMPLES]]


def _lines(text: str, name: str) -> tuple[list[str], QuestionsReport]:
    lines = [line.strip() for line in _LINE_BREAK.split(text)]
    while lines and not lines[-1]:  # a trailing newline (or several) ends the file, it is no question
        lines.pop()
    empty = np.array([not line for line in lines], dtype=bool)
    questions = [line for line in lines if line]
    dropped = {EMPTY_QUESTION: int(empty.sum())} if empty.any() else {}
    report = QuestionsReport(name, LINES, [], "", len(lines), len(questions), dropped,
                             _examples(np.flatnonzero(empty) + 1, EMPTY_QUESTION))
    return questions, report


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
    cells = frame.iloc[1:, 0].fillna("").astype(str).str.strip()
    while len(cells) and cells.iloc[-1] == "":
        cells = cells.iloc[:-1]
    empty = (cells == "").to_numpy(dtype=bool)
    questions = cells[~empty].tolist()
    dropped = {EMPTY_QUESTION: int(empty.sum())} if empty.any() else {}
    report = QuestionsReport(name, COLUMN, [header[0]], "", len(cells), len(questions), dropped,
                             _examples(np.flatnonzero(empty) + 2, EMPTY_QUESTION))
    return questions, report


def _question_positions(names: list[str], shape: str) -> list[int]:
    """The question column's position (COLUMN), or question1's and question2's (PAIRS), in lower-cased ``names``."""
    if shape == COLUMN:
        return [names.index(next(alias for alias in QUESTION_ALIASES if alias in names))]
    return [next(names.index(a) for a in ROLE_ALIASES[role] if a in names) for role in ("question1", "question2")]


def _parquet(data: bytes, name: str, max_bytes: int | None) -> tuple[list[str], QuestionsReport]:
    header = parquet_header(data, name)
    names = [column.strip().lower() for column in header]
    if any(alias in names for alias in QUESTION_ALIASES):
        shape = COLUMN
    elif all(any(a in names for a in ROLE_ALIASES[role]) for role in ("question1", "question2")):
        shape = PAIRS
    elif len(header) == 1:  # one column, whatever its name: the questions
        shape, names = COLUMN, [QUESTION_ALIASES[0]]
    else:
        raise DataError(f"{name}: no question column among {', '.join(header[:10])}; name one question (or "
                        f"{', '.join(QUESTION_ALIASES[1:])}), or question1 and question2")
    positions = _question_positions(names, shape)
    columns = parquet_text_columns(data, name, [header[p] for p in positions], max_bytes)
    grid = np.array([[text.strip() for text in column] for column in columns], dtype=object).T.reshape(-1, len(positions))
    report = _grid_report(grid, name, shape, [header[p] for p in positions], "", np.zeros(0, np.int64), first_line=1)
    report[1].file_format = "parquet"
    return report


def _columns(text: str, name: str, shape: str, delimiter: str,
             header: list[str]) -> tuple[list[str], QuestionsReport]:
    positions = _question_positions([column.strip().lower() for column in header], shape)
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
    dropped = {EMPTY_QUESTION: int(empty.sum()), MALFORMED_LINE: int(skipped.size)}
    examples = [(int(line), MALFORMED_LINE) for line in skipped[:MAX_EXAMPLES]]
    examples += [(first_line + int(row) if first_line is not None else record_line(int(row), skipped),
                  EMPTY_QUESTION) for row in np.flatnonzero(empty.any(axis=1))[:MAX_EXAMPLES]]
    warnings = []
    if shape == COLUMN:
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
                             dropped, sorted(examples)[:MAX_EXAMPLES], warnings=warnings)
    return questions, report
