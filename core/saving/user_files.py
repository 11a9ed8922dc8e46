"""The one way a command writes a file the user named: ``claim_files(paths, overwrite)``.

Every target is claimed before any work (a folder, FIFO or device refused; an existing file or link only with
``overwrite``, replaced, never followed), written to a temporary of ours beside it (``temp_files``) and renamed into
place once every file of the claim is whole; without ``overwrite`` by a hard link, so a file made meanwhile is never
replaced. On any failure, SIGTERM included, the targets keep their content and one ``UserFileError`` says why.
"""
from __future__ import annotations

import errno
import os
import signal
import stat
import threading
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Iterable

from core.saving.atomic import fsync_folder
from core.saving.temp_files import create_temporary, remove_leftovers, unlink_quietly

# What os.link raises where a file system cannot link: the file is then put in place by a rename.
NO_HARD_LINKS = {errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EACCES, errno.ENOSYS}


class UserFileError(Exception):
    """A target that may not or could not be written; ``reason`` is one of ``REASONS``, ``str()`` names the path."""

    REASONS = ("exists", "folder", "not_a_file", "no_folder", "unwritable", "write_failed")

    def __init__(self, path: Path, problem: str, reason: str):
        super().__init__(f"{path}{'' if problem[0] in ';:' or problem.startswith(' ') else ' '}{problem}")
        self.path, self.problem, self.reason = Path(path), problem, reason


class Terminated(KeyboardInterrupt):
    """SIGTERM while a claim is open: unwinds like Ctrl-C, so the temporaries are removed."""


def _exists(target: Path) -> UserFileError:
    return UserFileError(target, "exists; choose a new file or allow overwriting it", "exists")


@contextmanager
def _as_user_file_error(path: Path, doing: str = "cannot write it", reason: str = "write_failed"):
    try:
        yield
    except OSError as error:
        raise UserFileError(path, f": {doing} ({error.strerror or error})", reason) from None


class OutputFile(AbstractContextManager):
    """A file object on a claimed temporary whose write errors (a full disk...) are ``UserFileError``s."""

    def __init__(self, handle, path: Path):
        self._handle, self.path = handle, path

    def write(self, data):
        with _as_user_file_error(self.path):
            return self._handle.write(data)

    def close(self) -> None:
        with _as_user_file_error(self.path):
            self._handle.close()

    def discard(self) -> None:
        """Close without a word: the error already in flight says what went wrong."""
        with suppress(OSError, ValueError):
            self._handle.close()

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.close()
        else:
            self.discard()


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
        self.mode = mode  # the new files' permissions; None: the replaced file's, else what open() gives
        self._temps: dict[Path, _Temporary] = {}
        self._files: list[OutputFile] = []  # closed (flushed) before the temporaries are fsynced
        self._done = self._sigterm_pending = self._deferring = False
        self._previous_sigterm = None
        if threading.current_thread() is threading.main_thread():
            with suppress(ValueError, OSError):
                if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # else someone has their own plan for it
                    self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)

    def fileno(self, target: str | Path) -> int:
        """The temporary's descriptor (for a memory map); the claim closes it."""
        return self._temps[Path(target)].fd

    def open(self, target: str | Path, mode: str = "wb", **options) -> OutputFile:
        """A file object writing ``target``'s temporary (``open``'s ``mode`` and options, e.g. ``encoding``)."""
        target = Path(target)
        opened = OutputFile(open(self.fileno(target), mode, closefd=False, **options), target)
        self._files.append(opened)
        return opened

    def allocate(self, target: str | Path, size: int) -> None:
        """Reserve ``size`` bytes for ``target``: a full disk fails here, not as a SIGBUS in a memory map."""
        target = Path(target)
        fd = self.fileno(target)
        with _as_user_file_error(target, "cannot reserve its space"):
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
        with self._finishing():
            try:
                for opened in self._files:
                    opened.close()
                for temp in self._temps.values():
                    with _as_user_file_error(temp.target):
                        os.fchmod(temp.fd, self.mode if self.mode is not None else _kept_mode(temp, self.overwrite))
                        os.fsync(temp.fd)
                for temp in self._temps.values():
                    _place(temp, self.overwrite)
                for folder in {temp.target.parent for temp in self._temps.values()}:
                    fsync_folder(folder)
            except BaseException:
                self._remove_temporaries(unplace=True)
                raise
        if self._sigterm_pending:
            self._sigterm_pending = False
            raise Terminated()

    def abandon(self) -> None:
        """Remove the temporaries; the targets keep what they held."""
        with self._finishing():
            self._remove_temporaries(unplace=False)

    @contextmanager
    def _finishing(self):
        """The block with SIGTERM held back until the end, then every descriptor closed and SIGTERM restored."""
        self._deferring = True
        try:
            yield
        finally:
            if not self._done:
                self._done = True
                for opened in self._files:
                    opened.discard()
                for temp in self._temps.values():
                    with suppress(OSError):
                        os.close(temp.fd)
                if self._previous_sigterm is not None:
                    signal.signal(signal.SIGTERM, self._previous_sigterm)
                    self._previous_sigterm = None
            self._deferring = False

    def _remove_temporaries(self, unplace: bool) -> None:
        for temp in self._temps.values():
            if temp.is_ours(temp.temp):
                unlink_quietly(temp.temp)
            # A target placed by a hard link without overwrite was nothing before: the claim as a whole
            # failed, so it goes too (only if it is still our file).
            if unplace and temp.placed and not self.overwrite and temp.is_ours(temp.target):
                unlink_quietly(temp.target)

    def _on_sigterm(self, signum, frame) -> None:
        if self._deferring:  # mid-cleanup: finish it, then stop
            self._sigterm_pending = True
            return
        raise Terminated()

    def __exit__(self, kind, error, trace) -> None:
        if self._done:
            return
        if kind is None:
            self.commit()
        else:
            self.abandon()
            self._sigterm_pending = False  # already unwinding


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
            with _as_user_file_error(target, f"cannot write in {target.parent}", "unwritable"):
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
        with _as_user_file_error(target, f"cannot create the folder {folder}", "unwritable"):
            folder.mkdir(parents=True, exist_ok=True)
    with _as_user_file_error(target, "cannot look at it"):
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
    with _as_user_file_error(target):
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


def _kept_mode(temp: _Temporary, overwrite: bool) -> int:
    """The permissions of the file the new one replaces, else what ``open`` would have given it."""
    if overwrite:
        with suppress(OSError):
            found = os.lstat(temp.target).st_mode
            if stat.S_ISREG(found):
                return stat.S_IMODE(found)
    try:  # read without setting it: os.umask would change it for every thread for a moment
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            umask = next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
    except (OSError, ValueError, IndexError, StopIteration):
        umask = os.umask(0o022)
        os.umask(umask)
    return 0o666 & ~umask
