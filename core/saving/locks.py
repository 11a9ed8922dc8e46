"""The one way the lab locks a path against its other processes: ``take_lock`` (or ``held_lock`` for a block).

The lock is an ``flock`` taken through the ``filelock`` package, so it goes with its process: a killed holder
never leaves the path locked. The lock file sits beside what it guards (``.<name>.lock``), where a user may
keep a file of that very name, so the lab tells its own lock files from anyone else's:

* A lock file the lab creates is created exclusively and holds ``LOCK_MARK``; only such a file is ever removed,
  at release and while still held (a holder that opened the old file finds it unlinked and opens the new one).
  One left by a killed holder holds the mark too: the next holder takes it over and removes it.
* A file already at that name that does not hold exactly ``LOCK_MARK`` is not the lab's: it is locked as it is
  (an ``flock`` changes nothing in a file) and never written, truncated or removed.
"""
from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from filelock import Timeout, UnixFileLock

LOCK_SUFFIX = ".lock"
LOCK_MARK = b"siamese-lab lock file: removed by the process that holds it\n"
TAKE_TRIES = 10  # a lock file removed by its releasing holder between our open and flock: open the new one


class LockBusy(Exception):
    """Another process holds the lock and the caller asked not to wait."""


def lock_path_for(target: str | Path) -> Path:
    """``.<name>.lock`` beside ``target``: where its lock lives."""
    target = Path(target)
    return target.parent / f".{target.name}{LOCK_SUFFIX}"


class HeldLock:
    """A lock taken by ``take_lock``; ``release`` frees it (and removes its file when the lab made it)."""

    def __init__(self, path: Path, lock: UnixFileLock, ours: os.stat_result | None):
        self.path = path
        self._lock = lock
        self._ours = ours  # the lab's own lock file (its identity), or None when the file is someone else's

    def release(self) -> None:
        if not self._lock.is_locked:
            return
        try:
            if self._ours is not None and _same_file(self.path, self._ours):
                os.unlink(self.path)  # still held: no other holder can be using this file now
        except OSError:
            pass  # already gone, or the folder turned read-only: the file is harmless either way
        finally:
            self._lock.release()

    def __enter__(self) -> "HeldLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def take_lock(path: str | Path, wait: bool = True) -> HeldLock:
    """An exclusive lock on ``path``: waited for, or ``LockBusy`` at once when ``wait`` is False and another
    process holds it. ``OSError`` when the file cannot be opened (a read-only folder, a link, a folder)."""
    path = Path(path)
    for _ in range(TAKE_TRIES):
        _create_marked(path)
        seen: dict[str, object] = {}
        lock = UnixFileLock(path, blocking=wait, thread_local=False, fallback_to_soft=False,
                            preserve_lock_file=True, on_acquired=lambda fd: seen.update(_identity(fd)))
        try:
            lock.acquire()
        except Timeout:
            if os.path.lexists(path):
                raise LockBusy(path) from None
            continue  # its holder removed it as we opened it: the next open finds it free
        return HeldLock(path, lock, seen["stat"] if seen.get("marked") else None)
    raise LockBusy(path)


@contextmanager
def held_lock(path: str | Path, wait: bool = True) -> Iterator[HeldLock]:
    """``take_lock`` for the block."""
    lock = take_lock(path, wait)
    try:
        yield lock
    finally:
        lock.release()


def _create_marked(path: Path) -> None:
    """Create ``path`` holding ``LOCK_MARK`` when nothing is there; anything already there is left as it is."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError:
        return
    try:
        os.write(fd, LOCK_MARK)
    finally:
        os.close(fd)


def _identity(fd: int) -> dict:
    """What the locked file is: its stat, and whether it is a regular file holding exactly ``LOCK_MARK``."""
    info = os.fstat(fd)
    marked = stat.S_ISREG(info.st_mode) and info.st_size == len(LOCK_MARK) and os.pread(fd, len(LOCK_MARK) + 1,
                                                                                      0) == LOCK_MARK
    return {"stat": info, "marked": marked}


def _same_file(path: Path, info: os.stat_result) -> bool:
    try:
        return os.path.samestat(os.lstat(path), info)
    except FileNotFoundError:
        return False
