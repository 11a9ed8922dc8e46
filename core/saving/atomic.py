"""Writing a folder atomically: ``write_folder_atomically(target, write)``.

``write(temp)`` fills a hidden ``.tmp-<name>-<id>`` folder beside the target; every file and folder
in it is fsynced, and it then takes the target's place:

* If the process dies at any moment (SIGKILL, a crash, an exception), the target holds the previous
  content or the new one, each whole; never a mix, never a half-written file. (tests/test_crash_save.py
  kills a model save before each of its filesystem steps and at random moments.) Files and folders are
  fsynced before and after the swap so that a power cut behaves the same; that part is not tested.
* Replacing an existing folder is one ``renameat2(RENAME_EXCHANGE)`` on Linux, so the target is
  never missing. Where that call is unavailable (other systems, some filesystems) it falls back to
  two renames (target -> ``.old-<name>-<id>``, new -> target); a crash between them leaves the
  target missing and its complete previous content in ``.old-<name>-<id>``, which
  ``displaced_folders`` finds (``core.saving.runs.recover_interrupted_saves`` puts models back).
* A ``.tmp-*`` or ``.old-*`` folder is never the target: readers skip such leftovers.
"""
from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import sys
import uuid
from pathlib import Path
from typing import Callable

TEMP_PREFIX, OLD_PREFIX = ".tmp-", ".old-"
_OLD_FOLDER = re.compile(r"^\.old-(?P<name>.+)-[0-9a-f]{8}$")
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2  # from <fcntl.h> and <linux/fs.h>


def write_folder_atomically(target: str | Path, write: Callable[[Path], None]) -> Path:
    """Have ``write(temp)`` fill a new hidden folder beside ``target``, then put it in ``target``'s place.

    ``write`` creates plain files (and folders) under the path it is given. Everything is fsynced
    before the swap and the parent folder after it. On any exception, from ``write`` or from the
    filesystem, the temporary folder is removed and the exception propagates; ``target`` then still
    holds its previous content. Returns ``target`` as a Path.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.parent / f"{TEMP_PREFIX}{target.name}-{uuid.uuid4().hex[:8]}"
    temp.mkdir()
    try:
        write(temp)
        _fsync_tree(temp)
        _swap_into_place(temp, target)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    _fsync_folder(target.parent)  # make the rename itself survive a power cut
    return target


def _swap_into_place(new: Path, target: Path) -> None:
    if target.exists() and _exchange_folders(new, target):
        shutil.rmtree(new, ignore_errors=True)  # `new` now holds the previous content
    elif target.exists():
        old = target.parent / f"{OLD_PREFIX}{target.name}-{uuid.uuid4().hex[:8]}"
        os.rename(target, old)
        os.rename(new, target)  # a crash just before this leaves the target missing: see displaced_folders
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(new, target)


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
    _fsync_folder(folder)


def _fsync_folder(folder: Path) -> None:
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open a directory; the rename is still atomic there
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


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
