"""Nearest questions: every question of a dataset as a unit vector in a FAISS index.

The corpus is encoded once through tower 1 (the question2 side) and a query through tower 0 (the
question1 side), the same way pairs are scored, so a search score is the cosine similarity the
model would give the pair (query, corpus question). Up to ``FLAT_LIMIT`` texts the index is exact
(``IndexFlatIP``); above it, an HNSW graph answers in milliseconds with a small loss of recall.

An index can be saved beside the model it was built with and reloaded when the same texts are asked
for again (same ``fingerprint``). Only indexes this module wrote are ever read back: FAISS files are
trusted input.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Callable, Sequence

import faiss
import numpy as np
import pandas as pd

FLAT_LIMIT = 50_000  # corpus size up to which search is exact
HNSW_NEIGHBOURS = 32  # M: graph links per vector
HNSW_EF_SEARCH = 512  # candidates kept while searching: recall@10 0.97 at p50 5.5 ms on 448k questions (docs/BENCHMARKS.md)
HNSW_EF_CONSTRUCTION = 80  # candidates kept while building
ENCODE_CHUNK = 4096  # texts per model.encode call, so progress moves and memory stays bounded
INDEX_FILE, TEXTS_FILE, META_FILE = "index.faiss", "texts.json", "meta.json"
FORMAT = "siamese-lab-search"

Progress = Callable[[int, int], None]  # (texts encoded so far, total)


def corpus_questions(pairs: pd.DataFrame) -> list[str]:
    """The distinct questions of both columns, stripped, in first-seen order (question1 before
    question2 within a row); empty texts are left out."""
    seen: dict[str, None] = {}
    for first, second in zip(pairs["question1"].astype(str), pairs["question2"].astype(str)):
        for text in (first.strip(), second.strip()):
            if text:
                seen.setdefault(text, None)
    return list(seen)


def fingerprint(texts: Sequence[str]) -> str:
    """sha1 of the texts in order; a NUL between texts keeps ["ab", "c"] apart from ["a", "bc"]."""
    digest = hashlib.sha1()
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


def _unit_rows(vectors) -> np.ndarray:
    """(N, d) float32 rows scaled to length 1; an all-zero row stays zero (scores 0), as in
    ``F.normalize``."""
    v = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))  # (N, d)
    norms = np.linalg.norm(v, axis=1, keepdims=True)  # (N, 1)
    return np.ascontiguousarray(v / np.maximum(norms, 1e-12), dtype=np.float32)


def _encode(model, texts: Sequence[str], tower: int, batch_size: int, progress: Progress | None) -> np.ndarray:
    total = len(texts)
    parts = []
    for offset in range(0, total, ENCODE_CHUNK):
        chunk = list(texts[offset : offset + ENCODE_CHUNK])
        inner = None
        if progress is not None:
            inner = lambda done, _n, offset=offset: progress(offset + done, total)  # noqa: E731
        parts.append(np.asarray(model.encode(chunk, tower=tower, batch_size=batch_size, progress=inner)))
    if not parts:
        return np.zeros((0, 0), dtype=np.float32)
    return _unit_rows(np.concatenate(parts))  # (N, d)


def _new_index(dim: int, size: int, flat_limit: int) -> faiss.Index:
    if size <= flat_limit:
        return faiss.IndexFlatIP(dim)
    index = faiss.IndexHNSWFlat(dim, HNSW_NEIGHBOURS, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    index.hnsw.efSearch = HNSW_EF_SEARCH
    return index


class SearchIndex:
    """Unit vectors of ``texts`` in a FAISS inner-product index, plus the model that encodes queries."""

    def __init__(self, model, index: faiss.Index, texts: list[str], fingerprint_: str | None = None):
        if index.ntotal != len(texts):
            raise ValueError(f"the index holds {index.ntotal} vectors for {len(texts)} texts")
        self.model = model
        self.index = index
        self.texts = list(texts)
        self.fingerprint = fingerprint_ or fingerprint(self.texts)

    @property
    def kind(self) -> str:
        return "hnsw" if isinstance(self.index, faiss.IndexHNSWFlat) else "flat"

    def __len__(self) -> int:
        return len(self.texts)

    @classmethod
    def build(cls, model, texts: Sequence[str], progress: Progress | None = None, batch_size: int = 256,
              flat_limit: int = FLAT_LIMIT) -> "SearchIndex":
        """Encode ``texts`` with ``model`` (tower 1) and index them; exact up to ``flat_limit`` texts."""
        texts = list(texts)
        if not texts:
            raise ValueError("nothing to index: the corpus has no questions")
        vectors = _encode(model, texts, tower=1, batch_size=batch_size, progress=progress)  # (N, d)
        index = _new_index(vectors.shape[1], len(texts), flat_limit)
        index.add(vectors)
        return cls(model, index, texts)

    def search(self, query: str | Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """The ``k`` most similar corpus texts of each query, best first, as (text, cosine score).

        A single string still gives a list with one result list.
        """
        queries = [query] if isinstance(query, str) else list(query)
        if not queries:
            return []
        k = max(0, min(int(k), len(self.texts)))
        if k == 0:
            return [[] for _ in queries]
        vectors = _encode(self.model, queries, tower=0, batch_size=256, progress=None)  # (Q, d)
        scores, ids = self.index.search(vectors, k)  # (Q, k) each; id -1 where HNSW found fewer
        return [[(self.texts[i], float(s)) for s, i in zip(row_scores, row_ids) if i >= 0]
                for row_scores, row_ids in zip(scores, ids)]

    # ---- on disk -------------------------------------------------------------------------------
    def save(self, folder: str | Path) -> Path:
        """Write the index, the texts and the fingerprint to ``folder`` atomically (temp + rename)."""
        folder = Path(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        temp = folder.parent / f".tmp-{folder.name}-{uuid.uuid4().hex[:8]}"
        temp.mkdir()
        try:
            faiss.write_index(self.index, str(temp / INDEX_FILE))
            (temp / TEXTS_FILE).write_text(json.dumps(self.texts, ensure_ascii=False), encoding="utf-8")
            meta = {"format": FORMAT, "fingerprint": self.fingerprint, "count": len(self.texts), "kind": self.kind}
            (temp / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
            if folder.exists():
                shutil.rmtree(folder)
            os.rename(temp, folder)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
        return folder

    @classmethod
    def load(cls, folder: str | Path, model) -> "SearchIndex":
        """Read an index written by ``save``; raises ``ValueError`` when the files do not agree."""
        folder = Path(folder)
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT:
            raise ValueError(f"{folder} is not a saved search index")
        texts = json.loads((folder / TEXTS_FILE).read_text(encoding="utf-8"))
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ValueError(f"{folder / TEXTS_FILE} is not a list of texts")
        if fingerprint(texts) != meta.get("fingerprint"):
            raise ValueError(f"{folder}: the texts do not match the saved fingerprint")
        index = faiss.read_index(str(folder / INDEX_FILE))
        if isinstance(index, faiss.IndexHNSWFlat):
            index.hnsw.efSearch = HNSW_EF_SEARCH
        return cls(model, index, texts, meta["fingerprint"])


def cache_folder(cache_dir: str | Path, texts_fingerprint: str) -> Path:
    return Path(cache_dir) / f"search-{texts_fingerprint[:12]}"


def load_or_build(model, texts: Sequence[str], cache_dir: str | Path | None, progress: Progress | None = None,
                  flat_limit: int = FLAT_LIMIT, batch_size: int = 256) -> SearchIndex:
    """The saved index for exactly these texts in ``cache_dir`` if there is one, else a new one
    (saved there when ``cache_dir`` is given and writable).

    ``cache_dir`` must belong to ``model`` (its saved folder): the fingerprint covers the texts only.
    """
    texts = list(texts)
    wanted = fingerprint(texts)
    folder = cache_folder(cache_dir, wanted) if cache_dir is not None else None
    if folder is not None and (folder / META_FILE).is_file():
        try:
            saved = SearchIndex.load(folder, model)
            if saved.fingerprint == wanted and saved.texts == texts:
                return saved
        except (OSError, ValueError, RuntimeError):  # unreadable or stale: rebuild over it
            pass
    built = SearchIndex.build(model, texts, progress=progress, batch_size=batch_size, flat_limit=flat_limit)
    if folder is not None:
        try:
            built.save(folder)
        except OSError:  # a read-only model folder still gets a working (in-memory) index
            pass
    return built
