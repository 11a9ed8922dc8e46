"""Which ONNX exports the lab wrote itself: those it runs as they are, without the foreign checks.

When the lab writes an ONNX export (``core.export.export_folder.write_export``: ``export --format onnx``,
or an entry of the backend's cache), the manifest records the sha256 of each graph and of the tokenizer
(``FILE_HASHES``) and is sealed (``sealed``): an HMAC of the whole manifest under the
key of the lab's cache (``core.saving.cache_seal``, kept in ``core.export.onnx_cache.cache_root()``).
Anyone can edit a manifest and recompute a hash; only the seal needs the key. So ``lab_wrote`` holds
only for a manifest sealed with this cache's key whose recorded hashes match the bytes about to run: a
graph swapped after, a manifest edited after, an export sealed under another cache (another user,
another machine) or not sealed at all is foreign, and is checked and probed before it runs
(``core.export.onnx_checks``, ``core.export.onnx_probe``).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from core.export.manifest import json_default
from core.export.onnx_cache import cache_root
from core.saving.cache_seal import SEAL, cache_key, is_sealed, seal

FILE_HASHES = "sha256"  # the manifest's field: file name -> sha256 of its bytes


def _file_hashes(folder: Path, names: list[str]) -> dict[str, str]:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in names}


def sealed(manifest: dict, folder: Path, root: str | Path | None = None) -> dict:
    """``manifest`` of the ONNX export just written to ``folder`` as it will be written (JSON's types),
    with the sha256 of its graphs and tokenizer, sealed with the key of the cache at ``root`` (made there
    if it has none). Unsealed when no key can be made (an unwritable cache): the export is then foreign to
    this lab, usable once checked."""
    files = [*manifest["files"]["graphs"], manifest["files"]["tokenizer"]]
    recorded = {**manifest, FILE_HASHES: _file_hashes(folder, files)}
    plain = json.loads(json.dumps(recorded, default=json_default, allow_nan=False))
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
