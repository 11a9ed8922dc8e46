"""Reading files that someone else may have written: regular files only, never more than a cap.

``open_regular_file`` opens with ``O_NONBLOCK`` (a FIFO never makes it wait), refuses anything ``fstat`` does not
call a regular file (whatever link led there), a file over the caller's cap before a byte is read, and one outside
``folder`` when given. A missing file is ``FileNotFoundError``; any other refusal a ``ModelLoadError`` saying why.
"""
from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path
from typing import Iterator

MiB = 1024 * 1024
CONFIG_MAX_BYTES = 1 * MiB  # config.json, meta.json and other small JSON files
VOCAB_MAX_BYTES = 64 * MiB  # a tokenizer's vocabulary file
JSON_MAX_DEPTH = 32  # nesting of arrays / objects in any JSON file we read


class ModelLoadError(ValueError):
    """A model folder (or a file in it) that cannot be used; the message says which file and why."""


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


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
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
            raise ModelLoadError(f"{path} is {kind}, not a regular file; refused")
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
    with open_regular_file(path, max_bytes, folder) as (fd, size):
        parts, left = [], size
        while left > 0 and (part := os.read(fd, min(left, 1 << 30))):  # stops early if the file shrank meanwhile
            parts.append(part)
            left -= len(part)
        return b"".join(parts)


def json_depth(value) -> int:
    """How deeply ``value``'s lists and dicts nest (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


JSON_MAX_DIGITS = 100  # an integer longer than this is no setting, count or id (Python's own limit: 4,300 digits)
_DIGITS_AS_ONES = bytes(49 if 48 <= byte <= 57 else 48 for byte in range(256))  # b"0".."9" -> b"1", the rest b"0"


class _LongInteger(ValueError):
    """An integer literal of more than ``JSON_MAX_DIGITS`` digits (its count of digits), refused unconverted."""


def _short_int(literal: str) -> int:
    digits = len(literal) - literal.startswith("-")
    if digits > JSON_MAX_DIGITS:
        raise _LongInteger(digits)
    return int(literal)


def parse_json(data: bytes, path: str | Path, max_depth: int = JSON_MAX_DEPTH):
    """``data`` (UTF-8 JSON read from ``path``) parsed; ModelLoadError when it is not JSON, nests
    deeper than ``max_depth`` or holds an integer of more than ``JSON_MAX_DIGITS`` digits. A bracket bomb
    stops the parser at Python's recursion limit (``RecursionError``); anything it parses is then measured."""
    too_deep = ModelLoadError(f"{path} nests deeper than {max_depth} levels of brackets; refused")
    try:
        # The integer hook costs a call per integer: only a file with a run of digits that long takes it.
        long_run = b"1" * (JSON_MAX_DIGITS + 1) in data.translate(_DIGITS_AS_ONES)
        value = json.loads(data.decode("utf-8"), parse_int=_short_int if long_run else None)
    except RecursionError:
        raise too_deep from None
    except _LongInteger as error:
        raise ModelLoadError(f"{path} holds a number {error.args[0]:,} digits long, too long to be a setting "
                             f"(at most {JSON_MAX_DIGITS} digits); refused") from None
    except ValueError as error:  # not UTF-8, or not JSON
        raise ModelLoadError(f"{path} is not valid JSON: {str(error)[:200]}") from None
    if json_depth(value) > max_depth:
        raise too_deep
    return value


def read_json_file(path: str | Path, max_bytes: int = CONFIG_MAX_BYTES, folder: str | Path | None = None,
                   max_depth: int = JSON_MAX_DEPTH):
    """``read_regular_file`` + ``parse_json``."""
    return parse_json(read_regular_file(path, max_bytes, folder), path, max_depth)


def hash_regular_file(digest, path: Path, max_bytes: int, folder: Path) -> None:
    """``path``'s name, size and bytes into ``digest`` through ``open_regular_file``; a missing file as missing."""
    try:
        with open_regular_file(path, max_bytes, folder) as (fd, size):
            digest.update(f"{path.name}\0{size}\0".encode())
            for block in iter(lambda: os.read(fd, 1 << 20), b""):
                digest.update(block)
    except FileNotFoundError:
        digest.update(f"{path.name}\0missing\0".encode())
