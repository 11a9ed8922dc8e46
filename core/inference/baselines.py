"""Every model and two reference baselines scored on one common set of pairs, as one comparable table.

Which pairs: ``core.inference.honest_pairs.honest_pairs``, the pairs that *no* compared model trained on
(matched by content), so every row of the table is measured on pairs that every model saw for the first time.

The references: zero-shot MiniLM (scored like any model) and ``tfidf_scores``, the cosine of the two
questions' TF-IDF vectors (scikit-learn's ``TfidfVectorizer``), fitted by one rule everywhere: on the
questions of the pairs it scores (``TFIDF_FIT``). No labels are read, so the fit is honest on held-out pairs,
and the baseline's figure does not change with how much training data a compared run had.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from core.inference.metrics import best_thresholds, ranking_metrics, threshold_metrics
from core.inference.uncertainty import metric_intervals, paired_verdict

TFIDF_LABEL = "TF-IDF cosine (scikit-learn)"
TFIDF_FIT = "the questions of the pairs it scores"  # what every TF-IDF baseline is fitted on, said beside its figure
METRICS = {"roc_auc": "ROC AUC", "average_precision": "avg precision", "accuracy": "accuracy", "f1": "F1"}
ROC_AUC_INTERVAL, VERSUS_ZERO_SHOT = "ROC AUC 95 %", "vs zero-shot"  # a row's uncertainty and its paired verdict
COMPARE_COLUMNS = ["model", "kind", *METRICS.values(), ROC_AUC_INTERVAL, VERSUS_ZERO_SHOT, "threshold",
                   "threshold from"]
REFERENCE, TRAINED = "reference", "trained"


def tfidf_scores(first: Sequence[str], second: Sequence[str], fit_texts: Sequence[str] | None = None,
                 **vectorizer_options) -> np.ndarray:
    """Cosine similarity of the TF-IDF vectors of ``first[i]`` and ``second[i]``, (N,) float64.

    The vectorizer (scikit-learn defaults unless ``vectorizer_options`` say otherwise) is fitted on
    ``fit_texts``, or on the questions themselves when none are given. A question with no known word
    has a zero vector and scores 0.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    first, second = [str(t) for t in first], [str(t) for t in second]
    if len(first) != len(second):
        raise ValueError(f"{len(first)} first questions but {len(second)} second ones")
    texts = list(fit_texts) if fit_texts else first + second
    vectorizer = TfidfVectorizer(**vectorizer_options)
    try:
        vectorizer.fit(texts)
    except ValueError:  # empty vocabulary: no text holds a word
        return np.zeros(len(first))
    a, b = vectorizer.transform(first), vectorizer.transform(second)  # (N, V) sparse, rows of unit length
    if vectorizer.norm != "l2":
        a, b = _unit_sparse_rows(a), _unit_sparse_rows(b)
    return np.asarray(a.multiply(b).sum(axis=1), dtype=np.float64).ravel()


def _unit_sparse_rows(matrix):
    from sklearn.preprocessing import normalize

    return normalize(matrix, norm="l2")


def comparison_row(name: str, kind: str, labels, scores, threshold: float | None, threshold_from: str,
                   zero_shot_scores=None, groups=None) -> dict:
    """One row of the comparison table: ranking metrics of ``scores`` and accuracy / F1 at ``threshold``, the
    95 % bootstrap interval of the ROC AUC and, given zero-shot MiniLM's scores of the same pairs, the paired
    verdict against it ("" for zero-shot itself or without its scores).

    ``threshold=None`` calibrates it on these very scores (best accuracy), and ``threshold_from`` should
    then say so: such a row is measured on the pairs it was calibrated on. ``groups``
    (``core.data.resampling_groups``): pairs resampled together.
    """
    if threshold is None or not math.isfinite(float(threshold)):
        threshold = best_thresholds(labels, scores)["accuracy"]
    at = threshold_metrics(labels, scores, float(threshold))
    values = {**ranking_metrics(labels, scores), "accuracy": at["accuracy"], "f1": at["f1"]}
    interval = metric_intervals(labels, scores, float(threshold), groups=groups).get("roc_auc")
    verdict = (paired_verdict(labels, scores, zero_shot_scores, groups=groups) if zero_shot_scores is not None
               else None)
    return {"model": name, "kind": kind, **{column: values[key] for key, column in METRICS.items()},
            ROC_AUC_INTERVAL: f"{interval[0]:.3f}–{interval[1]:.3f}" if interval else "",
            VERSUS_ZERO_SHOT: verdict_text(verdict) if verdict else "",
            "threshold": float(threshold), "threshold from": threshold_from}


def verdict_text(verdict) -> str:
    """A paired verdict as the table shows it: the verdict, the ROC AUC difference and its 95 % interval, e.g.
    "better (+0.007, +0.001 to +0.012)"; every verdict carries its interval, "no measurable difference" too."""
    low, high = verdict.interval
    return f"{verdict.verdict} ({verdict.difference:+.3f}, {low:+.3f} to {high:+.3f})"


def comparison_table(rows: Sequence[dict]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=COMPARE_COLUMNS)


def sort_table(table: pd.DataFrame, column: str, ascending: bool = False) -> pd.DataFrame:
    """``table`` sorted by ``column`` (ties keep their order; NaN always last), index 0..n-1."""
    if column not in table.columns:
        raise ValueError(f"no column {column!r} to sort by")
    return table.sort_values(column, ascending=ascending, kind="stable", na_position="last").reset_index(drop=True)
