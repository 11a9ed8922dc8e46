"""Writing a folder atomically: ``write_folder_atomically(target, write)``.

``write(temp)`` fills a temporary folder beside the target (named after its writer: ``temp_files``); it is fsynced,
then put in place by two renames: the previous folder aside to ``.old-<name>-<id>``, the new one onto the target;
the previous one is then removed. The one crash window lies between the two renames: the target is missing while
its previous content sits whole beside it under the aside name. ``put_back_displaced`` renames it back; the next
write of the target, a read of a model there (``read_config``) and ``list_runs`` call it. A folder holding files
the lab did not write is never replaced (``owned_files.refuse_foreign_files``): the user moves them first.
"""
from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import uuid
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path

from core.saving.owned_files import fsync_folder, refuse_foreign_files, write_record
from core.saving.temp_files import new_temp_path, remove_stale_temps

OLD_PREFIX = ".old-"
_OLD_FOLDER = re.compile(r"^\.old-(?P<name>.+)-[0-9a-f]{8}$")


def write_folder_atomically(target: str | Path, write: Callable[[Path], None],
                            owned_before: Iterable[str] = ()) -> Path:
    """Have ``write(temp)`` fill a new hidden folder beside ``target``, then put it in ``target``'s place.
    ``ForeignFilesError`` (an ``OSError``) when ``target`` holds anything the lab did not write (``owned_before``:
    what a folder from before records owns). On any exception ``target`` keeps its previous content. Returns it."""
    target = Path(target)
    owned_before = tuple(owned_before)
    target.parent.mkdir(parents=True, exist_ok=True)
    put_back_displaced(target)
    if os.path.lexists(target) and not _is_folder(target):  # a link or a file there is never ours to replace
        raise FileExistsError(errno.EEXIST, "exists and is not a folder (a link or a file is never replaced)",
                              str(target))
    refuse_foreign_files(target, owned_before)  # before the work; checked again once the folder is aside
    remove_stale_temps(target)
    temp = new_temp_path(target)
    temp.mkdir()
    old = None
    try:
        write(temp)
        write_record(temp)
        _fsync_tree(temp)
        if _is_folder(target):
            old = target.parent / f"{OLD_PREFIX}{target.name}-{uuid.uuid4().hex[:8]}"
            os.rename(target, old)
            refuse_foreign_files(old, owned_before, shown_as=target)  # a file the user put there meanwhile
        os.rename(temp, target)  # a crash just before this leaves the target missing: put_back_displaced
    except BaseException:
        if old is not None and not os.path.lexists(target):
            with suppress(OSError):
                os.rename(old, target)
        shutil.rmtree(temp, ignore_errors=True)
        raise
    fsync_folder(target.parent)  # make the renames themselves survive a power cut
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target


def put_back_displaced(target: str | Path) -> bool:
    """Rename back the previous folder a writer killed between its two renames left beside a missing ``target``
    (the newest, if several); whether one was put back."""
    target = Path(target)
    if os.path.lexists(target):
        return False
    previous = [path for name, path in displaced_folders(target.parent) if name == target.name and _is_folder(path)]
    if not previous:
        return False
    try:
        os.rename(max(previous, key=lambda path: (os.lstat(path).st_mtime, path)), target)
    except OSError:  # put back or written by someone else meanwhile
        return False
    return True


def displaced_folders(root: str | Path) -> list[tuple[str, Path]]:
    """(target name, ``.old-<name>-<id>``) in ``root`` for each missing target: a writer killed between renames."""
    root = Path(root)
    matches = [(_OLD_FOLDER.match(path.name), path) for path in sorted(root.iterdir())] if root.is_dir() else []
    return [(match["name"], path) for match, path in matches if match and not os.path.lexists(root / match["name"])]


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _fsync_tree(folder: Path) -> None:
    """fsync every file under ``folder``, then each folder (its entries)."""
    for here, _, names in os.walk(folder):
        for name in names:
            with open(os.path.join(here, name), "rb") as handle:
                os.fsync(handle.fileno())
        fsync_folder(Path(here))
