"""Labels that are never lost: ``LabelStore(path)``, an SQLite database of answers, one current label per pair.

WAL with ``synchronous=FULL`` and one ``BEGIN IMMEDIATE`` transaction per change, so a killed process leaves it
before or after an answer. ``answers`` holds every answer (an undo marks it ``undone_at``; nothing is deleted),
``labels`` each ``pair_key``'s latest answer not undone, ``imports`` the CSV files taken in once. Fields are bounded
(``label_rows.checked_answer`` and CHECKs); the path must be a regular file or absent.
"""
from __future__ import annotations

import os
import sqlite3
import stat
import threading
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from core.data.limits import DataError
from core.data.questions import pair_key
from core.saving.label_rows import (
    LABEL_COLUMNS,
    MAX_LABELLER_CHARS,
    MAX_QUESTION_CHARS,
    PAIR_COLUMNS,
    Label,
    MergeCounts,
    checked_answer,
    escape_cell,
    is_label_database,
    read_labels_csv,
    unescape_cell,
)

BUSY_TIMEOUT_S = 15.0  # how long a write waits for another writer before giving up
SCHEMA_VERSION = 1
LAB_TABLES = ("answers", "labels", "imports")  # what makes a database the lab's labels

_SCHEMA = f"""
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
_CURRENT = ("SELECT a.question1, a.question2, a.is_duplicate, a.labelled_by, a.labelled_at "
            "FROM labels AS l JOIN answers AS a ON a.id = l.answer_id")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class LabelStore:
    """The labels of one SQLite file, safe to share between threads and processes; nothing is created before the
    first change. ``legacy_csv``: a CSV labels file imported once, on first use (why a file could not be, in one
    line: ``import_problem``)."""

    def __init__(self, path: str | Path, legacy_csv: str | Path | None = None):
        self.path = Path(path)
        self.legacy_csv = Path(legacy_csv) if legacy_csv is not None else None
        self.import_problem: str | None = None
        self._mutex = threading.RLock()  # one transaction at a time on the connection, whatever the thread
        self._db: sqlite3.Connection | None = None
        self._opened: tuple | None = None  # (process, device, inode) the connection belongs to

    def _rows(self, sql: str, values=()) -> list[tuple]:
        """The rows of one read; none while the database does not exist."""
        with self._transaction(write=False) as db:
            return [] if db is None else db.execute(sql, tuple(values)).fetchall()

    def pairs(self) -> pd.DataFrame:
        """The current labels in the order they were given: ``LABEL_COLUMNS``, ``is_duplicate`` 0 or 1."""
        frame = pd.DataFrame(self._rows(f"{_CURRENT} ORDER BY l.answer_id"), columns=list(LABEL_COLUMNS))
        frame["is_duplicate"] = frame["is_duplicate"].astype("int64")
        return frame

    def keys(self) -> set[tuple[str, str]]:
        """The ``pair_key`` of every labelled pair."""
        return set(self._rows("SELECT key1, key2 FROM labels"))

    def __len__(self) -> int:
        return sum(count for (count,) in self._rows("SELECT count(*) FROM labels"))

    def __contains__(self, pair) -> bool:
        """Whether the pair (question1, question2) is labelled, in either order."""
        return self.label_of(*pair) is not None

    def label_of(self, question1: str, question2: str) -> Label | None:
        """The pair's current label (in either order), None when it has none."""
        key = pair_key(str(question1).strip(), str(question2).strip())
        return next((Label(*row) for row in self._rows(f"{_CURRENT} WHERE l.key1 = ? AND l.key2 = ?", key)), None)

    def recent(self, n: int, labelled_by: str | None = None) -> list[Label]:
        """The ``n`` labels given last (of ``labelled_by``, when given), the latest first."""
        where, values = ("WHERE a.labelled_by = ?", (labelled_by, n)) if labelled_by is not None else ("", (n,))
        return [Label(*row) for row in self._rows(f"{_CURRENT} {where} ORDER BY l.answer_id DESC LIMIT ?", values)]

    def history(self, question1: str, question2: str) -> pd.DataFrame:
        """Every answer the pair was given, the first first: ``LABEL_COLUMNS`` and ``undone_at`` (None if not)."""
        key = pair_key(str(question1).strip(), str(question2).strip())
        rows = self._rows(f"SELECT {', '.join(LABEL_COLUMNS)}, undone_at FROM answers WHERE key1 = ? AND key2 = ? "
                          "ORDER BY id", key)
        return pd.DataFrame(rows, columns=[*LABEL_COLUMNS, "undone_at"])

    def export_csv(self) -> bytes:
        """The current labels as a formula-safe pairs CSV (UTF-8, CRLF) that ``merge`` takes back."""
        frame = self.pairs()[list(PAIR_COLUMNS)].copy()
        for column in ("question1", "question2"):
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
        where, values = ("WHERE a.labelled_by = ?", (labelled_by,)) if labelled_by is not None else ("", ())
        with self._transaction(write=True) as db:
            found = db.execute(f"SELECT a.id, l.key1, l.key2, {', '.join('a.' + c for c in LABEL_COLUMNS)} FROM "
                               f"labels AS l JOIN answers AS a ON a.id = l.answer_id {where} "
                               "ORDER BY l.answer_id DESC LIMIT 1", values).fetchone()
            if found is None:
                return None
            answer_id, key = found[0], found[1:3]
            db.execute("UPDATE answers SET undone_at = ? WHERE id = ?", (_now(), answer_id))
            before = db.execute("SELECT max(id) FROM answers WHERE key1 = ? AND key2 = ? AND undone_at IS NULL "
                                "AND id < ?", (*key, answer_id)).fetchone()[0]
            if before is None:
                db.execute("DELETE FROM labels WHERE key1 = ? AND key2 = ?", key)
            else:
                db.execute("UPDATE labels SET answer_id = ? WHERE key1 = ? AND key2 = ?", (before, *key))
        return Label(*found[3:])

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

    def close(self) -> None:
        """Close the connection (a later call opens another)."""
        with self._mutex:
            if self._db is not None:
                self._db.close()
            self._db = self._opened = None

    def _regular_file(self) -> os.stat_result | None:
        """The database's ``lstat``, None when it does not exist; ``DataError`` when it is not a regular file."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise DataError(f"cannot open the labels {self.path.name}: {error.strerror or error}") from None
        if stat.S_ISLNK(info.st_mode):
            raise DataError(f"the labels {self.path.name} is a symbolic link; it must be a regular file")
        if not stat.S_ISREG(info.st_mode):
            raise DataError(f"the labels {self.path.name} is not a regular file (a pipe, socket, device or folder)")
        return info

    @contextmanager
    def _transaction(self, write: bool):
        """A connection inside one transaction (``BEGIN IMMEDIATE`` to write); None for a read of a database not
        made yet. Any SQLite failure is one ``DataError`` line."""
        with self._mutex:
            info = self._regular_file()
            if info is None and not write and not (self.legacy_csv and self.legacy_csv.exists()):
                yield None
                return
            try:
                db = self._connection(info)
            except sqlite3.Error as error:
                raise DataError(f"the labels {self.path.name} cannot be opened: {error}") from None
            try:
                db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                with db:  # commits at the end, rolls back on any exception (a failed commit included)
                    yield db
            except sqlite3.Error as error:
                raise DataError(f"the labels {self.path.name}: {error}") from None

    def _connection(self, info: os.stat_result | None) -> sqlite3.Connection:
        """The open connection, or a new one in a forked child or when the file was removed or replaced."""
        if self._db is not None and (info is None or self._opened != (os.getpid(), info.st_dev, info.st_ino)):
            if self._opened[0] == os.getpid():
                self._db.close()
            self._db = None
        if self._db is None:
            self._db = self._connect()
            opened = os.stat(self.path)
            self._opened = (os.getpid(), opened.st_dev, opened.st_ino)
        return self._db

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        uri = Path(os.path.abspath(self.path)).as_uri() + "?mode=rwc"
        db = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        try:  # a database of something else (or of a newer lab) is never changed
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise sqlite3.DatabaseError(f"it was written by a newer lab (schema {version}; this lab reads "
                                            f"{SCHEMA_VERSION})")
            if (tables or version) and not (version == SCHEMA_VERSION and set(LAB_TABLES) <= tables):
                raise sqlite3.DatabaseError("it is an SQLite database of something else, not the lab's labels; it was "
                                            "left as it is: name another file")
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":  # set once: it stays with the file
                db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = FULL")  # an answer acknowledged survives a power cut too
            db.execute("PRAGMA foreign_keys = ON")
            self._prepare(db)
        except BaseException:
            db.close()
            raise
        return db

    def _prepare(self, db: sqlite3.Connection) -> None:
        """The schema, on each new connection; then the legacy CSV, unless it was imported before."""
        db.executescript(_SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION};")
        if self.legacy_csv is None or not self.legacy_csv.exists():
            return
        db.execute("BEGIN IMMEDIATE")
        with db:
            if db.execute("SELECT 1 FROM imports WHERE source = ?", (self.legacy_csv.name,)).fetchone() is None:
                self._import_legacy(db)

    def _import_legacy(self, db: sqlite3.Connection) -> None:
        """The legacy CSV's labels, skipping (and saying) a row ``checked_answer`` refuses; a file that cannot be
        read is said and tried again next time."""
        name = self.legacy_csv.name  # messages name it, never by its server path
        try:
            frame = read_labels_csv(self.legacy_csv)
        except DataError as error:
            self.import_problem = (f"the earlier labels file {name} was not imported: "
                                   f"{str(error).replace(str(self.legacy_csv), name)}")
            return
        answers, refused = [], []
        for row, values in enumerate(frame.itertuples(index=False), 1):
            try:
                answers.append(checked_answer(*values, ""))
            except DataError as error:
                refused.append(f"row {row:,}: {error}")
        counts = _merge(db, answers)
        db.execute("INSERT INTO imports VALUES (?, ?, ?)", (name, counts.added + counts.changed, _now()))
        if refused:
            self.import_problem = (f"{len(refused):,} rows of the earlier labels file {name} were not imported "
                                   f"(the first, {refused[0]}); the file is kept as it was")


def _record(db: sqlite3.Connection, answer: tuple, when: str) -> None:
    """One answer into the history and, as the pair's label, into ``labels``."""
    cursor = db.execute("INSERT INTO answers (key1, key2, question1, question2, is_duplicate, labelled_by, "
                        "labelled_at) VALUES (?, ?, ?, ?, ?, ?, ?)", (*answer, when))
    db.execute("INSERT INTO labels (key1, key2, answer_id) VALUES (?, ?, ?) "
               "ON CONFLICT (key1, key2) DO UPDATE SET answer_id = excluded.answer_id",
               (*answer[:2], cursor.lastrowid))


def _merge(db: sqlite3.Connection, answers: list[tuple]) -> MergeCounts:
    held = {(key1, key2): label for key1, key2, label in db.execute(
        "SELECT l.key1, l.key2, a.is_duplicate FROM labels AS l JOIN answers AS a ON a.id = l.answer_id")}
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


__all__ = ["LABEL_COLUMNS", "MAX_LABELLER_CHARS", "MAX_QUESTION_CHARS", "PAIR_COLUMNS", "Label", "LabelStore",
           "MergeCounts", "checked_answer", "escape_cell", "is_label_database", "read_labels_csv", "unescape_cell"]
