"""Workspaces: everything one person (or project) makes in the app, kept apart from everyone else's.

A workspace is a folder named by an unguessable id (the URL's ``ws``: 128 random bits; whoever has it can open the
workspace): its models and label databases, its uploads, and its choices in ``workspace.sqlite`` (a ``state`` table
of JSON values by key, WAL; each change one transaction over the changed keys only, reads read-only). The folder is
made by the first thing kept, so a visit that keeps nothing leaves nothing.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import sqlite3
import stat
import time
from contextlib import closing, suppress
from dataclasses import dataclass
from pathlib import Path

from core.saving.files import connect_read_only, read_regular_file, write_ahead_logged
from core.saving.user_files import write_file_atomically

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{16,64}")  # token_urlsafe's alphabet; 16+ characters so it cannot be guessed
UPLOAD_SUFFIXES = (".csv", ".tsv", ".txt", ".gz")  # what the Data page accepts; a stored upload keeps its suffix
STORED_UPLOAD = re.compile(r"[0-9a-f]{32}(?:" + "|".join(map(re.escape, UPLOAD_SUFFIXES)) + ")")  # store_upload's
MODELS, UPLOADS, DATABASE = "models", "uploads", "workspace.sqlite"
HELD_OUT_KINDS = ("val", "test")  # the validation and test files kept beside the training upload
READ_TIMEOUT_S = 0.5  # a reader waits at most this long (WAL readers wait only on a checkpoint or a recovery)
WRITE_TIMEOUT_S = 10.0  # a writer waits this long for another tab's transaction before giving up on its change
PRIVATE_FOLDER, PRIVATE_FILE = 0o700, 0o600  # what the lab creates here: for the server's user only


class WorkspaceError(ValueError):
    """A workspace id or stored upload the lab will not use, said in one line."""


def new_workspace_id() -> str:
    """A fresh id: 128 random bits, URL-safe (22 characters)."""
    return secrets.token_urlsafe(16)


def is_workspace_id(text: object) -> bool:
    return isinstance(text, str) and ID_PATTERN.fullmatch(text) is not None


@dataclass(frozen=True)
class Workspace:
    folder: Path  # <workspaces root>/<id>

    @property
    def id(self) -> str:
        return self.folder.name

    @property
    def models(self) -> Path:
        """The workspace's models folder (``core.saving.list_runs`` reads it; its labels live in it too)."""
        return self.folder / MODELS

    @property
    def uploads(self) -> Path:
        return self.folder / UPLOADS

    @property
    def database(self) -> Path:
        return self.folder / DATABASE

    def exists(self) -> bool:
        """Whether anything was ever kept here (the folder is made by the first keep)."""
        return self.folder.is_dir()

    def create(self) -> None:
        """Make the folder and its models folder (private to the server's user) when they are not there yet."""
        self.folder.mkdir(exist_ok=True, mode=PRIVATE_FOLDER)
        self.models.mkdir(exist_ok=True, mode=PRIVATE_FOLDER)

    def mark_used(self) -> None:
        """Note a visit in the folder's time (the last use ``list_workspaces`` reports), when the folder exists."""
        with suppress(OSError):  # not made yet, or not ours to touch: the visit is not noted
            os.utime(self.folder)

    def load_state(self) -> dict:
        """The kept choices (key -> value), or {} for a new workspace or a database the lab cannot read (choices are
        conveniences, never data)."""
        if not self.database.is_file():
            return {}
        try:
            with closing(connect_read_only(self.database, READ_TIMEOUT_S)) as connection:
                rows = connection.execute("SELECT key, value FROM state").fetchall()
        except sqlite3.Error:  # damaged, not a database, locked past the timeout, or the table not made yet
            return {}
        return {key: json.loads(value) for key, value in rows}  # each written by save_state's json.dumps

    def save_state(self, changed: dict) -> None:
        """Keep the ``changed`` keys (JSON values) in one transaction that writes only them; the first save makes the
        folder and the database (private: 0600, as SQLite's WAL files then are)."""
        rows = [(str(key), json.dumps(value, allow_nan=False, sort_keys=True)) for key, value in changed.items()]
        self.create()
        with suppress(FileExistsError):
            os.close(os.open(self.database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
        with closing(sqlite3.connect(self.database, timeout=WRITE_TIMEOUT_S, isolation_level=None)) as connection:
            write_ahead_logged(connection)
            connection.execute("BEGIN IMMEDIATE")
            with connection:  # commits at the end, rolls back on any exception
                if connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'state'").fetchone() is None:
                    connection.execute("CREATE TABLE state (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                connection.executemany("INSERT INTO state VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
                                       "value = excluded.value", rows)

    def store_upload(self, name: str, data: bytes, kind: str = "train") -> str:
        """Keep an uploaded file's bytes as the workspace's one upload of its ``kind`` (the training file, or a
        ``HELD_OUT_KINDS`` file), removing earlier ones of that kind; returns its stored name (content hash + the
        original suffix)."""
        suffix = Path(name).suffix.lower()
        stored = hashlib.sha256(data).hexdigest()[:32] + (suffix if suffix in UPLOAD_SUFFIXES else ".csv")
        self.create()
        self.uploads.mkdir(exist_ok=True, mode=PRIVATE_FOLDER)
        folder = self._uploads_of(kind)
        folder.mkdir(exist_ok=True, mode=PRIVATE_FOLDER)
        if not (folder / stored).is_file():  # anything else there is refused by the write, in one line
            write_file_atomically(folder / stored, data, mode=PRIVATE_FILE)
        self.remove_uploads(kind, keep=stored)
        return stored

    def remove_uploads(self, kind: str = "train", keep: str | None = None) -> None:
        """Remove the uploads of ``kind`` the lab stored (all but ``keep``); nothing else in the folder."""
        folder = self._uploads_of(kind)
        if not folder.is_dir():
            return
        for old in folder.iterdir():
            if old.name != keep and STORED_UPLOAD.fullmatch(old.name) and not old.is_dir():
                old.unlink(missing_ok=True)

    def read_upload(self, stored: str, max_bytes: int, kind: str = "train") -> bytes:
        """The bytes of an upload ``store_upload`` kept; WorkspaceError when it is gone, not ours or too large."""
        if not STORED_UPLOAD.fullmatch(stored):
            raise WorkspaceError(f"{stored!r} is not an upload this lab stored")
        folder = self._uploads_of(kind)
        try:
            return read_regular_file(folder / stored, max_bytes, folder=folder)
        except (OSError, ValueError) as error:
            raise WorkspaceError(f"the stored upload cannot be read ({error})") from error

    def _uploads_of(self, kind: str) -> Path:
        """uploads/ for the training file, uploads/<kind>/ for a validation or test file (``HELD_OUT_KINDS``)."""
        return self.uploads if kind == "train" else self.uploads / kind


def open_workspace(root: str | Path, workspace_id: str) -> Workspace:
    """The workspace ``workspace_id`` under ``root``; nothing is made for it until it keeps something
    (``Workspace.create``). The root is made private to the server's user: its listing names every workspace."""
    if not is_workspace_id(workspace_id):
        raise WorkspaceError("a workspace id is 16 to 64 letters, digits, '-' or '_'")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
    return Workspace(root / workspace_id)


@dataclass(frozen=True)
class WorkspaceUsage:
    """One workspace as an operator sees it: its id, its files' bytes and its last use (epoch seconds: the newest
    time of its folder, noted by every visit, or of anything in it)."""
    id: str
    bytes: int
    last_used: float


def list_workspaces(root: str | Path) -> list[WorkspaceUsage]:
    """The workspaces under ``root`` (folders named like a workspace id; links and anything else are not
    workspaces), least recently used first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for folder in root.iterdir():
        if not is_workspace_id(folder.name) or folder.is_symlink() or not folder.is_dir():
            continue
        size, newest = 0, folder.lstat().st_mtime
        for base, folders, files in os.walk(folder):  # links are not followed: only the workspace's own files
            for name in folders + files:
                try:
                    info = os.lstat(os.path.join(base, name))
                except FileNotFoundError:  # removed meanwhile by the app
                    continue
                newest = max(newest, info.st_mtime)
                size += info.st_size if stat.S_ISREG(info.st_mode) else 0
        found.append(WorkspaceUsage(folder.name, size, newest))
    return sorted(found, key=lambda usage: usage.last_used)


def remove_idle_workspaces(root: str | Path, days: float, now: float | None = None) -> list[WorkspaceUsage]:
    """Remove the workspaces under ``root`` unused for more than ``days`` days; returns those removed."""
    cutoff = (time.time() if now is None else now) - days * 86_400
    removed = [usage for usage in list_workspaces(root) if usage.last_used < cutoff]
    for usage in removed:
        shutil.rmtree(Path(root) / usage.id)
    return removed
