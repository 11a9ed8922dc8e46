"""Where a training may write its model: ``claim_output`` claims it before training, until the save is done: a
model folder (or nothing, or an empty folder), replaced only with ``overwrite`` and only when it holds nothing the
lab did not write, in a writable place, one writer at a time (``claim_new_run``: a fresh run name).

``take_lock``, the lab's one lock between processes: an ``flock`` on ``.<name>.lock`` beside what it guards, whose
file is removed on release only when the lab made it (a user's file of that name is locked as it is).
"""
from __future__ import annotations

import fcntl
import os
import stat
from contextlib import AbstractContextManager, suppress
from datetime import datetime
from pathlib import Path
from typing import Callable

from core.saving.atomic import FOLDER_NAME_MAX_BYTES, ForeignFilesError, refuse_foreign_files, remove_stale_temps
from core.saving.model_folder import CONFIG_FILE, ModelLoadError, read_config

LOCK_MARK = b"siamese-lab lock file: removed by the process that holds it\n"
TAKE_TRIES = 10  # a lock file removed by its releasing holder between our open and flock: open the new one


class LockBusy(Exception):
    """Another process holds the lock and the caller asked not to wait."""


def lock_path_for(target: str | Path) -> Path:
    """``.<name>.lock`` beside ``target``: where its lock lives."""
    target = Path(target)
    return target.parent / f".{target.name}.lock"


class HeldLock(AbstractContextManager):
    """A lock taken by ``take_lock``, also a ``with`` block; ``release`` frees it (and removes the lab's file). As
    ``claim_output``'s claim: ``target``, the folder the model will be saved as, and ``existing``, the config.json of
    the model it would replace (``overwrite``), else None."""

    target: Path | None = None
    existing: dict | None = None

    def __init__(self, path: Path, fd: int, ours: os.stat_result | None):
        self.path, self._fd, self._ours = path, fd, ours  # ours: the lab's own lock file (its identity), or None

    def release(self) -> None:
        if self._fd is None:
            return
        with suppress(OSError):  # already gone, or the folder turned read-only: the file is harmless either way
            if self._ours is not None and os.path.samestat(os.lstat(self.path), self._ours):
                os.unlink(self.path)  # still held: no other holder can be using this file now
        os.close(self._fd)  # the flock goes with it
        self._fd = None

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
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:  # removed by its releasing holder since: made anew
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BaseException as error:
            os.close(fd)
            raise LockBusy(path) if isinstance(error, BlockingIOError) else error from None
        info = os.fstat(fd)
        with suppress(FileNotFoundError):
            if os.path.samestat(os.lstat(path), info):
                ours = stat.S_ISREG(info.st_mode) and info.st_size == len(LOCK_MARK) and \
                    os.pread(fd, len(LOCK_MARK) + 1, 0) == LOCK_MARK
                return HeldLock(path, fd, info if ours else None)
        os.close(fd)  # its holder removed it as we opened it: the next open finds it free
    raise LockBusy(path)


class OutputError(ValueError):
    """A path a training may not write to, and why; ``reason``: not_a_model, model_exists, busy or unwritable."""

    def __init__(self, path: Path, problem: str, reason: str):
        super().__init__(f"{path}: {problem}")
        self.path, self.problem, self.reason = path, problem, reason


OutputClaim = HeldLock  # the right to write one model folder: its lock, held until the save is done


def _existing_model(target: Path, overwrite: bool) -> dict | None:
    """The config of the model at ``target`` if it may be replaced; None when nothing is there."""
    if not os.path.lexists(target):
        return None
    if target.is_symlink() or not target.is_dir():
        raise OutputError(target, "exists and is not a model folder; choose a new folder", "not_a_model")
    if not any(target.iterdir()):
        return None  # an empty folder: nothing to lose
    if not (target / CONFIG_FILE).is_file():
        raise OutputError(target, "exists and is not a model folder (it holds other files); choose a new folder",
                          "not_a_model")
    try:
        config = read_config(target)
    except ModelLoadError as error:
        raise OutputError(target, f"holds something that is not a usable model ({error}); choose a new folder",
                          "not_a_model") from None
    if not overwrite:
        raise OutputError(target, "holds a saved model; replacing it needs overwrite", "model_exists")
    refuse_others_files(target)
    return config


def refuse_others_files(target: Path) -> None:
    """``OutputError`` (before any work) when the folder to replace holds files the lab did not write."""
    try:
        refuse_foreign_files(target)
    except ForeignFilesError as error:
        raise OutputError(target, error.problem, "not_a_model") from None


def not_a_folder(path: Path) -> tuple[Path, str] | None:
    """(the part, its kind) when ``path``, or the nearest of its parents that exists, is not a folder (a file, a
    pipe, a device, a broken link), so nothing can be made in it; None otherwise."""
    for part in (path, *path.parents):
        if os.path.lexists(part):
            return None if part.is_dir() else (part, "a file" if part.is_file() else "a pipe, a device or a broken link")
    return None


def claim_output(target: str | Path, overwrite: bool = False,
                 existing: Callable[[Path, bool], dict | None] | None = None) -> OutputClaim:
    """Claim ``target`` for one training's model folder. ``existing(target, overwrite)`` returns what may be
    replaced there (None when nothing is) or raises ``OutputError``; by default a saved model, with ``overwrite``."""
    target = Path(target).expanduser()
    if target.name in ("", ".", ".."):
        raise OutputError(target, "is not a folder name a model can be saved as", "not_a_model")
    if len(os.fsencode(target.name)) > FOLDER_NAME_MAX_BYTES:  # its ``.old-`` name would not fit, after the work
        raise OutputError(target, f"the folder name is longer than the {FOLDER_NAME_MAX_BYTES} bytes a save can "
                                  "use; choose a shorter name", "unwritable")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        blocked = not_a_folder(target.parent)
        reason = (f"{blocked[0]} is {blocked[1]}, not a folder" if blocked
                  else f"its folder cannot be created ({error.strerror or error})")
        raise OutputError(target, reason, "unwritable") from None
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise OutputError(target, f"cannot write in {target.parent}", "unwritable")
    lock_path = lock_path_for(target)
    try:
        claim = take_lock(lock_path, wait=False)
    except LockBusy:
        raise OutputError(target, "another process is writing this folder right now", "busy") from None
    except OSError as error:
        raise OutputError(target, f"cannot lock it through {lock_path} ({error.strerror or error})",
                          "unwritable") from None
    try:
        claim.target = target
        remove_stale_temps(target)
        claim.existing = (existing or _existing_model)(target, overwrite)
    except BaseException:
        claim.release()
        raise
    return claim


def claim_new_run(root: str | Path, model_type: str, loss: str) -> OutputClaim:
    """A fresh ``<model>-<loss>-<time>[-n]`` folder in the models folder ``root``, claimed."""
    root = Path(root).expanduser()
    base = f"{model_type}-{loss}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    for n in range(1, 1000):
        name = base if n == 1 else f"{base}-{n}"
        if os.path.lexists(root / name):
            continue
        try:
            return claim_output(root / name)
        except OutputError as error:
            if error.reason in ("busy", "model_exists", "not_a_model"):  # taken meanwhile: try the next name
                continue
            raise
    raise OutputError(root, "no free run name", "busy")
