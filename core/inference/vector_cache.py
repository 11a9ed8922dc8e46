"""A corpus's vectors kept on disk between runs: a second ``dedup`` at another threshold, a ``suggest`` round
or a ``search`` index of another kind, on the same corpus with the same model, encodes nothing.

An entry is one folder under the cache root, named by the model's key and the corpus's fingerprint
(``core.inference.search.fingerprint``: the texts, in order). It holds ``second.npy``, the unit vectors of
the question2 side (tower 1: what a search indexes and what a Siamese model clusters), ``first.npy`` (tower
0) only for a model whose two towers differ, and ``meta.json``: the stamp (the model's key, the corpus's
fingerprint and count, the width, the towers) and each file's sha256, computed as it was written. The folder
is written atomically (``core.saving.write_folder_atomically``), so a reader sees a whole entry or none.

Nothing read back is trusted as it is (``load_arrays``): the stamp must be the one asked for; each file must be
a regular file inside the folder of exactly the size its shape needs, with exactly the ``.npy`` header of
a C-ordered float32 array of that shape, and hash to the recorded sha256; every value must be finite and every
row of length 1 (or 0: ``unit_rows`` leaves an all-zero vector so). Anything else gives None: the caller encodes
again and writes the entry over. A cache that cannot be written costs only the reuse.

Someone who can write into the lab's cache is outside the threat model (``docs/RELIABILITY.md``): the checks
catch a torn, truncated or stale entry, not a forgery.

The model's key is the caller's: the CLI names a saved model by the sha256 of its files, so a second run
needs no model loaded at all; the library's default is ``core.inference.vector_index.model_identity``.
"""
from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

FORMAT, FORMAT_VERSION = "siamese-lab-corpus-vectors", 1
META_FILE = "meta.json"
SECOND, FIRST = "second.npy", "first.npy"
UNIT_TOLERANCE = 1e-4  # how far from 1 a stored row's length may be (float32 rounding of a unit row)
READ_CHUNK = 1 << 24  # bytes read or hashed at a time
CHECK_ROWS = 1 << 16  # rows checked at a time: bounds the temporaries of the finite and unit checks

Progress = Callable[[int, int], None]


@dataclass
class CorpusVectors:
    """A corpus's unit vectors under one model: ``second`` (N, d) its tower 1 rows, ``first`` (N, d) its tower
    0 rows or None when the towers agree (a Siamese model); ``reused`` says whether they came from the cache."""

    second: np.ndarray
    first: np.ndarray | None = None
    reused: bool = False

    def for_clustering(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(vectors, queries) as ``core.inference.dedup.encode_corpus`` gives them."""
        from core.inference.dedup import clustering_rows

        return clustering_rows(self.second, self.first)


# ---- checked arrays in a folder ----------------------------------------------------------------
def npy_header(shape: tuple[int, ...], dtype) -> bytes:
    """The ``.npy`` header ``np.save`` writes first for a C-ordered array of ``shape`` and ``dtype``."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                                  "fortran_order": False, "shape": tuple(shape)})
    return buffer.getvalue()


def _write_array(path: Path, array: np.ndarray) -> str:
    """``array`` as a ``.npy`` file at ``path``, written in chunks (no second copy); its sha256."""
    array = np.ascontiguousarray(array)
    digest = hashlib.sha256()
    header = npy_header(array.shape, array.dtype)
    data = memoryview(array.reshape(-1)).cast("B")
    with open(path, "wb") as handle:
        for piece in [header, *(data[at : at + READ_CHUNK] for at in range(0, len(data), READ_CHUNK))]:
            handle.write(piece)
            digest.update(piece)
    return digest.hexdigest()


def save_arrays(folder: str | Path, arrays: dict[str, np.ndarray], stamp: dict) -> Path:
    """Write ``arrays`` (file name -> array) and ``meta.json`` (the ``stamp``, each file's sha256) to ``folder``
    atomically, replacing what was there."""
    from core.saving.atomic import write_folder_atomically

    def write(temp: Path) -> None:
        hashes = {name: _write_array(temp / name, array) for name, array in arrays.items()}
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "stamp": stamp, "sha256": hashes}
        (temp / META_FILE).write_text(json.dumps(meta, sort_keys=True), encoding="utf-8")

    return write_folder_atomically(folder, write, owned_before=(META_FILE, *arrays))


def _read_array(path: Path, folder: Path, shape: tuple[int, ...], dtype, sha256: str) -> np.ndarray | None:
    """The array at ``path`` when its file is exactly a C-ordered ``dtype`` array of ``shape`` whose bytes hash
    to ``sha256``, read once into a fresh (writable) array; None otherwise."""
    from core.saving.files import open_regular_file

    header = npy_header(shape, dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    with open_regular_file(path, len(header) + nbytes, folder=folder) as (fd, size):
        if size != len(header) + nbytes:
            return None
        array = np.empty(shape, dtype=dtype)  # allocated once the file is known to hold exactly that much
        reader = io.FileIO(fd, "rb", closefd=False)
        if reader.read(len(header)) != header:
            return None
        digest = hashlib.sha256(header)
        target = memoryview(array.reshape(-1)).cast("B")
        done = 0
        while done < len(target):
            got = reader.readinto(target[done : done + READ_CHUNK])
            if not got:
                return None  # the file shrank while it was read
            digest.update(target[done : done + got])
            done += got
    return array if digest.hexdigest() == sha256 else None


def saved_meta(folder: str | Path) -> dict | None:
    """The ``meta.json`` ``save_arrays`` wrote to ``folder`` (read through ``core.saving.files``'s checks): its
    stamp and hashes; None when there is none."""
    from core.saving.files import CONFIG_MAX_BYTES, read_json_file

    folder = Path(folder)
    try:
        if not (folder / META_FILE).is_file():
            return None
        meta = read_json_file(folder / META_FILE, CONFIG_MAX_BYTES, folder=folder)
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        return None
    return meta


def load_arrays(folder: str | Path, stamp: dict, shapes: dict[str, tuple[tuple[int, ...], object]]) -> dict | None:
    """The arrays ``save_arrays`` wrote to ``folder`` with exactly ``stamp``, each file's name mapped to the
    (shape, dtype) it must have; None when there is no such entry or anything about it disagrees."""
    folder = Path(folder)
    meta = saved_meta(folder)
    if meta is None:
        return None
    try:
        hashes = meta.get("sha256")
        if json.dumps(meta.get("stamp"), sort_keys=True) != json.dumps(stamp, sort_keys=True) or not (
                isinstance(hashes, dict) and set(hashes) == set(shapes)):
            return None
        arrays = {}
        for name, (shape, dtype) in shapes.items():
            arrays[name] = _read_array(folder / name, folder, shape, dtype, str(hashes[name]))
            if arrays[name] is None:
                return None
        return arrays
    except (OSError, ValueError, MemoryError):  # unreadable, a link out of the folder, not ours: build again
        return None


def unit_and_finite(rows: np.ndarray) -> bool:
    """Every value of ``rows`` ((N, d)) finite and every row of length 1 (within ``UNIT_TOLERANCE``) or 0."""
    for start in range(0, len(rows), CHECK_ROWS):
        part = rows[start : start + CHECK_ROWS]
        if not np.isfinite(part).all():
            return False
        norms = np.linalg.norm(part, axis=1)
        if not ((np.abs(norms - 1) <= UNIT_TOLERANCE) | (norms == 0)).all():
            return False
    return True


# ---- a corpus's vectors ------------------------------------------------------------------------
class VectorCache:
    """Corpus vectors under ``root`` (the CLI's: the lab's cache, ``vectors/``), one folder per model and corpus."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def folder(self, model_key: str, corpus: str) -> Path:
        return self.root / f"{model_key[:16]}-{corpus[:16]}"

    @staticmethod
    def stamp(model_key: str, corpus: str, count: int, dim: int, towers: int) -> dict:
        return {"use": "corpus vectors", "model": model_key, "corpus": corpus, "count": count, "dim": dim,
                "towers": towers, "dtype": "float32", "unit": True}

    def load(self, model_key: str, texts: Sequence[str], corpus: str | None = None) -> CorpusVectors | None:
        """The vectors saved for ``texts`` under ``model_key``, checked (see the module docstring); None when there
        are none or they fail a check. ``corpus``: the texts' fingerprint when the caller has it."""
        from core.inference.search import fingerprint

        corpus = corpus or fingerprint(texts)
        folder = self.folder(model_key, corpus)
        saved = (saved_meta(folder) or {}).get("stamp")  # its width and towers, checked against the stamp below
        dim, towers = (saved.get("dim"), saved.get("towers")) if isinstance(saved, dict) else (None, None)
        if not (isinstance(dim, int) and 1 <= dim <= 1 << 16 and towers in (1, 2)):
            return None
        shape = ((len(texts), dim), np.float32)
        arrays = load_arrays(folder, self.stamp(model_key, corpus, len(texts), dim, towers),
                             {SECOND: shape, **({FIRST: shape} if towers == 2 else {})})
        if arrays is None or not all(unit_and_finite(rows) for rows in arrays.values()):
            return None
        return CorpusVectors(arrays[SECOND], arrays.get(FIRST), reused=True)

    def save(self, model_key: str, texts: Sequence[str], vectors: CorpusVectors, corpus: str | None = None) -> bool:
        """Keep ``vectors`` of ``texts`` for the next run; False when the cache cannot be written."""
        from core.inference.search import fingerprint

        corpus = corpus or fingerprint(texts)
        towers = 1 if vectors.first is None else 2
        arrays = {SECOND: vectors.second, **({FIRST: vectors.first} if towers == 2 else {})}
        stamp = self.stamp(model_key, corpus, len(texts), int(vectors.second.shape[1]), towers)
        try:
            save_arrays(self.folder(model_key, corpus), arrays, stamp)
        except OSError:  # a read-only or full cache: this run still has its vectors
            return False
        return True


def corpus_vectors(texts: Sequence[str], model, cache: VectorCache | None = None, model_key: str | None = None,
                   progress: Progress | None = None, batch_size: int = 256) -> CorpusVectors:
    """The unit vectors of ``texts``: ``cache``'s for ``model_key`` when it holds them (checked), else encoded
    (``core.inference.dedup.encode_towers``) and saved there. ``model`` is a model, or a function giving one,
    called only when something must be encoded. ``model_key`` defaults to the model's
    ``model_identity``; a model nothing identifies is encoded every time."""
    from core.inference.dedup import encode_towers
    from core.inference.search import fingerprint
    from core.inference.vector_index import model_identity

    texts = list(texts)
    if cache is not None and model_key is None:
        model = _loaded(model)
        model_key = model_identity(model)
    corpus = fingerprint(texts) if cache is not None and model_key is not None and texts else None
    if corpus is not None:
        saved = cache.load(model_key, texts, corpus)
        if saved is not None:
            return saved
    model = _loaded(model)
    second, first = encode_towers(model, texts, progress=progress, batch_size=batch_size)
    vectors = CorpusVectors(second, first, reused=False)
    if corpus is not None:
        cache.save(model_key, texts, vectors, corpus)
    return vectors


def _loaded(model):
    """``model`` itself, or the model a loader function gives."""
    return model if hasattr(model, "encode") else model()
