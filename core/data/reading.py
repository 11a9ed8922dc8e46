"""Question pairs in, clean frame out: ``load_pairs`` and its ``LoadReport``.

`load_pairs` accepts whatever a user may hand us (CSV/TSV/;/| text, plain or gzip, path, bytes or
an upload) and returns exactly `question1, question2, is_duplicate` plus a `LoadReport` that counts
every row it had to drop and why. Unusable input raises `DataError`, and only `DataError`. The
byte-level steps (source, gzip, delimiter, columns, the pandas parse) live in ``core.data.parsing``.

Line numbers in reports count records: the header is line 1 and data row k (0-based) is line k+2,
corrected for malformed records that pandas skipped. Quoted fields with embedded newlines and blank
lines can shift these numbers slightly from what an editor shows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from core.data.parsing import (
    DELIMITERS,
    ROLE_ALIASES,
    ROLES,
    DataError,
    choose_delimiter,
    column_warnings,
    parse_any_encoding,
    read_text_bytes,
    resolve_columns,
    skipped_up_to,
)

__all__ = [
    "DELIMITERS", "EMPTY_QUESTION", "FALSE_LABELS", "MALFORMED_LINE", "MAX_EXAMPLES", "ROLES", "ROLE_ALIASES",
    "TRUE_LABELS", "UNREADABLE_LABEL", "DataError", "LoadReport", "load_pairs", "normalise_questions",
]

TRUE_LABELS = frozenset({"1", "1.0", "true", "yes", "t", "y"})
FALSE_LABELS = frozenset({"0", "0.0", "false", "no", "f", "n"})

EMPTY_QUESTION = "empty question"
UNREADABLE_LABEL = "unreadable label"
MALFORMED_LINE = "malformed line"
MAX_EXAMPLES = 20


@dataclass
class LoadReport:
    source: str  # file name, or "<upload>" for bytes / nameless file objects
    delimiter: str  # "," "\t" ";" or "|"
    columns: dict[str, str]  # role -> column name as found in the file
    rows_read: int  # data rows seen, including dropped rows and malformed lines
    rows_kept: int  # rows in the returned frame
    dropped: dict[str, int]  # reason -> count, only reasons that occurred
    examples: list[tuple[int, str]]  # first MAX_EXAMPLES (line number, reason) of dropped rows
    encoding: str = "utf-8"  # how the bytes were decoded: "utf-8", "cp1252", "latin-1", "utf-16-le" or "utf-16-be"
    # One line each for what loaded but may not be what was meant (e.g. a header name repeated:
    # which column was used). Not part of summary(); callers show them on their own.
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = f"kept {self.rows_kept:,} of {self.rows_read:,} rows"
        if self.dropped:
            text += "; dropped " + _describe_counts(self.dropped)
        return text

    def to_dict(self) -> dict:
        report = asdict(self)
        report["examples"] = [list(example) for example in self.examples]
        return report


def load_pairs(
    source, columns: dict[str, str] | None = None, max_rows: int | None = None
) -> tuple[pd.DataFrame, LoadReport]:
    """Read question pairs from a CSV/TSV file, raw bytes or a binary file object.

    Args:
        source: path (str / PathLike), `bytes`, or an object with `.read()` (io.BytesIO, a Streamlit
            UploadedFile). Plain or gzip (detected by its magic bytes), UTF-8 with or without BOM,
            falling back to cp1252 / latin-1; or UTF-16 (LE/BE, found by its BOM or, without one,
            by the NUL bytes of its ASCII characters).
        columns: optional role -> column name mapping ("question1", "question2", "is_duplicate")
            that overrides header detection for the roles it names.
        max_rows: keep only the first `max_rows` usable rows; the report then describes the rows
            up to the last one kept.

    Returns:
        (pairs, report): pairs has exactly `question1`, `question2` (stripped text) and
        `is_duplicate` (int64 0/1) in file order with a fresh RangeIndex.

    Raises:
        DataError: the input cannot give any pairs (binary, empty, missing columns, unparseable,
            UTF-32, UTF-16 that does not decode...).
    """
    if max_rows is not None and max_rows < 1:
        raise ValueError(f"max_rows must be a positive integer, got {max_rows}")
    data, name, utf16 = read_text_bytes(source)
    delimiter = choose_delimiter(data, columns)
    frame, skipped_records, encoding = parse_any_encoding(data, delimiter, name, dtype=None)
    if frame.shape[0] == 0:
        raise DataError(f"{name}: the file is empty")
    header = ["" if pd.isna(value) else str(value) for value in frame.iloc[0].tolist()]
    positions = resolve_columns(header, columns, name)
    if not _questions_parsed_as_text(frame, positions):
        # Type inference turned some chunk of a question column into numbers ("007" -> 7); only a
        # text parse keeps questions verbatim. Forcing text up front costs ~2x parse time, and
        # this is rare, so the common case keeps the fast parse.
        text_columns = {positions[role]: str for role in ("question1", "question2")}
        frame, skipped_records, encoding = parse_any_encoding(data, delimiter, name, dtype=text_columns)

    body = frame.iloc[1:]
    if body.shape[0] == 0 and not skipped_records:
        raise DataError(f"{name}: the file has a header but no rows")
    question1 = _clean_questions(body.iloc[:, positions["question1"]])
    question2 = _clean_questions(body.iloc[:, positions["question2"]])
    labels, label_readable = _parse_labels(body.iloc[:, positions["is_duplicate"]])

    empty_question = (question1 == "").to_numpy(dtype=bool) | (question2 == "").to_numpy(dtype=bool)
    unreadable_label = ~label_readable & ~empty_question  # a row is counted under one reason only
    keep = ~(empty_question | unreadable_label)

    skipped = np.asarray(skipped_records, dtype=np.int64)
    rows_considered = body.shape[0]
    if max_rows is not None and np.count_nonzero(keep) > max_rows:
        rows_considered = int(np.flatnonzero(keep)[max_rows - 1]) + 1
        keep[rows_considered:] = False
        skipped = skipped_up_to(data, encoding, delimiter, name, rows_considered)
    rows_kept = int(np.count_nonzero(keep))

    empty_question = empty_question[:rows_considered]
    unreadable_label = unreadable_label[:rows_considered]
    dropped = {
        EMPTY_QUESTION: int(empty_question.sum()),
        UNREADABLE_LABEL: int(unreadable_label.sum()),
        MALFORMED_LINE: int(skipped.size),
    }
    dropped = {reason: count for reason, count in dropped.items() if count}
    if rows_kept == 0:
        raise DataError(f"{name}: no usable rows: dropped {_describe_counts(dropped)}")

    report = LoadReport(
        source=name,
        delimiter=delimiter,
        columns={role: header[position] for role, position in positions.items()},
        rows_read=rows_considered + int(skipped.size),
        rows_kept=rows_kept,
        dropped=dropped,
        examples=_dropped_examples(empty_question, unreadable_label, skipped),
        encoding=utf16 or encoding,  # UTF-16 arrives here re-encoded as UTF-8
        warnings=column_warnings(header, columns),
    )
    pairs = pd.DataFrame(
        {
            "question1": _take(question1, keep),
            "question2": _take(question2, keep),
            "is_duplicate": labels[keep],
        }
    )
    return pairs, report


def _questions_parsed_as_text(frame: pd.DataFrame, positions: dict[str, int]) -> bool:
    # Labels need no such check: _parse_labels reads numbers and text alike.
    return all(pd.api.types.is_string_dtype(frame.iloc[:, positions[role]]) for role in ("question1", "question2"))


def _clean_questions(column: pd.Series) -> pd.Series:
    return column.fillna("").str.strip()


def _parse_labels(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(labels as int64, 0 where unreadable; readable mask), both (n,).

    Spellings are decided once per distinct value: a label column has a handful of them, and the
    parse may hand back ints, floats, bools or text depending on the chunk.
    """
    codes, distinct = pd.factorize(column)  # missing values get code -1
    verdicts = np.array([_label_value(value) for value in distinct.tolist()] + [-1], dtype=np.int64)
    labels = verdicts[codes]  # code -1 picks the trailing "unreadable" verdict
    readable = labels >= 0
    return np.where(readable, labels, 0), readable


def _label_value(value) -> int:
    """1, 0, or -1 for unreadable."""
    if isinstance(value, (bool, int, float, np.number)):
        number = float(value)
    else:
        text = str(value).strip().lower()
        if text in TRUE_LABELS:
            return 1
        if text in FALSE_LABELS:
            return 0
        try:
            number = float(text)  # numeric spellings such as "1.00" or "+1"
        except ValueError:
            return -1
    return 1 if number == 1 else 0 if number == 0 else -1


def _record_line(position: int, skipped: np.ndarray) -> int:
    """File record number of data row `position`, stepping over records pandas skipped."""
    line = position + 2
    while True:
        shifted = position + 2 + int(np.searchsorted(skipped, line, side="right"))
        if shifted == line:
            return line
        line = shifted


def _dropped_examples(
    empty_question: np.ndarray, unreadable_label: np.ndarray, skipped: np.ndarray
) -> list[tuple[int, str]]:
    examples = [(int(line), MALFORMED_LINE) for line in skipped[:MAX_EXAMPLES]]
    for mask, reason in ((empty_question, EMPTY_QUESTION), (unreadable_label, UNREADABLE_LABEL)):
        examples += [(_record_line(int(p), skipped), reason) for p in np.flatnonzero(mask)[:MAX_EXAMPLES]]
    return sorted(examples)[:MAX_EXAMPLES]


def _take(questions: pd.Series, keep: np.ndarray) -> pd.Series:
    if keep.all():
        return questions.reset_index(drop=True)  # the usual case: skip the gather
    return questions[keep].reset_index(drop=True)


def _describe_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{count:,} {reason}" for reason, count in counts.items())


def normalise_questions(questions) -> np.ndarray:
    """Comparison key for question text: lower-cased, whitespace runs collapsed, stripped. (n,) object."""
    texts = questions.tolist() if hasattr(questions, "tolist") else list(questions)  # iterating Arrow is slow
    return np.array([" ".join(str(text).lower().split()) for text in texts], dtype=object)
