"""Downloads never carry a live spreadsheet formula (fuzzed): every text cell that a spreadsheet
would evaluate (= + - @, tab, carriage return) comes back with a leading quote, everything else
unchanged."""
import csv
import io

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from core.saving.safe_csv import FORMULA_STARTS, safe_csv

cells = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1", "ok", ""]),
)


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
            if original.startswith(FORMULA_STARTS):
                assert written == "'" + original
            else:
                assert written == original
        assert float(line[2]) == float(number[0])  # numbers, negative ones too, stay numbers
