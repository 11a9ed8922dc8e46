"""Reading files that someone else may have written: regular files only, never more than a cap; SQLite read-only.

``open_regular_file`` opens with ``O_NONBLOCK`` (a FIFO never makes it wait), refuses anything ``fstat`` does not
call a regular file (whatever link led there), a file over the caller's cap before a byte is read, and one outside
``folder`` when given. A missing file is ``FileNotFoundError``; any other refusal a ``ModelLoadError`` saying why.
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
from pathlib import Path
from typing import Iterator

MiB = 1024 * 1024
CONFIG_MAX_BYTES = 1 * MiB  # config.json, meta.json and other small JSON files
VOCAB_MAX_BYTES = 64 * MiB  # a tokenizer's vocabulary file


class ModelLoadError(ValueError):
    """A model folder (or a file in it) that cannot be used; the message says which file and why."""


@contextlib.contextmanager
def open_regular_file(path: str | Path, max_bytes: int, folder: str | Path | None = None) -> Iterator[tuple[int, int]]:
    """``(fd, size)`` of ``path`` opened read-only, once it is a regular file of at most ``max_bytes`` bytes (inside
    ``folder`` when given), closed on exit; ``FileNotFoundError`` or ``ModelLoadError`` otherwise."""
    path = Path(path)
    if folder is not None:
        real, base = os.path.realpath(path), os.path.realpath(folder)
        if real == base or os.path.commonpath([real, base]) != base:
            raise ModelLoadError(f"{path}: points outside {folder} (to {real}); only files inside the folder are read")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise ModelLoadError(f"{path}: cannot be opened ({error.strerror or error})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ModelLoadError(f"{path} is not a regular file (a folder, FIFO, socket or device); refused")
        if info.st_size > max_bytes:
            raise ModelLoadError(f"{path} is {info.st_size:,} bytes, more than the {max_bytes:,} allowed for it")
        yield fd, info.st_size
    finally:
        os.close(fd)


def check_regular_file(path: str | Path, max_bytes: int, folder: str | Path | None = None) -> int:
    """The size of ``path`` after the checks of ``open_regular_file``; reads nothing."""
    with open_regular_file(path, max_bytes, folder) as (_, size):
        return size


def read_regular_file(path: str | Path, max_bytes: int, folder: str | Path | None = None) -> bytes:
    """The bytes of ``path`` after ``open_regular_file``'s checks; never more than its size then, even if it grows."""
    with open_regular_file(path, max_bytes, folder) as (fd, size), open(fd, "rb", closefd=False) as handle:
        return handle.read(size)  # reads until ``size`` bytes or the end, if the file shrank meanwhile


def parse_json(data: bytes, path: str | Path):
    """``data`` (UTF-8 JSON read from ``path``) parsed; one ``ModelLoadError`` line when it is not JSON Python reads
    (a bracket bomb stops the parser at its recursion limit, a huge integer at its digit limit)."""
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as error:  # not UTF-8, not JSON, nested or numbered past Python's limits
        raise ModelLoadError(f"{path} is not valid JSON: {str(error)[:200]}") from None


def read_json_file(path: str | Path, max_bytes: int = CONFIG_MAX_BYTES, folder: str | Path | None = None):
    """``read_regular_file`` + ``parse_json``."""
    return parse_json(read_regular_file(path, max_bytes, folder), path)


def connect_read_only(path: str | Path, timeout: float, **options) -> sqlite3.Connection:
    """A connection to the SQLite database ``path`` that never writes (no pragma, schema or checkpoint). A WAL
    database whose shared-memory file cannot be made (a folder this process cannot write) is then read as the
    file holds it (``immutable``), which this process cannot change anyway."""
    uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro"
    db = sqlite3.connect(uri, uri=True, timeout=timeout, **options)
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the file and the WAL's shared memory
    except sqlite3.OperationalError as error:
        db.close()
        if error.sqlite_errorcode != sqlite3.SQLITE_CANTOPEN:
            raise
        db = sqlite3.connect(uri + "&immutable=1", uri=True, timeout=timeout, **options)
    except BaseException:
        db.close()
        raise
    return db


def write_ahead_logged(db: sqlite3.Connection) -> None:
    """Switch ``db``'s file to WAL (it then stays so) unless it is already. While another connection switches it or
    writes, SQLite answers "locked" at once, without waiting its busy timeout: this connection then goes on in the
    rollback-journal mode, which is as safe, only slower for readers, and a later connection makes the switch."""
    try:
        if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.execute("PRAGMA journal_mode = WAL")
    except sqlite3.OperationalError as error:
        if error.sqlite_errorcode not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            raise


def hash_regular_file(digest, path: Path, max_bytes: int, folder: Path) -> None:
    """``path``'s name, size and bytes into ``digest`` through ``open_regular_file``; a missing file as missing."""
    try:
        with open_regular_file(path, max_bytes, folder) as (fd, size):
            digest.update(f"{path.name}\0{size}\0".encode())
            for block in iter(lambda: os.read(fd, 1 << 20), b""):
                digest.update(block)
    except FileNotFoundError:
        digest.update(f"{path.name}\0missing\0".encode())
