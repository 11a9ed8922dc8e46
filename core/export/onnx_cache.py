"""Where ``--backend onnx`` keeps what it makes itself: a folder the lab owns, keyed by content.

The cache root is ``$SIAMESE_LAB_CACHE`` when set, else ``$XDG_CACHE_HOME/siamese-lab``, else
``~/.cache/siamese-lab``. It holds:

* ``onnx/<key>/``: the ONNX export of a saved model folder or of zero-shot MiniLM, ``key`` the sha256
  of what the export is made from (``content_key``): the bytes of the model's ``config.json``,
  ``model.safetensors`` and vocabulary file (for MiniLM, the installed package's files and the
  zero-shot config), and the export format's version. Touching a file or copying the folder with new
  times changes nothing; changing one byte of the weights gives a new key, so a stale graph is never
  served. An entry is written once, atomically (``core.saving.write_folder_atomically``: a temporary
  folder, then a rename; two processes exporting one key at once each rename a whole folder, and the
  last stays), and is checked like any other export every time it is loaded.
* ``search/<digest>/``: the search indexes built on an ONNX export's vectors, ``digest`` that of its
  graphs and tokenizer (``OnnxEncoder.digest``), so an export folder someone handed in stays as it is.
* ``search/`` itself: the key that seals every search index the lab writes (``search_root``), the ONNX
  ones above and those kept in a model folder alike, so that a model folder handed over with a key of its
  own is not taken for the lab's.

Nothing is ever written into the folder the user passed with ``--model`` (its ``onnx/`` subfolder
included).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from core.export.common import OnnxBackendError
from core.export.manifest import EXPORT_VERSION
from core.model_names import ZERO_SHOT
from core.saving.files import (
    CONFIG_MAX_BYTES,
    VOCAB_MAX_BYTES,
    ModelLoadError,
    hash_regular_file,
)

CACHE_ENV = "SIAMESE_LAB_CACHE"
# What a model's ONNX export is made from: its settings, its weights and its vocabulary (either kind).
SOURCE_FILES = ("config.json", "model.safetensors", "tokenizer.json", "word_vocab.txt", "vocab.txt")


def cache_root(root: str | Path | None = None) -> Path:
    """``root`` if given, else ``$SIAMESE_LAB_CACHE``, else ``$XDG_CACHE_HOME/siamese-lab``, else
    ``~/.cache/siamese-lab``."""
    if root:
        return Path(root)
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "siamese-lab"


def _max_bytes(name: str) -> int:
    from core.models.registry import max_parameters
    from core.saving.model_folder import weights_max_bytes

    if name == "model.safetensors":
        try:
            return weights_max_bytes(max_parameters())
        except ValueError as error:  # SIAMESE_LAB_MAX_PARAMETERS set to something else than a count
            raise OnnxBackendError(str(error)) from None
    return CONFIG_MAX_BYTES if name == "config.json" else VOCAB_MAX_BYTES


def _hash_file(digest, path: Path, folder: Path) -> None:
    """``path`` into ``digest`` (``core.saving.files.hash_regular_file``); a file its checks refuse is the
    backend's error."""
    try:
        hash_regular_file(digest, path, _max_bytes(path.name), folder)
    except ModelLoadError as error:
        raise OnnxBackendError(str(error)) from None


def content_key(source: str | Path) -> str:
    """The sha256 (hex) of what ``source``'s ONNX export is made from (see the module docstring)."""
    digest = hashlib.sha256(f"siamese-lab-onnx-cache {EXPORT_VERSION}\0".encode())
    if str(source) == ZERO_SHOT:
        from core.models.registry import zero_shot_config
        from core.text.wordpiece_tokenizer import minilm_folder

        folder = minilm_folder()
        digest.update(json.dumps(zero_shot_config(), sort_keys=True, default=str).encode() + b"\0")
    else:
        folder = Path(source)
    for name in SOURCE_FILES:
        _hash_file(digest, folder / name, folder)
    return digest.hexdigest()


def cache_entry(source: str | Path, root: str | Path | None = None) -> tuple[Path, str]:
    """(the cache folder of ``source``'s ONNX export, its key)."""
    key = content_key(source)
    return cache_root(root) / "onnx" / key[:32], key


def search_root(root: str | Path | None = None) -> Path:
    """Where the key sealing every search index the lab writes is kept (``core.inference.search.load_or_build``'s
    ``key_root``): the lab's own cache, shared by the CLI and the app, never a model folder."""
    return cache_root(root) / "search"


def search_cache(digest: bytes, root: str | Path | None = None) -> Path:
    """Where the search indexes of the ONNX export whose graphs have ``digest`` are kept."""
    return search_root(root) / digest.hex()[:32]
