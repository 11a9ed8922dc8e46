"""Temporaries beside a target, and the leftovers of writers that were killed: how each is named, and the one rule
for when the next writer may remove it.

* A file written whole (``core.saving.user_files``) goes through ``.<name>.siamese-tmp-<host>-<pid>-<token>``:
  ``<name>`` is the target's name (its first 40 characters), ``<token>`` 8 random hex digits.
* A folder (``core.saving.atomic``) is built as ``.tmp-<name>-<id>@<host>-<pid>``.
* A scratch folder for a block of work (``work_folder``: Ray's vector shards beside ``--out``) has a folder
  temporary's name and is removed at the block's end.

``<host>`` is a tag of the writing machine's host name and ``<pid>`` the writing process. A temporary is a
leftover, removed by the next write beside it, when its writer is gone (``writer_gone``): written on this
machine and its pid names no living process (``kill -9``, a crash, a power cut), or written on another machine
(a shared folder) and a day old, since that writer cannot be asked. A pid that names a living process is never
taken for gone, even when it was reused since: such a leftover stays until that process ends. Only a regular
file (for a file) or a folder (for a folder) of such a name is removed, never a link.

A folder without a writer in its name (``.tmp-<name>-<id>``, left by versions before writers were recorded) is
stale only when the caller holds the target's claim lock (``core.saving.output``) and the folder last changed
before the lock was taken: a claimed writer makes its folder only after taking the lock.

A temporary never holds the only copy of anything: a file's holds new bytes; a folder's holds the new files and
hard links to the user's files (still in the target); the previous content a swap displaces is renamed
``.old-<name>-<id>`` at once (``core.saving.atomic``), a name never removed as stale. So removing a leftover loses
nothing.
"""
from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import socket
import stat
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

TEMP_MARK = ".siamese-tmp-"  # in a file temporary's name
TEMP_PREFIX = ".tmp-"  # of a folder temporary's name
FOREIGN_LEFTOVER_SECONDS = 24 * 3600
NAME_CHARS = 40  # of the target's name kept in its temporary's name: file names stop at 255 bytes
# The longest folder name a folder temporary can carry whole: 255 bytes less ".tmp-", "-<id>@<host>-" and a pid.
FOLDER_NAME_MAX_BYTES = 255 - len(TEMP_PREFIX) - len("-01234567@abcdef-") - 10
_FILE_TEMP = re.compile(r"^\..*" + re.escape(TEMP_MARK) + r"(?P<host>[0-9a-f]{6})-(?P<pid>\d+)-[0-9a-f]{8}$", re.DOTALL)
_FOLDER_TEMP = re.compile(r"^\.tmp-(?P<name>.+)-[0-9a-f]{8}@(?P<host>[0-9a-f]{6})-(?P<pid>[0-9]{1,10})$")
_FOLDER_TEMP_WITHOUT_WRITER = re.compile(r"^\.tmp-(?P<name>.+)-[0-9a-f]{8}$")
_CREATE_FLAGS = (os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0))


# ---- names ------------------------------------------------------------------------------------------
def create_temporary(target: Path) -> tuple[Path, int]:
    """A new empty temporary file for ``target`` (mode 0600) and its open descriptor. ``O_EXCL`` with
    ``O_NOFOLLOW``: an entry already there under the drawn name (a file, a link, a folder) is never
    opened; another name is drawn. Raises ``OSError`` when the folder cannot be written."""
    prefix = f".{target.name[:NAME_CHARS]}{TEMP_MARK}{host_tag()}-{os.getpid()}-"
    for _ in range(100):
        temp = target.parent / f"{prefix}{token()}"
        try:
            return temp, os.open(temp, _CREATE_FLAGS, 0o600)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {target.parent}")


def new_temp_path(target: Path) -> Path:
    """A fresh temporary folder name beside ``target`` that records this machine and process as its writer."""
    return target.parent / f"{TEMP_PREFIX}{target.name}-{uuid.uuid4().hex[:8]}@{host_tag()}-{os.getpid()}"


@contextmanager
def work_folder(target: str | Path):
    """A new folder (mode 0700) named like a temporary of ``target`` (``new_temp_path``) for the block, removed at
    its end. The folders of ``target`` left by gone writers (a run killed before it could remove its own) are
    removed first; a living writer's are kept."""
    target = Path(target)
    remove_stale_temps(target)
    path = new_temp_path(target)
    path.mkdir(mode=0o700)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def token() -> str:
    """The random part of a temporary file's name (tests replace it to make names collide)."""
    return secrets.token_hex(4)


def host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:6]


# ---- leftovers --------------------------------------------------------------------------------------
def writer_gone(host: str, pid: int, changed: float) -> bool:
    """Whether the writer ``host``/``pid`` of a temporary last changed at ``changed`` (epoch seconds) is gone."""
    if host == host_tag():
        return not process_alive(pid)
    return time.time() - changed > FOREIGN_LEFTOVER_SECONDS


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        return list(os.scandir(folder))
    except OSError:
        return []


def remove_leftovers(folder: Path) -> list[Path]:
    """Remove the temporary files of gone writers in ``folder`` and return them."""
    removed = []
    for entry in _entries(folder):
        match = _FILE_TEMP.match(entry.name)
        try:
            info = entry.stat(follow_symlinks=False) if match else None
        except OSError:
            continue
        if (info is not None and stat.S_ISREG(info.st_mode)
                and writer_gone(match["host"], int(match["pid"]), info.st_mtime) and unlink_quietly(Path(entry.path))):
            removed.append(Path(entry.path))
    return removed


def stale_temps(target: str | Path, locked_since: float | None = None) -> list[Path]:
    """The temporary folders of ``target`` whose writers are gone; ``locked_since`` is when the caller took the
    target's claim lock, or None when it holds none."""
    target = Path(target)
    found = []
    for entry in _entries(target.parent):
        with_writer = _FOLDER_TEMP.match(entry.name)
        match = with_writer or _FOLDER_TEMP_WITHOUT_WRITER.match(entry.name)
        if match is None or match["name"] != target.name:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode):  # a link or a file of that name is nobody's folder: left alone
            continue
        if with_writer is None:  # no writer to ask: stale once the target's lock, taken after it changed, is ours
            stale = locked_since is not None and info.st_mtime < locked_since
        else:
            stale = writer_gone(with_writer["host"], int(with_writer["pid"]), info.st_mtime)
        if stale:
            found.append(Path(entry.path))
    return sorted(found)


def remove_stale_temps(target: str | Path, locked_since: float | None = None) -> list[Path]:
    """Remove ``stale_temps(target, locked_since)`` (never following a link); returns what was removed."""
    removed = []
    for path in stale_temps(target, locked_since):
        shutil.rmtree(path, ignore_errors=True)  # rmtree unlinks links inside, never follows them
        if not os.path.lexists(path):
            removed.append(path)
    return removed


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (another user's included)."""
    if pid <= 0:
        return False  # never signal 0 or a negative pid: those name process groups
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except (OSError, OverflowError):  # no such process, or a pid no process can have
        return False
    return True


def unlink_quietly(path: Path) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False
