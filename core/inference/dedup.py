"""Near-duplicate questions of a corpus, texts in and table out: ``encode_corpus`` turns the texts into the
vectors to cluster, ``core.inference.dedup_graph.NeighbourGraph`` clusters them (community detection on a
FAISS k-NN graph, the rule is described there), ``clusters_frame`` lays the clusters out one row per
question and ``write_csv_chunks`` writes that table as formula-safe CSV in chunks; ``outsized_cluster_note``
warns of a cluster too large to be one question's copies. The default threshold is
``core.inference.calibration.clustering_threshold``.

A model with two independent towers (a dual encoder that does not share them) scores a pair as
cos(tower0(q1), tower1(q2)), which is not symmetric; clustering uses the symmetric
½·(s(a, b) + s(b, a)), computed as one inner product: queries [t0, t1]/√2 searched against [t1, t0]/√2.
Siamese models (one tower) use their unit vectors directly.
"""
from __future__ import annotations

import math
from typing import BinaryIO, Sequence

import numpy as np
import pandas as pd

from core.inference.dedup_graph import Cluster, NeighbourGraph, Progress
from core.saving.safe_csv import safe_csv_text

CSV_CHUNK = 50_000  # rows per written CSV chunk
COLUMNS = ["cluster_id", "cluster_size", "representative", "question", "similarity_to_representative"]
PROBE_TEXTS = 8  # texts encoded through both towers to tell a Siamese model from a two-tower one


def encode_corpus(model, texts: Sequence[str], progress: Progress | None = None,
                  batch_size: int = 256) -> tuple[np.ndarray, np.ndarray | None]:
    """(vectors, queries) to cluster ``texts`` with: a Siamese model's unit vectors and None; for a model
    whose two towers differ, [t1, t0]/√2 and [t0, t1]/√2, whose inner product is the mean of the model's
    scores of the pair in both orders. Encoded in chunks (``core.inference.search``), with ``progress(done, total)``."""
    return clustering_rows(*encode_towers(model, texts, progress=progress, batch_size=batch_size))


def towers_differ(model, texts: Sequence[str], batch_size: int = 256) -> bool:
    """Whether ``model``'s two towers give different vectors, told from the first ``PROBE_TEXTS`` of ``texts``."""
    probe = list(texts[:PROBE_TEXTS])
    if not probe:
        return False
    first = np.asarray(model.encode(probe, tower=0, batch_size=batch_size))
    second = np.asarray(model.encode(probe, tower=1, batch_size=batch_size))
    return not (first.shape == second.shape and np.allclose(first, second, atol=1e-5))


def encode_towers(model, texts: Sequence[str], progress: Progress | None = None,
                  batch_size: int = 256) -> tuple[np.ndarray, np.ndarray | None]:
    """(tower 1's unit rows, tower 0's or None) of ``texts``: None for a Siamese model, whose towers agree,
    so it is encoded once. ``progress(done, total)`` counts every text encoded, both towers together."""
    from core.inference.search import encode_unit_rows

    texts = list(texts)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32), None
    if not towers_differ(model, texts, batch_size):
        return encode_unit_rows(model, texts, tower=1, batch_size=batch_size, progress=progress), None
    total = 2 * len(texts)
    one = encode_unit_rows(model, texts, tower=1, batch_size=batch_size,
                           progress=None if progress is None else (lambda done, _n: progress(done, total)))
    zero = encode_unit_rows(model, texts, tower=0, batch_size=batch_size, progress=None if progress is None else (
        lambda done, _n: progress(len(texts) + done, total)))
    return one, zero


def clustering_rows(second: np.ndarray, first: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """(vectors, queries) of ``encode_corpus`` from ``encode_towers``' rows: ``second`` and None for a
    Siamese model, else [t1, t0]/√2 and [t0, t1]/√2."""
    if first is None:
        return second, None
    half = np.float32(1 / math.sqrt(2))
    return np.hstack([second, first]) * half, np.hstack([first, second]) * half


def clusters_frame(clusters: Sequence[Cluster], texts: Sequence[str]) -> pd.DataFrame:
    """One row per clustered question (``COLUMNS``): clusters largest first, numbered from 1 in that
    order, each with its representative first."""
    if not clusters:
        frame = pd.DataFrame({column: pd.Series(dtype=dtype) for column, dtype in zip(
            COLUMNS, ("int64", "int64", "object", "object", "float64"))})
        return frame
    texts = list(texts)
    sizes = np.array([c.size for c in clusters], dtype=np.int64)
    members = np.concatenate([c.members for c in clusters])
    representatives = np.repeat([c.representative for c in clusters], sizes)
    return pd.DataFrame({
        "cluster_id": np.repeat(np.arange(1, len(clusters) + 1, dtype=np.int64), sizes),
        "cluster_size": np.repeat(sizes, sizes),
        "representative": [texts[i] for i in representatives],
        "question": [texts[i] for i in members],
        "similarity_to_representative": np.round(
            np.concatenate([c.similarities for c in clusters]).astype(np.float64), 6),
    })


MAX_SWEEP = 201  # thresholds one sweep may ask for: -1 to 1 by 0.01


def threshold_range(start: float, stop: float, step: float) -> list[float]:
    """The cosines ``start``, ``start + step``, ... up to ``stop`` (included, within rounding), each rounded to
    6 decimals so that 0.1 + 0.2 is 0.3; ValueError for a range that is not one."""
    if not all(math.isfinite(v) for v in (start, stop, step)) or not -1 <= start <= stop <= 1 or step <= 0:
        raise ValueError(f"a range of cosines needs -1 <= START <= STOP <= 1 and STEP > 0, got {start}:{stop}:{step}")
    count = math.floor((stop - start) / step + 1e-9) + 1
    if count > MAX_SWEEP:
        raise ValueError(f"{start}:{stop}:{step} holds {count:,} thresholds")
    return [round(start + i * step, 6) for i in range(count)]


def sweep_rows(graph: NeighbourGraph, thresholds: Sequence[float], min_size: int = 2,
               max_results: int | None = None) -> list[dict]:
    """Per threshold, what ``graph.cluster`` gives: the clusters, the largest one's size and the questions in
    one. A threshold whose deeper searches would return more than ``max_results`` (``deeper_search``) is
    not clustered: its row says so (``too_low``: the questions whose first neighbours are all above it)."""
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


# A cluster is outsized when it holds more than this share of the corpus and at least this many questions.
# Real near-duplicate groups are small: in ../shared's 323,000 Quora pairs the largest group of questions linked
# by duplicate labels is 107 of 448,909 questions (0.02%), so one question with a tenth of the corpus above it says
# the threshold is below where the model separates topics (the 550 unrelated sentences), not that
# a tenth of the corpus asks one thing. The floor keeps a small corpus quiet: 5 copies of one question
# among 30 (17%) is not a finding.
OUTSIZED_SHARE = 0.10
OUTSIZED_MIN_SIZE = 20


def outsized_cluster_note(largest: int, questions: int, threshold: float) -> str | None:
    """What to tell a user whose largest cluster holds ``largest`` of ``questions`` (None when it is not
    outsized: more than ``OUTSIZED_SHARE`` of them and at least ``OUTSIZED_MIN_SIZE``)."""
    if largest < OUTSIZED_MIN_SIZE or largest <= OUTSIZED_SHARE * questions:
        return None
    return (f"{largest:,} of the {questions:,} questions ({largest / questions:.0%}) are in one cluster at the "
            f"threshold {threshold:.4g}, more than real duplicates make: at this threshold unrelated questions are "
            "alike to the model. Raise the threshold, unless the corpus really is that many copies of one question.")


def write_csv_chunks(handle: BinaryIO, frame: pd.DataFrame, chunk_rows: int = CSV_CHUNK) -> None:
    """``frame`` as formula-safe UTF-8 CSV (``core.saving.safe_csv.safe_csv_text``) into the binary file
    ``handle``, ``chunk_rows`` rows at a time, so no second copy of a big table sits in memory."""
    for start in range(0, max(len(frame), 1), chunk_rows):
        handle.write(safe_csv_text(frame.iloc[start : start + chunk_rows], header=start == 0).encode("utf-8"))
