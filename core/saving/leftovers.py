"""What a killed folder writer leaves beside its target, and when the next writer may remove it.

``write_folder_atomically`` builds a folder as ``.tmp-<name>-<id>@<host>-<pid>`` beside its target:
the name carries the writing machine (``core.saving.temp_files``' host tag) and process. Such a
folder is stale, and removed by the next write to the same target (``remove_stale_temps``), when its
writer is gone:

* it was written on this machine and its pid names no living process (``kill -9``, a crash, a
  power cut); written on another machine (a shared folder), once it is a day old, since its writer
  cannot be asked (the rule of ``core.saving.temp_files`` for single files);
* it has no writer in its name (``.tmp-<name>-<id>``, named so by versions before writers were
  recorded), the caller holds the target's claim lock (``core.saving.output``), and the folder was
  last changed before that lock was taken: a claimed writer makes its folder only after taking the
  lock, so the folder is older than its lock and belongs to no writer now.

A folder whose pid names a living process is never removed, even when that pid was reused since: a
leftover then stays until that process ends, rather than risking a live writer's folder.

A temporary folder never holds the only copy of anything: before the swap it holds the new files and
hard links to the user's files, which are still in the target; after it, the previous content, whose
user files were carried into the target first. So removing a stale one loses nothing.

A writer's claim lock (``.<name>.lock``) needs no cleaning here: an ``flock`` ends with its process,
and the next claim of the same target takes that file over and removes it when it is done
(``core.saving.locks``, which never removes a file of that name the lab did not create).
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import time
import uuid
from pathlib import Path

from core.saving.temp_files import FOREIGN_LEFTOVER_SECONDS, host_tag, process_alive

TEMP_PREFIX = ".tmp-"
_TEMP_WITH_WRITER = re.compile(r"^\.tmp-(?P<name>.+)-[0-9a-f]{8}@(?P<host>[0-9a-f]{6})-(?P<pid>[0-9]{1,10})$")
_TEMP_WITHOUT_WRITER = re.compile(r"^\.tmp-(?P<name>.+)-[0-9a-f]{8}$")  # folders left by earlier versions


def new_temp_path(target: Path) -> Path:
    """A fresh temporary name beside ``target`` that records this machine and process as its writer."""
    return target.parent / f"{TEMP_PREFIX}{target.name}-{uuid.uuid4().hex[:8]}@{host_tag()}-{os.getpid()}"


def stale_temps(target: str | Path, locked_since: float | None = None) -> list[Path]:
    """The stale temporary folders of ``target`` (see the module docstring); ``locked_since`` is when the
    caller took the target's claim lock, or None when it holds none."""
    target = Path(target)
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return []
    found, host, now = [], host_tag(), time.time()
    for entry in entries:
        with_writer = _TEMP_WITH_WRITER.match(entry.name)
        match = with_writer or _TEMP_WITHOUT_WRITER.match(entry.name)
        if match is None or match["name"] != target.name:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode):  # a link or a file of that name is nobody's folder: left alone
            continue
        if with_writer is None:  # no writer to ask: stale once the target's lock, taken after it changed, is ours
            stale = locked_since is not None and info.st_mtime < locked_since
        elif with_writer["host"] != host:
            stale = now - info.st_mtime > FOREIGN_LEFTOVER_SECONDS
        else:
            pid = int(with_writer["pid"])
            stale = pid != os.getpid() and not process_alive(pid)
        if stale:
            found.append(Path(entry.path))
    return sorted(found)


def remove_stale_temps(target: str | Path, locked_since: float | None = None) -> list[Path]:
    """Remove ``stale_temps(target, locked_since)`` (never following a link); returns what was removed."""
    removed = []
    for path in stale_temps(target, locked_since):
        shutil.rmtree(path, ignore_errors=True)  # rmtree unlinks links inside, never follows them
        if not os.path.lexists(path):
            removed.append(path)
    return removed
