"""Near-duplicate clusters of vectors: ``sentence_transformers.util.community_detection``'s rule (threshold strictly
above) on a FAISS k-NN graph. Centres are taken greedily, the largest neighbourhood first (ties: the earlier row);
each takes its neighbours not yet placed and is kept at ``min_size``; clusters come largest first. So every member
lies within the threshold of its centre, with no chaining. A row whose k neighbours are all above the threshold is
searched again with 2k, 4k, ... (on an approximate index at most ``max_neighbourhood`` deep, counted in
``capped``); ivfpq candidates are scored again exactly. Identical rows are indexed once with their count.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

DEFAULT_K = 50  # neighbours per question in the first search: community_detection's first sort size
SEARCH_BUDGET = 1 << 22  # (row, neighbour) results per FAISS call: bounds the live search arrays
DEEP_BUDGET = 1 << 23  # results of deepened searches kept for clustering; beyond it they are searched again
MAX_NEIGHBOURHOOD = 256  # deepest search of a neighbourhood on an approximate index (its closest are kept)
# Fewer HNSW links and candidates than search's: a cluster needs only the very close neighbours, found first.
GRAPH_HNSW_LINKS = 16
GRAPH_EF_SEARCH = 64
RESCORE_PAIRS = 1 << 14  # (row, neighbour) pairs re-scored at a time on an ivfpq index: the gather stays small

Progress = Callable[[int, int], None]  # (done, total)


@dataclass(frozen=True)
class Cluster:
    """One cluster: ``members[0]`` is the representative (the centre), the others by similarity to it, highest
    first (ties: lower index first); ``similarities[i]`` is member i's cosine to the representative."""

    representative: int
    members: np.ndarray  # (m,) int64 row numbers of the clustered vectors
    similarities: np.ndarray  # (m,) float32

    @property
    def size(self) -> int:
        return int(len(self.members))


def greedy_clusters(order, neighbourhood: Callable, counts: np.ndarray, copies: Callable,
                    min_size: int) -> list[Cluster]:
    """The community rule: each centre of ``order`` (best first) not yet placed takes the rows of its
    ``neighbourhood(centre)`` (ids and scores, itself included) not yet placed, kept at ``min_size`` rows; a row
    stands for ``copies(row)`` (``counts`` of them), which always go together. Clusters come largest first."""
    used = np.zeros(len(counts), dtype=bool)
    clusters: list[Cluster] = []
    for centre in order:
        if used[centre]:
            continue
        ids, scores = neighbourhood(centre)
        free = ~used[ids]
        if int(counts[ids[free]].sum()) < min_size:
            continue
        ids, scores = ids[free], scores[free]
        rows, row_scores = np.concatenate([copies(i) for i in ids.tolist()]), np.repeat(scores, counts[ids])
        representative = int(copies(centre)[0])  # its other copies score as the centre does
        others = rows != representative
        ranked = np.lexsort((rows[others], -row_scores[others]))
        members = np.concatenate([[representative], rows[others][ranked]]).astype(np.int64)
        similarities = np.concatenate([scores[ids == centre][:1], row_scores[others][ranked]]).astype(np.float32)
        used[ids] = True
        clusters.append(Cluster(representative, members, similarities))
    clusters.sort(key=lambda c: -c.size)  # stable: equal sizes keep the order they were formed in
    return clusters


class NeighbourGraph:
    """The ``k`` nearest neighbours of every row of ``vectors`` (searched with ``queries``, by default the vectors),
    in an index kept so that any threshold can be clustered again, searching deeper only where it must."""

    def __init__(self, vectors, k: int = DEFAULT_K, queries=None, progress: Progress | None = None,
                 max_neighbourhood: int | None = None, index_kind: str | None = None, index_store=None, device=None):
        from core.inference.search import FLAT_LIMIT, device_index, unit_rows

        self.capped = 0  # rows whose neighbourhood filled max_neighbourhood at the last threshold clustered
        vectors = unit_rows(vectors, "vectors")  # (N, d) what the index holds
        queries = vectors if queries is None else unit_rows(queries, "queries")  # (N, d) what searches it
        self.n = len(vectors)
        # Distinct rows in order of first appearance: unique row u stands for the rows copies[u].
        first, inverse, counts = distinct_rows(vectors, queries)
        if len(first) == self.n:  # no row repeated (the usual case): no copy of a corpus's vectors
            self.vectors, self.queries = vectors, queries  # (U, d) each, the same array for one tower
        else:
            self.vectors = vectors[first]  # (U, d)
            self.queries = self.vectors if queries is vectors else queries[first]  # (U, d)
        self.first = first  # (U,) the first row of each distinct row, increasing
        self.inverse = inverse  # (N,) row -> its distinct row
        self.counts = counts  # (U,) how many rows each distinct row stands for
        order = np.argsort(inverse, kind="stable")  # rows grouped by distinct row, each group ascending
        self._copies_at = np.concatenate([[0], np.cumsum(counts)])  # (U + 1,) offsets into _copies
        self._copies = order.astype(np.int64)
        u = len(first)
        self.k = min(int(k), u)
        self.index = None
        self._id_type = np.int32 if u < 2**31 - 1 else np.int64
        self.ids = np.zeros((u, self.k), dtype=self._id_type)  # (U, k) best first; -1 where HNSW found fewer
        self.scores = np.zeros((u, self.k), dtype=np.float32)  # (U, k)
        # On a CUDA ``device`` the vectors fit on, every search is exact there, whatever the corpus's size; an
        # exact index is searched as deep as needed (as community_detection does), an approximate one bounded.
        on_device = device_index(self.vectors, device, self.queries) if index_kind in (None, "flat") else None
        exact = on_device is not None or index_kind == "flat" or (index_kind is None and u <= FLAT_LIMIT)
        self.max_neighbourhood = max(int(max_neighbourhood), self.k) if max_neighbourhood is not None else (
            max(u, 1) if exact else MAX_NEIGHBOURHOOD)
        if u == 0:
            return
        if on_device is not None:
            index_store = None  # it keeps FAISS indexes; the device searches faster than one is read back
        self.index = on_device or self._index(index_kind, exact, index_store)
        if hasattr(self.index, "hnsw"):
            self.index.hnsw.efSearch = GRAPH_EF_SEARCH  # FAISS searches with max(efSearch, k)
        if self.queries is self.vectors and self.kind != "ivfpq" and on_device is None:  # one tower: FAISS's copy
            self.vectors = self.queries = stored_vectors(self.index)
        step = max(1, SEARCH_BUDGET // self.k)
        for start in range(0, u, step):
            rows = np.arange(start, min(start + step, u))
            self.ids[rows], self.scores[rows] = self._search(rows, self.k)
            if progress is not None:
                progress(int(rows[-1]) + 1, u)

    def _index(self, index_kind: str | None, exact: bool, store):
        """The filled index of the distinct rows: ``store``'s (a ``SavedIndex``) when it holds them, else built."""
        from core.inference.search import filled_index, index_parameters

        u, dim = self.vectors.shape
        kind = "ivfpq" if index_kind == "ivfpq" else "flat" if exact else "hnsw"
        parameters = index_parameters(kind, dim, u, GRAPH_HNSW_LINKS)

        def build():
            return filled_index(kind, self.vectors, links=GRAPH_HNSW_LINKS)

        return build() if store is None else store.load_or_build(kind, parameters, build, self.vectors.shape)

    @property
    def kind(self) -> str:
        """"flat" (exact), "hnsw" or "ivfpq" (approximate)."""
        from core.inference.search import index_kind

        return index_kind(self.index)

    def copies(self, unique: int) -> np.ndarray:
        """The rows (ascending) that distinct row ``unique`` stands for."""
        return self._copies[self._copies_at[unique] : self._copies_at[unique + 1]]

    def _search(self, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores), each (len(rows), k), of distinct rows, best first; a missing one is id -1, score -inf."""
        scores, ids = self.index.search(self.queries[rows], k)
        scores = np.where(ids >= 0, scores, -np.inf).astype(np.float32)
        if self.kind == "ivfpq":  # PQ scores are estimates: score the candidates exactly, then sort again
            step = max(1, RESCORE_PAIRS // k)
            for start in range(0, len(rows), step):
                part = slice(start, start + step)
                found = ids[part] >= 0
                exact = np.einsum("rd,rkd->rk", self.queries[rows[part]], self.vectors[np.maximum(ids[part], 0)])
                scores[part] = np.where(found, exact, -np.inf)
            order = np.argsort(-scores, axis=1, kind="stable")
            scores, ids = np.take_along_axis(scores, order, 1), np.take_along_axis(ids, order, 1)
        return ids.astype(self._id_type), scores

    # ---- neighbourhoods at a threshold (of distinct rows) --------------------------------------
    def _neighbourhoods(self, t: np.float32):
        """(sizes (U,) of every distinct row's neighbourhood at ``t`` in rows, itself included; a function
        unique -> (ids, scores) of that neighbourhood in distinct rows; how many rows filled ``max_neighbourhood``)."""
        u, k = len(self.first), self.k
        above = self.scores > t  # (U, k); sorted rows, so the above entries come first
        if (self.counts == 1).all():  # no question repeated (the usual corpus): each neighbour is one row
            sizes = above.sum(axis=1).astype(np.int64)
        else:
            sizes = np.zeros(u, dtype=np.int64)
            step = max(1, SEARCH_BUDGET // max(k, 1))
            for start in range(0, u, step):  # chunks keep the (rows, k) weights small
                part = slice(start, start + step)
                sizes[part] = (above[part] * self.counts[np.maximum(self.ids[part], 0)]).sum(axis=1)
        own = (self.ids == np.arange(u, dtype=self._id_type)[:, None]) & above
        sizes += np.where(own.any(axis=1), 0, self.counts)
        deep: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # row -> its whole neighbourhood (kept)
        deep_k: dict[int, int] = {}  # row -> the k that holds its whole neighbourhood (searched again)
        kept = 0
        deepest = min(self.max_neighbourhood, u)
        full_at_k = np.flatnonzero(above[:, -1]) if 0 < k < u else np.zeros(0, dtype=np.int64)
        pending, capped = (full_at_k, 0) if k < deepest else (full_at_k[:0], int(self.counts[full_at_k].sum()))
        depth = k
        while pending.size:  # every neighbour above t: there may be more; search deeper (2k, 4k, ...)
            depth = min(2 * depth, deepest)
            step = max(1, SEARCH_BUDGET // depth)
            still = []
            for start in range(0, pending.size, step):
                rows = pending[start : start + step]
                ids, scores = self._search(rows, depth)
                hits = scores > t
                full = hits[:, -1] & (depth < deepest)
                if depth == deepest:  # the last allowed depth: rows still full keep their closest
                    capped += int(self.counts[rows[hits[:, -1] & (depth < u)]].sum())
                for row, row_ids, row_scores, row_hits, more in zip(rows, ids, scores, hits, full):
                    if more:
                        still.append(row)
                        continue
                    row = int(row)
                    found = row_ids[row_hits]
                    sizes[row] = int(self.counts[found].sum()) + (0 if (found == row).any() else int(self.counts[row]))
                    if kept + len(found) <= DEEP_BUDGET:
                        deep[row] = (found, row_scores[row_hits])
                        kept += len(found)
                    else:
                        deep_k[row] = depth
            pending = np.asarray(still, dtype=np.int64)

        def neighbourhood(row: int) -> tuple[np.ndarray, np.ndarray]:
            if row in deep:
                ids, scores = deep[row]
            elif row in deep_k:
                found_ids, found_scores = self._search(np.array([row]), deep_k[row])
                hits = found_scores[0] > t
                ids, scores = found_ids[0][hits], found_scores[0][hits]
            else:
                hits = above[row]
                ids, scores = self.ids[row][hits], self.scores[row][hits]
            if not (ids == row).any():
                ids = np.append(ids, self._id_type(row))
                scores = np.append(scores, np.float32(self.queries[row] @ self.vectors[row]))
            return ids.astype(np.int64), scores.astype(np.float32)

        return sizes, neighbourhood, capped

    def deeper_search(self, threshold: float) -> tuple[int, int]:
        """(distinct rows whose ``k`` neighbours are all above ``threshold``, the results searching them as deep as
        allowed would return): what clustering at ``threshold`` may cost, known before it."""
        t = np.float32(threshold)
        deepest = min(self.max_neighbourhood, len(self.first))
        if self.k == 0 or self.k >= deepest:
            return 0, 0
        full = int(np.count_nonzero(self.scores[:, -1] > t))
        return full, full * deepest

    # ---- clusters ------------------------------------------------------------------------------
    def pairs_above(self, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every (i, j, cosine) with i != j and cosine > ``threshold`` that the graph finds (and every pair of
        identical rows), as three (E,) arrays, both directions: the candidates a cross-encoder confirms."""
        t = np.float32(threshold)
        sizes, neighbourhood, self.capped = self._neighbourhoods(t)
        first, second, scores = [], [], []
        for unique in np.flatnonzero(sizes > 1).tolist():
            ids, unique_scores = neighbourhood(unique)
            mine = self.copies(unique)
            for other, score in zip(ids.tolist(), unique_scores.tolist()):
                theirs = self.copies(other)  # copies of one row are pairs too, as in ``cluster``
                a, b = np.repeat(mine, len(theirs)), np.tile(theirs, len(mine))
                keep = a != b
                first.append(a[keep])
                second.append(b[keep])
                scores.append(np.full(int(keep.sum()), score, dtype=np.float32))
        if not first:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
        return np.concatenate(first), np.concatenate(second), np.concatenate(scores)

    def cluster(self, threshold: float, min_size: int = 2) -> list[Cluster]:
        """The greedy community clusters at ``threshold``, at least ``min_size`` rows each, largest first."""
        t = np.float32(threshold)
        if self.n == 0:
            return []
        sizes, neighbourhood, self.capped = self._neighbourhoods(t)
        candidates = np.flatnonzero(sizes >= min_size)
        # Largest first, then the earlier row (a distinct row's first copy, as community_detection takes it).
        order = candidates[np.lexsort((self.first[candidates], -sizes[candidates]))]
        return greedy_clusters(order.tolist(), neighbourhood, self.counts, self.copies, min_size)


def capped_note(capped: int, limit: int, threshold: float) -> str | None:
    """What to tell a user when ``capped`` questions filled their neighbourhood's ``limit`` (None if none)."""
    if not capped:
        return None
    return (f"{capped:,} questions have more than {limit:,} neighbours above the threshold {threshold:.4g}; "
            f"their clusters hold only their {limit:,} closest. The threshold is low for this corpus: a higher "
            "one gives tighter clusters.")


# ---- the rows a graph indexes ------------------------------------------------------------------
def stored_vectors(index) -> np.ndarray:
    """(ntotal, d) read-only float32 view of the vectors ``index`` (flat, or HNSW over flat) holds, not a copy: valid
    while the index lives, as the graph holding both keeps it."""
    import faiss

    flat = index if isinstance(index, faiss.IndexFlat) else faiss.downcast_index(index.storage)
    rows = faiss.rev_swig_ptr(flat.get_xb(), index.ntotal * index.d).reshape(index.ntotal, index.d)
    rows.flags.writeable = False
    return rows


def _row_hashes(rows: np.ndarray) -> np.ndarray:
    """(N,) uint64: a random linear hash of each row's bytes (unequal rows collide with probability about 2^-64,
    and ``distinct_rows`` checks the bytes of every shared hash)."""
    words = np.ascontiguousarray(rows).view(np.uint32)  # (N, d) the float bits
    weights = np.random.default_rng(0).integers(1, 2**63, size=words.shape[1], dtype=np.uint64) | np.uint64(1)
    return np.einsum("ij,j->i", words, weights, dtype=np.uint64)  # modulo 2^64; buffered, no (N, d) uint64 copy


def distinct_rows(vectors: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first (U,) increasing, inverse (N,) row -> distinct row, counts (U,)) of the distinct rows of (vectors,
    queries) taken together, in order of first appearance."""
    import pandas as pd

    keys = _row_hashes(vectors) if queries is vectors else _row_hashes(vectors) * np.uint64(0x9E3779B97F4A7C15) \
        + _row_hashes(queries)  # (N,) one 64-bit key per row instead of a sorted copy of every row's bytes
    inverse = pd.factorize(keys)[0]  # numbered in order of first appearance
    _, first, counts = np.unique(inverse, return_index=True, return_counts=True)
    shared = np.flatnonzero(counts[inverse] > 1)  # rows whose key another row has: check their bytes
    if shared.size and not all(np.array_equal(side[shared], side[first[inverse[shared]]])
                               for side in ((vectors,) if queries is vectors else (vectors, queries))):
        both = vectors if queries is vectors else np.hstack([vectors, queries])  # a hash collision: bytes decide
        keys = np.ascontiguousarray(both).view(np.dtype((np.void, both.dtype.itemsize * both.shape[1]))).ravel()
        inverse = pd.factorize(np.unique(keys, return_inverse=True)[1].ravel())[0]
        _, first, counts = np.unique(inverse, return_index=True, return_counts=True)
    return first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)
