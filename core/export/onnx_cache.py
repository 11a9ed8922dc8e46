"""The lab's own cache (``cache_root``): ``onnx/<key>/`` holds the ONNX export of a saved model or zero-shot
MiniLM, keyed by the sha256 of the bytes it is made from (``content_key``), written once atomically and
checked like any export on every load; ``search/`` holds the indexes built on ONNX exports' vectors. Nothing is written into a folder the user passed."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from core.export.common import OnnxBackendError
from core.export.manifest import EXPORT_VERSION
from core.model_names import ZERO_SHOT
from core.saving.files import CONFIG_MAX_BYTES, VOCAB_MAX_BYTES, ModelLoadError, hash_regular_file

CACHE_ENV = "SIAMESE_LAB_CACHE"
# What a model's ONNX export is made from: its settings, its weights and its vocabulary (either kind).
SOURCE_FILES = ("config.json", "model.safetensors", "tokenizer.json", "word_vocab.txt", "vocab.txt")


def cache_root(root: str | Path | None = None) -> Path:
    """``root`` if given, else the default (see the module docstring)."""
    if root:
        return Path(root)
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "siamese-lab"


def content_key(source: str | Path) -> str:
    """The sha256 (hex) of what ``source``'s ONNX export is made from: the bytes of its ``SOURCE_FILES``
    (for ``"minilm"``, the installed package's and the zero-shot config) and the export format's version."""
    from core.models.registry import max_parameters, zero_shot_config
    from core.saving.model_folder import weights_max_bytes
    from core.text.wordpiece_tokenizer import minilm_folder

    digest = hashlib.sha256(f"siamese-lab-onnx-cache {EXPORT_VERSION}\0".encode())
    if str(source) == ZERO_SHOT:
        folder = minilm_folder()
        digest.update(json.dumps(zero_shot_config(), sort_keys=True, default=str).encode() + b"\0")
    else:
        folder = Path(source)
    try:
        limits = {"config.json": CONFIG_MAX_BYTES, "model.safetensors": weights_max_bytes(max_parameters())}
    except ValueError as error:  # SIAMESE_LAB_MAX_PARAMETERS set to something else than a count
        raise OnnxBackendError(str(error)) from None
    try:
        for name in SOURCE_FILES:
            hash_regular_file(digest, folder / name, limits.get(name, VOCAB_MAX_BYTES), folder)
    except ModelLoadError as error:
        raise OnnxBackendError(str(error)) from None
    return digest.hexdigest()


def cache_entry(source: str | Path, root: str | Path | None = None) -> tuple[Path, str]:
    """(the cache folder of ``source``'s ONNX export, its key)."""
    key = content_key(source)
    return cache_root(root) / "onnx" / key[:32], key


def search_cache(digest: bytes) -> Path:
    """Where the search indexes of the ONNX export whose graphs have ``digest`` are kept."""
    return cache_root() / "search" / digest.hex()[:32]
