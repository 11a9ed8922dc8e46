"""A cross-encoder confirms the pairs a bi-encoder finds (``dedup --rerank``, ``suggest --rerank``).

A cross-encoder (``core.models.cross_encoder``) reads both questions together and ranks pairs better than a
bi-encoder's cosine, but it has no vectors: every pair is a forward pass, so it cannot search a corpus. The
bi-encoder's k-nearest-neighbour graph proposes the candidate pairs (few per question), the cross-encoder scores
each once, and its own threshold decides. Reference: the retrieve-and-rerank pattern of Sentence-BERT's
documentation; Thakur et al. (2021), "Augmented SBERT", for a cross-encoder trained on the user's pairs.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd

from core.inference.dedup_graph import Cluster, NeighbourGraph, checked_threshold


def candidate_scores(graph: NeighbourGraph, texts: Sequence[str], candidate_threshold: float, reranker,
                     progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, second, score): each pair of rows i < j whose bi-encoder cosine in ``graph`` is above
    ``candidate_threshold``, once, with ``reranker.score_pairs``' score of its texts in that order (a cross-encoder's
    score depends on it: the corpus's order is the one fixed choice); pairs of identical texts score 1 without being
    run. Three (E,) arrays."""
    first, second, _ = graph.pairs_above(candidate_threshold)
    keep = first < second
    first, second = first[keep], second[keep]
    scores = np.ones(len(first), dtype=np.float64)
    left, right = [texts[i] for i in first.tolist()], [texts[j] for j in second.tolist()]
    differ = np.flatnonzero([a != b for a, b in zip(left, right)])
    if len(differ):
        scores[differ] = reranker.score_pairs([left[i] for i in differ], [right[i] for i in differ])
    if progress is not None:
        progress(len(first), len(first))
    return first, second, scores


def confirmed_clusters(n: int, first: np.ndarray, second: np.ndarray, scores: np.ndarray, threshold: float,
                       min_size: int = 2) -> list[Cluster]:
    """The clusters of ``n`` rows when only the pairs scored above ``threshold`` link questions, by
    ``core.inference.dedup_graph``'s rule: centres greedily, the most linked first (ties: the earlier row), each
    with its linked rows not yet placed, kept at ``min_size`` rows; largest first. A member's similarity is its
    pair's score with the centre (the centre's own is 1)."""
    t = checked_threshold(threshold, min_size)
    kept = scores > t
    a, b, s = (np.concatenate([first[kept], second[kept]]), np.concatenate([second[kept], first[kept]]),
               np.concatenate([scores[kept], scores[kept]]))
    order = np.lexsort((b, a))
    a, b, s = a[order], b[order], s[order]
    starts = np.searchsorted(a, np.arange(n + 1))
    sizes = np.diff(starts) + 1
    used = np.zeros(n, dtype=bool)
    clusters = []
    for centre in np.lexsort((np.arange(n), -sizes)).tolist():
        if used[centre] or sizes[centre] < min_size:
            continue
        rows, row_scores = b[starts[centre]:starts[centre + 1]], s[starts[centre]:starts[centre + 1]]
        free = ~used[rows]
        if free.sum() + 1 < min_size:
            continue
        rows, row_scores = rows[free], row_scores[free]
        ranked = np.lexsort((rows, -row_scores))
        members = np.concatenate([[centre], rows[ranked]]).astype(np.int64)
        used[members] = True
        clusters.append(Cluster(centre, members, np.concatenate([[1.0], row_scores[ranked]]).astype(np.float32)))
    clusters.sort(key=lambda c: -c.size)
    return clusters


def rescored(candidates: pd.DataFrame, reranker) -> pd.DataFrame:
    """``candidates`` (question1, question2, similarity, ...) with ``similarity`` replaced by the reranker's score
    of each pair."""
    if candidates.empty:
        return candidates
    scores = reranker.score_pairs(candidates["question1"].tolist(), candidates["question2"].tolist())
    return candidates.assign(similarity=np.asarray(scores, dtype=np.float64))
