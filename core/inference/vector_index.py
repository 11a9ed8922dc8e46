"""The vector indexes a corpus can be searched in, by name, and kept on disk between runs.

``flat`` is exact (every vector in float32, 4·d bytes each); ``hnsw`` adds a graph for fast approximate
search (``core.inference.search``'s settings); ``ivfpq`` compresses: the vectors are split among ``nlist``
k-means cells (IVF) and each is stored as ``m`` one-byte codes of its residual (product quantisation),
trained on a seeded sample of the vectors. For 384-d vectors that is 96 code bytes + an 8-byte id instead
of 1,536 bytes, about 15x smaller (docs/BENCHMARKS.md, ``bench/index_memory.py``). Its scores are PQ
estimates of the cosine: callers that compare them with a threshold score their candidates again exactly
(``core.inference.dedup_graph``).

An index saved with ``save_vector_index`` is reused by ``load_vector_index`` only when the ``stamp`` it
was saved with (the model's and the corpus's fingerprints, the kind, its parameters) equals the one asked
for, its file's sha256 is the one recorded, and it passes the same checks as the search cache
(``core.inference.search``): bounded file sizes, only these three inner-product types parsed, under
FAISS's allocation limits, and their tables checked to point only at stored vectors. Anything else
gives None: the caller builds it again.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Sequence

import faiss
import numpy as np

from core.inference.search import (
    HNSW_EF_SEARCH,
    HNSW_NEIGHBOURS,
    SPOT_CHECKS,
    SPOT_TOLERANCE,
    SearchIndex,
    _index_max_bytes,
    _parse_index,
    _spot_check,
    deserialize_bounded,
    encode_unit_rows,
    fingerprint,
    model_fingerprint,
    new_index,
)
from core.inference.index_kinds import INDEX_KINDS
from core.saving.atomic import write_folder_atomically
from core.saving.files import CONFIG_MAX_BYTES, read_json_file, read_regular_file

INDEX_FILE, META_FILE = "index.faiss", "meta.json"
FORMAT, FORMAT_VERSION = "siamese-lab-vector-index", 1
MIN_POINTS = 39  # training rows per k-means centroid below which FAISS warns (its min_points_per_centroid)
MAX_NLIST = 65_536  # IVF cells: about 4·sqrt(n), so 65,536 cells are reached at 268 million vectors
PQ_DIMS_PER_CODE = 4  # dimensions per one-byte PQ code: 384-d -> 96 bytes, 16x below float32
PQ_BITS = 8  # bits per code (256 centroids per sub-vector), FAISS's fast path
# Cells searched per query: a 16th of them (at least 8), a 16th of the exhaustive cost. Near duplicates fall in
# their query's cell or a neighbouring one: 99.997 % of the dedup pairs above 0.8 found on 20,000 clustered
# 384-d vectors; on uniform random vectors (no cells to follow) recall@10 is only 0.27 (bench/index_memory.py).
NPROBE_SHARE, MIN_NPROBE = 16, 8
_MAGIC = {b"IxFI": "flat", b"IHNf": "hnsw", b"IwPQ": "ivfpq"}


def checked_kind(kind: str) -> str:
    if kind not in INDEX_KINDS:
        raise ValueError(f"index kind must be one of {', '.join(INDEX_KINDS)}, got {kind!r}")
    return kind


def ivf_cells(n: int) -> int:
    """IVF cells for ``n`` vectors: about 4·sqrt(n), at most ``MAX_NLIST``, and few enough that every
    cell gets ``MIN_POINTS`` training rows when the corpus has them."""
    return int(max(1, min(round(4 * math.sqrt(max(n, 1))), MAX_NLIST, n // MIN_POINTS)))


def training_rows(n: int) -> int:
    """How many sampled vectors train an ivfpq index over ``n``: ``MIN_POINTS`` per IVF cell and per PQ
    centroid, or all of them when the corpus is smaller."""
    return min(n, MIN_POINTS * max(ivf_cells(n), 1 << PQ_BITS))


def training_sample(vectors: np.ndarray, seed: int = 0) -> np.ndarray:
    """(training_rows(N), d) rows of ``vectors`` drawn without replacement with ``seed``, in order."""
    n = len(vectors)
    rows = np.sort(np.random.default_rng(seed).choice(n, size=training_rows(n), replace=False))
    return np.ascontiguousarray(vectors[rows], dtype=np.float32)


def pq_codes(dim: int) -> int:
    """Sub-vectors per PQ code: the largest divisor of ``dim`` at most dim / ``PQ_DIMS_PER_CODE``."""
    return max(m for m in range(1, max(1, dim // PQ_DIMS_PER_CODE) + 1) if dim % m == 0)


def nprobe_for(nlist: int) -> int:
    return min(nlist, max(MIN_NPROBE, nlist // NPROBE_SHARE))


def index_parameters(kind: str, dim: int, n: int) -> dict:
    """What decides an index of ``kind`` beyond the vectors (part of its stamp)."""
    if checked_kind(kind) == "ivfpq":
        return {"nlist": ivf_cells(n), "m": pq_codes(dim), "bits": PQ_BITS, "train_rows": training_rows(n)}
    return {"links": HNSW_NEIGHBOURS, "ef_search": HNSW_EF_SEARCH} if kind == "hnsw" else {}


def new_vector_index(kind: str, dim: int, n: int, sample: np.ndarray | None = None, seed: int = 0) -> faiss.Index:
    """An empty inner-product index of ``kind`` for ``n`` unit vectors of width ``dim``; ivfpq is trained
    on ``sample`` (``training_sample``'s rows: required). A single vector has nothing to train on: its
    ivfpq index is flat."""
    if checked_kind(kind) != "ivfpq" or n < 2:
        return new_index(dim, n, flat_limit=-1 if kind == "hnsw" else n)
    if sample is None or len(sample) < 2:
        raise ValueError("an ivfpq index is trained on a sample of at least 2 of its vectors")
    sample = np.ascontiguousarray(sample, dtype=np.float32)
    nlist, m = min(ivf_cells(n), len(sample)), pq_codes(dim)
    # A small corpus gets fewer PQ centroids (at least 2), so that each is trained on enough rows.
    bits = int(min(PQ_BITS, max(1, math.floor(math.log2(max(len(sample) // MIN_POINTS, 2))))))
    index = faiss.index_factory(dim, f"IVF{nlist},PQ{m}x{bits}np", faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = index.pq.cp.seed = int(seed)  # "np": no polysemous training (minutes, for a filter unused here)
    # Fewer rows than FAISS likes are a deliberate choice for a small corpus, not a warning per sub-vector.
    index.cp.min_points_per_centroid = min(MIN_POINTS, len(sample) // nlist)
    index.pq.cp.min_points_per_centroid = min(MIN_POINTS, len(sample) // (1 << bits))
    index.train(sample)
    index.nprobe = nprobe_for(nlist)
    return index


def add_vectors(index: faiss.Index, vectors: np.ndarray | Sequence[np.ndarray]) -> faiss.Index:
    """Add unit rows to ``index``: one (N, d) array or a sequence of shards, one shard at a time."""
    shards = [vectors] if isinstance(vectors, np.ndarray) else vectors
    for shard in shards:
        index.add(np.ascontiguousarray(shard, dtype=np.float32))
    return index


def index_kind(index: faiss.Index) -> str:
    if isinstance(index, faiss.IndexIVFPQ):
        return "ivfpq"
    return "hnsw" if isinstance(index, faiss.IndexHNSWFlat) else "flat"


# ---- on disk -----------------------------------------------------------------------------------
def save_vector_index(index: faiss.Index, folder: str | Path, stamp: dict) -> Path:
    """Write ``index`` and ``meta.json`` (the ``stamp``, its size and sha256) to ``folder`` atomically."""
    data = faiss.serialize_index(index).tobytes()
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "stamp": stamp, "kind": index_kind(index),
            "count": int(index.ntotal), "dim": int(index.d), "index_sha256": hashlib.sha256(data).hexdigest()}
    text = json.dumps(meta, sort_keys=True)

    def write(temp: Path) -> None:
        (temp / INDEX_FILE).write_bytes(data)
        (temp / META_FILE).write_text(text, encoding="utf-8")

    return write_folder_atomically(folder, write, owned_before=(INDEX_FILE, META_FILE))


def load_vector_index(folder: str | Path, stamp: dict) -> faiss.Index | None:
    """The index saved in ``folder`` with exactly ``stamp``, checked; None when there is none, it was saved with
    another stamp, or anything about its files is wrong."""
    folder = Path(folder)
    try:
        if not (folder / META_FILE).is_file():
            return None
        meta = read_json_file(folder / META_FILE, CONFIG_MAX_BYTES, folder=folder)
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
            return None
        if json.dumps(meta.get("stamp"), sort_keys=True) != json.dumps(stamp, sort_keys=True):
            return None
        count, dim = meta.get("count"), meta.get("dim")
        if not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 1 << 31 for v in (count, dim)):
            return None
        # Beyond the flat and HNSW bound: IVF centroids (at most one per vector) and PQ centroids.
        limit = _index_max_bytes(count, dim) + 4 * dim * (count + (1 << 16))
        data = read_regular_file(folder / INDEX_FILE, limit, folder=folder)
        if hashlib.sha256(data).hexdigest() != meta.get("index_sha256"):
            return None
        index = parse_vector_index(data, folder / INDEX_FILE)
        if index.d != dim or index.ntotal != count or index_kind(index) != meta.get("kind"):
            return None
        return index
    except (OSError, ValueError, RuntimeError, MemoryError):  # unreadable, tampered or stale: build again
        return None


def parse_vector_index(data: bytes, path: Path) -> faiss.Index:
    """A flat, HNSW or IVF-PQ inner-product index from ``data``, checked (``ValueError`` otherwise)."""
    if _MAGIC.get(bytes(data[:4])) != "ivfpq":
        return _parse_index(data, path)
    # An inner-product IVF-PQ never uses FAISS's precomputed (L2) table: skip its size check and build.
    index = deserialize_bounded(data, path, faiss.IO_FLAG_SKIP_PRECOMPUTE_TABLE)
    if type(index) is not faiss.IndexIVFPQ or index.metric_type != faiss.METRIC_INNER_PRODUCT:
        raise ValueError(f"{path} is not an inner-product IVF-PQ index")
    _check_ivfpq(index, path)
    index.nprobe = nprobe_for(index.nlist)
    return index


def _check_ivfpq(index: faiss.IndexIVFPQ, path: Path) -> None:
    """Its quantisers must fit its width, and its lists hold every vector id 0..ntotal-1 exactly once."""
    quantizer, pq, d, n = faiss.downcast_index(index.quantizer), index.pq, index.d, index.ntotal
    ok = (type(quantizer) is faiss.IndexFlatIP and quantizer.d == d and quantizer.ntotal == index.nlist >= 1
          and index.is_trained and pq.d == d and 1 <= pq.M and d % pq.M == 0 and 1 <= pq.nbits <= 16
          and pq.code_size == index.code_size == (pq.M * pq.nbits + 7) // 8
          and pq.centroids.size() == d * (1 << pq.nbits) and index.direct_map.type == faiss.DirectMap.NoMap)
    lists = faiss.downcast_InvertedLists(index.invlists)
    ok = ok and type(lists) is faiss.ArrayInvertedLists and lists.nlist == index.nlist
    ok = ok and lists.code_size == index.code_size
    if not ok:
        raise ValueError(f"{path}: the IVF-PQ index's tables do not agree")
    seen = np.zeros(n, dtype=bool)
    for cell in range(index.nlist):
        size = lists.list_size(cell)
        ids = faiss.rev_swig_ptr(lists.get_ids(cell), size) if size else np.zeros(0, dtype=np.int64)
        if size and (ids.min() < 0 or ids.max() >= n or seen[ids].any() or len(np.unique(ids)) != size):
            raise ValueError(f"{path}: the IVF-PQ lists point outside the vectors or twice at one")
        seen[ids] = True
    if not seen.all():
        raise ValueError(f"{path}: the IVF-PQ lists miss some vectors")


# ---- the search command's index of a kind ------------------------------------------------------
def model_identity(model) -> str | None:
    """What names a model's vectors: its weights' ``model_fingerprint``, or an ONNX graph's digest."""
    identity = model_fingerprint(model)
    digest = getattr(model, "digest", None)
    return identity if identity is not None else digest.hex() if isinstance(digest, bytes) else None


def corpus_stamp(model, texts: Sequence[str], kind: str, dim: int) -> dict:
    """What an index of ``texts`` encoded by ``model`` depends on: reused only when all of it agrees."""
    return {"model": model_identity(model), "corpus": fingerprint(texts), "count": len(texts), "dim": dim,
            "kind": kind, "parameters": index_parameters(kind, dim, len(texts))}


def load_or_build_kind(model, texts: Sequence[str], kind: str, cache_dir: str | Path | None,
                       progress=None, batch_size: int = 256, seed: int = 0, encode=None) -> SearchIndex:
    """A ``SearchIndex`` of ``texts`` in an index of ``kind``: the one saved in ``cache_dir`` for this
    model, corpus and kind if its stamp agrees and a few of its vectors are what the model gives their texts
    now, else a new one (saved there when it can be) of ``encode(texts, progress)``'s
    unit rows when given (``core.inference.search.SearchIndex.build``), else the model's."""
    texts = list(texts)
    if not texts:
        raise ValueError("nothing to index: the corpus has no questions")
    folder = Path(cache_dir) / f"index-{checked_kind(kind)}-{fingerprint(texts)[:12]}" if cache_dir else None
    if model_identity(model) is None:  # nothing tells this model's saved vectors from another's: memory only
        folder = None
    if folder is not None:
        dim = encode_unit_rows(model, texts[:1], tower=1, batch_size=1, progress=None).shape[1]
        saved = load_vector_index(folder, corpus_stamp(model, texts, kind, dim))
        try:
            if saved is not None:
                (_spot_check_ivfpq if kind == "ivfpq" else _spot_check)(model, saved, texts, folder)
                return SearchIndex(model, saved, texts)
        except ValueError:  # stored vectors that are not this model's: build again
            pass
    vectors = encode(texts, progress) if encode is not None else encode_unit_rows(  # (N, d)
        model, texts, tower=1, batch_size=batch_size, progress=progress)
    dim = vectors.shape[1]
    sample = training_sample(vectors, seed) if kind == "ivfpq" else None
    index = add_vectors(new_vector_index(kind, dim, len(texts), sample, seed), vectors)
    if folder is not None:
        try:
            save_vector_index(index, folder, corpus_stamp(model, texts, kind, dim))
        except OSError:  # a read-only model folder still gets a working (in-memory) index
            pass
    return SearchIndex(model, index, texts)


def _spot_check_ivfpq(model, index: faiss.IndexIVFPQ, texts: list[str], folder: Path) -> None:
    """``search._spot_check`` for compressed vectors: the stored code of a few texts, chosen at random,
    must decode as close to the model's vector now as the index's own code for that vector does."""
    picks = np.unique(np.random.default_rng().choice(len(texts), size=min(SPOT_CHECKS, len(texts)), replace=False))
    fresh = encode_unit_rows(model, [texts[i] for i in picks], tower=1, batch_size=64, progress=None)  # (k, d)
    check_ivfpq_rows(index, picks, fresh, folder)


def check_ivfpq_rows(index: faiss.IndexIVFPQ, picks: np.ndarray, fresh: np.ndarray, folder: Path) -> None:
    """The codes ``index`` holds for the ids ``picks`` (ascending, distinct) must decode as close to
    ``fresh`` ((k, d), what those rows are now) as the index's own code of ``fresh`` does; ValueError if not."""
    stored = np.zeros((len(picks), index.d), dtype=np.float32)  # (k, d)
    found = np.zeros(len(picks), dtype=bool)
    lists = faiss.downcast_InvertedLists(index.invlists)
    for cell in range(index.nlist):
        size = lists.list_size(cell)
        ids = faiss.rev_swig_ptr(lists.get_ids(cell), size) if size else np.zeros(0, dtype=np.int64)
        for offset in np.flatnonzero(np.isin(ids, picks)).tolist():
            at = int(np.searchsorted(picks, ids[offset]))
            index.reconstruct_from_offset(cell, offset, faiss.swig_ptr(stored[at]))
            found[at] = True
    if not found.all() or fresh.shape[1] != index.d:
        raise ValueError(f"{folder}: the index does not hold the vectors of its texts")
    fresh = np.ascontiguousarray(fresh, dtype=np.float32)
    own = index.sa_decode(index.sa_encode(fresh))  # (k, d) the best this index's codes give them
    error = np.linalg.norm(stored - fresh, axis=1) - np.linalg.norm(own - fresh, axis=1)
    if not np.isfinite(error).all() or error.max() > SPOT_TOLERANCE:
        raise ValueError(f"{folder}: stored vectors differ from the model's (by up to {error.max():.3g})")
