"""Writing a folder atomically: ``write_folder_atomically(target, write)``.

``write(temp)`` fills a temporary folder beside the target; it is fsynced and swapped in with one
``renameat2(RENAME_EXCHANGE)``, so a crash leaves the previous content or the new one, whole. Without that call it
takes two renames; a crash between them leaves the previous content in ``.old-<name>-<id>``, which the next write
(or ``runs.recover_interrupted_saves``) puts back. The user's files in the target are carried over (``owned_files``).
"""
from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import stat
import uuid
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path

from core.notices import notice
from core.saving.owned_files import Carried, carry_user_files, catch_up, describe, fsync_folder, write_record
from core.saving.temp_files import new_temp_path, remove_stale_temps

OLD_PREFIX = ".old-"
_OLD_FOLDER = re.compile(r"^\.old-(?P<name>.+)-[0-9a-f]{8}$")
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2  # from <fcntl.h> and <linux/fs.h>


def write_folder_atomically(target: str | Path, write: Callable[[Path], None],
                            owned_before: Iterable[str] = ()) -> Path:
    """Have ``write(temp)`` fill a new hidden folder beside ``target``, then put it in ``target``'s place; what
    else ``target`` holds is the user's (``owned_before``: what a folder from before records owns), carried over
    and named in a warning. On any exception ``target`` keeps its previous content. Returns ``target``."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _put_back_displaced(target)
    if os.path.lexists(target) and not _is_folder(target):  # a link or a file there is never ours to replace
        raise FileExistsError(errno.EEXIST, "exists and is not a folder (a link or a file is never replaced)",
                              str(target))
    remove_stale_temps(target)
    temp = new_temp_path(target)
    temp.mkdir()
    try:
        write(temp)
        write_record(temp)
        _fsync_tree(temp)
        carried = carry_user_files(target, temp, owned_before)  # none when there is no target yet
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
    """Put back what a fallback killed between its two renames left in ``.old-*``, so this write carries it over."""
    if os.path.lexists(target):
        return
    previous = [path for name, path in displaced_folders(target.parent) if name == target.name and _is_folder(path)]
    if previous:
        with suppress(OSError):  # put back or written by someone else meanwhile
            os.rename(max(previous, key=lambda path: (os.lstat(path).st_mtime, path)), target)


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _old_path(target: Path) -> Path:
    return target.parent / f"{OLD_PREFIX}{target.name}-{uuid.uuid4().hex[:8]}"


def _retire(displaced: Path, target: Path, owned_before: Iterable[str], carried: Carried) -> None:
    """Remove the previous content once the user's changes in it are in ``target``; else keep it and say so."""
    if catch_up(displaced, target, owned_before, carried):
        shutil.rmtree(displaced, ignore_errors=True)
        return
    kept = displaced
    if not displaced.name.startswith(OLD_PREFIX):  # a temporary's name: one never removed as stale
        with suppress(OSError):
            kept = displaced.rename(_old_path(target))
    notice(f"{target} was replaced while files in it changed; the previous folder, with those files, is kept "
           f"in {kept}")


def _swap_into_place(new: Path, target: Path) -> Path | None:
    """Put ``new`` at ``target``; returns where the previous content now is (to remove), or None."""
    if not _is_folder(target):
        os.rename(new, target)
        return None
    old = _old_path(target)
    if _exchange_folders(new, target):
        # `new` now holds the previous content, with any file the user made there meanwhile: under a name never
        # removed as stale, so a writer killed before it has moved those files over loses none of them.
        with suppress(OSError):
            os.rename(new, old)
            return old
        return new
    os.rename(target, old)
    os.rename(new, target)  # a crash just before this leaves the target missing: see displaced_folders
    return old


def _exchange_folders(new: Path, target: Path) -> bool:
    """Swap two existing paths in one step; False where the system or filesystem cannot."""
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
    """Linux's ``renameat2`` (glibc >= 2.28), or None."""
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return function


def _fsync_tree(folder: Path) -> None:
    """fsync every file under ``folder``, then each folder (its entries)."""
    for here, _, names in os.walk(folder):
        for name in names:
            with open(os.path.join(here, name), "rb") as handle:
                os.fsync(handle.fileno())
        fsync_folder(Path(here))


def displaced_folders(root: str | Path) -> list[tuple[str, Path]]:
    """(target name, ``.old-<name>-<id>``) in ``root`` for each missing target: a fallback killed between renames."""
    root = Path(root)
    matches = [(_OLD_FOLDER.match(path.name), path) for path in sorted(root.iterdir())] if root.is_dir() else []
    return [(match["name"], path) for match, path in matches if match and not (root / match["name"]).exists()]
