"""A corpus's vectors kept on disk between runs, so another threshold, round or index kind on the same corpus with the
same model encodes nothing. An entry is a folder named by the model's key and the corpus's fingerprint: tower 1's
unit rows (``second.npy``), tower 0's (``first.npy``) only when the towers differ, and the stamp; anything but exactly
the stamp, shapes, dtypes and finite unit rows asked for is encoded again.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from core.inference.search import fingerprint, is_unit, load_arrays, model_identity, row_norms, save_arrays, saved_stamp

SECOND, FIRST = "second.npy", "first.npy"

Progress = Callable[[int, int], None]


@dataclass
class CorpusVectors:
    """A corpus's unit vectors under one model: ``second`` (N, d) its tower 1 rows, ``first`` (N, d) its tower 0
    rows or None when the towers agree; ``reused`` says whether they came from the cache."""

    second: np.ndarray
    first: np.ndarray | None = None
    reused: bool = False

    def for_clustering(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(vectors, queries) as ``core.inference.dedup.encode_corpus`` gives them."""
        from core.inference.dedup import clustering_rows

        return clustering_rows(self.second, self.first)


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
        """The vectors saved for ``texts`` under ``model_key``, checked; None when there are none or a check fails.
        ``corpus``: the texts' fingerprint when the caller has it."""
        corpus = corpus or fingerprint(texts)
        folder = self.folder(model_key, corpus)
        saved = saved_stamp(folder) or {}  # its width and towers; the rest is checked against the stamp
        dim, towers = saved.get("dim"), saved.get("towers")
        if not (isinstance(dim, int) and towers in (1, 2)):
            return None
        shape = ((len(texts), dim), np.float32)
        arrays = load_arrays(folder, self.stamp(model_key, corpus, len(texts), dim, towers),
                             {SECOND: shape, **({FIRST: shape} if towers == 2 else {})})
        try:
            if arrays is None or not all(is_unit(row_norms(rows)) for rows in arrays.values()):
                return None
        except ValueError:  # NaN or infinite values
            return None
        return CorpusVectors(arrays[SECOND], arrays.get(FIRST), reused=True)

    def save(self, model_key: str, texts: Sequence[str], vectors: CorpusVectors, corpus: str | None = None) -> bool:
        """Keep ``vectors`` of ``texts`` for the next run; False when the cache cannot be written."""
        corpus = corpus or fingerprint(texts)
        arrays = {SECOND: vectors.second, **({} if vectors.first is None else {FIRST: vectors.first})}
        stamp = self.stamp(model_key, corpus, len(texts), int(vectors.second.shape[1]), len(arrays))
        with contextlib.suppress(OSError):  # a read-only or full cache: this run still has its vectors
            save_arrays(self.folder(model_key, corpus), arrays, stamp)
            return True
        return False


def corpus_vectors(texts: Sequence[str], model, cache: VectorCache | None = None, model_key: str | None = None,
                   progress: Progress | None = None, batch_size: int = 256) -> CorpusVectors:
    """The unit vectors of ``texts``: ``cache``'s for ``model_key`` (default: the model's ``model_identity``) when it
    holds them, else encoded (``core.inference.dedup.encode_towers``) and saved there. ``model`` is a model, or a
    function giving one, called only when something must be encoded."""
    from core.inference.dedup import encode_towers

    def loaded():
        return model if hasattr(model, "encode") else model()

    texts = list(texts)
    if cache is not None and model_key is None:
        model_key = model_identity(model := loaded())
    corpus = fingerprint(texts) if cache is not None and model_key is not None and texts else None
    saved = cache.load(model_key, texts, corpus) if corpus is not None else None
    if saved is not None:
        return saved
    vectors = CorpusVectors(*encode_towers(loaded(), texts, progress=progress, batch_size=batch_size))
    if corpus is not None:
        cache.save(model_key, texts, vectors, corpus)
    return vectors
