"""Question pairs in, clean frame out: loading, summarising and splitting Quora-style pairs.

`load_pairs` accepts whatever a user may hand us (CSV/TSV/;/| text, plain or gzip, path, bytes or
an upload) and returns exactly `question1, question2, is_duplicate` plus a `LoadReport` that counts
every row it had to drop and why. Unusable input raises `DataError`, and only `DataError`.

Line numbers in reports count records: the header is line 1 and data row k (0-based) is line k+2,
corrected for malformed records that pandas skipped. Quoted fields with embedded newlines and blank
lines can shift these numbers slightly from what an editor shows.
"""

from __future__ import annotations

import csv
import io
import os
import re
import threading
import warnings
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

ROLES = ("question1", "question2", "is_duplicate")

# Accepted header names per role, compared lower-cased and stripped; the first one present wins.
ROLE_ALIASES = {
    "question1": ("question1", "q1", "sentence1", "text1"),
    "question2": ("question2", "q2", "sentence2", "text2"),
    "is_duplicate": ("is_duplicate", "label", "duplicate"),
}
DELIMITERS = (",", "\t", ";", "|")

TRUE_LABELS = frozenset({"1", "1.0", "true", "yes", "t", "y"})
FALSE_LABELS = frozenset({"0", "0.0", "false", "no", "f", "n"})

EMPTY_QUESTION = "empty question"
UNREADABLE_LABEL = "unreadable label"
MALFORMED_LINE = "malformed line"
MAX_EXAMPLES = 20

_UPLOAD_NAME = "<upload>"
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
_BINARY_SNIFF_BYTES = 8192
_HEADER_SNIFF_BYTES = 65536
# Real text has essentially no control bytes besides tab/newline/form feed; random binary has ~11 %.
_BINARY_CONTROL_SHARE = 0.10
_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 12, 13)) + b"\x7f"
_SKIPPED_RECORD = re.compile(r"Skipping line (\d+)")
_WARNING_CAPTURE_LOCK = threading.Lock()
_DELIMITER_NAMES = {",": "comma", "\t": "tab", ";": "semicolon", "|": "pipe"}


class DataError(ValueError):
    """The one exception for unusable input; the message names the problem for the user."""


@dataclass
class LoadReport:
    source: str  # file name, or "<upload>" for bytes / nameless file objects
    delimiter: str  # "," "\t" ";" or "|"
    columns: dict[str, str]  # role -> column name as found in the file
    rows_read: int  # data rows seen, including dropped rows and malformed lines
    rows_kept: int  # rows in the returned frame
    dropped: dict[str, int]  # reason -> count, only reasons that occurred
    examples: list[tuple[int, str]]  # first MAX_EXAMPLES (line number, reason) of dropped rows
    encoding: str = "utf-8"  # how the bytes were decoded: "utf-8", "cp1252" or "latin-1"

    def summary(self) -> str:
        text = f"kept {self.rows_kept:,} of {self.rows_read:,} rows"
        if self.dropped:
            text += "; dropped " + _describe_counts(self.dropped)
        return text

    def to_dict(self) -> dict:
        report = asdict(self)
        report["examples"] = [list(example) for example in self.examples]
        return report


@dataclass
class Splits:
    train: pd.DataFrame  # pairs to fit on
    val: pd.DataFrame  # pairs for model selection / early stopping
    test: pd.DataFrame  # pairs touched once, for the final numbers


# ----------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------


def load_pairs(
    source, columns: dict[str, str] | None = None, max_rows: int | None = None
) -> tuple[pd.DataFrame, LoadReport]:
    """Read question pairs from a CSV/TSV file, raw bytes or a binary file object.

    Args:
        source: path (str / PathLike), `bytes`, or an object with `.read()` (io.BytesIO, a Streamlit
            UploadedFile). Plain or gzip (detected by its magic bytes), UTF-8 with or without BOM,
            falling back to cp1252 / latin-1.
        columns: optional role -> column name mapping ("question1", "question2", "is_duplicate")
            that overrides header detection for the roles it names.
        max_rows: keep only the first `max_rows` usable rows; the report then describes the rows
            up to the last one kept.

    Returns:
        (pairs, report): pairs has exactly `question1`, `question2` (stripped text) and
        `is_duplicate` (int64 0/1) in file order with a fresh RangeIndex.

    Raises:
        DataError: the input cannot give any pairs (binary, empty, missing columns, unparseable...).
    """
    if max_rows is not None and max_rows < 1:
        raise ValueError(f"max_rows must be a positive integer, got {max_rows}")
    raw, name = _read_source(source)
    data = _inflate(raw, name) if raw[:2] == _GZIP_MAGIC else raw
    data = data.removeprefix(_UTF8_BOM)
    head = data[:_HEADER_SNIFF_BYTES]
    if not head.strip():
        raise DataError(f"{name}: the file is empty")
    if _looks_binary(head[:_BINARY_SNIFF_BYTES]):
        raise DataError(f"{name} looks like a binary file, not CSV/TSV text")

    delimiter = _choose_delimiter(head.decode("utf-8", errors="replace"), columns)
    frame, skipped_records, encoding = _parse_any_encoding(data, delimiter, name, dtype=None)
    if frame.shape[0] == 0:
        raise DataError(f"{name}: the file is empty")
    header = ["" if pd.isna(value) else str(value) for value in frame.iloc[0].tolist()]
    positions = _resolve_columns(header, columns, name)
    if not _questions_parsed_as_text(frame, positions):
        # Type inference turned some chunk of a question column into numbers ("007" -> 7); only a
        # text parse keeps questions verbatim. Forcing text up front costs ~2x parse time, and
        # this is rare, so the common case keeps the fast parse.
        text_columns = {positions[role]: str for role in ("question1", "question2")}
        frame, skipped_records, encoding = _parse_any_encoding(data, delimiter, name, dtype=text_columns)

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
        skipped = _skipped_up_to(data, encoding, delimiter, name, rows_considered)
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
        encoding=encoding,
    )
    pairs = pd.DataFrame(
        {
            "question1": _take(question1, keep),
            "question2": _take(question2, keep),
            "is_duplicate": labels[keep],
        }
    )
    return pairs, report


def _read_source(source) -> tuple[bytes, str]:
    """All bytes of the source, and the name to report it under."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), _UPLOAD_NAME
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            return path.read_bytes(), path.name
        except FileNotFoundError:
            raise DataError(f"file not found: {path}") from None
        except IsADirectoryError:
            raise DataError(f"{path} is a directory, not a file") from None
        except OSError as error:
            raise DataError(f"cannot read {path}: {error.strerror or error}") from None
    if hasattr(source, "read"):
        if hasattr(source, "seek"):
            # An upload may already have been read once (e.g. for a preview); start over.
            try:
                source.seek(0)
            except (OSError, ValueError):
                pass
        content = source.read()
        if isinstance(content, str):
            content = content.encode("utf-8")
        name = getattr(source, "name", None)
        return bytes(content), (Path(name).name if isinstance(name, str) and name else _UPLOAD_NAME)
    raise TypeError(f"source must be a path, bytes or a binary file object, not {type(source).__name__}")


def _looks_binary(sample: bytes) -> bool:
    if b"\x00" in sample:
        return True
    control_count = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    return control_count > _BINARY_CONTROL_SHARE * len(sample)


def _choose_delimiter(head_text: str, columns: dict[str, str] | None) -> str:
    """The delimiter that splits the header into a known column set; else the most frequent one."""
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
    explicit = columns or {}
    unknown = sorted(set(explicit) - set(ROLES))
    if unknown:
        raise DataError(f"unknown role(s) in columns mapping: {', '.join(unknown)}; roles are {', '.join(ROLES)}")
    normalised = [name.strip().lower() for name in header]
    positions: dict[str, int] = {}
    for role in ROLES:
        if role in explicit:
            wanted = str(explicit[role])
            if wanted in header:
                positions[role] = header.index(wanted)
            elif wanted.strip().lower() in normalised:
                positions[role] = normalised.index(wanted.strip().lower())
            continue
        for alias in ROLE_ALIASES[role]:
            if alias in normalised:
                positions[role] = normalised.index(alias)
                break
    return positions, [role for role in ROLES if role not in positions]


def _resolve_columns(header: list[str], columns: dict[str, str] | None, name: str) -> dict[str, int]:
    positions, missing = _match_columns(header, columns)
    if missing:
        explicit = columns or {}
        wanted = [f"{role} (mapped to {explicit[role]!r})" if role in explicit else role for role in missing]
        raise DataError(
            f"{name}: missing column(s) for {', '.join(wanted)}; found columns: {_describe_header(header)} "
            "(expected question1, question2, is_duplicate or an alias such as q1/q2/label)"
        )
    return positions


def _describe_header(header: list[str], max_names: int = 20, max_length: int = 40) -> str:
    names = []
    for name in header[:max_names]:
        name = name.strip()
        names.append("(blank)" if not name else name if len(name) <= max_length else name[:max_length] + "…")
    if len(header) > max_names:
        names.append(f"… ({len(header) - max_names} more)")
    return ", ".join(names)


def _parse_any_encoding(
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


def _inflate(raw: bytes, name: str) -> bytes:
    """Whole gzip content in one zlib pass (pandas' streaming gzip reader is ~30 % slower)."""
    members = []
    rest = raw
    try:
        while rest:
            inflater = zlib.decompressobj(wbits=31)
            members.append(inflater.decompress(rest))
            if not inflater.eof:
                raise DataError(f"{name}: the gzip data is truncated or damaged")
            rest = inflater.unused_data
            if not rest.strip(b"\x00"):  # gzip tolerates zero padding after the last member
                break
    except zlib.error as error:
        raise DataError(f"{name} starts like a gzip file but cannot be decompressed ({error})") from None
    return members[0] if len(members) == 1 else b"".join(members)


def _skipped_up_to(data: bytes, encoding: str, delimiter: str, name: str, rows: int) -> np.ndarray:
    """Record numbers pandas skips before it has read `rows` data rows.

    Asked of pandas itself (a parse of just that prefix): its skip numbers count blank lines but
    not embedded newlines, so they cannot be compared with a data row's position.
    """
    text = data if encoding == "utf-8" else data.decode(encoding).encode("utf-8")
    _, skipped = _parse(text, delimiter, name, dtype=str, nrows=rows + 1)  # + 1: the header row
    return np.asarray(skipped, dtype=np.int64)


def _parse(
    data: bytes, delimiter: str, name: str, dtype, nrows: int | None = None
) -> tuple[pd.DataFrame, list[int]]:
    """One C-engine parse with the header kept as row 0, plus the record numbers pandas skipped.

    header=None makes the header line fix the expected field count: with header=0 a first data row
    with extra fields silently switches pandas to an implicit index or truncation.
    """
    # catch_warnings swaps process-wide state; the lock keeps two loads (e.g. two Streamlit
    # sessions) from recording each other's skipped lines.
    with _WARNING_CAPTURE_LOCK, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            frame = pd.read_csv(
                io.BytesIO(data),
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
            )
        except UnicodeDecodeError:
            raise
        except pd.errors.EmptyDataError:
            raise DataError(f"{name}: the file is empty") from None
        except Exception as error:
            # Whatever the tokenizer or decompressor trips over in user data must reach the user
            # as a DataError carrying pandas' own (line-numbered) explanation.
            raise DataError(
                f"could not parse {name} as {_DELIMITER_NAMES[delimiter]}-separated text: {error}"
            ) from error
    skipped = sorted({int(number) for w in caught for number in _SKIPPED_RECORD.findall(str(w.message))})
    return frame, skipped


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


# ----------------------------------------------------------------------------------------------
# Summaries, splits and overlap
# ----------------------------------------------------------------------------------------------


def normalise_questions(questions) -> np.ndarray:
    """Comparison key for question text: lower-cased, whitespace runs collapsed, stripped. (n,) object."""
    texts = questions.tolist() if hasattr(questions, "tolist") else list(questions)  # iterating Arrow is slow
    return np.array([" ".join(str(text).lower().split()) for text in texts], dtype=object)


def dataset_summary(pairs: pd.DataFrame) -> dict:
    """Counts for display; unique_questions compares normalised text across both columns."""
    count = int(pairs.shape[0])
    duplicates = int(pairs["is_duplicate"].sum())
    texts = np.concatenate(
        [normalise_questions(pairs["question1"]), normalise_questions(pairs["question2"])]
    )
    return {
        "pairs": count,
        "duplicates": duplicates,
        "duplicate_rate": duplicates / count if count else 0.0,
        "unique_questions": int(pd.unique(texts).size),
    }


def split_pairs(
    pairs: pd.DataFrame,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    seed: int = 0,
    by_question: bool = False,
) -> Splits:
    """Seeded train/val/test split; fractions are of pairs.

    by_question=True keeps every connected group of pairs that share a (normalised) question text in
    one split, so no val/test question text is ever seen in training. Groups are dealt out in a
    seeded order until each held-out split reaches its size; groups too big to fit (the giant one)
    land in train, so held-out sizes are approximate.
    """
    if not (0 <= val_fraction < 1 and 0 <= test_fraction < 1 and val_fraction + test_fraction < 1):
        raise ValueError(
            f"need 0 <= val_fraction, test_fraction and val_fraction + test_fraction < 1, "
            f"got {val_fraction} and {test_fraction}"
        )
    count = pairs.shape[0]
    test_target = round(count * test_fraction)
    val_target = round(count * val_fraction)
    rng = np.random.default_rng(seed)
    if by_question:
        assignment = _assign_groups(_question_groups(pairs), test_target, val_target, rng)
    else:
        assignment = np.zeros(count, dtype=np.int8)  # 0 train, 1 val, 2 test
        order = rng.permutation(count)
        assignment[order[:test_target]] = 2
        assignment[order[test_target : test_target + val_target]] = 1
    return Splits(
        train=pairs.iloc[np.flatnonzero(assignment == 0)].reset_index(drop=True),
        val=pairs.iloc[np.flatnonzero(assignment == 1)].reset_index(drop=True),
        test=pairs.iloc[np.flatnonzero(assignment == 2)].reset_index(drop=True),
    )


def _question_groups(pairs: pd.DataFrame) -> np.ndarray:
    """Connected-component id per pair, pairs linked by shared normalised question text. (n,)"""
    count = pairs.shape[0]
    texts = np.concatenate(
        [normalise_questions(pairs["question1"]), normalise_questions(pairs["question2"])]
    )
    codes, uniques = pd.factorize(texts)
    parent = list(range(len(uniques)))

    def find(node: int) -> int:
        root = node
        while parent[root] != root:
            root = parent[root]
        while parent[node] != root:  # path compression keeps later finds near O(1)
            parent[node], node = root, parent[node]
        return root

    for left, right in zip(codes[:count].tolist(), codes[count:].tolist()):
        left_root, right_root = find(left), find(right)
        if left_root != right_root:
            parent[right_root] = left_root
    roots = np.array([find(code) for code in codes[:count].tolist()], dtype=np.int64)
    return pd.factorize(roots)[0]


def _assign_groups(
    groups: np.ndarray, test_target: int, val_target: int, rng: np.random.Generator
) -> np.ndarray:
    """Split id per pair (0 train, 1 val, 2 test), dealing whole groups in a seeded order."""
    sizes = np.bincount(groups)
    split_of_group = np.zeros(sizes.size, dtype=np.int8)
    test_size = val_size = 0
    for group in rng.permutation(sizes.size).tolist():
        size = int(sizes[group])
        if test_size + size <= test_target:
            split_of_group[group], test_size = 2, test_size + size
        elif val_size + size <= val_target:
            split_of_group[group], val_size = 1, val_size + size
        if test_size == test_target and val_size == val_target:
            break
    return split_of_group[groups]


def unseen_mask(train: pd.DataFrame, other: pd.DataFrame) -> pd.Series:
    """True for rows of `other` where neither question text (normalised) occurs anywhere in `train`."""
    seen = set(normalise_questions(train["question1"])) | set(normalise_questions(train["question2"]))
    unseen = [
        first not in seen and second not in seen
        for first, second in zip(normalise_questions(other["question1"]), normalise_questions(other["question2"]))
    ]
    return pd.Series(np.array(unseen, dtype=bool), index=other.index, name="unseen")
