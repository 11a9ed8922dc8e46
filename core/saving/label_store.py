"""Labels that are never lost: ``LabelStore(path)``, an SQLite database of answers, one current label per pair.

WAL with ``synchronous=FULL`` and one ``BEGIN IMMEDIATE`` transaction per change, so a killed process leaves it
before or after an answer. ``answers`` holds every answer (an undo marks it ``undone_at``; nothing is deleted),
``labels`` each pair's latest answer not undone, with its label and ``pair_bucket``. Reads never write
(``files.connect_read_only``); the first write makes or upgrades the schema. Labels travel as a formula-safe pairs
CSV (``export_csv``, ``read_labels_csv``); ``imports`` lists the labels CSV of the lab before this database, taken
in once (``import_legacy``).
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
from collections import Counter
from collections.abc import Iterable
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from core.data.limits import DataError, clip
from core.data.questions import pair_key
from core.saving.files import connect_read_only, open_regular_file, write_ahead_logged
from core.saving.safe_csv import is_formula

LABEL_COLUMNS = ("question1", "question2", "is_duplicate", "labelled_by", "labelled_at")
PAIR_COLUMNS = LABEL_COLUMNS[:3]  # what a labels CSV holds: the pairs file the Data and Train pages read
MAX_QUESTION_CHARS = 100_000  # a long forum post
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
    why it cannot be stored: an empty or over-long question, a self-pair, a label not 0/1."""
    question1, question2, labelled_by = str(question1).strip(), str(question2).strip(), str(labelled_by)
    if not question1 or not question2:
        raise DataError("a labelled pair needs two non-empty questions")
    for name, text, limit in (("question1", question1, MAX_QUESTION_CHARS),
                              ("question2", question2, MAX_QUESTION_CHARS),
                              ("labelled_by", labelled_by, MAX_LABELLER_CHARS)):
        if len(text) > limit:
            raise DataError(f"{name} has {len(text):,} characters; a label's limit is {limit:,}")
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
    # one statement, so one snapshot: another connection may make the schema between two reads
    rows = db.execute("SELECT v.user_version, m.name FROM pragma_user_version AS v "
                      "LEFT JOIN sqlite_master AS m ON m.type = 'table'").fetchall()
    version, tables = rows[0][0], {name for _, name in rows if name is not None}
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


def _of_keys(db: sqlite3.Connection, columns: str, keys: list[tuple]) -> list[tuple]:
    """``columns`` (of ``l``, the labels, and ``a``, their answers) of the labels of ``keys``: pair keys, or 1-tuples
    of a first key. ``KEYS_PER_QUERY`` keys a query, one primary-key look-up each (a row-value ``IN`` would scan)."""
    rows = []
    for start in range(0, len(keys), KEYS_PER_QUERY):
        chunk = keys[start:start + KEYS_PER_QUERY]
        values = ", ".join([f"({', '.join('?' * len(chunk[0]))})"] * len(chunk))
        on = " AND ".join(f"l.key{i} = v.column{i}" for i in range(1, len(chunk[0]) + 1))
        rows += db.execute(f"SELECT {columns} FROM (VALUES {values}) AS v JOIN labels AS l ON {on} "
                           "JOIN answers AS a ON a.id = l.answer_id", [part for key in chunk for part in key])
    return rows


BUSY_TIMEOUT_S = 15.0  # how long a write waits for another writer before giving up
READ_BUSY_TIMEOUT_S = 1.0  # a WAL reader waits only on a crash recovery or a checkpoint's restart, never a writer
KEYS_PER_QUERY = 400  # pair keys asked about in one query (two parameters each)
_CURRENT = ("SELECT a.question1, a.question2, a.is_duplicate, a.labelled_by, a.labelled_at "
            "FROM labels AS l JOIN answers AS a ON a.id = l.answer_id")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class LabelStore:
    """The labels of one SQLite file, safe to share between threads and processes; nothing is created before the
    first change. ``legacy_csv``: the labels CSV of the lab before this database, taken in once by ``import_legacy``
    (why it could not be, in one line: ``import_problem``)."""

    def __init__(self, path: str | Path, legacy_csv: str | Path | None = None):
        self.path = Path(path)
        self.legacy_csv = Path(legacy_csv) if legacy_csv is not None else None
        self.import_problem: str | None = None

    def _rows(self, sql: str, values=()) -> list[tuple]:
        """The rows of one read; none while the database does not exist."""
        with self._transaction(write=False) as db:
            return [] if db is None else db.execute(sql, tuple(values)).fetchall()

    def pairs(self) -> pd.DataFrame:
        """The current labels in the order they were given: ``LABEL_COLUMNS``, ``is_duplicate`` 0 or 1."""
        frame = pd.DataFrame(self._rows(f"{_CURRENT} ORDER BY l.answer_id"), columns=list(LABEL_COLUMNS))
        return frame.astype({"is_duplicate": "int64"})

    def labels_between(self, texts: Iterable[str]) -> pd.DataFrame:
        """The labels of pairs whose two questions are both among ``texts`` (normalised as ``pair_key``'s): the
        pair key as question1 and question2, and is_duplicate; found by first key, without reading the others."""
        within = set(texts)
        with self._transaction(write=False) as db:
            found = [] if db is None else _of_keys(db, "l.key1, l.key2, a.is_duplicate", [(t,) for t in sorted(within)])
        rows = [row for row in found if row[1] in within]
        return pd.DataFrame(rows, columns=list(PAIR_COLUMNS)).astype({"is_duplicate": "int64"})

    def labelled_among(self, keys: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """The pair keys of ``keys`` that are labelled."""
        with self._transaction(write=False) as db:
            return set() if db is None else set(_of_keys(db, "l.key1, l.key2", [tuple(key) for key in keys]))

    def bucket_counts(self) -> Counter:
        """How many labels each (``pair_bucket``, ``is_duplicate``) has: one indexed query."""
        with self._transaction(write=False) as db:
            if db is None:
                return Counter()
            if db.execute("PRAGMA user_version").fetchone()[0] >= 2:
                return Counter({(bucket, label): n for bucket, label, n in db.execute(
                    "SELECT bucket, is_duplicate, count(*) FROM labels GROUP BY bucket, is_duplicate")})
            counts = Counter()  # a database no write of this lab has upgraded yet: each key hashed here
            for key1, key2, label in db.execute("SELECT l.key1, l.key2, a.is_duplicate FROM labels AS l "
                                                "JOIN answers AS a ON a.id = l.answer_id"):
                counts[pair_bucket(key1, key2), label] += 1
            return counts

    def __len__(self) -> int:
        return sum(count for (count,) in self._rows("SELECT count(*) FROM labels"))

    def label_of(self, question1: str, question2: str) -> Label | None:
        """The pair's current label (in either order), None when it has none."""
        key = pair_key(str(question1).strip(), str(question2).strip())
        return next((Label(*row) for row in self._rows(f"{_CURRENT} WHERE l.key1 = ? AND l.key2 = ?", key)), None)

    def recent(self, n: int, labelled_by: str | None = None) -> list[Label]:
        """The ``n`` labels given last (of ``labelled_by``, when given), the latest first."""
        sql, values = _latest(labelled_by)
        return [Label(*row[3:]) for row in self._rows(f"{sql} LIMIT ?", (*values, n))]

    def export_csv(self) -> bytes:
        """The current labels as a formula-safe CSV (UTF-8, CRLF) that ``merge`` takes back: the pairs file's columns,
        then who gave each label and when (``LABEL_COLUMNS``)."""
        frame = self.pairs()
        for column in ("question1", "question2", "labelled_by"):
            frame[column] = frame[column].map(escape_cell)
        return frame.to_csv(index=False, lineterminator="\r\n").encode("utf-8")

    def add(self, question1: str, question2: str, is_duplicate, labelled_by: str = "") -> Label | None:
        """Record an answer, durably, as the pair's label; returns the label it replaced, if any. ``DataError``
        (nothing written) for an answer ``checked_answer`` refuses or a database that cannot be used."""
        answer = checked_answer(question1, question2, is_duplicate, labelled_by)
        with self._transaction(write=True) as db:
            previous = db.execute(f"{_CURRENT} WHERE l.key1 = ? AND l.key2 = ?", answer[:2]).fetchone()
            _record(db, answer, _now())
        return None if previous is None else Label(*previous)

    def undo_last(self, labelled_by: str | None = None) -> Label | None:
        """Take back the last answer that is a pair's label (of ``labelled_by``, when given), the pair's answer
        before it its label again; returns the answer taken back, if any."""
        sql, values = _latest(labelled_by)
        with self._transaction(write=True) as db:
            found = db.execute(f"{sql} LIMIT 1", values).fetchone()
            if found is None:
                return None
            answer_id, key = found[0], found[1:3]
            db.execute("UPDATE answers SET undone_at = ? WHERE id = ?", (_now(), answer_id))
            before = db.execute("SELECT max(id) FROM answers WHERE key1 = ? AND key2 = ? AND undone_at IS NULL "
                                "AND id < ?", (*key, answer_id)).fetchone()[0]
            if before is None:
                db.execute("DELETE FROM labels WHERE key1 = ? AND key2 = ?", key)
            else:
                db.execute("UPDATE labels SET answer_id = ?, is_duplicate = (SELECT is_duplicate FROM answers "
                           "WHERE id = ?) WHERE key1 = ? AND key2 = ?", (before, before, *key))
        return Label(*found[3:])

    def import_legacy(self) -> None:
        """Take in ``legacy_csv`` when it exists and was not taken in (a write: the database is made), rows
        ``checked_answer`` refuses skipped and said; the file itself is never changed. A file that cannot be read is
        said in ``import_problem`` and tried again next time."""
        if self.legacy_csv is None or not self.legacy_csv.exists():
            return
        name, refused = self.legacy_csv.name, []  # messages name it, never by its server path
        try:
            with self._transaction(write=True) as db:
                if db.execute("SELECT 1 FROM imports WHERE source = ?", (name,)).fetchone() is not None:
                    return
                answers = []
                for row, values in enumerate(read_labels_csv(self.legacy_csv).itertuples(index=False), 1):
                    try:
                        answers.append(checked_answer(*values, ""))
                    except DataError as error:
                        refused.append(f"row {row:,}: {error}")
                counts = _merge(db, answers)
                db.execute("INSERT INTO imports VALUES (?, ?, ?)", (name, counts.added + counts.changed, _now()))
        except DataError as error:
            self.import_problem = (f"the earlier labels file {name} was not imported: "
                                   f"{str(error).replace(str(self.legacy_csv), name)}")
            return
        if refused:
            self.import_problem = (f"{len(refused):,} rows of the earlier labels file {name} were not imported "
                                   f"(the first, {refused[0]}); the file is kept as it was")

    def merge(self, pairs: pd.DataFrame, labelled_by: str = "") -> MergeCounts:
        """Take in a pairs frame (``read_labels_csv``'s) as answers given now, a later row winning; a row that says
        what the store holds is no new answer. All rows or none: a refused row is one ``DataError`` naming it."""
        answers = []
        for row, (question1, question2, label) in enumerate(pairs[list(PAIR_COLUMNS)].itertuples(index=False), 1):
            try:
                answers.append(checked_answer(question1, question2, label, labelled_by))
            except DataError as error:
                raise DataError(f"row {row:,}: {error}") from None
        with self._transaction(write=True) as db:
            return _merge(db, answers)

    @contextmanager
    def _transaction(self, write: bool):
        """A new connection inside one transaction (``BEGIN IMMEDIATE`` to write, read-only to read), closed after
        it; None for a read of a database not made yet. Any SQLite failure is one ``DataError`` line (a path that is
        no regular file is the lab's own folder's, or refused before by ``is_label_database``)."""
        try:
            db = self._connect_to_write() if write else self._connect_to_read() if self.path.exists() else None
        except sqlite3.Error as error:
            raise DataError(f"the labels {self.path.name} cannot be opened: {error}") from None
        if db is None:
            yield None
            return
        try:
            db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            with db:  # commits at the end, rolls back on any exception (a failed commit included)
                yield db
        except sqlite3.Error as error:
            raise DataError(f"the labels {self.path.name}: {error}") from None
        finally:
            db.close()

    def _connect_to_read(self) -> sqlite3.Connection | None:
        """A connection that never writes (``connect_read_only``); None for an empty database."""
        db = connect_read_only(self.path, READ_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        try:
            if checked_schema(db):
                return db
        except BaseException:
            db.close()
            raise
        db.close()
        return None

    def _connect_to_write(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        uri = Path(os.path.abspath(self.path)).as_uri() + "?mode=rwc"
        db = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        try:  # a database of something else (or of a newer lab) is never changed
            version = checked_schema(db)
            write_ahead_logged(db)
            db.execute("PRAGMA synchronous = FULL")  # an answer acknowledged survives a power cut too
            db.execute("PRAGMA foreign_keys = ON")
            db.create_function("pair_bucket", 2, pair_bucket, deterministic=True)
            if version < SCHEMA_VERSION:  # the schema made or brought up to date, in one transaction
                db.execute("BEGIN IMMEDIATE")
                with db:
                    made_current(db)
        except BaseException:
            db.close()
            raise
        return db


def _latest(labelled_by: str | None) -> tuple[str, tuple]:
    """The labels (answer id, key1, key2, ``LABEL_COLUMNS``), the latest first, of ``labelled_by`` when given:
    by the labeller's index, so one labeller's last answer is found without reading everyone's."""
    columns = f"a.id, l.key1, l.key2, {', '.join('a.' + c for c in LABEL_COLUMNS)}"
    if labelled_by is None:
        return (f"SELECT {columns} FROM labels AS l JOIN answers AS a ON a.id = l.answer_id "
                "ORDER BY l.answer_id DESC", ())
    return (f"SELECT {columns} FROM answers AS a JOIN labels AS l ON l.answer_id = a.id WHERE a.labelled_by = ? "
            "ORDER BY a.id DESC", (labelled_by,))


def _record(db: sqlite3.Connection, answer: tuple, when: str) -> None:
    """One answer into the history and, as the pair's label, into ``labels``."""
    cursor = db.execute("INSERT INTO answers (key1, key2, question1, question2, is_duplicate, labelled_by, "
                        "labelled_at) VALUES (?, ?, ?, ?, ?, ?, ?)", (*answer, when))
    db.execute("INSERT INTO labels (key1, key2, answer_id, is_duplicate, bucket) VALUES (?, ?, ?, ?, ?) "
               "ON CONFLICT (key1, key2) DO UPDATE SET answer_id = excluded.answer_id, "
               "is_duplicate = excluded.is_duplicate",
               (*answer[:2], cursor.lastrowid, answer[4], pair_bucket(*answer[:2])))


def _merge(db: sqlite3.Connection, answers: list[tuple]) -> MergeCounts:
    held = {(key1, key2): label for key1, key2, label in  # the labels of the pairs the file names, not of all
            _of_keys(db, "l.key1, l.key2, l.is_duplicate", [answer[:2] for answer in answers])}
    added = changed = unchanged = 0
    when = _now()
    for answer in answers:
        before = held.get(answer[:2])
        if before == answer[4]:
            unchanged += 1
            continue
        added, changed = (added + 1, changed) if before is None else (added, changed + 1)
        held[answer[:2]] = answer[4]
        _record(db, answer, when)
    return MergeCounts(added, changed, unchanged)

