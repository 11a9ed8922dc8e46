"""Writing a folder whole, replacing only what the lab wrote: ``write_folder_atomically(target, write)``.

``write(temp)`` fills a temporary folder beside the target; its ``RECORD_FILE`` then lists what the lab wrote, and
after an fsync two renames put it in place (the previous folder aside as ``.old-<name>-<id>``, then removed). A
writer killed between the renames leaves the target missing and the ``.old-`` folder whole, which ``list_runs``
names. Anything the record does not name, and any link, is the user's: such a folder is never replaced.

Temporaries (``.<name>.siamese-tmp-<id>`` files, ``.tmp-<name>.siamese-tmp-<id>`` folders) are removed by the next
write beside them once a day old (no write lasts that long); anything named otherwise, or a link, never is.
"""
from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shutil
import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path, PurePosixPath

from core.saving.files import ModelLoadError, read_json_file

TEMP_MARK = ".siamese-tmp-"
STALE_SECONDS = 24 * 3600
NAME_CHARS = 40  # of the target's name kept in its temporary's name: file names stop at 255 bytes
_TEMP = re.compile(r"^\..*" + re.escape(TEMP_MARK) + r"[0-9a-f]{8}$", re.DOTALL)


def token() -> str:
    """The random part of a temporary's name (tests replace it to make names collide)."""
    return secrets.token_hex(4)


def temp_path(target: Path, folder: bool = False) -> Path:
    """A fresh temporary name beside ``target`` (a folder's starts ``.tmp-``, as ``list_runs`` reports it)."""
    return target.parent / f".{'tmp-' if folder else ''}{target.name[:NAME_CHARS]}{TEMP_MARK}{token()}"


def create_temporary(target: Path) -> tuple[Path, int]:
    """A new empty temporary file for ``target`` (mode 0666 less the umask) and its open descriptor; an entry
    already at the drawn name (a link included) is never opened: another is drawn."""
    for _ in range(100):
        temp = temp_path(target)
        with suppress(FileExistsError):
            return temp, os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    raise FileExistsError(f"no free temporary name in {target.parent}")


def remove_stale_temps(target: str | Path) -> None:
    """Remove the lab's temporaries beside ``target`` (of any name) that are a day old: their writers are gone. A
    link is never one; a folder goes whole (``rmtree`` unlinks the links inside, never follows them)."""
    with suppress(OSError):
        for entry in list(os.scandir(Path(target).parent)):  # listed whole before any removal
            with suppress(OSError):
                if _TEMP.match(entry.name) and not entry.is_symlink() and \
                        time.time() - entry.stat(follow_symlinks=False).st_mtime > STALE_SECONDS:
                    (shutil.rmtree if entry.is_dir(follow_symlinks=False) else os.unlink)(entry.path)


OLD_PREFIX = ".old-"
FOLDER_NAME_MAX_BYTES = 255 - len(OLD_PREFIX) - len("-01234567")  # the longest name whose ``.old-`` name fits
RECORD_FILE = ".siamese_lab_files.json"
RECORD_FORMAT = "siamese-lab-files"
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


def _walk(folder: Path):
    """(relative path, is a folder) of every entry under ``folder``; a link is not followed."""
    for here, dirs, names in os.walk(folder):
        relative = PurePosixPath(Path(here).relative_to(folder).as_posix())
        yield from ((str(relative / name), True) for name in dirs)
        yield from ((str(relative / name), False) for name in names)


def owned_by(folder: Path) -> tuple[set[str], set[str]]:
    """(files, folders) the lab owns in ``folder``: its record's, or only the record's name when it has no usable one."""
    record = None
    with suppress(OSError, ModelLoadError):
        record = read_json_file(folder / RECORD_FILE, folder=folder)
    usable = isinstance(record, dict) and record.get("format") == RECORD_FORMAT and \
        isinstance(record.get("files"), list) and isinstance(record.get("folders"), list)
    # Only names a walk of the folder gives can match: a ``..`` or absolute path in a record owns nothing.
    files = {str(path) for path in (record["files"] if usable else ())} | {RECORD_FILE}
    folders = {str(path) for path in (record["folders"] if usable else ())}
    folders |= {str(parent) for path in files for parent in PurePosixPath(path).parents[:-1]}
    return files, folders


def user_entries(folder: Path, owned: tuple[set[str], set[str]]) -> list[str]:
    """The entries of ``folder`` the lab does not own, as relative paths: a user's folder is one entry (not walked
    into); a link is the user's, whatever its name."""
    files, folders = owned
    found = []
    for relative, is_folder in _walk(folder):
        if any(relative.startswith(f"{entry}/") for entry in found):
            continue
        if os.path.islink(folder / relative) or relative not in (folders if is_folder else files):
            found.append(relative)
    return sorted(found)


def refuse_foreign_files(folder: Path, shown_as: Path | None = None) -> None:
    """``ForeignFilesError`` naming what in ``folder`` the lab did not write (``shown_as``: the folder's name to
    give); nothing when it holds only the lab's files or is missing."""
    entries = user_entries(folder, owned_by(folder))
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


def write_folder_atomically(target: str | Path, write: Callable[[Path], None]) -> Path:
    """Have ``write(temp)`` fill a new hidden folder beside ``target``, then put it in ``target``'s place.
    ``ForeignFilesError`` when ``target`` holds anything the lab did not write. On any exception ``target`` keeps
    its previous content. Returns it."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or os.path.lexists(target) and not target.is_dir():  # a link or a file: never ours
        raise FileExistsError(errno.EEXIST, "exists and is not a folder (a link or a file is never replaced)",
                              str(target))
    refuse_foreign_files(target)  # before the work; checked again once the folder is aside
    remove_stale_temps(target)
    temp = temp_path(target, folder=True)
    temp.mkdir()
    old = None
    try:
        write(temp)
        files, folders = {RECORD_FILE}, set()
        for relative, is_folder in _walk(temp):
            (folders if is_folder else files).add(relative)
            if not is_folder:
                with open(temp / relative, "rb") as handle:
                    os.fsync(handle.fileno())
        record = {"format": RECORD_FORMAT, "version": 1, "files": sorted(files), "folders": sorted(folders)}
        (temp / RECORD_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")
        for folder in (temp, *(temp / relative for relative in folders)):
            fsync_folder(folder)
        if target.is_dir():  # not a link: refused above
            old = target.parent / f"{OLD_PREFIX}{target.name}-{uuid.uuid4().hex[:8]}"
            os.rename(target, old)
            refuse_foreign_files(old, shown_as=target)  # a file the user put there meanwhile
        os.rename(temp, target)  # a crash just before this leaves the target missing: the one window
    except BaseException:
        if old is not None and not os.path.lexists(target):
            with suppress(OSError):
                os.rename(old, target)
        shutil.rmtree(temp, ignore_errors=True)
        raise
    fsync_folder(target.parent)  # the renames themselves survive a power cut
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target
