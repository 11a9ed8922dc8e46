"""What one label is, the bounds on its fields, and how labels travel as a pairs CSV.

``checked_answer`` is the one check an answer passes before ``label_store`` writes it. A labels CSV is the pairs
file the Data and Train pages read (``PAIR_COLUMNS``), formula safe: ``escape_cell`` puts a ``'`` before a cell a
spreadsheet would run, and ``read_labels_csv`` takes it off again.
"""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from core.data.limits import DataError, clip
from core.data.questions import pair_key
from core.saving.files import open_regular_file
from core.saving.safe_csv import is_formula

LABEL_COLUMNS = ("question1", "question2", "is_duplicate", "labelled_by", "labelled_at")
PAIR_COLUMNS = LABEL_COLUMNS[:3]  # what a labels CSV holds: the pairs file the Data and Train pages read
MAX_QUESTION_CHARS = 100_000  # a long forum post; the CSV store broke at 131,072
MAX_LABELLER_CHARS = 200
SQLITE_MAGIC = b"SQLite format 3\x00"


class Label(NamedTuple):
    """A pair's label as stored: the questions as given, 0 or 1, who (a session id, may be empty) and when."""

    question1: str
    question2: str
    is_duplicate: int
    labelled_by: str
    labelled_at: str


class MergeCounts(NamedTuple):
    """What a merge did, by rows of the file."""

    added: int  # pairs new to the store
    changed: int  # pairs whose label the file changed
    unchanged: int  # rows that said what the store already held


def escape_cell(text: str) -> str:
    """``text`` as exported: a leading ``'`` when a spreadsheet could run it (or it is ``'`` + such a text)."""
    return "'" + text if is_formula(text.lstrip("'")) else text


def unescape_cell(text: str) -> str:
    """The inverse of ``escape_cell``."""
    return text[1:] if text.startswith("'") and is_formula(text.lstrip("'")) else text


def pair_bucket(key1: str, key2: str) -> int:
    """0 to 99, from the sha1 of a ``pair_key``: the same for the same two texts in any order or round, so a share
    of the labels (the held-out one) is a range of buckets."""
    digest = hashlib.sha1(f"{key1}\x1f{key2}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % 100


def checked_answer(question1, question2, is_duplicate, labelled_by="") -> tuple:
    """(key1, key2, question1, question2, label, labelled_by) of an answer, or one ``DataError`` line saying
    why it cannot be stored: an empty or over-long question, a self-pair, a label not 0/1, text that is not
    valid Unicode."""
    question1, question2, labelled_by = str(question1).strip(), str(question2).strip(), str(labelled_by)
    if not question1 or not question2:
        raise DataError("a labelled pair needs two non-empty questions")
    for name, text, limit in (("question1", question1, MAX_QUESTION_CHARS),
                              ("question2", question2, MAX_QUESTION_CHARS),
                              ("labelled_by", labelled_by, MAX_LABELLER_CHARS)):
        if len(text) > limit:
            raise DataError(f"{name} has {len(text):,} characters; a label's limit is {limit:,}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise DataError(f"{name} is not valid text (it holds an unpaired surrogate)") from None
    key = pair_key(question1, question2)
    if key[0] == key[1]:
        raise DataError(f"a question is not paired with itself: {clip(question1)!r}")
    if isinstance(is_duplicate, str) or is_duplicate not in (0, 1):  # True and False too
        raise DataError(f"is_duplicate must be 0 or 1, got {clip(repr(is_duplicate))}")
    return (*key, question1, question2, int(is_duplicate), labelled_by)


def is_label_database(path: str | Path) -> bool:
    """Whether ``path`` is a regular file that starts as an SQLite database does (read without blocking)."""
    try:
        with open_regular_file(path, sys.maxsize) as (fd, _):
            return os.read(fd, len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except (OSError, ValueError):  # missing, or not a regular file
        return False


def read_labels_csv(source, max_bytes: int | None = None) -> pd.DataFrame:
    """A pairs CSV (a path, bytes or a file object) as ``load_pairs`` reads it, ``escape_cell``'s quotes taken off."""
    from core.data import load_pairs

    frame, _ = load_pairs(source, max_bytes=max_bytes)
    for column in ("question1", "question2"):
        frame[column] = frame[column].map(unescape_cell)
    return frame
