"""The one way the lab locks a path against its other processes: ``take_lock``, an ``flock`` through ``filelock``.

The lock goes with its process. Its file, ``.<name>.lock`` beside what it guards, is removed only when the lab made
it (holding exactly ``LOCK_MARK``; one a killed holder left is taken over); a user's file of that name is locked as
it is, never written or removed.
"""
from __future__ import annotations

import os
import stat
from contextlib import AbstractContextManager, suppress
from pathlib import Path

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


class HeldLock(AbstractContextManager):
    """A lock taken by ``take_lock``, also a ``with`` block; ``release`` frees it (and removes the lab's file)."""

    def __init__(self, path: Path, lock: UnixFileLock, ours: os.stat_result | None):
        self.path = path
        self._lock = lock
        self._ours = ours  # the lab's own lock file (its identity), or None when the file is someone else's

    def release(self) -> None:
        if not self._lock.is_locked:
            return
        try:
            if self._ours is not None and os.path.samestat(os.lstat(self.path), self._ours):
                os.unlink(self.path)  # still held: no other holder can be using this file now
        except OSError:
            pass  # already gone, or the folder turned read-only: the file is harmless either way
        finally:
            self._lock.release()

    def __exit__(self, *exc) -> None:
        self.release()


def take_lock(path: str | Path, wait: bool = True) -> HeldLock:
    """An exclusive lock on ``path``: waited for, or ``LockBusy`` at once when ``wait`` is False and another
    process holds it. ``OSError`` when the file cannot be opened (a read-only folder, a link, a folder)."""
    path = Path(path)
    for _ in range(TAKE_TRIES):
        # The lab's own lock file, unless something is there already (a link included: O_EXCL never follows one).
        with suppress(FileExistsError), open(path, "xb", opener=lambda name, flags: os.open(name, flags, 0o644)) as new:
            new.write(LOCK_MARK)
        seen: list[os.stat_result | None] = []
        lock = UnixFileLock(path, blocking=wait, thread_local=False, fallback_to_soft=False,
                            preserve_lock_file=True, on_acquired=lambda fd: seen.append(_marked(fd)))
        try:
            lock.acquire()
        except Timeout:
            if os.path.lexists(path):
                raise LockBusy(path) from None
            continue  # its holder removed it as we opened it: the next open finds it free
        return HeldLock(path, lock, seen[-1])
    raise LockBusy(path)


def _marked(fd: int) -> os.stat_result | None:
    """The locked file's stat when it is a regular file holding exactly ``LOCK_MARK`` (the lab's), else None."""
    info = os.fstat(fd)
    ours = stat.S_ISREG(info.st_mode) and info.st_size == len(LOCK_MARK)
    return info if ours and os.pread(fd, len(LOCK_MARK) + 1, 0) == LOCK_MARK else None
