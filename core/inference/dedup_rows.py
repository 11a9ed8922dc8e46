"""The rows a neighbour graph (``core.inference.dedup_graph``) indexes: a corpus's vectors checked and made
unit without copying rows that already are, its distinct rows (a question repeated word for word is
indexed once, found by a 64-bit row hash), and a view of the copy FAISS holds, so the vectors are held once.
"""
from __future__ import annotations

import numpy as np

UNIT_CHUNK = 65_536  # rows per step when checking, hashing or scaling a corpus's vectors


def unit_vectors(vectors, name: str) -> np.ndarray:
    """(N, d) float32 unit rows of ``vectors`` (called ``name`` in errors): rows already of length 1 (or
    all zero) are kept as they are, without a copy; NaN, infinite values or another shape are refused."""
    from core.inference.search import unit_rows

    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (N, d) array, got shape {array.shape}")
    if not array.size:
        return np.zeros(array.shape, dtype=np.float32)
    norms = np.empty(len(array), dtype=np.float32)
    for start in range(0, len(array), UNIT_CHUNK):  # chunks: no (N, d) temporary beside a corpus's vectors
        part = array[start : start + UNIT_CHUNK]
        if not np.isfinite(part).all():
            raise ValueError(f"{name} hold NaN or infinite values")
        norms[start : start + UNIT_CHUNK] = np.linalg.norm(part, axis=1)
    already = (np.abs(norms - 1) < 1e-5) | (norms == 0)  # encoders' rows are unit already: keep them as they are
    return np.ascontiguousarray(array) if already.all() else unit_rows(array)


class _IndexRows(np.ndarray):
    """A read-only view of the vectors a FAISS flat storage holds, which keeps the index alive: every
    slice of it has it as its base, so no view outlives the memory it reads."""

    index = None


def stored_vectors(index) -> np.ndarray:
    """(ntotal, d) float32 view of the vectors held by ``index`` (flat, or HNSW over flat), not a copy."""
    import faiss

    flat = index if isinstance(index, faiss.IndexFlat) else faiss.downcast_index(index.storage)
    rows = faiss.rev_swig_ptr(flat.get_xb(), index.ntotal * index.d).reshape(index.ntotal, index.d)
    view = rows.view(_IndexRows)
    view.index = index
    view.flags.writeable = False
    return view


def _row_hashes(rows: np.ndarray) -> np.ndarray:
    """(N,) uint64: a random linear hash of each row's bytes (equal rows, equal hashes; unequal rows
    collide with probability about 2^-64, and ``distinct_rows`` checks the bytes of every shared hash)."""
    words = np.ascontiguousarray(rows).view(np.uint32)  # (N, d) the float bits
    weights = np.random.default_rng(0).integers(1, 2**63, size=words.shape[1], dtype=np.uint64) | np.uint64(1)
    hashes = np.empty(len(words), dtype=np.uint64)
    with np.errstate(over="ignore"):  # arithmetic modulo 2^64 is the point
        for start in range(0, len(words), UNIT_CHUNK):
            hashes[start : start + UNIT_CHUNK] = (words[start : start + UNIT_CHUNK].astype(np.uint64) * weights).sum(
                axis=1, dtype=np.uint64)
    return hashes


def distinct_rows(vectors: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, inverse, counts) of the distinct rows of (vectors, queries) taken together, in order of
    first appearance: first (U,) increasing, inverse (N,) row -> distinct row, counts (U,)."""
    n = len(vectors)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    keys = _row_hashes(vectors) if queries is vectors else _row_hashes(vectors) * np.uint64(0x9E3779B97F4A7C15) \
        + _row_hashes(queries)  # (N,) one 64-bit key per row instead of a sorted copy of every row's bytes
    _, first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    shared = np.flatnonzero(counts[inverse] > 1)  # rows whose key another row has: check their bytes
    if shared.size and not all(np.array_equal(side[shared], side[first[inverse[shared]]])
                               for side in ((vectors,) if queries is vectors else (vectors, queries))):
        both = vectors if queries is vectors else np.hstack([vectors, queries])  # a hash collision: bytes decide
        keys = np.ascontiguousarray(both).view(np.dtype((np.void, both.dtype.itemsize * both.shape[1]))).ravel()
        _, first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    by_appearance = np.argsort(first, kind="stable")  # unique's order (bytes) -> order of first appearance
    rank = np.empty_like(by_appearance)
    rank[by_appearance] = np.arange(len(by_appearance))
    return (first[by_appearance].astype(np.int64), rank[inverse.ravel()].astype(np.int64),
            counts[by_appearance].astype(np.int64))

