"""Which files of a folder the lab wrote, so that a folder is replaced only when it holds nothing else.

Every folder ``write_folder_atomically`` writes records what its writer made (``RECORD_FILE``; before records, the
format's files, ``owned_before``). Everything else is the user's: a folder holding any of it is never replaced
(``refuse_foreign_files``); the user moves those files and runs again.
"""
from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from core.saving.files import CONFIG_MAX_BYTES, ModelLoadError, read_json_file

RECORD_FILE = ".siamese_lab_files.json"
RECORD_FORMAT = "siamese-lab-files"
RECORD_VERSION = 1
RECORD_MAX_PATHS = 10_000  # a lab folder holds a handful; more is not a record we wrote
SHOWN_NAMES = 3  # user entries named in one refusal; the rest are counted


class ForeignFilesError(OSError):
    """A folder to replace holds entries the lab did not write: it is left as it is, and the user moves them
    (an ``OSError``, as any failed write, so a cache that cannot be written is simply not reused)."""

    def __init__(self, folder: Path, entries: list[str]):
        shown = ", ".join(name[:200] for name in entries[:SHOWN_NAMES])
        more = f" and {len(entries) - SHOWN_NAMES} more" if len(entries) > SHOWN_NAMES else ""
        self.problem = (f"holds {shown}{more}, which Siamese Lab did not write; an overwrite replaces only the "
                        "lab's own files: move them out of the folder and run again")
        super().__init__(f"{folder}: {self.problem}")
        self.folder, self.entries = Path(folder), entries


@dataclass(frozen=True)
class Owned:
    """The relative paths of the files and folders the lab wrote in one folder."""
    files: frozenset[str]
    folders: frozenset[str]


def write_record(folder: Path) -> None:
    """Record everything now under ``folder`` (what the lab just wrote) in its ``RECORD_FILE``."""
    files, folders = {RECORD_FILE}, set()
    for here, dirs, names in os.walk(folder):
        relative = PurePosixPath(Path(here).relative_to(folder).as_posix())
        folders.update(str(relative / name) for name in dirs)
        files.update(str(relative / name) for name in names)
    record = {"format": RECORD_FORMAT, "version": RECORD_VERSION, "files": sorted(files), "folders": sorted(folders)}
    (folder / RECORD_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")


def _is_clean(path) -> bool:
    """Whether ``path`` is a relative path inside a folder (no leading ``/``, no empty, ``.`` or ``..`` part)."""
    return isinstance(path, str) and "\0" not in path and all(part not in ("", ".", "..") for part in path.split("/"))


def owned_by(folder: Path, owned_before: Iterable[str] = ()) -> Owned:
    """What the lab owns in ``folder``: its record, or ``owned_before`` when it has no usable record."""
    record = None
    with suppress(OSError, ModelLoadError):
        if stat.S_ISREG(os.lstat(folder / RECORD_FILE).st_mode):  # a link of that name is not our record
            record = read_json_file(folder / RECORD_FILE, CONFIG_MAX_BYTES, folder=folder)
    usable = (isinstance(record, dict) and record.get("format") == RECORD_FORMAT
              and isinstance(record.get("files"), list) and isinstance(record.get("folders"), list)
              and len(record["files"]) + len(record["folders"]) <= RECORD_MAX_PATHS)
    files = {path for path in (record["files"] if usable else owned_before) if _is_clean(path)} | {RECORD_FILE}
    folders = {path for path in record["folders"] if _is_clean(path)} if usable else set()
    for path in files:  # a file's folders are the lab's too
        folders.update(str(parent) for parent in PurePosixPath(path).parents[:-1])
    return Owned(frozenset(files), frozenset(folders))


def user_entries(folder: Path, owned: Owned) -> list[str]:
    """The entries of ``folder`` the lab does not own, as relative paths: a user's folder is one entry; inside a
    lab's folder the walk goes on. A link is never followed: it is the user's, whatever its name."""
    found, pending = [], [""]
    while pending:
        prefix = pending.pop()
        try:
            entries = list(os.scandir(folder / prefix))
        except OSError:
            continue
        for entry in entries:
            relative = prefix + entry.name
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) and relative in owned.folders:
                pending.append(relative + "/")
            elif stat.S_ISDIR(mode) or stat.S_ISLNK(mode) or relative not in owned.files:
                found.append(relative)
    return sorted(found)


def refuse_foreign_files(folder: Path, owned_before: Iterable[str] = (), shown_as: Path | None = None) -> None:
    """``ForeignFilesError`` naming what in ``folder`` the lab did not write (``shown_as``: the folder's name to
    give); nothing when it holds only the lab's files or is missing."""
    entries = user_entries(folder, owned_by(folder, owned_before))
    if entries:
        raise ForeignFilesError(shown_as or folder, entries)


def fsync_folder(folder: Path) -> None:
    """fsync a folder's entries (its new names survive a power cut); a no-op where folders cannot be opened."""
    with suppress(OSError):
        handle = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)
