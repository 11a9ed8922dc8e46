"""Workspaces: everything one person (or project) makes in the app, kept apart from everyone else's.

A workspace is a folder named by an unguessable id (the app URL's ``ws`` parameter: 128 random bits, never listed
or derived from what a user typed; whoever has it can open the workspace): its models and label databases, its
active upload and a ``state.json`` of choices. Nothing here knows about Streamlit.
"""
from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from core.saving.files import read_json_file, read_regular_file
from core.saving.user_files import write_file_atomically

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{16,64}")  # token_urlsafe's alphabet; 16+ characters so it cannot be guessed
STATE_MAX_BYTES = 1_000_000  # state.json holds choices, not data: anything larger was not written by the lab
UPLOAD_SUFFIXES = (".csv", ".tsv", ".txt", ".gz")  # what the Data page accepts; a stored upload keeps its suffix
STORED_UPLOAD = re.compile(r"[0-9a-f]{32}(?:" + "|".join(map(re.escape, UPLOAD_SUFFIXES)) + ")")  # store_upload's
MODELS, UPLOADS, STATE = "models", "uploads", "state.json"
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

    def load_state(self) -> dict:
        """The saved choices, or {} for a new workspace or a state file the lab cannot read (choices are
        conveniences, never data: the file is rewritten at the next change)."""
        try:
            state = read_json_file(self.folder / STATE, STATE_MAX_BYTES, folder=self.folder)
        except (OSError, ValueError):  # missing, not a regular file, too large, not JSON
            return {}
        return state if isinstance(state, dict) else {}

    def save_state(self, state: dict) -> None:
        """Replace state.json whole (``write_file_atomically``); ``state`` must be JSON."""
        write_file_atomically(self.folder / STATE, json.dumps(state, allow_nan=False, sort_keys=True).encode(),
                              mode=PRIVATE_FILE)

    def store_upload(self, name: str, data: bytes) -> str:
        """Keep an uploaded file's bytes as the workspace's one upload, removing earlier ones; returns its stored
        name (content hash + the original suffix)."""
        suffix = Path(name).suffix.lower()
        stored = hashlib.sha256(data).hexdigest()[:32] + (suffix if suffix in UPLOAD_SUFFIXES else ".csv")
        self.uploads.mkdir(exist_ok=True, mode=PRIVATE_FOLDER)
        if not (self.uploads / stored).is_file():  # anything else there is refused by the write, in one line
            write_file_atomically(self.uploads / stored, data, mode=PRIVATE_FILE)
        for old in self.uploads.iterdir():
            if old.name != stored and STORED_UPLOAD.fullmatch(old.name) and not old.is_dir():
                old.unlink(missing_ok=True)
        return stored

    def read_upload(self, stored: str, max_bytes: int) -> bytes:
        """The bytes of an upload ``store_upload`` kept; WorkspaceError when it is gone, not ours or too large."""
        if not STORED_UPLOAD.fullmatch(stored):
            raise WorkspaceError(f"{stored!r} is not an upload this lab stored")
        try:
            return read_regular_file(self.uploads / stored, max_bytes, folder=self.uploads)
        except (OSError, ValueError) as error:
            raise WorkspaceError(f"the stored upload cannot be read ({error})") from error


def open_workspace(root: str | Path, workspace_id: str) -> Workspace:
    """The workspace ``workspace_id`` under ``root``, created (private to the server's user) when new."""
    if not is_workspace_id(workspace_id):
        raise WorkspaceError("a workspace id is 16 to 64 letters, digits, '-' or '_'")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)  # its listing names every workspace: the keys
    folder = root / workspace_id
    folder.mkdir(exist_ok=True, mode=PRIVATE_FOLDER)
    (folder / MODELS).mkdir(exist_ok=True, mode=PRIVATE_FOLDER)
    return Workspace(folder)
