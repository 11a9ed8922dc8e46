"""The temporaries a user file is written through (``core.saving.user_files``): their names, how one is
created without following anything, and how those of a killed writer are found and removed.

A temporary is ``.<name>.siamese-tmp-<host>-<pid>-<token>`` beside its target: ``<name>`` is the
target's name (its first 40 characters), ``<host>`` a tag of this machine's host name, ``<pid>`` the
writing process and ``<token>`` 8 random hex digits. A regular file of that form whose writer on this
machine is gone is a leftover of a command that was killed; one written on another machine (a shared
folder) counts as a leftover once it is a day old, since its writer cannot be asked.
"""
from __future__ import annotations

import hashlib
import os
import re
import secrets
import socket
import stat
import time
from pathlib import Path

TEMP_MARK = ".siamese-tmp-"
FOREIGN_LEFTOVER_SECONDS = 24 * 3600
NAME_CHARS = 40  # of the target's name kept in its temporary's name: file names stop at 255 bytes
_LEFTOVER = re.compile(r"^\..*" + re.escape(TEMP_MARK) + r"(?P<host>[0-9a-f]{6})-(?P<pid>\d+)-[0-9a-f]{8}$",
                       re.DOTALL)
_CREATE_FLAGS = (os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0))


def create_temporary(target: Path) -> tuple[Path, int]:
    """A new empty temporary for ``target`` (mode 0600) and its open descriptor. ``O_EXCL`` with
    ``O_NOFOLLOW``: an entry already there under the drawn name (a file, a link, a folder) is never
    opened; another name is drawn. Raises ``OSError`` when the folder cannot be written."""
    prefix = f".{target.name[:NAME_CHARS]}{TEMP_MARK}{host_tag()}-{os.getpid()}-"
    for _ in range(100):
        temp = target.parent / f"{prefix}{token()}"
        try:
            return temp, os.open(temp, _CREATE_FLAGS, 0o600)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {target.parent}")


def token() -> str:
    """The random part of a temporary's name (tests replace it to make names collide)."""
    return secrets.token_hex(4)


def host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:6]


def remove_leftovers(folder: Path) -> list[Path]:
    """Remove the leftovers of killed writers in ``folder`` (the rule is in the module docstring) and
    return them. Only regular files are removed, never a link or a folder of such a name."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    host, now = host_tag(), time.time()
    for entry in entries:
        match = _LEFTOVER.match(entry.name)
        if not match:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode):
            continue
        if match["host"] == host:
            gone = not process_alive(int(match["pid"]))
        else:
            gone = now - info.st_mtime > FOREIGN_LEFTOVER_SECONDS
        if gone and unlink_quietly(Path(entry.path)):
            removed.append(Path(entry.path))
    return removed


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (another user's included)."""
    if pid <= 0:
        return False  # never signal 0 or a negative pid: those name process groups
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except (OSError, OverflowError):  # no such process, or a pid no process can have
        return False
    return True


def unlink_quietly(path: Path) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False
