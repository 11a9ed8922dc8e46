"""Near-duplicate questions of a corpus, texts in and table out: encoding, clustering (``dedup_graph``), the table
and its formula-safe CSV. A two-tower model clusters on the symmetric ½·(s(a, b) + s(b, a)), one inner product of
[t0, t1]/√2 against [t1, t0]/√2. Reranking: the bi-encoder's graph proposes candidate pairs and a cross-encoder scores
each once (the retrieve-and-rerank pattern; Thakur et al. (2021), "Augmented SBERT").
"""
from __future__ import annotations

import math
from typing import BinaryIO, Callable, Sequence

import numpy as np
import pandas as pd

from core.inference.dedup_graph import Cluster, NeighbourGraph, greedy_clusters
from core.saving.safe_csv import safe_csv_text

CSV_CHUNK = 50_000  # rows per written CSV chunk
COLUMNS = ["cluster_id", "cluster_size", "representative", "question", "similarity_to_representative"]


def clusters_frame(clusters: Sequence[Cluster], texts: Sequence[str]) -> pd.DataFrame:
    """One row per clustered question (``COLUMNS``), clusters largest first from 1, representative first."""
    texts = list(texts)
    sizes = np.array([c.size for c in clusters], dtype=np.int64)
    members = np.concatenate([np.zeros(0, np.int64), *(c.members for c in clusters)])
    representatives = np.repeat(np.array([c.representative for c in clusters], dtype=np.int64), sizes)
    similarities = np.concatenate([np.zeros(0, np.float32), *(c.similarities for c in clusters)])
    return pd.DataFrame({
        "cluster_id": np.repeat(np.arange(1, len(clusters) + 1, dtype=np.int64), sizes),
        "cluster_size": np.repeat(sizes, sizes),
        "representative": np.array([texts[i] for i in representatives], dtype=object),
        "question": np.array([texts[i] for i in members], dtype=object),
        "similarity_to_representative": np.round(similarities.astype(np.float64), 6),
    })


MAX_SWEEP = 201  # thresholds one sweep may ask for: -1 to 1 by 0.01


def threshold_range(start: float, stop: float, step: float) -> list[float]:
    """The cosines ``start``, ``start + step``, ... up to ``stop`` (included), rounded to 6 decimals."""
    if not all(math.isfinite(v) for v in (start, stop, step)) or not -1 <= start <= stop <= 1 or step <= 0:
        raise ValueError(f"a range of cosines needs -1 <= START <= STOP <= 1 and STEP > 0, got {start}:{stop}:{step}")
    count = math.floor((stop - start) / step + 1e-9) + 1
    if count > MAX_SWEEP:
        raise ValueError(f"{start}:{stop}:{step} holds {count:,} thresholds")
    return [round(start + i * step, 6) for i in range(count)]


def sweep_rows(graph: NeighbourGraph, thresholds: Sequence[float], min_size: int = 2,
               max_results: int | None = None) -> list[dict]:
    """Per threshold, the clusters, the largest one's size and the questions in one; a threshold whose deeper
    searches would return more than ``max_results`` is not clustered (``too_low``: the questions full at k)."""
    rows = []
    for threshold in thresholds:
        full, results = graph.deeper_search(threshold)
        if max_results is not None and results > max_results:
            rows.append({"threshold": threshold, "clusters": None, "largest_cluster": None,
                         "clustered_questions": None, "too_low": full})
            continue
        clusters = graph.cluster(threshold, min_size)
        rows.append({"threshold": threshold, "clusters": len(clusters),
                     "largest_cluster": clusters[0].size if clusters else 0,
                     "clustered_questions": int(sum(c.size for c in clusters)), "capped_questions": graph.capped})
    return rows


# Real near-duplicate groups are small, so a tenth of the corpus in one cluster says the threshold is below where
# the model separates topics; the floor keeps a small corpus quiet.
OUTSIZED_SHARE = 0.10
OUTSIZED_MIN_SIZE = 20


def outsized_cluster_note(largest: int, questions: int, threshold: float) -> str | None:
    """What to tell a user whose largest cluster holds ``largest`` of ``questions`` (None when not outsized)."""
    if largest < OUTSIZED_MIN_SIZE or largest <= OUTSIZED_SHARE * questions:
        return None
    return (f"{largest:,} of the {questions:,} questions ({largest / questions:.0%}) are in one cluster at the "
            f"threshold {threshold:.4g}, more than real duplicates make: at this threshold unrelated questions are "
            "alike to the model. Raise the threshold, unless the corpus really is that many copies of one question.")


def write_csv_chunks(handle: BinaryIO, frame: pd.DataFrame, chunk_rows: int = CSV_CHUNK) -> None:
    """``frame`` as formula-safe UTF-8 CSV into the binary ``handle``, ``chunk_rows`` rows at a time."""
    for start in range(0, max(len(frame), 1), chunk_rows):
        handle.write(safe_csv_text(frame.iloc[start : start + chunk_rows], header=start == 0).encode("utf-8"))


# ---- reranking by a cross-encoder ----------------------------------------------------------------
def candidate_scores(graph: NeighbourGraph, texts: Sequence[str], candidate_threshold: float, reranker,
                     progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, second, score), three (E,) arrays: each pair i < j above ``candidate_threshold`` in ``graph``, once,
    with the reranker's score of its texts in corpus order (a cross-encoder's depends on order); identical ones 1."""
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
    """The clusters of ``n`` rows when only the pairs scored above ``threshold`` link questions, by the graph's
    rule (``greedy_clusters``, the most linked centre first); a member's similarity is its pair's score."""
    t = np.float32(threshold)
    kept = scores > t
    a, b, s = (np.concatenate([first[kept], second[kept]]), np.concatenate([second[kept], first[kept]]),
               np.concatenate([scores[kept], scores[kept]]))
    order = np.lexsort((b, a))
    a, b, s = a[order], b[order], s[order]
    starts = np.searchsorted(a, np.arange(n + 1))
    sizes = np.diff(starts) + 1

    def linked(centre: int) -> tuple[np.ndarray, np.ndarray]:
        part = slice(starts[centre], starts[centre + 1])
        return np.append(b[part], centre), np.append(s[part], 1.0)  # the centre's own similarity is 1

    order = [centre for centre in np.lexsort((np.arange(n), -sizes)).tolist() if sizes[centre] >= min_size]
    return greedy_clusters(order, linked, np.ones(n, dtype=np.int64), lambda row: np.array([row]), min_size)


def rescored(candidates: pd.DataFrame, reranker) -> pd.DataFrame:
    """``candidates`` (question1, question2, similarity, ...) with ``similarity`` replaced by the reranker's score
    of each pair."""
    if candidates.empty:
        return candidates
    scores = reranker.score_pairs(candidates["question1"].tolist(), candidates["question2"].tolist())
    return candidates.assign(similarity=np.asarray(scores, dtype=np.float64))
