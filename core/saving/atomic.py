"""Writing a folder atomically: ``write_folder_atomically(target, write)``.

``write(temp)`` fills a hidden ``.tmp-<name>-<id>@<pid>`` folder beside the target; every file and folder
in it is fsynced, and it then takes the target's place:

* If the process dies at any moment (SIGKILL, a crash, an exception), the target holds the previous
  content or the new one, each whole; never a mix, never a half-written file. (tests/test_crash_save.py
  kills a model save before each of its filesystem steps and at random moments.) Files and folders are
  fsynced before and after the swap so that a power cut behaves the same; that part is not tested.
* Replacing an existing folder is one ``renameat2(RENAME_EXCHANGE)`` on Linux, so the target is
  never missing; the previous content is then renamed ``.old-<name>-<id>`` at once, and removed once
  the user's files made in it meanwhile are in the target (killed before that, it stays, reported by
  ``list_runs``, never removed as stale). Where that call is unavailable (other systems, some
  filesystems) it falls back to two renames (target -> ``.old-<name>-<id>``, new -> target); a crash between them leaves the
  target missing and its complete previous content in ``.old-<name>-<id>``, which
  ``displaced_folders`` finds (``core.saving.runs.recover_interrupted_saves`` puts models back).
* A ``.tmp-*`` or ``.old-*`` folder is never the target: readers skip such leftovers.
* Only what the lab wrote is replaced: the new folder records its files (``core.saving.owned_files``),
  and every entry of the old folder the lab does not own (a user's notes, plots, links) is carried
  into the new folder before the swap, then named in one warning.
* The temporary folder's name carries this process's pid; the next write to the same target removes
  the temporary folders of writers that are gone (``core.saving.temp_files``).
"""
from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import stat
import sys
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from core.notices import notice
from core.saving.owned_files import (
    Carried,
    carry_user_files,
    catch_up,
    describe,
    fsync_folder,
    write_record,
)
from core.saving.temp_files import new_temp_path, remove_stale_temps

OLD_PREFIX = ".old-"
_OLD_FOLDER = re.compile(r"^\.old-(?P<name>.+)-[0-9a-f]{8}$")
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2  # from <fcntl.h> and <linux/fs.h>


def write_folder_atomically(target: str | Path, write: Callable[[Path], None],
                            owned_before: Iterable[str] = ()) -> Path:
    """Have ``write(temp)`` fill a new hidden folder beside ``target``, then put it in ``target``'s place.

    ``write`` creates plain files (and folders) under the path it is given; they are recorded as the
    lab's (``core.saving.owned_files``). Everything else already in ``target`` (user files) is carried
    into the new folder and named in a warning; ``owned_before`` names what a folder written before
    records existed owns (its format's files). Everything is fsynced before the swap and the parent
    folder after it. On any exception, from ``write``, from carrying or from the filesystem, the
    temporary folder is removed and the exception propagates; ``target`` then still holds its
    previous content. Returns ``target`` as a Path.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _put_back_displaced(target)
    if os.path.lexists(target) and not _is_folder(target):  # a link or a file there is never ours to replace
        raise FileExistsError(errno.EEXIST, "exists and is not a folder (a link or a file is never replaced)",
                              str(target))
    remove_stale_temps(target)
    temp = new_temp_path(target)
    temp.mkdir()
    carried = Carried()
    try:
        write(temp)
        write_record(temp)
        _fsync_tree(temp)
        if _is_folder(target):
            carried = carry_user_files(target, temp, owned_before)
        displaced = _swap_into_place(temp, target)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    fsync_folder(target.parent)  # make the rename itself survive a power cut
    if displaced is not None:
        _retire(displaced, target, owned_before, carried)
    if carried.entries:
        notice(describe(target, carried.entries))
    return target


def _put_back_displaced(target: Path) -> None:
    """A write killed between the two renames of the fallback left ``target`` missing and its previous
    content (the user's files included) in ``.old-<name>-<id>``: put the newest such folder back, so
    this write replaces it like any other and carries the user's files."""
    if os.path.lexists(target):
        return
    previous = [(os.lstat(path), path) for name, path in displaced_folders(target.parent) if name == target.name]
    previous = [(info.st_mtime, path) for info, path in previous if stat.S_ISDIR(info.st_mode)]
    for _, path in sorted(previous, reverse=True)[:1]:
        try:
            os.rename(path, target)
        except OSError:  # put back or written by someone else meanwhile
            pass


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _retire(displaced: Path, target: Path, owned_before: Iterable[str], carried: Carried) -> None:
    """Remove the previous content, once what the user changed in it meanwhile is in ``target``; if
    something could not be moved, keep it as ``.old-<name>-<id>`` (never removed as stale) and say so."""
    if catch_up(displaced, target, owned_before, carried):
        shutil.rmtree(displaced, ignore_errors=True)
        return
    kept = displaced
    if not displaced.name.startswith(OLD_PREFIX):
        kept = target.parent / f"{OLD_PREFIX}{target.name}-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(displaced, kept)
        except OSError:
            kept = displaced
    notice(f"{target} was replaced while files in it changed; the previous folder, with those files, is kept "
           f"in {kept}")


def _swap_into_place(new: Path, target: Path) -> Path | None:
    """Put ``new`` at ``target``; returns where the previous content now is (to remove), or None."""
    if _is_folder(target) and _exchange_folders(new, target):
        # `new` now holds the previous content, and with it any file the user made there while the new folder
        # was built: under a name that is never removed as stale, so a writer killed before it has moved those
        # files over loses none of them.
        old = target.parent / f"{OLD_PREFIX}{target.name}-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(new, old)
        except OSError:
            return new
        return old
    if _is_folder(target):
        old = target.parent / f"{OLD_PREFIX}{target.name}-{uuid.uuid4().hex[:8]}"
        os.rename(target, old)
        os.rename(new, target)  # a crash just before this leaves the target missing: see displaced_folders
        return old
    os.rename(new, target)
    return None


def _exchange_folders(new: Path, target: Path) -> bool:
    """Swap two existing paths in one step (Linux ``renameat2`` with ``RENAME_EXCHANGE``).

    False when the system or filesystem cannot, so the caller falls back to two renames.
    """
    rename_exchange = _renameat2()
    if rename_exchange is None:
        return False
    if rename_exchange(_AT_FDCWD, os.fsencode(new), _AT_FDCWD, os.fsencode(target), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(target))


def _renameat2():
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2  # glibc >= 2.28
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def _fsync_tree(folder: Path) -> None:
    """fsync every file under ``folder``, then the folder itself (its entries)."""
    for path in folder.iterdir():
        if path.is_dir():
            _fsync_tree(path)
        else:
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    fsync_folder(folder)


def displaced_folders(root: str | Path) -> list[tuple[str, Path]]:
    """(target name, ``.old-<name>-<id>`` folder) in ``root``, in name order, for every such folder whose
    target is missing: only the two-rename fallback leaves this state (killed between its renames),
    and the folder then holds the target's complete previous content."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.iterdir()):
        match = _OLD_FOLDER.match(path.name)
        if match and not (root / match["name"]).exists():
            found.append((match["name"], path))
    return found
