"""Downloads never carry a live spreadsheet formula (fuzzed): every text cell that a spreadsheet
would evaluate (= + - @, tab, carriage return) comes back with a leading quote, everything else
unchanged; a text cell that is a plain signed number (-2, +3.5) is a number, kept as written."""
import csv
import io

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.saving.safe_csv import FORMULA_STARTS, PLAIN_NUMBER, safe_csv

cells = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1", "ok", "",
                     "-2", "+3.5", "-0.5e3", "-.5", "-", "+", "-inf", "-1,000", "-2 ", "--2"]),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(cells, cells), min_size=1, max_size=8), st.lists(st.floats(allow_nan=False,
       allow_infinity=False, width=32), min_size=1, max_size=1))
def test_no_text_cell_starts_a_formula(rows, number):
    table = pd.DataFrame(rows, columns=["question", "=cmd"])
    table["score"] = number * len(rows)
    read = list(csv.reader(io.StringIO(safe_csv(table).decode("utf-8"), newline="")))
    header, body = read[0], read[1:]
    assert header == ["question", "'=cmd", "score"]
    assert len(body) == len(rows)
    for (first, second), line in zip(rows, body):
        for original, written in zip((first, second), line[:2]):
            if original.startswith(FORMULA_STARTS) and not PLAIN_NUMBER.fullmatch(original):
                assert written == "'" + original
            else:
                assert written == original
        assert float(line[2]) == float(number[0])  # numbers, negative ones too, stay numbers


@pytest.mark.parametrize("text, written", [
    ("-2", "-2"), ("+3.5", "+3.5"), ("-0.5", "-0.5"), ("-.5", "-.5"), ("+1e-3", "+1e-3"), ("-12.", "-12."),
    ("-2+3", "'-2+3"), ("=1", "'=1"), ("@SUM(A1)", "'@SUM(A1)"), ("+1+1", "'+1+1"), ("-A1", "'-A1"),
    ("-inf", "'-inf"), ("-", "'-"), ("-2\n", "'-2\n"), ("\t-2", "'\t-2"), ("-1e5+cmd", "'-1e5+cmd"),
])
def test_a_plain_signed_number_in_a_text_cell_is_kept_and_anything_more_neutralised(text, written):
    """docs/RELIABILITY.md: negative numbers are kept; '-2' was written as the text "'-2" before."""
    read = list(csv.reader(io.StringIO(safe_csv(pd.DataFrame({"cell": [text]})).decode("utf-8"), newline="")))
    assert read[1] == [written]
