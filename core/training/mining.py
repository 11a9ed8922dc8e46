"""Hard negatives mined from a corpus with a model, on ``core.inference.search``'s index. A neighbour counts as a
negative only when it scores under ``max_share`` of the pair's own score (NV-Retriever's "TopK-PercPos", Moreira et
al., 2024): on Quora many of the nearest questions are unlabelled duplicates, which a plain top-k would train on as
negatives.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from core.data import normalise_questions
from core.data.splitting import connected_components

Progress = Callable[[int, int], None]


def select_hard_negatives(anchors: np.ndarray, positive_scores: np.ndarray, neighbour_ids: np.ndarray,
                          neighbour_scores: np.ndarray, groups: np.ndarray, k: int = 1,
                          max_share: float = 0.95) -> list[tuple[int, int]]:
    """Up to ``k`` hard negatives per anchor, as (anchor id, negative id), closest first: never a neighbour in the
    anchor's ``groups`` label (joined by labelled duplicates), nor one scoring ``max_share`` x its positive or more."""
    chosen: list[tuple[int, int]] = []
    for anchor, positive, ids, scores in zip(anchors, positive_scores, neighbour_ids, neighbour_scores):
        cap, kept = max_share * float(positive), 0
        for candidate, score in zip(ids, scores):
            if kept == k:
                break
            if candidate < 0 or groups[candidate] == groups[anchor] or score >= cap:
                continue
            chosen.append((int(anchor), int(candidate)))
            kept += 1
    return chosen


def mine_hard_negatives(pairs: pd.DataFrame, model, k: int = 1, candidates: int = 16, max_share: float = 0.95,
                        progress: Progress | None = None) -> pd.DataFrame:
    """Up to ``k`` new non-duplicate pairs per duplicate pair (its question1, a mined negative), none already
    labelled: near misses the data did not label, for a labelled loss (contrastive, CoSENT)."""
    from core.data import corpus_questions
    from core.inference.search import load_or_build

    corpus = corpus_questions(pairs)
    row_of = {key: row for row, key in enumerate(normalise_questions(corpus))}
    first = np.array([row_of.get(key, -1) for key in normalise_questions(pairs["question1"])], dtype=np.int64)
    second = np.array([row_of.get(key, -1) for key in normalise_questions(pairs["question2"])], dtype=np.int64)
    labels = pairs["is_duplicate"].to_numpy()
    usable = (first >= 0) & (second >= 0)  # an empty question is in no corpus
    joined = usable & (labels == 1)
    groups = connected_components(first[joined], second[joined], len(corpus))  # (Q,) chains of labelled duplicates

    index = load_or_build(model, corpus, None, progress).index  # FAISS's copy of the unit vectors is the only one
    vectors = index.reconstruct_n(0, len(corpus))
    anchors = first[joined]
    positive = np.einsum("nd,nd->n", vectors[anchors], vectors[second[joined]])  # (N,)
    scores, ids = index.search(vectors[anchors], min(candidates + 1, len(corpus)))  # (N, C) each
    chosen = select_hard_negatives(anchors, positive, ids, scores, groups, k=k, max_share=max_share)

    labelled = set(zip(first[usable].tolist(), second[usable].tolist()))
    labelled |= {(b, a) for a, b in labelled}
    fresh = list(dict.fromkeys(pair for pair in chosen if pair not in labelled))
    return pd.DataFrame({"question1": [corpus[a] for a, _ in fresh], "question2": [corpus[b] for _, b in fresh],
                         "is_duplicate": np.zeros(len(fresh), dtype=np.int64)})


