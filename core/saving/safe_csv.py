"""Tables written as CSV that a spreadsheet will not execute (OWASP "CSV injection")."""
from __future__ import annotations

import re

import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # a formula to Excel, LibreOffice and Sheets
# A plain signed decimal ("-2", "+3.5", "-1e-3") is a number to a spreadsheet, kept as written (a quote would turn
# a user's -2 into the text '-2); anything more ("-2+3", "-A1", "-inf") is neutralised.
PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def is_formula(text: str) -> bool:
    """Whether a spreadsheet could evaluate ``text`` as a formula (OWASP's leading characters)."""
    return text.startswith(FORMULA_STARTS) and PLAIN_NUMBER.fullmatch(text) is None


def _neutralise(value):
    return "'" + value if isinstance(value, str) and is_formula(value) else value


def safe_csv(table: pd.DataFrame) -> bytes:
    """UTF-8 CSV bytes of ``table`` in which no text cell (or header) can run as a spreadsheet formula: one starting
    with ``= + - @``, a tab or a carriage return gets a leading ``'`` unless it is a plain signed number (``-2``)."""
    return safe_csv_text(table).encode("utf-8")


def safe_csv_text(table: pd.DataFrame, header: bool = True) -> str:
    """``safe_csv`` as text, optionally without the header row: files written in chunks append these."""
    clean = table.copy()
    clean.columns = [_neutralise(str(column)) for column in clean.columns]
    for column in clean.columns:
        if not pd.api.types.is_numeric_dtype(clean[column]):
            clean[column] = clean[column].map(_neutralise)
    # CRLF rows (RFC 4180): the csv writer then quotes any cell holding a lone \r, which a "\n"
    # terminator would leave bare and a reader would split into two rows.
    return clean.to_csv(index=False, header=header, lineterminator="\r\n")
