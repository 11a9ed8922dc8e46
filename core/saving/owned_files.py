"""Which files of a folder the lab wrote, so that replacing the folder replaces only those.

Every folder ``write_folder_atomically`` writes records what its writer made (``RECORD_FILE``; before records, the
format's files, ``owned_before``). Everything else is the user's: ``carry_user_files`` links it into the new folder
before the swap, ``catch_up`` moves over what changed meanwhile, and a user's entry where the new folder needs the
name stops the write (``CarryOverError``) with the old folder untouched.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from core.saving.files import CONFIG_MAX_BYTES, ModelLoadError, read_json_file

RECORD_FILE = ".siamese_lab_files.json"
RECORD_FORMAT = "siamese-lab-files"
RECORD_VERSION = 1
RECORD_MAX_PATHS = 10_000  # a lab folder holds a handful; more is not a record we wrote
SHOWN_NAMES = 12  # user entries named in one warning; the rest are counted
# What os.link raises where a file system cannot link: the caller falls back to a copy or a rename.
NO_HARD_LINKS = {errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EACCES, errno.ENOSYS}


class CarryOverError(OSError):
    """A user's file that cannot be carried into the replacing folder (an ``OSError``, as any failed write)."""


@dataclass(frozen=True)
class Owned:
    """The relative paths of the files and folders the lab wrote in one folder."""
    files: frozenset[str]
    folders: frozenset[str]


@dataclass
class Carried:
    """What ``carry_user_files`` carried: the user's top entries, and the (device, inode) of each file it linked."""
    entries: list[str] = field(default_factory=list)
    linked: dict[str, tuple[int, int]] = field(default_factory=dict)


def write_record(folder: Path) -> None:
    """Record everything now under ``folder`` (what the lab just wrote) in its ``RECORD_FILE``."""
    files, folders = {RECORD_FILE}, set()
    for here, dirs, names in os.walk(folder):
        relative = PurePosixPath(Path(here).relative_to(folder).as_posix())
        folders.update(str(relative / name) for name in dirs)
        files.update(str(relative / name) for name in names)
    record = {"format": RECORD_FORMAT, "version": RECORD_VERSION, "files": sorted(files), "folders": sorted(folders)}
    (folder / RECORD_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")


def _is_clean(path) -> bool:
    """Whether ``path`` is a relative path inside a folder (no leading ``/``, no empty, ``.`` or ``..`` part)."""
    return isinstance(path, str) and "\0" not in path and all(part not in ("", ".", "..") for part in path.split("/"))


def owned_by(folder: Path, owned_before: Iterable[str] = ()) -> Owned:
    """What the lab owns in ``folder``: its record, or ``owned_before`` when it has no usable record."""
    record = None
    with suppress(OSError, ModelLoadError):
        if stat.S_ISREG(os.lstat(folder / RECORD_FILE).st_mode):  # a link of that name is not our record
            record = read_json_file(folder / RECORD_FILE, CONFIG_MAX_BYTES, folder=folder)
    usable = (isinstance(record, dict) and record.get("format") == RECORD_FORMAT
              and isinstance(record.get("files"), list) and isinstance(record.get("folders"), list)
              and len(record["files"]) + len(record["folders"]) <= RECORD_MAX_PATHS)
    files = {path for path in (record["files"] if usable else owned_before) if _is_clean(path)} | {RECORD_FILE}
    folders = {path for path in record["folders"] if _is_clean(path)} if usable else set()
    for path in files:  # a file's folders are the lab's too
        folders.update(str(parent) for parent in PurePosixPath(path).parents[:-1])
    return Owned(frozenset(files), frozenset(folders))


def user_entries(folder: Path, owned: Owned) -> list[str]:
    """The entries of ``folder`` the lab does not own, as relative paths: a user's folder is one entry; inside a
    lab's folder the walk goes on. A link is never followed: it is the user's, whatever its name."""
    found, pending = [], [""]
    while pending:
        prefix = pending.pop()
        try:
            entries = list(os.scandir(folder / prefix))
        except OSError:
            continue
        for entry in entries:
            relative = prefix + entry.name
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) and relative in owned.folders:
                pending.append(relative + "/")
            elif stat.S_ISDIR(mode) or stat.S_ISLNK(mode) or relative not in owned.files:
                found.append(relative)
    return sorted(found)


def carry_user_files(old: Path, new: Path, owned_before: Iterable[str] = ()) -> Carried:
    """Put every user entry of ``old`` into ``new`` at the same path; ``CarryOverError`` when one cannot be."""
    carried = Carried(user_entries(old, owned_by(old, owned_before)))
    touched: set[Path] = set()
    for relative in carried.entries:
        _make_room(new, relative, old, touched)
        _carry(old / relative, new / relative, relative, carried, touched)
    for folder in touched:
        fsync_folder(folder)
    return carried


def _cannot_keep(path: Path, error: OSError) -> CarryOverError:
    return CarryOverError(f"{path} was not written by Siamese Lab and could not be kept in the new folder "
                          f"({error.strerror or error}); nothing was replaced")


def _make_room(new: Path, relative: str, old: Path, touched: set[Path]) -> None:
    """Make ``relative``'s folders in ``new`` like ``old``'s; ``CarryOverError`` when something is in the way."""
    here = new
    try:
        for part in PurePosixPath(relative).parts[:-1]:
            here = here / part
            if not os.path.lexists(here):
                os.mkdir(here)
                shutil.copymode(old / here.relative_to(new), here)
                touched.add(here.parent)
            elif not stat.S_ISDIR(os.lstat(here).st_mode):
                raise CarryOverError(f"{old / relative} was not written by Siamese Lab and the new folder has a file "
                                     f"at {here.relative_to(new)}; move it away and try again")
        in_the_way = os.path.lexists(new / relative)
    except CarryOverError:
        raise
    except OSError as error:
        raise _cannot_keep(old / relative, error) from None
    touched.add(here)
    if in_the_way:
        raise CarryOverError(f"{old / relative} was not written by Siamese Lab and the new folder needs that name; "
                             "move it away and try again")


def _carry(source: Path, target: Path, relative: str, carried: Carried, touched: set[Path]) -> None:
    try:
        info = os.lstat(source)
        if stat.S_ISDIR(info.st_mode):
            os.mkdir(target)
            touched.add(target)
            for name in sorted(os.listdir(source)):
                _carry(source / name, target / name, f"{relative}/{name}", carried, touched)
            shutil.copystat(source, target, follow_symlinks=False)  # after its entries changed its times
            return
        try:
            os.link(source, target, follow_symlinks=False)  # the same file; a symlink as the link itself
            carried.linked[relative] = (info.st_dev, info.st_ino)
            return
        except OSError as error:
            if error.errno not in NO_HARD_LINKS:
                raise
        if stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(source), target)
        elif stat.S_ISREG(info.st_mode):
            shutil.copy2(source, target, follow_symlinks=False)
            with open(target, "rb") as handle:
                os.fsync(handle.fileno())
        else:
            raise CarryOverError(f"{source} was not written by Siamese Lab and cannot be kept (this filesystem "
                                 "links no files, and it is not a regular file to copy); move it away and try again")
    except CarryOverError:
        raise
    except OSError as error:
        raise _cannot_keep(source, error) from None


def catch_up(displaced: Path, target: Path, owned_before: Iterable[str], carried: Carried) -> bool:
    """After the swap: move into ``target`` every user entry that appeared in the previous folder (``displaced``)
    while the new one was built, and every file the user replaced there meanwhile. False when one could not be
    moved (the caller then keeps ``displaced``)."""
    pending = user_entries(displaced, owned_by(displaced, owned_before))
    complete = True
    while pending:
        relative = pending.pop()
        source, destination = displaced / relative, target / relative
        try:
            info = os.lstat(source)
            if not os.path.lexists(destination):
                if os.path.isdir(destination.parent) and not os.path.islink(destination.parent):
                    os.rename(source, destination)
                else:
                    complete = False
            elif stat.S_ISDIR(info.st_mode) and not os.path.islink(destination) and destination.is_dir():
                pending.extend(f"{relative}/{name}" for name in os.listdir(source))
            elif relative in carried.linked and (info.st_dev, info.st_ino) != carried.linked[relative] \
                    and not stat.S_ISDIR(info.st_mode):
                os.replace(source, destination)  # the user saved a new version of the file meanwhile
        except OSError:
            complete = False
    return complete


def describe(target: Path, entries: list[str]) -> str:
    """One line naming the user's entries kept in ``target`` (folders end in ``/``)."""
    shown = [f"{name[:200]}/" if os.path.isdir(target / name) and not os.path.islink(target / name) else name[:200]
             for name in entries[:SHOWN_NAMES]]
    more = f" and {len(entries) - SHOWN_NAMES} more" if len(entries) > SHOWN_NAMES else ""
    return (f"kept {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} in {target} that Siamese Lab did not "
            f"write: {', '.join(shown)}{more} (an overwrite replaces only the lab's own files)")


def fsync_folder(folder: Path) -> None:
    """fsync a folder's entries (its new names survive a power cut); a no-op where folders cannot be opened."""
    with suppress(OSError):
        handle = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)
