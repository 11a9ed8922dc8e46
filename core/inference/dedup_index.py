"""A deduplication's neighbour index kept on disk between runs (``python -m core dedup``'s cache).

``NeighbourGraph`` puts a corpus's distinct vectors in a FAISS index before it searches them. Building it is
the costly part after encoding: HNSW's graph took 69 s of the local path's 272 s on all 448,316 Quora
questions (docs/BENCHMARKS.md), and an ivfpq index trains k-means on a sample first. A ``SavedGraphIndex``
says where the index of one model's vectors of one corpus is kept and what it must agree with to be used
again: ``core.inference.vector_index``'s stamp rule (the model's identity, the corpus's fingerprint and
count, the index kind and its parameters), with the graph's own facts added (``"use": "dedup"``, the
number of distinct rows and their width), so a search index of the same corpus is never taken for it.

A run that reuses the index still encodes the corpus: the vectors are the graph's queries, an ivfpq index
scores its candidates again with them, and they check the index: a flat or HNSW index holds every vector
in float32, all compared with the fresh ones (within ``SPOT_TOLERANCE``); an ivfpq index's codes are
checked on a random sample (``check_ivfpq_rows``). An index that disagrees, or that cannot be read, is
built again and saved over; an index that cannot be written (a read-only cache) is only used in memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

CHECK_ROWS = 1 << 16  # stored vectors compared with the fresh ones per step: bounds the difference array


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


def saved_graph_index(root: str | Path, model, texts: Sequence[str]) -> SavedGraphIndex | None:
    """The ``SavedGraphIndex`` of ``model``'s vectors of ``texts`` under ``root``; None for a model nothing
    identifies (its saved vectors could not be told from another model's)."""
    from core.inference.search import fingerprint
    from core.inference.vector_index import model_identity

    identity = model_identity(model)
    if identity is None:
        return None
    return SavedGraphIndex(Path(root), identity, fingerprint(texts), len(texts))


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
