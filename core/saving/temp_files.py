"""Temporaries beside a target, and the one rule for a killed writer's leftovers.

A file is written through ``.<name>.siamese-tmp-<id>`` (``user_files``), a folder built as
``.tmp-<name>.siamese-tmp-<id>`` (``atomic``, ``work_folder``). The next write in the same folder removes such an
entry once it is a day old (no write takes that long; a killed one never finishes). Anything named otherwise (a
user's ``.tmp-<name>-<date>``, say) is never removed, nor is a link. A temporary never holds the only copy of anything.
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
from contextlib import contextmanager, suppress
from pathlib import Path

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


@contextmanager
def work_folder(target: str | Path):
    """A new folder (mode 0700) named like a temporary of ``target`` for the block, removed at its end."""
    target = Path(target)
    remove_stale_temps(target)
    path = temp_path(target, folder=True)
    path.mkdir(mode=0o700)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def stale_temps(target: str | Path) -> list[Path]:
    """The lab's temporaries beside ``target`` (of any name) that are a day old: their writers are gone."""
    folder, stale = Path(target).parent, []
    with suppress(OSError):
        for entry in os.scandir(folder):
            with suppress(OSError):
                info = entry.stat(follow_symlinks=False) if _TEMP.match(entry.name) else None
                if info and not stat.S_ISLNK(info.st_mode) and time.time() - info.st_mtime > STALE_SECONDS:
                    stale.append(Path(entry.path))
    return sorted(stale)


def remove_stale_temps(target: str | Path) -> None:
    """Remove ``stale_temps(target)`` (a folder whole: ``rmtree`` unlinks the links inside, never follows them)."""
    for path in stale_temps(target):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            unlink_quietly(path)


def unlink_quietly(path: Path) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


# A run record's writer (``core.training.jobs``): this machine and a live pid, or another machine's for a day.
def host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:6]


def writer_gone(host: str, pid: int, changed: float) -> bool:
    """Whether the writer ``host``/``pid`` of a record last changed at ``changed`` (epoch seconds) is gone."""
    if host != host_tag():
        return time.time() - changed > STALE_SECONDS
    if pid <= 0:
        return True  # never signal 0 or a negative pid: those name process groups
    try:
        os.kill(pid, 0)
    except PermissionError:  # another user's process
        return False
    except (OSError, OverflowError):  # no such process, or a pid no process can have
        return True
    return False
