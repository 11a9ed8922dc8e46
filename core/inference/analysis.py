"""Error analysis of a model's scores on labelled pairs (row for row): which pairs it gets wrong at a threshold,
how its scores spread with question length, and which pairs' questions its training saw.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from core.data import normalise_questions
from core.inference.honest_pairs import run_split
from core.inference.metrics import predict

FALSE_POSITIVE, FALSE_NEGATIVE = "false positive", "false negative"
ERROR_KINDS = (FALSE_POSITIVE, FALSE_NEGATIVE)
ERROR_COLUMNS = ["question1", "question2", "score", "label"]
# Bucket edges in words of the longer question: (0, 5], (5, 10], ..., (30, inf).
LENGTH_EDGES = (5, 10, 15, 20, 30)
SEEN_BOTH, SEEN_ONE, SEEN_NEITHER = "both", "one", "neither"
SEEN_ORDER = (SEEN_BOTH, SEEN_ONE, SEEN_NEITHER)
SEEN_COLUMN = "seen in training"


def _checked(pairs: pd.DataFrame, scores) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64).ravel()
    if len(scores) != len(pairs):
        raise ValueError(f"{len(pairs)} pairs but {len(scores)} scores")
    return scores


def error_table(pairs: pd.DataFrame, scores, threshold: float, kind: str, limit: int | None = None) -> pd.DataFrame:
    """The pairs of one error kind at ``threshold`` (non-duplicates above it, or duplicates at or below), worst first,
    at most ``limit``: question1, question2, score, label, then ``pairs``' other columns, indexed by row."""
    if kind not in ERROR_KINDS:
        raise ValueError(f"kind must be one of {ERROR_KINDS}, got {kind!r}")
    scores = _checked(pairs, scores)
    labels = pairs["is_duplicate"].to_numpy().astype(int)
    said = predict(scores, threshold)
    if kind == FALSE_POSITIVE:
        rows = np.flatnonzero((labels == 0) & (said == 1))
        rows = rows[np.argsort(-scores[rows], kind="stable")]
    else:
        rows = np.flatnonzero((labels == 1) & (said == 0))
        rows = rows[np.argsort(scores[rows], kind="stable")]
    if limit is not None:
        rows = rows[:limit]
    table = pairs.iloc[rows].rename(columns={"is_duplicate": "label"})
    table.insert(0, "score", scores[rows])
    table.index = pd.Index(rows, name="pair")
    extra = [column for column in table.columns if column not in ERROR_COLUMNS]
    return table[ERROR_COLUMNS + extra]


def all_errors(pairs: pd.DataFrame, scores, threshold: float) -> pd.DataFrame:
    """Every error at ``threshold``, false positives first, with ``error`` (its kind) and ``pair`` (its row)."""
    parts = []
    for kind in ERROR_KINDS:
        table = error_table(pairs, scores, threshold, kind)
        table.insert(0, "error", kind)
        table.insert(0, "pair", table.index.to_numpy())
        parts.append(table)
    return pd.concat(parts, ignore_index=True)


def longer_question_words(pairs: pd.DataFrame) -> np.ndarray:
    """Words (whitespace-separated) in the longer question of each pair, (N,)."""
    first = pairs["question1"].astype(str).str.split().str.len().to_numpy()
    second = pairs["question2"].astype(str).str.split().str.len().to_numpy()
    return np.maximum(first, second).astype(int)


def length_bucket_names(edges=LENGTH_EDGES) -> list[str]:
    """"1–5", "6–10", ..., "31+" for edges (5, 10, ..., 30): the buckets in order."""
    names, low = [], 1
    for edge in edges:
        names.append(f"{low}–{edge}")
        low = edge + 1
    return names + [f"{low}+"]


def length_buckets(lengths, edges=LENGTH_EDGES) -> list[str]:
    """The bucket name of each length (a length equal to an edge falls in the bucket it closes)."""
    names = length_bucket_names(edges)
    return [names[i] for i in np.searchsorted(np.asarray(edges), np.asarray(lengths), side="left")]


def scores_by_length(pairs: pd.DataFrame, scores, edges=LENGTH_EDGES) -> pd.DataFrame:
    """Score distribution (pairs, min, q1, median, q3, max, mean) per length bucket of the longer question and label."""
    scores = _checked(pairs, scores)
    frame = pd.DataFrame({
        "bucket": pd.Categorical(length_buckets(longer_question_words(pairs), edges),
                                 categories=length_bucket_names(edges), ordered=True),
        "label": pairs["is_duplicate"].to_numpy().astype(int),
        "score": scores,
    })
    columns = ["bucket", "label", "pairs", "min", "q1", "median", "q3", "max", "mean"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    table = frame.groupby(["bucket", "label"], observed=True, sort=True)["score"].describe().reset_index()
    table = table.rename(columns={"count": "pairs", "25%": "q1", "50%": "median", "75%": "q3"})
    return table.astype({"bucket": str, "pairs": int})[columns]


def training_pairs(config: dict, pairs: pd.DataFrame) -> pd.DataFrame | None:
    """The pairs a saved model trained on when ``pairs`` is its training dataset (its split made again), else None."""
    split = run_split(config, pairs)
    return split.train if split is not None and len(split.val) else None


def seen_in_training(train: pd.DataFrame, pairs: pd.DataFrame) -> pd.Series:
    """For each pair: how many of its two questions occur (normalised) in ``train``: "both", "one" or "neither"."""
    seen = set(normalise_questions(train["question1"])) | set(normalise_questions(train["question2"]))
    first = np.array([text in seen for text in normalise_questions(pairs["question1"])], dtype=bool)
    second = np.array([text in seen for text in normalise_questions(pairs["question2"])], dtype=bool)
    count = first.astype(int) + second.astype(int)
    names = np.array([SEEN_NEITHER, SEEN_ONE, SEEN_BOTH], dtype=object)
    return pd.Series(names[count], index=pairs.index, name=SEEN_COLUMN)


def accuracy_by_group(labels, scores, threshold: float, groups, order=None) -> pd.DataFrame:
    """Pairs, errors and accuracy at ``threshold`` per group, in ``order`` (else first appearance)."""
    labels = np.asarray(labels).astype(int).ravel()
    wrong = predict(np.asarray(scores, dtype=np.float64).ravel(), threshold) != labels
    groups = pd.Series(np.asarray(groups, dtype=object))
    rows = []
    present = set(groups)
    for group in ([group for group in order if group in present] if order is not None else pd.unique(groups)):
        mask = (groups == group).to_numpy()
        rows.append({"group": group, "pairs": int(mask.sum()), "errors": int(wrong[mask].sum()),
                     "accuracy": float(1 - wrong[mask].mean())})
    return pd.DataFrame(rows, columns=["group", "pairs", "errors", "accuracy"])
