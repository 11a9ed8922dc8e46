"""Every model and two references (zero-shot MiniLM, TF-IDF cosine) as rows of one comparable table, all
measured on ``core.inference.honest_pairs``' pairs, which no compared model trained on.

TF-IDF (``core.inference.tfidf_scorer.tfidf_scores``) is fitted by one rule everywhere: on the questions of the
pairs it scores (``TFIDF_FIT``); no labels are read, so its figure does not depend on a run's training data.
"""
from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from core.inference.metrics import best_thresholds, ranking_metrics, threshold_metrics
from core.inference.uncertainty import metric_intervals, paired_verdict

TFIDF_LABEL = "TF-IDF cosine (scikit-learn)"
TFIDF_FIT = "the questions of the pairs it scores"  # what every TF-IDF baseline is fitted on, said beside its figure
METRICS = {"roc_auc": "ROC AUC", "average_precision": "avg precision", "accuracy": "accuracy", "f1": "F1"}
ROC_AUC_INTERVAL, VERSUS_ZERO_SHOT = "ROC AUC 95 %", "vs zero-shot"  # a row's uncertainty and its paired verdict
COMPARE_COLUMNS = ["model", "kind", *METRICS.values(), ROC_AUC_INTERVAL, VERSUS_ZERO_SHOT, "threshold",
                   "threshold from"]
REFERENCE = "reference"  # the kind of the zero-shot and TF-IDF rows


def comparison_row(name: str, kind: str, labels, scores, threshold: float | None, threshold_from: str,
                   zero_shot_scores=None, groups=None) -> dict:
    """One row of the comparison table: ranking metrics of ``scores``, accuracy / F1 at ``threshold`` (None: the
    best-accuracy one on these very scores, which ``threshold_from`` should say), the bootstrap interval of the
    ROC AUC (resampling ``groups`` together) and, given zero-shot MiniLM's scores, the paired verdict against it.
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
