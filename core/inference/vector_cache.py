"""A corpus's vectors kept on disk between runs: a second ``dedup`` at another threshold, a ``suggest`` round
or a ``search`` index of another kind, on the same corpus with the same model, encodes nothing.

An entry is one folder under the cache root, named by the model's key and the corpus's fingerprint
(``core.inference.search.fingerprint``: the texts, in order). It holds ``second.npy``, the unit vectors of
the question2 side (tower 1: what a search indexes and what a Siamese model clusters), ``first.npy`` (tower
0) only for a model whose two towers differ, and ``meta.json``, the stamp (the model's key, the corpus's
fingerprint and count, the width, the towers). The folder is written atomically
(``core.inference.search.save_arrays``), so a reader sees a whole entry or none.

An entry is named by the content it was made from, so it is used only under exactly the stamp asked for, and
its arrays only when their shape and dtype are the stamp's and every row is finite and of length 1 (or 0:
``unit_rows`` leaves an all-zero vector so). Anything else gives None: the caller encodes again and writes the
entry over. A cache that cannot be written costs only the reuse. Someone who can write into the lab's cache is
outside the threat model (``docs/RELIABILITY.md``): these checks catch a stale or damaged entry, not a forgery.

The model's key is the caller's: the CLI names a saved model by the sha256 of its files, so a second run
needs no model loaded at all; the library's default is ``core.inference.search.model_identity``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from core.inference.search import load_arrays, save_arrays, saved_stamp

SECOND, FIRST = "second.npy", "first.npy"
UNIT_TOLERANCE = 1e-4  # how far from 1 a stored row's length may be (float32 rounding of a unit row)
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


def unit_and_finite(rows: np.ndarray) -> bool:
    """Every value of ``rows`` ((N, d)) finite and every row of length 1 (within ``UNIT_TOLERANCE``) or 0."""
    for start in range(0, len(rows), CHECK_ROWS):
        part = rows[start : start + CHECK_ROWS]
        norms = np.linalg.norm(part, axis=1)
        if not (np.isfinite(part).all() and ((np.abs(norms - 1) <= UNIT_TOLERANCE) | (norms == 0)).all()):
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
                "towers": towers}

    def load(self, model_key: str, texts: Sequence[str], corpus: str | None = None) -> CorpusVectors | None:
        """The vectors saved for ``texts`` under ``model_key``, checked (see the module docstring); None when there
        are none or they fail a check. ``corpus``: the texts' fingerprint when the caller has it."""
        from core.inference.search import fingerprint

        corpus = corpus or fingerprint(texts)
        folder = self.folder(model_key, corpus)
        saved = saved_stamp(folder) or {}  # its width and towers; the rest is checked against the stamp
        dim, towers = saved.get("dim"), saved.get("towers")
        if not (isinstance(dim, int) and towers in (1, 2)):
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
    from core.inference.search import model_identity

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
