"""Question pairs in, clean frame out: ``load_pairs`` and its ``LoadReport``.

`load_pairs` accepts whatever a user may hand us (CSV/TSV/;/| text, plain or gzip, path, bytes or
an upload) and returns exactly `question1, question2, is_duplicate` plus a `LoadReport` that counts
every row it had to drop and why. Unusable input raises `DataError`, and only `DataError`. The bytes
and their encoding are ``core.data.text_source``'s; the delimiter, columns and the pandas parse ``core.data.parsing``'s;
what a label means (the spellings, a label map) and the refusals of columns that cannot hold their
roles, in ``core.data.labels``.

Line numbers in reports count records: the header is line 1 and data row k (0-based) is line k+2,
corrected for malformed records that pandas skipped. Quoted fields with embedded newlines and blank
lines can shift these numbers slightly from what an editor shows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from core.data.labels import LabelTally, LabelValuesError
from core.data.limits import DataError
from core.data.pair_chunks import (
    FALSE_LABELS,
    TRUE_LABELS,
    PairReader,
    record_line,
)
from core.data.parsing import DELIMITERS, ROLE_ALIASES, ROLES

__all__ = [
    "DELIMITERS", "EMPTY_QUESTION", "FALSE_LABELS", "MALFORMED_LINE", "MAX_EXAMPLES", "ROLES", "ROLE_ALIASES",
    "TRUE_LABELS", "UNREADABLE_LABEL", "DataError", "LabelValuesError", "LoadReport", "load_pairs",
    "normalise_questions",
]

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
    # which column was used; labels that were not read). Not part of summary(); callers show them on their own.
    warnings: list[str] = field(default_factory=list)
    label_map: dict[str, int] | None = None  # the label map the labels were read by (values lower-cased)
    # When rows were dropped for an unreadable label: the label column's distinct values as text -> rows of
    # the rows parsed, most frequent first (at most core.data.labels.MAX_LABEL_VALUES), what a label mapping
    # has to cover. Empty otherwise.
    label_values: dict[str, int] = field(default_factory=dict)
    label_warning: str | None = None  # the one of ``warnings`` on unreadable labels (the app words it its own way)

    def summary(self) -> str:
        text = f"kept {self.rows_kept:,} of {self.rows_read:,} rows"
        if self.dropped:
            text += "; dropped " + describe_counts(self.dropped)
        return text

    def to_dict(self) -> dict:
        report = asdict(self)
        report["examples"] = [list(example) for example in self.examples]
        return report


def load_pairs(
    source, columns: dict[str, str] | None = None, max_rows: int | None = None, max_bytes: int | None = None,
    label_map: dict | None = None,
) -> tuple[pd.DataFrame, LoadReport]:
    """Read question pairs from a CSV/TSV file, raw bytes or a binary file object.

    Args:
        source: path (str / PathLike), `bytes`, or an object with `.read()` (io.BytesIO, a Streamlit
            UploadedFile). Plain or gzip (detected by its magic bytes), UTF-8 with or without BOM,
            falling back to cp1252 / latin-1; or UTF-16 (LE/BE, found by its BOM or, without one,
            by the NUL bytes of its ASCII characters).
        columns: optional role -> column name mapping ("question1", "question2", "is_duplicate")
            that overrides header detection for the roles it names.
        max_rows: keep only the first `max_rows` usable rows (the rest of the file is not parsed);
            the report then describes the rows up to the last one kept.
        max_bytes: the cap on the text read (a compressed file's expanded size), instead of
            ``core.data.limits.input_limit()``'s; the app passes its upload limit.
        label_map: optional label value -> 1 (duplicate) or 0 (not), matched ignoring case and
            surrounding spaces (e.g. {"PerfectMatch": 1, "Relevant": 1, "Irrelevant": 0}); a value it
            leaves out is an unreadable label. Without it the documented spellings are read (1/0,
            true/false, yes/no...).

    Returns:
        (pairs, report): pairs has exactly `question1`, `question2` (stripped text) and
        `is_duplicate` (int64 0/1) in file order with a fresh RangeIndex.

    Raises:
        DataError: the input cannot give any pairs (binary, empty, missing columns, unparseable,
            UTF-32, UTF-16 that does not decode, over a cap of ``core.data.limits``...), or its columns
            cannot hold what their roles say (``core.data.labels``: one column given two roles, a question
            column of labels, a label column of other values: ``LabelValuesError``).
    """
    if max_rows is not None and max_rows < 1:
        raise ValueError(f"max_rows must be a positive integer, got {max_rows}")
    reader = PairReader(source, columns, max_bytes=max_bytes, label_map=label_map)
    tally, firsts, seconds, labels, label_readable, skipped = _read(reader, max_rows)
    if reader.reencoded:  # UTF-8 failed after the first chunk: the whole file again, in the one encoding found
        tally, firsts, seconds, labels, label_readable, skipped = _read(reader, max_rows)
    head = reader.head
    name = head.name
    question1, question2 = _joined(firsts), _joined(seconds)
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
    rows_kept = int(np.count_nonzero(keep))

    empty_question = empty_question[:rows_considered]
    unreadable_label = unreadable_label[:rows_considered]
    dropped = {
        EMPTY_QUESTION: int(empty_question.sum()),
        UNREADABLE_LABEL: int(unreadable_label.sum()),
        MALFORMED_LINE: int(skipped.size),
    }
    dropped = {reason: count for reason, count in dropped.items() if count}
    label_warning = tally.unreadable_warning(rows_considered)
    if rows_kept == 0:
        raise DataError(f"{name}: no usable rows: dropped {describe_counts(dropped)}"
                        + (f"; {label_warning}" if label_warning else ""))

    report = LoadReport(
        source=name,
        delimiter=head.delimiter,
        columns={role: head.header[position] for role, position in head.positions.items()},
        rows_read=rows_considered + int(skipped.size),
        rows_kept=rows_kept,
        dropped=dropped,
        examples=_dropped_examples(empty_question, unreadable_label, skipped),
        encoding=head.encoding,
        warnings=head.warnings + ([label_warning] if label_warning else []),
        label_map=reader.label_map,
        label_values=tally.label_values() if label_warning else {},
        label_warning=label_warning,
    )
    pairs = pd.DataFrame(
        {
            "question1": _take(question1, keep),
            "question2": _take(question2, keep),
            "is_duplicate": labels[keep],
        }
    )
    return pairs, report


def _read(reader: PairReader, max_rows: int | None):
    """One pass over ``reader``'s chunks, keeping the questions, the labels and the records skipped, until
    ``max_rows`` usable rows are had (the rest of the file is never parsed)."""
    head = reader.head
    tally = LabelTally(head.name, head.header, head.positions, reader.label_map)
    firsts, seconds, label_parts, readable_parts, skipped_parts = [], [], [], [], []
    kept_so_far = 0
    for chunk in reader:  # only the three columns of each chunk are kept
        tally.add(chunk)
        firsts.append(chunk.question1)
        seconds.append(chunk.question2)
        label_parts.append(chunk.labels)
        readable_parts.append(chunk.label_readable)
        skipped_parts.append(chunk.skipped)
        usable = (chunk.question1 != "").to_numpy(dtype=bool) & (chunk.question2 != "").to_numpy(dtype=bool)
        kept_so_far += int(np.count_nonzero(usable & chunk.label_readable))
        if max_rows is not None and kept_so_far > max_rows:
            break
    return (tally, firsts, seconds, np.concatenate(label_parts), np.concatenate(readable_parts),
            np.unique(np.concatenate(skipped_parts)).astype(np.int64))


def _joined(parts: list[pd.Series]) -> pd.Series:
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def _dropped_examples(
    empty_question: np.ndarray, unreadable_label: np.ndarray, skipped: np.ndarray
) -> list[tuple[int, str]]:
    examples = [(int(line), MALFORMED_LINE) for line in skipped[:MAX_EXAMPLES]]
    for mask, reason in ((empty_question, EMPTY_QUESTION), (unreadable_label, UNREADABLE_LABEL)):
        examples += [(record_line(int(p), skipped), reason) for p in np.flatnonzero(mask)[:MAX_EXAMPLES]]
    return sorted(examples)[:MAX_EXAMPLES]


def _take(questions: pd.Series, keep: np.ndarray) -> pd.Series:
    if keep.all():
        return questions.reset_index(drop=True)  # the usual case: skip the gather
    return questions[keep].reset_index(drop=True)


def describe_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{count:,} {reason}{'' if count == 1 else 's'}" for reason, count in counts.items())


def normalise_questions(questions) -> np.ndarray:
    """Comparison key for question text: lower-cased, whitespace runs collapsed, stripped. (n,) object."""
    texts = questions.tolist() if hasattr(questions, "tolist") else list(questions)  # iterating Arrow is slow
    return np.array([" ".join(str(text).lower().split()) for text in texts], dtype=object)
