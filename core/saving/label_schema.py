"""The label database's schema: what makes a database the lab's labels, and each version's steps.

Version 1: ``answers`` (every answer), ``labels`` (each pair's current answer), ``imports`` (CSV files taken in).
Version 2: each label carries its answer's ``is_duplicate`` and its pair's ``pair_bucket``, indexed, so counts by
share and by class are one index scan; and answers are indexed by labeller, for one labeller's last answer.
The first write brings a database to ``SCHEMA_VERSION`` (``made_current``); a read only checks it.
"""
from __future__ import annotations

import sqlite3

from core.saving.label_rows import MAX_LABELLER_CHARS, MAX_QUESTION_CHARS

SCHEMA_VERSION = 2
LAB_TABLES = ("answers", "labels", "imports")  # what makes a database the lab's labels

_SCHEMA_1 = f"""
CREATE TABLE IF NOT EXISTS answers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key1 TEXT NOT NULL,
    key2 TEXT NOT NULL,
    question1 TEXT NOT NULL CHECK (length(question1) BETWEEN 1 AND {MAX_QUESTION_CHARS}),
    question2 TEXT NOT NULL CHECK (length(question2) BETWEEN 1 AND {MAX_QUESTION_CHARS}),
    is_duplicate INTEGER NOT NULL CHECK (is_duplicate IN (0, 1)),
    labelled_by TEXT NOT NULL CHECK (length(labelled_by) <= {MAX_LABELLER_CHARS}),
    labelled_at TEXT NOT NULL,
    undone_at TEXT
);
CREATE INDEX IF NOT EXISTS answers_of_pair ON answers (key1, key2, id);
CREATE TABLE IF NOT EXISTS labels (
    key1 TEXT NOT NULL,
    key2 TEXT NOT NULL,
    answer_id INTEGER NOT NULL UNIQUE REFERENCES answers (id),
    PRIMARY KEY (key1, key2)
);
CREATE TABLE IF NOT EXISTS imports (
    source TEXT PRIMARY KEY,
    labels INTEGER NOT NULL,
    imported_at TEXT NOT NULL
);
"""
# Schema 2: each label carries its answer's label and its pair's bucket (held-out shares are bucket ranges).
_SCHEMA_2 = """
ALTER TABLE labels ADD COLUMN is_duplicate INTEGER NOT NULL DEFAULT 0;
ALTER TABLE labels ADD COLUMN bucket INTEGER NOT NULL DEFAULT 0;
UPDATE labels SET is_duplicate = (SELECT is_duplicate FROM answers WHERE id = answer_id),
                  bucket = pair_bucket(key1, key2);
CREATE INDEX labels_by_share ON labels (bucket, is_duplicate);
CREATE INDEX answers_by_labeller ON answers (labelled_by, id);
PRAGMA user_version = 2;
"""


def checked_schema(db: sqlite3.Connection) -> int:
    """The lab's schema version of an open database (0: empty, the lab's to make), read without writing;
    ``sqlite3.DatabaseError`` for a database of something else or of a newer lab."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(f"it was written by a newer lab (schema {version}; this lab reads "
                                    f"{SCHEMA_VERSION})")
    if (tables or version) and not (version >= 1 and set(LAB_TABLES) <= tables):
        raise sqlite3.DatabaseError("it is an SQLite database of something else, not the lab's labels; it was "
                                    "left as it is: name another file")
    return version


def made_current(db: sqlite3.Connection) -> None:
    """Bring the database to ``SCHEMA_VERSION``, inside the caller's write transaction (``pair_bucket`` registered
    on the connection); a version made meanwhile by another process is not made again."""
    version = checked_schema(db)
    for since, script in ((1, _SCHEMA_1 + "PRAGMA user_version = 1"), (2, _SCHEMA_2)):
        if version < since:
            for statement in filter(str.strip, script.split(";")):
                db.execute(statement)


def keys_join(n: int) -> str:
    """``FROM`` ``n`` pair keys (2n parameters) joined to their labels: one primary-key look-up each (a row-value
    ``IN`` would scan the table)."""
    return (f"FROM (VALUES {', '.join(['(?, ?)'] * n)}) AS v "
            "JOIN labels AS l ON l.key1 = v.column1 AND l.key2 = v.column2")
