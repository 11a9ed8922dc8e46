"""Which ONNX exports the lab wrote itself, and so runs without the foreign checks: their manifest records
the sha256 of each graph and of the tokenizer and is sealed with an HMAC under the cache's key
(``core.saving.cache_seal``). Anyone can edit a manifest and its hashes; only the seal needs the key."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from core.export.manifest import json_default
from core.export.onnx_cache import cache_root
from core.saving.cache_seal import SEAL, cache_key, is_sealed, seal

FILE_HASHES = "sha256"  # the manifest's field: file name -> sha256 of its bytes


def sealed(manifest: dict, folder: Path, root: str | Path | None = None) -> dict:
    """``manifest`` of the ONNX export just written to ``folder``, in JSON's types, with the sha256 of its
    graphs and tokenizer, sealed with the key of the cache at ``root`` (made there if it has none); unsealed
    when no key can be made (an unwritable cache), so foreign to this lab."""
    hashes = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
              for name in [*manifest["files"]["graphs"], manifest["files"]["tokenizer"]]}
    plain = json.loads(json.dumps({**manifest, FILE_HASHES: hashes}, default=json_default, allow_nan=False))
    try:
        key = cache_key(cache_root(root), create=True)
    except OSError:
        return plain
    return {**plain, SEAL: seal(plain, key)} if key is not None else plain


def lab_wrote(manifest: dict, files: dict[str, bytes], root: str | Path | None = None) -> bool:
    """Whether ``manifest`` carries this cache's seal and records the sha256 of each of ``files``
    (name -> the bytes read to be run)."""
    key = cache_key(cache_root(root))
    recorded = manifest.get(FILE_HASHES)
    if key is None or not isinstance(recorded, dict) or not is_sealed(manifest, key):
        return False
    return all(recorded.get(name) == hashlib.sha256(data).hexdigest() for name, data in files.items())
