"""The one way a command writes a file the user named: ``claim_files(paths, overwrite)`` claims every target before
any work (a folder, FIFO or device refused; an existing file or link only with ``overwrite``, never followed); each
is written beside and renamed into place once every file of the claim is whole, without ``overwrite`` by a hard link,
so a file made meanwhile is never replaced. On any failure the targets keep their content.
"""
from __future__ import annotations

import os
import stat
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Iterable

from core.saving.atomic import create_temporary, fsync_folder, remove_stale_temps


class UserFileError(Exception):
    """A target that may not be written, named; ``reason``: exists, folder, not_a_file, no_folder or unwritable."""

    def __init__(self, path: Path, problem: str, reason: str):
        super().__init__(f"{path}{'' if problem[0] in ';:' or problem.startswith(' ') else ' '}{problem}")
        self.path, self.problem, self.reason = Path(path), problem, reason


def _exists(target: Path) -> UserFileError:
    return UserFileError(target, "exists; choose a new file or allow overwriting it", "exists")


def _folder(target: Path) -> UserFileError:
    return UserFileError(target, "is a folder; name a file", "folder")


@contextmanager
def _as_unwritable(path: Path, doing: str):
    try:
        yield
    except OSError as error:
        raise UserFileError(path, f": {doing} ({error.strerror or error})", "unwritable") from None


def _mode(path: Path) -> int | None:
    """``lstat``'s mode of ``path``; None when nothing is there."""
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return None


class FileClaim(AbstractContextManager):
    """The right to write ``targets``, as a ``with`` block: leaving it normally puts every file in place
    (``commit``), by an exception removes the temporaries (``abandon``)."""

    def __init__(self, overwrite: bool, mode: int | None = None):
        self.overwrite = overwrite
        self.mode = mode  # the new files' permissions; None: the replaced file's, else 0666 less the umask
        self._temps: dict[Path, tuple[Path, int]] = {}  # target -> (temporary, its descriptor)
        self._placed: list[Path] = []
        self._files: list = []  # closed (flushed) before the temporaries are fsynced
        self._done = False

    def fileno(self, target: str | Path) -> int:
        """The temporary's descriptor (for a memory map); the claim closes it."""
        return self._temps[Path(target)][1]

    def open(self, target: str | Path, mode: str = "wb", **options):
        """A file object writing ``target``'s temporary (``open``'s ``mode`` and options, e.g. ``encoding``)."""
        opened = open(self.fileno(target), mode, closefd=False, **options)
        self._files.append(opened)
        return opened

    def allocate(self, target: str | Path, size: int) -> None:
        """Reserve ``size`` bytes for ``target``: a full disk fails here, not as a SIGBUS in a memory map (glibc
        writes zeros where the file system has no fallocate)."""
        os.posix_fallocate(self.fileno(target), 0, size)

    def commit(self) -> None:
        """fsync every temporary, put each in its target's place, fsync the folders."""
        try:
            for opened in self._files:
                opened.close()
            for target, (temp, fd) in self._temps.items():
                if self.mode is not None or self.overwrite:
                    replaced = _mode(target) if self.mode is None else None
                    kept = stat.S_IMODE(replaced) if replaced and stat.S_ISREG(replaced) else None
                    os.fchmod(fd, self.mode if self.mode is not None else kept or stat.S_IMODE(os.fstat(fd).st_mode))
                os.fsync(fd)
            for target, (temp, _) in self._temps.items():
                self._place(target, temp)
            for folder in {target.parent for target in self._temps}:
                fsync_folder(folder)
        finally:
            self.abandon()

    def _place(self, target: Path, temp: Path) -> None:
        mode = _mode(target)
        if mode is not None and stat.S_ISDIR(mode):
            raise _folder(target)
        if self.overwrite:
            os.replace(temp, target)
        else:
            try:
                os.link(temp, target, follow_symlinks=False)  # fails if anything is there, even since the check
            except FileExistsError:
                raise _exists(target) from None
            except OSError:  # a file system without hard links: checked just before, as close as it gets
                if os.path.lexists(target):
                    raise _exists(target) from None
                os.replace(temp, target)
        self._placed.append(target)

    def abandon(self) -> None:
        """Close every descriptor and remove the temporaries (the targets keep what they held); on a failed commit
        without ``overwrite``, the targets already placed too (they were nothing before, and the claim failed)."""
        if self._done:
            return
        self._done = True
        for opened in self._files:
            with suppress(OSError, ValueError):  # the error already in flight says what went wrong
                opened.close()
        for target, (temp, fd) in self._temps.items():
            inode = os.fstat(fd).st_ino
            os.close(fd)
            failed = not self.overwrite and len(self._placed) < len(self._temps)
            for path in (temp, *([target] if failed and target in self._placed else [])):
                with suppress(OSError):
                    if os.lstat(path).st_ino == inode:  # only our own file, never what replaced it since
                        os.unlink(path)

    def __exit__(self, kind, error, trace) -> None:
        if not self._done:
            self.commit() if kind is None else self.abandon()


def claim_files(targets: Iterable[str | Path], overwrite: bool = False, create_folder: bool = False,
                mode: int | None = None) -> FileClaim:
    """Claim every path of ``targets`` and create its temporary, or raise ``UserFileError`` before anything is
    created; ``create_folder`` makes a missing parent folder, ``mode`` gives the new files fixed permissions."""
    targets = [Path(target).expanduser() for target in targets]
    for target in targets:
        check_target(target, overwrite, create_folder)
    claim = FileClaim(overwrite, mode)
    try:
        for target in targets:
            remove_stale_temps(target)
            with _as_unwritable(target, f"cannot write in {target.parent}"):
                claim._temps[target] = create_temporary(target)
    except BaseException:
        claim.abandon()
        raise
    return claim


def check_target(target: Path, overwrite: bool, create_folder: bool = False) -> None:
    """``UserFileError`` unless ``target`` may be written (with ``overwrite`` when something is there)."""
    if target.name in ("", ".", ".."):
        raise _folder(target)
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
        raise _folder(target)
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise UserFileError(target, "is not a regular file", "not_a_file")
    if not overwrite:
        raise _exists(target)


def write_file_atomically(target: str | Path, data: bytes, mode: int | None = None) -> None:
    """``data`` as ``target``'s whole content, through ``claim_files``: a reader sees the old file or the new one."""
    with claim_files([target], overwrite=True, mode=mode) as claim, claim.open(target) as handle:
        handle.write(data)
