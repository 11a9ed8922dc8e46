"""Temporaries beside a target, named after their writer, and the one rule for removing a killed writer's.

A file is written through ``.<name>.siamese-tmp-<host>-<pid>-<token>`` (``user_files``), a folder built as
``.tmp-<name>-<id>@<host>-<pid>`` (``atomic``, ``work_folder``). The next write beside it removes it once its writer
is gone: a dead pid of this machine, or a day old from another. Anything named otherwise (a user's own
``.tmp-<name>-<date>``, say) is never removed. A temporary never holds the only copy of anything.
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
from contextlib import contextmanager, suppress
from pathlib import Path

TEMP_MARK = ".siamese-tmp-"  # in a file temporary's name
TEMP_PREFIX = ".tmp-"  # of a folder temporary's name
FOREIGN_LEFTOVER_SECONDS = 24 * 3600
NAME_CHARS = 40  # of the target's name kept in its temporary's name: file names stop at 255 bytes
# The longest folder name a folder temporary can carry whole: 255 bytes less ".tmp-", "-<id>@<host>-" and a pid.
FOLDER_NAME_MAX_BYTES = 255 - len(TEMP_PREFIX) - len("-01234567@abcdef-") - 10
_FILE_TEMP = re.compile(r"^\..*" + re.escape(TEMP_MARK) + r"(?P<host>[0-9a-f]{6})-(?P<pid>\d+)-[0-9a-f]{8}$", re.DOTALL)
_FOLDER_TEMP = re.compile(r"^\.tmp-(?P<name>.+)-[0-9a-f]{8}@(?P<host>[0-9a-f]{6})-(?P<pid>[0-9]{1,10})$")


def create_temporary(target: Path) -> tuple[Path, int]:
    """A new empty temporary file for ``target`` (mode 0666 less the umask, as ``open`` gives) and its open
    descriptor; an entry already there under the drawn name (a link included) is never opened: another is drawn."""
    prefix = f".{target.name[:NAME_CHARS]}{TEMP_MARK}{host_tag()}-{os.getpid()}-"
    for _ in range(100):
        temp = target.parent / f"{prefix}{token()}"
        with suppress(FileExistsError):
            return temp, os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    raise FileExistsError(f"no free temporary name in {target.parent}")


def new_temp_path(target: Path) -> Path:
    """A fresh temporary folder name beside ``target`` that records this machine and process as its writer."""
    return target.parent / f"{TEMP_PREFIX}{target.name}-{uuid.uuid4().hex[:8]}@{host_tag()}-{os.getpid()}"


@contextmanager
def work_folder(target: str | Path):
    """A new folder (mode 0700) named like a temporary of ``target`` for the block, removed at its end; the
    folders of ``target`` left by gone writers are removed first."""
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


def writer_gone(host: str, pid: int, changed: float) -> bool:
    """Whether the writer ``host``/``pid`` of a temporary last changed at ``changed`` (epoch seconds) is gone."""
    if host != host_tag():
        return time.time() - changed > FOREIGN_LEFTOVER_SECONDS
    if pid <= 0:
        return True  # never signal 0 or a negative pid: those name process groups
    try:
        os.kill(pid, 0)
    except PermissionError:  # another user's process
        return False
    except (OSError, OverflowError):  # no such process, or a pid no process can have
        return True
    return False


def _leftovers(folder: Path, pattern: re.Pattern, kind):
    """(name match, path) of each entry of ``folder`` that ``pattern`` names, of ``kind`` (never a link), whose
    writer is gone."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        match = pattern.match(entry.name)
        try:
            info = entry.stat(follow_symlinks=False) if match else None
        except OSError:
            continue
        if info is not None and kind(info.st_mode) and writer_gone(match["host"], int(match["pid"]), info.st_mtime):
            yield match, Path(entry.path)


def remove_leftovers(folder: Path) -> list[Path]:
    """Remove the temporary files of gone writers in ``folder`` and return them."""
    return [path for _, path in _leftovers(folder, _FILE_TEMP, stat.S_ISREG) if unlink_quietly(path)]


def stale_temps(target: str | Path) -> list[Path]:
    """The temporary folders of ``target`` whose writers are gone."""
    target = Path(target)
    return sorted(path for match, path in _leftovers(target.parent, _FOLDER_TEMP, stat.S_ISDIR)
                  if match["name"] == target.name)


def remove_stale_temps(target: str | Path) -> None:
    """Remove ``stale_temps(target)``, each whole (``rmtree`` unlinks the links inside, never follows them)."""
    for path in stale_temps(target):
        shutil.rmtree(path, ignore_errors=True)


def unlink_quietly(path: Path) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False
