"""Which pairs of a corpus to label next: each question paired with its nearest neighbours (``candidate_pairs``,
searched once per corpus by ``embed_corpus``'s ``EmbeddedCorpus`` and kept, so a later round only filters), and the
few a person should answer (``choose_pairs``). Two texts equal under ``core.data.normalise_questions`` are one
question (the first spelling kept), two pairs with the same ``core.data.pair_key`` one pair.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from core.data.questions import pair_keys
from core.data.reading import normalise_questions

STRATEGIES = ("uncertainty", "random")
UNCERTAIN, RANDOM = "uncertain", "random"  # the ``reason`` of a chosen pair
DEFAULT_K = 10  # neighbours per question
RANDOM_SHARE = 0.1  # share of a round drawn at random, so quality is also estimated on unbiased pairs
# Up to this many questions the neighbours are searched exactly (N^2 products), as cheaper than building HNSW
# (bench/suggest_speed.py).
EXACT_LIMIT = 50_000

Progress = Callable[[int, int], None]


class EmbeddedCorpus:
    """The distinct questions of a corpus and their vectors under one model: ``vectors[i] @ queries[j]`` is the
    model's similarity of questions i and j (``CorpusVectors.for_clustering``)."""

    def __init__(self, questions: Sequence[str], vectors: np.ndarray, queries: np.ndarray | None = None,
                 reused: bool = False, device=None):
        self.questions = list(questions)
        self.reused = reused  # the vectors came from a vector cache (``embed_corpus``), not from the encoder
        self.device = device  # a CUDA device searches exactly there when the vectors fit (``neighbours``)
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)  # (N, d)
        self.queries = self.vectors if queries is None else np.ascontiguousarray(queries, dtype=np.float32)
        self._row = {key: i for i, key in enumerate(normalise_questions(self.questions))}
        self._neighbours: tuple[np.ndarray, np.ndarray] | None = None  # (ids, scores), each (N, k)

    def __len__(self) -> int:
        return len(self.questions)

    def neighbours(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores), each (N, min(k, N - 1)): every question's nearest other questions, best first (-1 where
        HNSW found fewer). Searched once for the largest ``k`` asked; on a CUDA ``device`` the vectors fit on,
        exactly there, else with FAISS (exact up to ``EXACT_LIMIT`` questions)."""
        from core.inference.search import device_index, filled_index

        k = max(0, min(int(k), len(self) - 1))
        if self._neighbours is None or self._neighbours[0].shape[1] < k:
            n = len(self.vectors)
            index = device_index(self.vectors, self.device, self.queries) or filled_index(
                "flat" if n <= EXACT_LIMIT else "hnsw", self.vectors)
            found_scores, found = index.search(self.queries, k + 1)  # (N, k + 1), each question itself too
            others = (found != np.arange(n)[:, None]) & (found >= 0)  # HNSW may return -1
            columns = np.argsort(~others, axis=1, kind="stable")[:, :k]  # the others first, in order
            kept = np.take_along_axis(others, columns, axis=1)
            self._neighbours = (np.where(kept, np.take_along_axis(found, columns, axis=1), -1).astype(np.int64),
                                np.where(kept, np.take_along_axis(found_scores, columns, axis=1), -np.inf))
        ids, scores = self._neighbours
        return ids[:, :k], scores[:, :k]

    def similarity(self, questions1: Sequence[str], questions2: Sequence[str]) -> np.ndarray:
        """(P,) float64: the model's similarity of each pair whose two questions are in the corpus, else NaN."""
        first, second = (np.array([self._row.get(key, -1) for key in normalise_questions(questions)], dtype=np.int64)
                         for questions in (questions1, questions2))
        known, out = (first >= 0) & (second >= 0), np.full(len(first), np.nan)
        out[known] = np.einsum("id,id->i", self.queries[first[known]], self.vectors[second[known]])
        return out


def distinct_questions(questions: Sequence[str]) -> list[str]:
    """Stripped non-empty questions, one per ``normalise_questions`` text (its first spelling), in order."""
    texts = [str(text).strip() for text in questions]
    seen: dict[str, str] = {}
    for key, text in zip(normalise_questions(texts), texts):
        if text:
            seen.setdefault(key, text)
    return list(seen.values())


def embed_corpus(model, questions: Sequence[str], progress: Progress | None = None, cache=None,
                 model_key: str | None = None, device=None) -> EmbeddedCorpus:
    """The ``distinct_questions`` of ``questions`` encoded once for any number of rounds (through ``cache``, a
    ``VectorCache``, when given: ``core.inference.search.corpus_vectors``); ``device`` is where its
    neighbours are searched."""
    from core.inference.search import corpus_vectors

    texts = distinct_questions(questions)
    if not texts:
        return EmbeddedCorpus(texts, np.zeros((0, 1), dtype=np.float32))
    found = corpus_vectors(texts, model, cache, model_key, progress=progress)
    return EmbeddedCorpus(texts, *found.for_clustering(), reused=found.reused, device=device)


def candidate_pairs(corpus: EmbeddedCorpus, k: int = DEFAULT_K,
                    labelled: set[tuple[str, str]] | None = None) -> pd.DataFrame:
    """Each question paired with its ``k`` nearest neighbours (question1, question2, similarity), each unordered pair
    once (question1 the earlier), none in ``labelled``; highest similarity first (ties: corpus order)."""
    ids, scores = corpus.neighbours(k)  # (N, k) each; -1 where the approximate index found fewer
    n, width = ids.shape
    found = ids.ravel() >= 0
    first = np.repeat(np.arange(n), width)[found]
    other = ids.ravel()[found]
    low, high = np.minimum(first, other), np.maximum(first, other)
    code = low * n + high
    code, where = np.unique(code, return_index=True)  # each unordered pair once
    similarity = scores.ravel()[found][where].astype(np.float64)
    low, high = code // n, code % n
    order = np.lexsort((high, low, -similarity))
    low, high, similarity = low[order], high[order], similarity[order]
    questions = np.asarray(corpus.questions, dtype=object)
    frame = pd.DataFrame({"question1": questions[low], "question2": questions[high], "similarity": similarity})
    if labelled:
        done = np.array([key in labelled for key in pair_keys(frame["question1"], frame["question2"])], dtype=bool)
        frame = frame[~done].reset_index(drop=True)
    return frame


def choose_pairs(candidates: pd.DataFrame, n: int, threshold: float, strategy: str = "uncertainty",
                 random_share: float = RANDOM_SHARE, seed: int = 0) -> pd.DataFrame:
    """At most ``n`` rows of ``candidates`` to label, no question twice, with a ``reason`` column. ``uncertainty``:
    ``n - round(n * random_share)`` pairs with the similarity closest to ``threshold`` (ties: the earlier row),
    "uncertain", then the rest drawn at random with ``seed`` from the other rows, "random"; ``random``: all drawn so.

    >>> candidates = pd.DataFrame({"question1": ["a", "a", "c", "e"], "question2": ["b", "c", "d", "f"],
    ...                            "similarity": [0.95, 0.81, 0.78, 0.2]})
    >>> choose_pairs(candidates, 2, threshold=0.8, random_share=0)[["question1", "question2", "reason"]].values.tolist()
    [['a', 'c', 'uncertain'], ['e', 'f', 'uncertain']]
    """
    n = max(0, int(n))
    random_n = n if strategy == "random" else round(n * random_share)
    used: set[str] = set()
    distance = np.abs(candidates["similarity"].to_numpy(dtype=np.float64) - float(threshold))
    uncertain = _diverse(candidates, np.argsort(distance, kind="stable"), n - random_n, used)
    rest = np.setdiff1d(np.arange(len(candidates)), uncertain)
    drawn = _diverse(candidates, np.random.default_rng(seed).permutation(rest), random_n, used)
    chosen = candidates.iloc[uncertain + drawn].copy()
    chosen["reason"] = [UNCERTAIN] * len(uncertain) + [RANDOM] * len(drawn)
    return chosen.reset_index(drop=True)


def _diverse(candidates: pd.DataFrame, order, wanted: int, used: set[str]) -> list[int]:
    """The first ``wanted`` rows in ``order`` whose two questions are not in ``used`` (which grows)."""
    picked: list[int] = []
    if wanted <= 0:
        return picked
    first, second = candidates["question1"].to_numpy(dtype=object), candidates["question2"].to_numpy(dtype=object)
    for row in order:
        a, b = normalise_questions([first[row], second[row]])
        if a in used or b in used or a == b:
            continue
        used.update((a, b))
        picked.append(int(row))
        if len(picked) == wanted:
            break
    return picked
