"""A deduplication's neighbour index kept on disk between runs (``python -m core dedup``'s cache).

``NeighbourGraph`` puts a corpus's distinct vectors in a FAISS index before it searches them. Building it is
the costly part after encoding: HNSW's graph took 69 s of the local path's 272 s on all 448,316 Quora
questions (docs/BENCHMARKS.md), and an ivfpq index trains k-means on a sample first. A ``SavedGraphIndex``
says where the index of one model's vectors of one corpus is kept and what it must agree with to be used
again: ``core.inference.vector_index``'s stamp rule (the model's identity, the corpus's fingerprint and
count, the index kind and its parameters), with the graph's own facts added (``"use": "dedup"``, the
number of distinct rows and their width), so a search index of the same corpus is never taken for it.

The graph is still given the corpus's vectors (encoded, or ``core.inference.vector_cache``'s): they are its
queries, an ivfpq index scores its candidates again with them, and they check the index: a flat or HNSW index
holds every vector in float32, all compared with the given ones (within ``SPOT_TOLERANCE``); an ivfpq index's
codes are checked on a random sample (``check_ivfpq_rows``). An index that disagrees, or that cannot be read, is
built again and saved over; an index that cannot be written (a read-only cache) is only used in memory.

The graph's first search (every row's ``k`` best neighbours: on an exact index every row against every other,
most of what a second run would still do once the vectors are cached) is kept beside the index, one folder per
``k``, and used again only with the index it was searched in (reused, so the same vectors), under the same stamp
with ``k`` and the HNSW candidates added (``load_neighbours``): its files checked as
``core.inference.vector_cache.load_arrays`` checks a corpus's vectors, its ids within the rows, its scores
sorted, and a random sample of rows searched again and compared.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

CHECK_ROWS = 1 << 16  # stored vectors compared with the fresh ones per step: bounds the difference array
NEIGHBOUR_CHECKS = 16  # rows of a saved neighbour table searched again before it is used
SCORE_TOLERANCE = 1e-4  # largest difference between a saved neighbour's score and a fresh search's
IDS, SCORES = "ids.npy", "scores.npy"


@dataclass
class SavedGraphIndex:
    """Where a ``NeighbourGraph``'s index of one model's vectors of one corpus is kept (``NeighbourGraph``'s
    ``index_store``); ``reused`` says, once the graph is built, whether it was loaded."""

    root: Path  # the folder every saved dedup index lives in (the CLI's: the lab's cache, ``dedup/``)
    model: str  # ``vector_index.model_identity`` of the model whose vectors are indexed
    corpus: str  # ``search.fingerprint`` of the corpus's texts, in order
    count: int  # texts in the corpus (repeats included)
    reused: bool | None = None  # None until a graph used it; then True (loaded) or False (built)

    def folder(self, kind: str) -> Path:
        """One folder per model, corpus and kind: changing any of them never overwrites another's index."""
        return Path(self.root) / f"{kind}-{self.model[:16]}-{self.corpus[:16]}"

    def stamp(self, kind: str, parameters: dict, rows: int, dim: int) -> dict:
        return {"use": "dedup", "model": self.model, "corpus": self.corpus, "count": self.count, "rows": rows,
                "dim": dim, "kind": kind, "parameters": parameters}

    def load(self, kind: str, parameters: dict, vectors: np.ndarray):
        """The index saved for ``vectors`` ((U, d), the graph's distinct rows) with this stamp, checked
        against them; None when there is none or it disagrees."""
        from core.inference.vector_index import load_vector_index

        folder = self.folder(kind)
        index = load_vector_index(folder, self.stamp(kind, parameters, *vectors.shape))
        if index is not None:
            try:
                check_rows(index, vectors, folder)
            except ValueError:  # not these vectors (the cache edited, or the model's output drifted): build
                index = None
        self.reused = index is not None
        return index

    def save(self, index, kind: str, parameters: dict, vectors: np.ndarray) -> None:
        """Keep ``index`` (just built from ``vectors``) for the next run; a cache that cannot be written
        costs only the reuse."""
        from core.inference.vector_index import save_vector_index

        self.reused = False
        try:
            save_vector_index(index, self.folder(kind), self.stamp(kind, parameters, *vectors.shape))
        except OSError:
            pass


    def neighbours_folder(self, kind: str, k: int) -> Path:
        return Path(f"{self.folder(kind)}-k{k}")

    def _neighbour_stamp(self, graph) -> dict:
        rows, dim = graph.vectors.shape
        return {**self.stamp(graph.kind, graph.index_parameters, rows, dim), "use": "dedup neighbours",
                "k": graph.k, "ef_search": graph.ef_search}

    def load_neighbours(self, graph) -> bool:
        """Fill ``graph.ids`` and ``graph.scores`` with the first search saved for it, when its index was
        loaded (``reused``) and the saved table passes every check; False (nothing changed) otherwise."""
        from core.inference.vector_cache import load_arrays

        if not self.reused:  # a rebuilt index (HNSW differs build to build) has its own neighbours
            return False
        shape = graph.ids.shape
        arrays = load_arrays(self.neighbours_folder(graph.kind, graph.k), self._neighbour_stamp(graph),
                             {IDS: (shape, graph.ids.dtype), SCORES: (shape, np.float32)})
        if arrays is None or not _plausible(arrays[IDS], arrays[SCORES]):
            return False
        ids, scores = arrays[IDS], arrays[SCORES]
        picks = np.unique(np.random.default_rng().choice(len(ids), size=min(NEIGHBOUR_CHECKS, len(ids)),
                                                         replace=False))
        fresh_ids, fresh = graph._search(picks, graph.k)
        found = np.isfinite(fresh)
        if not (found == np.isfinite(scores[picks])).all() or (
                np.abs(fresh[found] - scores[picks][found]) > SCORE_TOLERANCE).any():
            return False
        for saved_ids, saved_scores, fresh_row, fresh_scores in zip(ids[picks], scores[picks], fresh_ids, fresh):
            saved = dict(zip(saved_ids.tolist(), saved_scores.tolist()))
            clear = fresh_scores > fresh_scores[-1] + SCORE_TOLERANCE  # above the last place: no tie moves them out
            if any(abs(saved.get(i, -np.inf) - score) > SCORE_TOLERANCE
                   for i, score in zip(fresh_row[clear].tolist(), fresh_scores[clear].tolist())):
                return False  # a neighbour missing, or saved with another's score
        graph.ids, graph.scores = ids, scores
        return True

    def save_neighbours(self, graph) -> None:
        """Keep ``graph``'s first search for the next run with the same index; a cache that cannot be written
        costs only the reuse."""
        from core.inference.vector_cache import save_arrays

        try:
            save_arrays(self.neighbours_folder(graph.kind, graph.k), {IDS: graph.ids, SCORES: graph.scores},
                        self._neighbour_stamp(graph))
        except OSError:
            pass


def _plausible(ids: np.ndarray, scores: np.ndarray) -> bool:
    """A neighbour table a search can give: ids within the rows or -1, scores not NaN, -inf exactly where no
    neighbour was found, each row best first."""
    missing = ids < 0
    return bool(len(ids) == 0 or (
        ids.min() >= -1 and ids.max() < len(ids) and not np.isnan(scores).any() and not np.isposinf(scores).any()
        and (np.isneginf(scores) == missing).all() and (scores[:, 1:] <= scores[:, :-1]).all()))


def check_rows(index, vectors: np.ndarray, folder: Path) -> None:
    """``index`` must hold ``vectors`` ((U, d) unit rows, in order): every row for a flat or HNSW index
    (within ``SPOT_TOLERANCE``), a random sample of an ivfpq index's codes; ValueError if not."""
    from core.inference.dedup_rows import stored_vectors
    from core.inference.search import SPOT_CHECKS, SPOT_TOLERANCE
    from core.inference.vector_index import check_ivfpq_rows, index_kind

    if index.ntotal != len(vectors) or index.d != vectors.shape[1]:
        raise ValueError(f"{folder}: the index holds {index.ntotal} vectors of width {index.d}")
    if index_kind(index) == "ivfpq":
        picks = np.unique(np.random.default_rng().choice(len(vectors), size=min(SPOT_CHECKS, len(vectors)),
                                                         replace=False))
        check_ivfpq_rows(index, picks, vectors[picks], folder)
        return
    stored = np.asarray(stored_vectors(index))  # (U, d) a view of the index's float32 rows
    for start in range(0, len(vectors), CHECK_ROWS):
        part = slice(start, start + CHECK_ROWS)
        distance = np.linalg.norm(stored[part] - vectors[part], axis=1)
        if not np.isfinite(distance).all() or distance.max() > SPOT_TOLERANCE:
            raise ValueError(f"{folder}: stored vectors differ from the model's (by up to {distance.max():.3g})")
