"""Telling a cache entry the lab wrote from one edited after: ``seal`` it with the cache's own key, ``is_sealed``.

Whoever edits a cached file can write its new sha256 into the entry's ``meta.json``; the seal, an HMAC-SHA256 of
the whole meta under a random key kept in the cache's root (``KEY_FILE``, owner-only, made once), cannot be
recomputed without that key. An entry without a matching seal is not used (and is written again, sealed).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from pathlib import Path

from core.saving.files import read_regular_file
from core.saving.user_files import UserFileError, write_file_atomically

KEY_FILE = ".siamese-lab-key"
KEY_BYTES = 32
SEAL = "seal"  # the meta's field that holds it


def cache_key(root: str | Path, create: bool = False) -> bytes | None:
    """The key of the cache at ``root``; made there first when ``create`` (OSError when it cannot be), else
    None when there is none or it is not a key this module wrote (a link, a file of another size)."""
    root = Path(root)
    key = _read_key(root)
    if key is None and create:
        root.mkdir(parents=True, exist_ok=True)
        try:  # never replaces a key: two processes making one at once agree on the first one linked
            write_file_atomically(root / KEY_FILE, secrets.token_bytes(KEY_BYTES), overwrite=False, mode=0o600)
        except UserFileError as error:
            if error.reason != "exists":  # "exists": another process made it first, and its key is the cache's
                raise OSError(str(error)) from None
        key = _read_key(root)
    return key


def seal(meta: dict, key: bytes) -> str:
    """The HMAC of ``meta`` (its ``SEAL`` field left out) under ``key``."""
    body = json.dumps({name: value for name, value in meta.items() if name != SEAL}, sort_keys=True)
    return hmac.new(key, body.encode("utf-8"), hashlib.sha256).hexdigest()


def is_sealed(meta: dict, key: bytes) -> bool:
    """Whether ``meta`` carries the seal ``key`` gives it: it is what the lab wrote with this cache's key."""
    found = meta.get(SEAL)
    return isinstance(found, str) and hmac.compare_digest(found, seal(meta, key))


def _read_key(root: Path) -> bytes | None:
    try:
        key = read_regular_file(root / KEY_FILE, KEY_BYTES, folder=root)
    except (OSError, ValueError):  # missing, a link, a FIFO, too large
        return None
    return key if len(key) == KEY_BYTES else None

