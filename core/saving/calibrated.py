"""A calibrated copy of a model: a small folder that points at its parent's weights and holds new thresholds.

Its config.json (``model_folder.save_calibrated``) carries the parent's metadata, thresholds calibrated on the
user's file (``calibration``) and ``calibrated_from``: ``minilm`` (the package's weights), ``tfidf`` (fitted in
``TFIDF_FILE``) or a saved model's absolute path, with the ``folder_digest`` of the parent's files, so a parent
changed since is refused rather than served.
"""
from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

from core.saving.files import ModelLoadError, hash_regular_file

CALIBRATED_FROM = "calibrated_from"
CALIBRATION = "calibration"
TFIDF_FILE = "tfidf.json"  # a calibrated TF-IDF baseline's fitted vocabulary and IDF weights
# The files whose bytes decide a parent's vectors (and config.json its metadata): a changed byte is a new parent.
DIGEST_FILES = ("config.json", "model.safetensors", "tokenizer.json", "word_vocab.txt", "vocab.txt")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
SOURCE_MAX_CHARS = 4096


def is_calibrated(config: Mapping) -> bool:
    return isinstance(config, Mapping) and CALIBRATED_FROM in config


def folder_digest(folder: str | Path, max_bytes: int) -> str:
    """sha256 of the name, size and bytes of each of ``DIGEST_FILES`` in ``folder`` (a missing one as missing)."""
    folder = Path(folder)
    digest = hashlib.sha256(b"siamese-lab-parent 1\0")
    for name in DIGEST_FILES:
        hash_regular_file(digest, folder / name, max_bytes, folder)
    return digest.hexdigest()


def check_calibration_metadata(config: Mapping, path: str | Path) -> None:
    """``calibrated_from``: absent, or a mapping with a non-empty ``source`` string and, when given, a
    ``sha256`` of 64 hex digits; ``calibration``: absent, or a mapping whose ``data`` is a string and
    ``pairs`` a whole number. ModelLoadError naming ``path`` and the field otherwise."""
    if CALIBRATED_FROM in config:
        record = config[CALIBRATED_FROM]
        if not isinstance(record, Mapping):
            raise ModelLoadError(f"{path}: {CALIBRATED_FROM} must be a mapping, got {record!r:.80}")
        source = record.get("source")
        if not isinstance(source, str) or not source or len(source) > SOURCE_MAX_CHARS:
            raise ModelLoadError(f"{path}: {CALIBRATED_FROM}.source must name the parent model, got {source!r:.80}")
        if "sha256" in record and not (isinstance(record["sha256"], str) and _SHA256.match(record["sha256"])):
            raise ModelLoadError(f"{path}: {CALIBRATED_FROM}.sha256 must be 64 hex digits, got {record['sha256']!r:.80}")
    if CALIBRATION in config:
        record = config[CALIBRATION]
        pairs = record.get("pairs") if isinstance(record, Mapping) else None
        if not isinstance(record, Mapping) or not isinstance(record.get("data"), str) \
                or not isinstance(pairs, int) or isinstance(pairs, bool) or pairs < 0:
            raise ModelLoadError(f"{path}: {CALIBRATION} must name its data and pair count, got {record!r:.80}")


def parent_folder(config: Mapping) -> Path | None:
    """The saved model folder a calibrated config points at; None for a packaged parent (a plain name)."""
    source = str(config[CALIBRATED_FROM]["source"])
    return Path(source) if os.path.isabs(source) else None
