"""The one way a command writes a file the user named: ``claim_files(paths, overwrite)``.

The rules, so that writing a result never loses a user's file:

* Claimed before any work: each target is looked at with ``lstat`` (a link is never followed). A
  folder, a FIFO or a device is refused; an existing file or link is refused unless ``overwrite``.
  With ``overwrite`` a link at the target is replaced by the new file; what it pointed to is untouched.
* Written beside the target into a temporary of our own: ``.<name>.siamese-tmp-<host>-<pid>-<token>``,
  created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (an existing entry of that name, a link included, is
  never opened: another token is drawn). Every write goes through the claim's file descriptor.
* Put in place only when every file of the claim is whole: fsynced, then renamed onto the target
  (without ``overwrite`` by a hard link that fails if the target appeared meanwhile, so a file made
  by someone else during the run is never replaced), then the folder fsynced. Two runs aimed at one
  target never mix: each has its own temporary and the last rename wins, whole.
* On any failure (an exception, Ctrl-C, SIGTERM while the claim is open in the main thread, a full
  disk, a read-only file system) the temporaries are removed and the targets keep their old content;
  a ``UserFileError`` says what went wrong in one line.
* Leftovers of a command that was killed (SIGKILL, a power cut) are removed by the next claim in the
  same folder: a regular file with the temporary name whose writer process on this machine is gone
  (or, written on another machine, older than a day); ``core.saving.temp_files`` owns the names.

The renames of a claim with several files run one after the other: a crash between them can leave
the first file new and the second old, each whole.
"""
from __future__ import annotations

import errno
import os
import signal
import stat
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable

from core.saving.owned_files import fsync_folder
from core.saving.temp_files import create_temporary, remove_leftovers, unlink_quietly

_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}


class UserFileError(Exception):
    """A target that may not or could not be written. ``reason`` is one of ``REASONS``; ``str()`` names
    the path first (``"<path> exists; ..."``, ``"<path>: cannot write it (...)"``)."""

    REASONS = ("exists", "folder", "not_a_file", "no_folder", "unwritable", "write_failed")

    def __init__(self, path: Path, problem: str, reason: str):
        super().__init__(f"{path}{'' if problem[0] in ';:' or problem.startswith(' ') else ' '}{problem}")
        self.path, self.problem, self.reason = Path(path), problem, reason


class Terminated(KeyboardInterrupt):
    """SIGTERM while a claim is open: unwinds like Ctrl-C, so the temporaries are removed."""


def _failure(path: Path, error: OSError, doing: str = "cannot write it", reason: str = "write_failed") -> UserFileError:
    return UserFileError(path, f": {doing} ({error.strerror or error})", reason)


@contextmanager
def _as_user_file_error(path: Path, doing: str = "cannot write it", reason: str = "write_failed"):
    try:
        yield
    except OSError as error:
        raise _failure(path, error, doing, reason) from None


class OutputFile:
    """A file object on a claimed temporary whose write errors (a full disk...) are ``UserFileError``s."""

    def __init__(self, handle, path: Path):
        self._handle, self.path = handle, path

    def write(self, data):
        with _as_user_file_error(self.path):
            return self._handle.write(data)

    def flush(self) -> None:
        with _as_user_file_error(self.path):
            self._handle.flush()

    def close(self) -> None:
        with _as_user_file_error(self.path):
            self._handle.close()

    def discard(self) -> None:
        """Close without a word: the error already in flight says what went wrong."""
        try:
            self._handle.close()
        except (OSError, ValueError):
            pass

    def __enter__(self) -> "OutputFile":
        return self

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


class FileClaim:
    """The right to write ``targets``; use it as a ``with`` block: leaving it normally puts every file in
    place (``commit``), leaving it by an exception removes the temporaries (``abandon``)."""

    def __init__(self, targets: list[Path], overwrite: bool, mode: int | None = None):
        self.targets, self.overwrite = targets, overwrite
        self.mode = mode  # the new files' permissions; None: the replaced file's, else what open() gives
        self._temps: dict[Path, _Temporary] = {}
        self._files: list[OutputFile] = []  # closed (flushed) before the temporaries are fsynced
        self._done = False
        self._previous_sigterm = None
        self._sigterm_pending = False
        self._deferring = False

    # -- writing --------------------------------------------------------------------------------
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
        """Reserve ``size`` bytes for ``target`` now, so a full disk fails here and not inside a memory map
        (where it would be a SIGBUS)."""
        target = Path(target)
        fd = self.fileno(target)
        with _as_user_file_error(target, "cannot reserve its space"):
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as error:
                if error.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
                    raise
                _write_zeros(fd, size)  # a file system without fallocate: real zeros reserve it too

    # -- finishing --------------------------------------------------------------------------------
    def commit(self) -> None:
        """fsync every temporary, rename each onto its target, fsync the folders."""
        self._deferring = True
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
        finally:
            self._close()
            self._deferring = False
        self._raise_deferred_sigterm()

    def abandon(self) -> None:
        """Remove the temporaries; the targets keep what they held."""
        self._deferring = True
        try:
            self._remove_temporaries(unplace=False)
        finally:
            self._close()
            self._deferring = False

    def _remove_temporaries(self, unplace: bool) -> None:
        for temp in self._temps.values():
            if temp.is_ours(temp.temp):
                unlink_quietly(temp.temp)
            # A target placed by a hard link without overwrite was nothing before: the claim as a whole
            # failed, so it goes too (only if it is still our file).
            if unplace and temp.placed and not self.overwrite and temp.is_ours(temp.target):
                unlink_quietly(temp.target)

    def _close(self) -> None:
        if self._done:
            return
        self._done = True
        for opened in self._files:
            opened.discard()
        for temp in self._temps.values():
            try:
                os.close(temp.fd)
            except OSError:
                pass
        self._restore_sigterm()

    # -- SIGTERM ----------------------------------------------------------------------------------
    def _catch_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
                return  # someone (a server, a test runner) has its own plan for SIGTERM
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        except (ValueError, OSError):
            self._previous_sigterm = None

    def _on_sigterm(self, signum, frame) -> None:
        if self._deferring:  # mid-cleanup: finish it, then stop
            self._sigterm_pending = True
            return
        raise Terminated()

    def _raise_deferred_sigterm(self) -> None:
        if self._sigterm_pending:
            self._sigterm_pending = False
            raise Terminated()

    def _restore_sigterm(self) -> None:
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None

    def __enter__(self) -> "FileClaim":
        return self

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
    """Claim every path of ``targets`` for writing (the rules are in the module docstring) and create
    its temporary; ``create_folder`` makes a missing parent folder instead of refusing it; ``mode`` gives
    the new files fixed permissions. Raises ``UserFileError`` before anything is created when a target
    may not be written."""
    targets = [Path(target).expanduser() for target in targets]
    for target in targets:
        check_target(target, overwrite, create_folder)
    claim = FileClaim(targets, overwrite, mode)
    claim._catch_sigterm()
    try:
        for target in targets:
            remove_leftovers(target.parent)
            with _as_user_file_error(target, f"cannot write in {target.parent}", "unwritable"):
                temp, fd = create_temporary(target)
            claim._temps[target] = _Temporary(target, temp, fd)
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
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return
    except OSError as error:
        raise _failure(target, error, "cannot look at it") from None
    if stat.S_ISDIR(mode):
        raise UserFileError(target, "is a folder; name a file", "folder")
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise UserFileError(target, "is not a regular file", "not_a_file")
    if not overwrite:
        raise UserFileError(target, "exists; choose a new file or allow overwriting it", "exists")


def _place(temp: _Temporary, overwrite: bool) -> None:
    target = temp.target
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise _failure(target, error) from None
    if mode is not None and stat.S_ISDIR(mode):
        raise UserFileError(target, "is a folder; name a file", "folder")
    if mode is not None and not overwrite:
        raise UserFileError(target, "exists; choose a new file or allow overwriting it", "exists")
    with _as_user_file_error(target):
        if overwrite:
            os.replace(temp.temp, target)
            temp.placed = True
            return
        try:
            os.link(temp.temp, target, follow_symlinks=False)  # fails if anything appeared there meanwhile
        except FileExistsError:
            raise UserFileError(target, "exists; choose a new file or allow overwriting it", "exists") from None
        except OSError as error:
            if error.errno not in _NO_HARD_LINKS:
                raise
            if os.path.lexists(target):
                raise UserFileError(target, "exists; choose a new file or allow overwriting it", "exists") from None
            os.replace(temp.temp, target)  # no hard links here: checked just before, as close as it gets
        else:
            os.unlink(temp.temp)
        temp.placed = True


def write_file_atomically(target: str | Path, data: bytes, overwrite: bool = True, mode: int | None = None) -> None:
    """``data`` as ``target``'s whole content under the rules of ``claim_files``: a reader sees the old file
    or the new one, never part of it; without ``overwrite`` an existing target is never replaced
    (``UserFileError`` with reason "exists")."""
    with claim_files([target], overwrite=overwrite, mode=mode) as claim, claim.open(target) as handle:
        handle.write(data)


def _kept_mode(temp: _Temporary, overwrite: bool) -> int:
    """The permissions of the file the new one replaces, else what ``open`` would have given it."""
    mode = None
    if overwrite:
        try:
            found = os.lstat(temp.target)
            mode = stat.S_IMODE(found.st_mode) if stat.S_ISREG(found.st_mode) else None
        except OSError:
            pass
    return mode if mode is not None else 0o666 & ~_umask()


def _umask() -> int:
    try:  # read without setting it: os.umask would change it for every thread for a moment
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    current = os.umask(0o022)
    os.umask(current)
    return current


def _write_zeros(fd: int, size: int) -> None:
    block = bytes(1 << 20)
    os.lseek(fd, 0, os.SEEK_SET)
    written = 0
    while written < size:
        written += os.write(fd, block[: min(len(block), size - written)])
    os.lseek(fd, 0, os.SEEK_SET)


__all__ = ["FileClaim", "OutputFile", "Terminated", "UserFileError", "check_target", "claim_files",
           "write_file_atomically"]
