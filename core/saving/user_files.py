"""The one way a command writes a file the user named: ``claim_files(paths, overwrite)``.

Every target is claimed before any work (a folder, FIFO or device refused; an existing file or link only with
``overwrite``, replaced, never followed), written to a temporary of ours beside it (``temp_files``) and renamed into
place once every file of the claim is whole; without ``overwrite`` by a hard link, so a file made meanwhile is never
replaced. On any failure the targets keep their content: a refusal is one ``UserFileError``, a failed write (a full
disk) the ``OSError`` it is, said in one line at the CLI's boundary; a killed writer's temporary goes with the next
write beside it (``temp_files``).
"""
from __future__ import annotations

import errno
import os
import stat
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Iterable

from core.saving.atomic import fsync_folder
from core.saving.temp_files import create_temporary, remove_leftovers, unlink_quietly

# What os.link raises where a file system cannot link: the file is then put in place by a rename.
NO_HARD_LINKS = {errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EACCES, errno.ENOSYS}


class UserFileError(Exception):
    """A target that may not be written; ``reason`` is one of ``REASONS``, ``str()`` names the path."""

    REASONS = ("exists", "folder", "not_a_file", "no_folder", "unwritable")

    def __init__(self, path: Path, problem: str, reason: str):
        super().__init__(f"{path}{'' if problem[0] in ';:' or problem.startswith(' ') else ' '}{problem}")
        self.path, self.problem, self.reason = Path(path), problem, reason


def _exists(target: Path) -> UserFileError:
    return UserFileError(target, "exists; choose a new file or allow overwriting it", "exists")


@contextmanager
def _as_unwritable(path: Path, doing: str):
    try:
        yield
    except OSError as error:
        raise UserFileError(path, f": {doing} ({error.strerror or error})", "unwritable") from None


class _Temporary:
    """One target and the temporary written in its place."""

    def __init__(self, target: Path, temp: Path, fd: int):
        self.target, self.temp, self.fd = target, temp, fd
        self.inode = os.fstat(fd).st_ino
        self.placed = False

    def is_ours(self, path: Path) -> bool:
        try:
            return os.lstat(path).st_ino == self.inode
        except OSError:
            return False


class FileClaim(AbstractContextManager):
    """The right to write ``targets``, as a ``with`` block: leaving it normally puts every file in place
    (``commit``), by an exception removes the temporaries (``abandon``)."""

    def __init__(self, targets: list[Path], overwrite: bool, mode: int | None = None):
        self.targets, self.overwrite = targets, overwrite
        self.mode = mode  # the new files' permissions; None: the replaced file's, else 0666 less the umask
        self._temps: dict[Path, _Temporary] = {}
        self._files: list = []  # closed (flushed) before the temporaries are fsynced
        self._done = False

    def fileno(self, target: str | Path) -> int:
        """The temporary's descriptor (for a memory map); the claim closes it."""
        return self._temps[Path(target)].fd

    def open(self, target: str | Path, mode: str = "wb", **options):
        """A file object writing ``target``'s temporary (``open``'s ``mode`` and options, e.g. ``encoding``)."""
        opened = open(self.fileno(target), mode, closefd=False, **options)
        self._files.append(opened)
        return opened

    def allocate(self, target: str | Path, size: int) -> None:
        """Reserve ``size`` bytes for ``target``: a full disk fails here, not as a SIGBUS in a memory map."""
        fd = self.fileno(target)
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as error:
            if error.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
                raise
            offset = os.fstat(fd).st_size  # no fallocate on this file system: real zeros after the data
            while offset < size:
                offset += os.pwrite(fd, bytes(min(1 << 20, size - offset)), offset)

    def commit(self) -> None:
        """fsync every temporary, rename each onto its target, fsync the folders."""
        try:
            for opened in self._files:
                opened.close()
            for temp in self._temps.values():
                if self.mode is not None or self.overwrite:
                    os.fchmod(temp.fd, self.mode if self.mode is not None else _kept_mode(temp))
                os.fsync(temp.fd)
            for temp in self._temps.values():
                _place(temp, self.overwrite)
            for folder in {temp.target.parent for temp in self._temps.values()}:
                fsync_folder(folder)
        except BaseException:
            self._finish(unplace=True)
            raise
        self._finish(unplace=False)  # every temporary is in place by now: nothing left to remove

    def abandon(self) -> None:
        """Remove the temporaries; the targets keep what they held."""
        self._finish(unplace=False)

    def _finish(self, unplace: bool) -> None:
        """Close every descriptor, then remove the temporaries (and, with ``unplace``, what was placed)."""
        if self._done:
            return
        self._done = True
        for opened in self._files:
            with suppress(OSError, ValueError):  # the error already in flight says what went wrong
                opened.close()
        for temp in self._temps.values():
            with suppress(OSError):
                os.close(temp.fd)
            if temp.is_ours(temp.temp):
                unlink_quietly(temp.temp)
            # A target placed by a hard link without overwrite was nothing before: the claim as a whole
            # failed, so it goes too (only if it is still our file).
            if unplace and temp.placed and not self.overwrite and temp.is_ours(temp.target):
                unlink_quietly(temp.target)

    def __exit__(self, kind, error, trace) -> None:
        if self._done:
            return
        if kind is None:
            self.commit()
        else:
            self.abandon()


def claim_files(targets: Iterable[str | Path], overwrite: bool = False, create_folder: bool = False,
                mode: int | None = None) -> FileClaim:
    """Claim every path of ``targets`` and create its temporary, or raise ``UserFileError`` before anything is
    created; ``create_folder`` makes a missing parent folder, ``mode`` gives the new files fixed permissions."""
    targets = [Path(target).expanduser() for target in targets]
    for target in targets:
        check_target(target, overwrite, create_folder)
    claim = FileClaim(targets, overwrite, mode)
    try:
        for target in targets:
            remove_leftovers(target.parent)
            with _as_unwritable(target, f"cannot write in {target.parent}"):
                claim._temps[target] = _Temporary(target, *create_temporary(target))
    except BaseException:
        claim.abandon()
        raise
    return claim


def check_target(target: Path, overwrite: bool, create_folder: bool = False) -> None:
    """``UserFileError`` unless ``target`` may be written (with ``overwrite`` when something is there)."""
    if target.name in ("", ".", ".."):
        raise UserFileError(target, "is a folder; name a file", "folder")
    folder = target.parent
    if not folder.is_dir():
        if not create_folder or os.path.lexists(folder):  # a file or a dangling link there: not ours to replace
            raise UserFileError(target, f": the folder {folder} does not exist", "no_folder")
        with _as_unwritable(target, f"cannot create the folder {folder}"):
            folder.mkdir(parents=True, exist_ok=True)
    with _as_unwritable(target, "cannot look at it"):
        mode = _mode(target)
    if mode is None:
        return
    if stat.S_ISDIR(mode):
        raise UserFileError(target, "is a folder; name a file", "folder")
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise UserFileError(target, "is not a regular file", "not_a_file")
    if not overwrite:
        raise _exists(target)


def _mode(path: Path) -> int | None:
    """``lstat``'s mode of ``path``; None when nothing is there."""
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return None


def _place(temp: _Temporary, overwrite: bool) -> None:
    target = temp.target
    mode = _mode(target)
    if mode is not None and stat.S_ISDIR(mode):
        raise UserFileError(target, "is a folder; name a file", "folder")
    if overwrite:
        os.replace(temp.temp, target)
    else:
        try:
            os.link(temp.temp, target, follow_symlinks=False)  # fails if anything is there, even since the check
        except FileExistsError:
            raise _exists(target) from None
        except OSError as error:
            if error.errno not in NO_HARD_LINKS:
                raise
            if os.path.lexists(target):
                raise _exists(target) from None
            os.replace(temp.temp, target)  # no hard links here: checked just before, as close as it gets
        else:
            os.unlink(temp.temp)
    temp.placed = True


def write_file_atomically(target: str | Path, data: bytes, overwrite: bool = True, mode: int | None = None) -> None:
    """``data`` as ``target``'s whole content, through ``claim_files``: a reader sees the old file or the new one."""
    with claim_files([target], overwrite=overwrite, mode=mode) as claim, claim.open(target) as handle:
        handle.write(data)


def _kept_mode(temp: _Temporary) -> int:
    """The permissions of the file the new one replaces, else those the temporary was created with."""
    with suppress(OSError):
        found = os.lstat(temp.target).st_mode
        if stat.S_ISREG(found):
            return stat.S_IMODE(found)
    return stat.S_IMODE(os.fstat(temp.fd).st_mode)
