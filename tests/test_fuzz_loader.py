"""Property-based fuzzing of ``load_pairs`` (reliability case "bad data").

Three properties:
  * anything at all (random bytes, broken gzip, random delimiter soup): ``load_pairs`` returns
    ``(frame, report)`` or raises ``DataError``, never another exception, and a returned frame and
    report are self-consistent;
  * files written with Python's ``csv`` module from a known list of rows: every valid row comes out,
    in order, with its text (stripped) and label; every invalid row is counted under its reason,
    so rows_kept + sum(dropped) == rows_read and rows_kept == the number of valid rows;
  * the same known-rows files encoded as UTF-16 (LE or BE, with their BOM, plain or gzip) load
    exactly like their UTF-8 form: the same frame, the same report (encoding aside), or the same
    DataError.

A row is valid when both questions are non-empty after ``str.strip()`` and the label is one of the
spellings the loader documents. A file is refused as a whole (``core.data.labels``), judged on its rows
with both questions, when a question column holds only label spellings, or when at least two of those
rows have an unreadable label and they outnumber the rows whose label is read. A line of only spaces/tabs is a blank line to pandas, so it is no
row at all (neither read nor dropped), like an empty line. Generated text holds no NUL or other C0
control (tab, newline and carriage return excepted): the loader may legitimately call such bytes
binary. Binary detection itself is fuzzed separately, with the weaker "DataError or a consistent
result" property.

The example counts (MAX_EXAMPLES) are quoted in docs/RELIABILITY.md; keep them in sync.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.data import (
    EMPTY_QUESTION,
    FALSE_LABELS,
    MALFORMED_LINE,
    TRUE_LABELS,
    UNREADABLE_LABEL,
    DataError,
    load_pairs,
)

pytestmark = pytest.mark.slow

# Examples per property; their sum is the number of generated inputs (see docs/RELIABILITY.md).
MAX_EXAMPLES = {
    "random_bytes": 200,
    "header_then_noise": 150,
    "empty_or_header_only": 60,
    "known_rows": 300,
    "max_rows_cut": 100,
    "label_modes": 80,
    "long_fields": 30,
    "mixed_encodings": 120,
    "binary_controls": 60,
    "utf16": 100,
}


def fuzz_settings(name: str):
    return settings(
        max_examples=MAX_EXAMPLES[name],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# ---------------------------------------------------------------------------------------------
# Checks shared by every property
# ---------------------------------------------------------------------------------------------


def load_or_data_error(content: bytes):
    """(pairs, report) or None when load_pairs raised DataError; any other exception fails the test."""
    try:
        pairs, report = load_pairs(content)
    except DataError as error:
        assert str(error), "a DataError must say what is wrong"
        return None
    assert_consistent(pairs, report)
    return pairs, report


def assert_consistent(pairs: pd.DataFrame, report) -> None:
    assert list(pairs.columns) == ["question1", "question2", "is_duplicate"]
    assert isinstance(pairs.index, pd.RangeIndex) and pairs.index.start == 0
    assert pairs["is_duplicate"].dtype == np.int64
    assert set(pairs["is_duplicate"].unique()) <= {0, 1}
    for column in ("question1", "question2"):
        texts = pairs[column].tolist()
        assert all(isinstance(text, str) and text and text == text.strip() for text in texts)
    assert report.rows_kept == len(pairs) >= 1
    assert all(count > 0 for count in report.dropped.values())
    assert set(report.dropped) <= {EMPTY_QUESTION, UNREADABLE_LABEL, MALFORMED_LINE}
    assert report.rows_kept + sum(report.dropped.values()) == report.rows_read
    assert len(report.examples) == min(20, sum(report.dropped.values()))


# ---------------------------------------------------------------------------------------------
# Anything at all: DataError or a consistent result
# ---------------------------------------------------------------------------------------------

HEADERS = [
    "question1,question2,is_duplicate",
    "question1\tquestion2\tis_duplicate",
    "id,qid1,qid2,question1,question2,is_duplicate",
    "q1;q2;label",
    "sentence1|sentence2|label",
]


def maybe_gzip(content: bytes, compress: bool) -> bytes:
    return gzip.compress(content, mtime=0) if compress else content


@fuzz_settings("random_bytes")
@given(
    content=st.one_of(
        st.binary(max_size=3000),
        st.binary(max_size=3000).map(lambda b: gzip.compress(b, mtime=0)),
        # gzip magic followed by garbage, and a valid gzip stream cut short
        st.binary(max_size=300).map(lambda b: b"\x1f\x8b" + b),
        st.tuples(st.binary(min_size=1, max_size=500), st.integers(0, 40)).map(
            lambda t: gzip.compress(t[0], mtime=0)[: -(t[1] + 1)]
        ),
    )
)
def test_random_bytes_give_a_frame_or_a_data_error(content):
    load_or_data_error(content)


# Delimiters, quotes, line ends and label-ish tokens are far likelier than in random bytes.
STRUCTURAL = st.sampled_from(
    [",", "\t", ";", "|", '"', '""', "\n", "\r\n", "\r", " ", "0", "1", "yes", "x", "é", "😀", "?", "\ufeff"]
)


@fuzz_settings("header_then_noise")
@given(
    header=st.sampled_from(HEADERS),
    body=st.lists(st.one_of(STRUCTURAL, st.text(max_size=8)), max_size=80).map("".join),
    encoding=st.sampled_from(["utf-8", "utf-8-sig", "latin-1"]),
    compress=st.booleans(),
)
def test_header_followed_by_noise_gives_a_frame_or_a_data_error(header, body, encoding, compress):
    content = (header + "\n" + body).encode(encoding, errors="replace")
    load_or_data_error(maybe_gzip(content, compress))


@fuzz_settings("empty_or_header_only")
@given(
    content=st.one_of(
        st.text(alphabet=" \t\r\n", max_size=50),
        st.sampled_from([header + end for header in HEADERS for end in ("", "\n", "\r\n", "\n\n\r\n  \n")]),
    ),
    bom=st.booleans(),
    compress=st.booleans(),
)
def test_empty_file_or_header_alone_is_a_data_error(content, bom, compress):
    data = maybe_gzip((b"\xef\xbb\xbf" if bom else b"") + content.encode(), compress)
    with pytest.raises(DataError, match="empty|header but no rows|no usable rows"):
        load_pairs(data)


# ---------------------------------------------------------------------------------------------
# Known rows in, the same rows out
# ---------------------------------------------------------------------------------------------

# (spelling, value) pairs the loader documents as readable, and spellings it must refuse.
READABLE_LABELS = [
    ("0", 0), ("1", 1), ("0.0", 0), ("1.0", 1), ("1.00", 1), ("+1", 1), ("-0", 0), ("true", 1),
    ("False", 0), ("YES", 1), ("no", 0), ("T", 1), ("f", 0), ("y", 1), ("N", 0), (" 1 ", 1), ("0 ", 0),
]
UNREADABLE_LABELS = ["2", "-1", "0.5", "maybe", "", " ", "yes please", "nan", "inf", "1 0", "duplicate"]

# Text with no NUL / C0 controls except tab, newline and carriage return; surrogates excluded so
# every string encodes. Quotes, delimiters, CR/LF, BOMs and non-Latin scripts come up often.
TEXT_CHARS = st.characters(
    blacklist_categories=("Cs",),
    blacklist_characters="".join(chr(c) for c in range(32) if c not in (9, 10, 13)) + "\x7f",
)
TRICKY = st.sampled_from(
    ['"', '""', ",", "\t", "\n", "\r\n", "\r", " ", "\ufeff", "é", "ß", "😀", "مرحبا", "שלום",
     "<script>alert(1)</script>", "007", "1e5", "NaN", "null", "True", "#", "\\", "'"]
)
TEXT = st.one_of(
    st.text(TEXT_CHARS, max_size=30),
    st.lists(st.one_of(TRICKY, st.text(TEXT_CHARS, max_size=5)), max_size=8).map("".join),
    st.sampled_from(["", " ", "\t", " \r\n ", "\u3000", "\xa0"]),  # empty after strip
)


def row_strategy(text=TEXT, labels=None):
    """A row as (q1, q2, label spelling, shape); shape is 'full', ('cut', k) or ('extra', k)."""
    if labels is None:
        labels = st.one_of(
            st.sampled_from(READABLE_LABELS).map(lambda pair: pair[0]),
            st.sampled_from(UNREADABLE_LABELS),
        )
    shape = st.one_of(
        st.just("full"),
        st.just("full"),
        st.just("full"),
        st.tuples(st.just("cut"), st.integers(1, 5)),
        st.tuples(st.just("extra"), st.integers(1, 2)),
    )
    return st.tuples(text, text, labels, shape)


# Column layouts: names in file order; "q1", "q2", "label" mark the roles, anything else is filler.
LAYOUTS = [
    (["question1", "question2", "is_duplicate"], ["q1", "q2", "label"]),
    (["id", "qid1", "qid2", "question1", "question2", "is_duplicate"], ["id", "id", "id", "q1", "q2", "label"]),
    (["q1", "q2", "label"], ["q1", "q2", "label"]),
    (["is_duplicate", "question2", "question1"], ["label", "q2", "q1"]),
    ([" Question1 ", "QUESTION2", "Label", "note"], ["q1", "q2", "label", "note"]),
]
LABEL_VALUE = dict(READABLE_LABELS)


def expected_outcome(rows, roles, decode=lambda text: text, blank=frozenset(), max_rows=None):
    """What load_pairs must give: kept rows as (q1, q2, label), dropped by reason, all (line, reason)
    of dropped rows, and the number of rows read (up to the last kept one when ``max_rows`` cuts).

    ``decode`` maps the written text to what the loader can read back (for re-encoded files).
    ``blank`` holds the positions of rows written as a line of spaces/tabs only: pandas skips
    those as blank lines, so they are neither rows nor drops (documented in core/data/reading.py).
    """
    if max_rows is not None and len(expected_outcome(rows, roles, decode, blank)[0]) <= max_rows:
        max_rows = None  # as documented: the report is cut only when max_rows drops usable rows
    kept, dropped, problems, rows_read = [], {}, [], 0
    for position, (q1, q2, label, shape) in enumerate(rows):
        if max_rows is not None and len(kept) == max_rows:
            break
        if position in blank:
            continue
        rows_read += 1
        fields = written_fields(q1, q2, label, shape, roles, position)
        if isinstance(shape, tuple) and shape[0] == "extra":
            reason = MALFORMED_LINE
        else:
            present = dict(zip(roles, fields))
            first = decode(present.get("q1", "")).strip()
            second = decode(present.get("q2", "")).strip()
            if not first or not second:
                reason = EMPTY_QUESTION
            elif present.get("label", "").strip().lower() not in {s.strip().lower() for s in LABEL_VALUE}:
                reason = UNREADABLE_LABEL
            else:
                kept.append((first, second, LABEL_VALUE[present["label"]]))
                continue
        dropped[reason] = dropped.get(reason, 0) + 1
        problems.append((position + 2, reason))
    return kept, dropped, problems, rows_read


def expected_refusal(rows, roles, decode=lambda text: text, blank=frozenset()):
    """The message (a regex) load_pairs refuses these rows with, or None. Judged on the rows with both
    questions of the whole file (the files here are one chunk, so ``max_rows`` reads them whole too)."""
    firsts, seconds, unreadable = [], [], 0
    spellings = {label.strip().lower() for label in LABEL_VALUE}
    for position, (q1, q2, label, shape) in enumerate(rows):
        if position in blank or (isinstance(shape, tuple) and shape[0] == "extra"):
            continue
        present = dict(zip(roles, written_fields(q1, q2, label, shape, roles, position)))
        first, second = decode(present.get("q1", "")).strip(), decode(present.get("q2", "")).strip()
        if first and second:
            firsts.append(first)
            seconds.append(second)
            unreadable += present.get("label", "").strip().lower() not in spellings
    for role, questions in (("question1", firsts), ("question2", seconds)):
        if questions and all(text.lower() in TRUE_LABELS | FALSE_LABELS for text in questions):
            return f"the {role} column .* holds labels, not questions"
    if unreadable >= 2 and unreadable > len(firsts) - unreadable:
        return "does not hold duplicate labels"
    return None


def written_fields(q1, q2, label, shape, roles, position):
    values = {"q1": q1, "q2": q2, "label": label}
    fields = [values.get(role, f"{role}-{position}") for role in roles]
    if shape == "full":
        return fields
    kind, count = shape
    if kind == "cut":
        return fields[: max(1, len(fields) - count)]
    return fields + [f"extra-{i}" for i in range(count)]


def write_csv(
    names, roles, rows, delimiter, lineterminator, quoting, empty_lines_before=()
) -> tuple[str, frozenset[int]]:
    """The file's text, and the positions of rows written as blank-looking lines.

    ``empty_lines_before`` lists row positions preceded by an empty line (which is no row at all).
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator=lineterminator, quoting=quoting)
    # Python 3.11's csv quotes a field only for the characters of *its own* line terminator, so with
    # "\n" a bare "\r" goes out unquoted, and every CSV reader (pandas included) sees a line break.
    # Such a file does not hold the rows we meant; quote those rows fully, as RFC 4180 asks.
    quote_all = csv.writer(buffer, delimiter=delimiter, lineterminator=lineterminator, quoting=csv.QUOTE_ALL)
    writer.writerow(names)
    blank = set()
    for position, (q1, q2, label, shape) in enumerate(rows):
        buffer.write(lineterminator * list(empty_lines_before).count(position))
        start = buffer.tell()
        fields = written_fields(q1, q2, label, shape, roles, position)
        has_bare_break = any(("\r" in f or "\n" in f) for f in fields)
        (quote_all if has_bare_break else writer).writerow(fields)
        line = buffer.getvalue()[start:].removesuffix(lineterminator)
        if line and not line.strip(" \t".replace(delimiter, "")):
            blank.add(position)
    return buffer.getvalue(), frozenset(blank)


def assert_loads_as_expected(
    content: bytes,
    rows,
    roles,
    decode=lambda text: text,
    encoding=None,
    blank=frozenset(),
    max_rows=None,
    check_lines=True,
):
    text_has_line_breaks = any(
        "\n" in value or "\r" in value for row in rows for value in row[:3]
    )
    kept, dropped, problems, rows_read = expected_outcome(rows, roles, decode, blank, max_rows)
    refusal = expected_refusal(rows, roles, decode, blank)
    if refusal and rows_read:
        with pytest.raises(DataError, match=refusal):
            load_pairs(content, max_rows=max_rows)
        return
    if not kept:
        # Only blank lines under the header (pandas skips them) is a file without rows; rows that are
        # all dropped is a file without usable ones. (Hypothesis found the first: one row cut to " ".)
        message = "the file has a header but no rows" if rows_read == 0 else "no usable rows"
        with pytest.raises(DataError, match=message):
            load_pairs(content, max_rows=max_rows)
        return
    pairs, report = load_pairs(content, max_rows=max_rows)
    assert_consistent(pairs, report)
    got = list(pairs.itertuples(index=False, name=None))
    assert got == kept
    assert report.rows_read == rows_read
    assert report.rows_kept == len(kept)
    assert report.dropped == dropped
    if encoding is not None:
        assert report.encoding == encoding
    if check_lines and not text_has_line_breaks and not blank:
        # Reported line numbers are exact only without embedded newlines and blank lines.
        assert report.examples == sorted(problems)[:20]


@fuzz_settings("known_rows")
@given(
    layout=st.sampled_from(LAYOUTS),
    rows=st.lists(row_strategy(), min_size=1, max_size=25),
    delimiter=st.sampled_from([",", "\t"]),
    lineterminator=st.sampled_from(["\n", "\r\n"]),
    quoting=st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]),
    bom=st.booleans(),
    compress=st.booleans(),
    max_rows=st.one_of(st.none(), st.none(), st.integers(1, 20)),
    empty_lines_before=st.one_of(st.just([]), st.lists(st.integers(0, 25), max_size=4)),
)
def test_known_rows_come_out_in_order_and_drops_are_counted(
    layout, rows, delimiter, lineterminator, quoting, bom, compress, max_rows, empty_lines_before
):
    names, roles = layout
    text, blank = write_csv(names, roles, rows, delimiter, lineterminator, quoting, empty_lines_before)
    # Empty lines shift the reported line numbers (documented in core/data/reading.py); counts must hold.
    check_lines = not any(position < len(rows) for position in empty_lines_before)
    content = maybe_gzip((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"), compress)
    assert_loads_as_expected(
        content, rows, roles, encoding="utf-8", blank=blank, max_rows=max_rows, check_lines=check_lines
    )


@fuzz_settings("max_rows_cut")
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["What is A?", "B b?", " ", ""]),
            st.sampled_from(["What is C?", "D?"]),
            st.sampled_from(["1", "0", "maybe"]),
            st.sampled_from(["full", "full", ("extra", 1), ("cut", 1)]),
        ),
        min_size=2,
        max_size=30,
    ),
    empty_lines_before=st.lists(st.integers(0, 30), max_size=6),
    max_rows=st.integers(1, 10),
    lineterminator=st.sampled_from(["\n", "\r\n"]),
)
def test_max_rows_report_counts_every_row_up_to_the_cut(rows, empty_lines_before, max_rows, lineterminator):
    """Empty lines and malformed lines before the max_rows cut: dense, so their mix comes up often."""
    names, roles = LAYOUTS[0]
    text, blank = write_csv(names, roles, rows, ",", lineterminator, csv.QUOTE_MINIMAL, empty_lines_before)
    assert_loads_as_expected(
        text.encode(), rows, roles, blank=blank, max_rows=max_rows, check_lines=not empty_lines_before
    )


@fuzz_settings("label_modes")
@given(
    mode=st.sampled_from(["all duplicates", "no duplicates", "identical rows", "labels outside 0/1"]),
    question=st.text(TEXT_CHARS, min_size=1, max_size=20).filter(lambda t: t.strip()),
    count=st.integers(1, 60),
    delimiter=st.sampled_from([",", "\t"]),
    compress=st.booleans(),
)
def test_label_distributions(mode, question, count, delimiter, compress):
    if mode == "all duplicates":
        rows = [(f"{question} {i}", f"{question} again {i}", "1", "full") for i in range(count)]
    elif mode == "no duplicates":
        rows = [(f"{question} {i}", f"other {i}", "0", "full") for i in range(count)]
    elif mode == "identical rows":
        rows = [(question, question, "1", "full")] * count
    else:  # every label unreadable but one readable row at the end: refused from two unreadable rows on
        rows = [(question, question, UNREADABLE_LABELS[i % len(UNREADABLE_LABELS)], "full") for i in range(count)]
        rows.append((question, "last", "0", "full"))
    names, roles = LAYOUTS[0]
    text, blank = write_csv(names, roles, rows, delimiter, "\n", csv.QUOTE_MINIMAL)
    content = maybe_gzip(text.encode("utf-8"), compress)
    assert_loads_as_expected(content, rows, roles, blank=blank)
    if mode in ("all duplicates", "no duplicates"):  # questions numbered, so never mere labels: loaded
        pairs, _ = load_pairs(content)
        assert pairs["is_duplicate"].tolist() == [1 if mode == "all duplicates" else 0] * count


def long_text(piece: str, length: int) -> str:
    return (piece * (length // len(piece) + 1))[:length]


@fuzz_settings("long_fields")
@given(
    rows=st.lists(
        st.tuples(
            st.tuples(st.one_of(TRICKY, st.text(TEXT_CHARS, min_size=1, max_size=12)), st.integers(10_000, 100_000)),
            TEXT,
            st.sampled_from(READABLE_LABELS).map(lambda pair: pair[0]),
        ),
        min_size=1,
        max_size=4,
    ),
    delimiter=st.sampled_from([",", "\t"]),
    compress=st.booleans(),
)
def test_very_long_fields_survive_whole(rows, delimiter, compress):
    rows = [(long_text(*spec), q2, label, "full") for spec, q2, label in rows]
    assert all(10_000 <= len(row[0]) <= 100_000 for row in rows)
    names, roles = LAYOUTS[0]
    text, blank = write_csv(names, roles, rows, delimiter, "\r\n", csv.QUOTE_MINIMAL)
    assert_loads_as_expected(maybe_gzip(text.encode("utf-8"), compress), rows, roles, blank=blank)


@fuzz_settings("utf16")
@given(
    layout=st.sampled_from(LAYOUTS),
    rows=st.lists(row_strategy(), min_size=1, max_size=25),
    delimiter=st.sampled_from([",", "\t"]),
    lineterminator=st.sampled_from(["\n", "\r\n"]),
    quoting=st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]),
    codec=st.sampled_from(["utf-16-le", "utf-16-be"]),
    compress=st.booleans(),
)
def test_known_rows_in_utf16_load_like_their_utf8_form(layout, rows, delimiter, lineterminator, quoting, codec, compress):
    names, roles = layout
    text, blank = write_csv(names, roles, rows, delimiter, lineterminator, quoting)
    content = maybe_gzip("\ufeff".encode(codec) + text.encode(codec), compress)
    try:
        expected_pairs, expected_report = load_pairs(text.encode("utf-8"))
    except DataError as error:
        with pytest.raises(DataError) as caught:
            load_pairs(content)
        assert str(caught.value) == str(error)
        return
    pairs, report = load_pairs(content)
    pd.testing.assert_frame_equal(pairs, expected_pairs)
    assert report == dataclasses.replace(expected_report, encoding=codec)
    assert_loads_as_expected(content, rows, roles, encoding=codec, blank=blank)


# Characters latin-1 can encode (C0 controls and DEL excluded), for rows written as latin-1.
LATIN1_CHARS = ["\t", "\n", "\r"] + [chr(c) for c in range(0x20, 0x100) if c != 0x7F]
LATIN1_TEXT = st.one_of(
    st.text(st.sampled_from(LATIN1_CHARS), max_size=25),
    st.lists(st.sampled_from(['"', ",", "\r\n", " ", "é", "\xa0", "\x85", "ÿ", "Ã©"]), max_size=8).map("".join),
)


@fuzz_settings("mixed_encodings")
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["utf-8", "latin-1"]), row_strategy(text=LATIN1_TEXT)),
        min_size=1,
        max_size=20,
    ),
    delimiter=st.sampled_from([",", "\t"]),
    lineterminator=st.sampled_from(["\n", "\r\n"]),
    compress=st.booleans(),
)
def test_mixed_utf8_and_latin1_rows_all_arrive(rows, delimiter, lineterminator, compress):
    """Each row is encoded on its own; the loader decodes the whole file with one encoding.

    It reads UTF-8 when the whole file is valid UTF-8, else the single-byte encoding charset_normalizer
    picks (cp1252 or latin-1, one that decodes the file). Each row must come out as exactly its bytes
    decoded with that encoding: no row lost, merged or split.
    """
    names, roles = LAYOUTS[0]
    header, _ = write_csv(names, roles, [], delimiter, lineterminator, csv.QUOTE_MINIMAL)
    lines, blank = [], set()
    for position, (encoding, row) in enumerate(rows):
        # One row at a time, so each gets its own encoding; write_csv's header line is cut off.
        # (written_fields uses the position only for filler columns, and LAYOUTS[0] has none.)
        text, blank_line = write_csv(names, roles, [row], delimiter, lineterminator, csv.QUOTE_MINIMAL)
        lines.append(text[len(header):].encode(encoding))
        if blank_line:
            blank.add(position)
    data = header.encode("ascii") + b"".join(lines)
    failures = []
    for chosen in _possible_encodings(data):
        # Text as the loader can see it: this row's bytes decoded with the file-wide encoding ("replace" only
        # matters for fields a cut row never wrote).
        decoded_rows = [
            (*(text.encode(encoding).decode(chosen, errors="replace") for text in (q1, q2)), label, shape)
            for encoding, (q1, q2, label, shape) in rows
        ]
        try:
            assert_loads_as_expected(
                maybe_gzip(data, compress), decoded_rows, roles, blank=frozenset(blank), encoding=chosen
            )
            return
        except (AssertionError, pytest.fail.Exception) as failure:
            failures.append(failure)
    raise failures[0]


def _possible_encodings(data: bytes) -> list[str]:
    try:
        data.decode("utf-8")
        return ["utf-8"]
    except UnicodeDecodeError:
        pass
    possible = []
    for encoding in ("cp1252", "latin-1"):
        try:
            data.decode(encoding)
            possible.append(encoding)
        except UnicodeDecodeError:
            pass
    return possible


# ---------------------------------------------------------------------------------------------
# Binary detection: control bytes and NULs inside otherwise fine files
# ---------------------------------------------------------------------------------------------


CONTROL_CHARS = [chr(c) for c in range(32) if c not in (9, 10, 13)] + ["\x7f"]


@fuzz_settings("binary_controls")
@given(
    rows=st.lists(row_strategy(), min_size=1, max_size=10),
    controls=st.lists(st.sampled_from(CONTROL_CHARS), min_size=1, max_size=50),
    at=st.integers(0, 10_000),
    compress=st.booleans(),
)
def test_control_characters_give_a_data_error_or_a_consistent_frame(rows, controls, at, compress):
    names, roles = LAYOUTS[0]
    text, _ = write_csv(names, roles, rows, ",", "\n", csv.QUOTE_MINIMAL)
    body = text.encode("utf-8")
    position = len(names[0]) + 1 + at % max(1, len(body) - len(names[0]))
    content = body[:position] + "".join(controls).encode() + body[position:]
    result = load_or_data_error(maybe_gzip(content, compress))
    if "\x00" in controls and result is not None:
        pytest.fail("a file with a NUL byte in its first 8 KiB must be refused as binary")


def test_max_rows_counts_a_malformed_line_after_an_empty_line():
    """Regression (found by test_max_rows_report_counts_every_row_up_to_the_cut): pandas numbers
    skipped lines counting empty lines, and the max_rows cut compared those numbers with record
    positions, so this malformed line between two kept rows went uncounted (rows_read was 2)."""
    content = b"question1,question2,is_duplicate\n\na,b,1\nc,d,0,extra\ne,f,1\ng,h,1\n"
    pairs, report = load_pairs(content, max_rows=2)
    assert pairs["question1"].tolist() == ["a", "e"]
    assert (report.rows_read, report.rows_kept, report.dropped) == (3, 2, {MALFORMED_LINE: 1})
    assert report.examples == [(4, MALFORMED_LINE)]  # the line an editor shows


def test_declared_example_budget_reaches_one_thousand():
    assert sum(MAX_EXAMPLES.values()) >= 1000
