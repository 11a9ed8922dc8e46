"""A model's scores of labelled pairs measured against the labels (scikit-learn, imported where used), and how sure
each figure is: percentile-bootstrap intervals over the pairs (or whole groups sharing questions), and a paired
verdict of two scorers on the same resamples (Efron & Tibshirani, *An Introduction to the Bootstrap*, ch. 13, 16).
A pair is a duplicate when its score is strictly above the threshold.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # torch loads with a model, not with the figures: the pages' inputs draw first
    from core.models.base import PairEncoder
    from core.text.pair_table import PairTable

BOOTSTRAP_ROUNDS = 1000  # resamples per interval: percentiles stable to about a hundredth of their width
CONFIDENCE = 0.95  # two-sided: the 2.5th and 97.5th percentiles
_ROUNDS_PER_CHUNK = 100  # weights of this many rounds are held at once: (100, n) float64
BETTER, NO_DIFFERENCE, WORSE = "better", "no measurable difference", "worse"


def _arrays(labels, scores) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels).astype(int).ravel()
    s = np.asarray(scores, dtype=np.float64).ravel()
    if y.shape != s.shape:
        raise ValueError(f"{len(y)} labels but {len(s)} scores")
    return y, s


def predict(scores, threshold: float) -> np.ndarray:
    return (np.asarray(scores) > threshold).astype(int)


def ranking_metrics(labels, scores) -> dict:
    """Threshold-free quality: ROC AUC and average precision (NaN when only one class is present)."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    y, s = _arrays(labels, scores)
    if len(np.unique(y)) < 2:
        return {"roc_auc": float("nan"), "average_precision": float("nan")}
    return {"roc_auc": float(roc_auc_score(y, s)), "average_precision": float(average_precision_score(y, s))}


def threshold_metrics(labels, scores, threshold: float) -> dict:
    """Accuracy, precision, recall, F1 (0 where undefined, as scikit-learn's ``zero_division=0``) and the confusion
    counts at one threshold."""
    from sklearn.metrics import confusion_matrix

    y, s = _arrays(labels, scores)
    tn, fp, fn, tp = (int(count) for count in confusion_matrix(y, predict(s, threshold), labels=[0, 1]).ravel())

    def ratio(a: int, b: int) -> float:
        return a / b if b else 0.0

    return {"threshold": float(threshold), "accuracy": ratio(tp + tn, len(y)), "precision": ratio(tp, tp + fp),
            "recall": ratio(tp, tp + fn), "f1": ratio(2 * tp, 2 * tp + fp + fn), "tp": tp, "fp": fp, "tn": tn,
            "fn": fn, "n": int(len(y))}


def best_thresholds(labels, scores) -> dict:
    """The thresholds that maximise accuracy and F1 on these scores, {"accuracy": t, "f1": t}: every candidate
    between two neighbouring distinct scores is tried at once."""
    y, s = _arrays(labels, scores)
    distinct = np.unique(s)
    thresholds = np.concatenate([[distinct[0] - 1e-6], (distinct[1:] + distinct[:-1]) / 2, [distinct[-1] + 1e-6]])
    # Counts of positives/negatives strictly above each threshold, vectorised with searchsorted.
    pos, neg = np.sort(s[y == 1]), np.sort(s[y == 0])
    tp = len(pos) - np.searchsorted(pos, thresholds, side="right")
    fp = len(neg) - np.searchsorted(neg, thresholds, side="right")
    tn = len(neg) - fp
    accuracy = (tp + tn) / len(y)
    f1 = np.where(tp > 0, 2 * tp / np.maximum(2 * tp + fp + (len(pos) - tp), 1), 0.0)
    return {"accuracy": float(thresholds[np.argmax(accuracy)]), "f1": float(thresholds[np.argmax(f1)])}


def curves(labels, scores) -> dict:
    """ROC and precision-recall curve points, as lists (JSON- and plot-friendly)."""
    from sklearn.metrics import precision_recall_curve, roc_curve

    y, s = _arrays(labels, scores)
    fpr, tpr, roc_thr = roc_curve(y, s)
    precision, recall, pr_thr = precision_recall_curve(y, s)
    return {
        "roc": {"fpr": fpr.tolist(), "tpr": tpr.tolist(), "thresholds": roc_thr.tolist()},
        "pr": {"precision": precision.tolist(), "recall": recall.tolist(), "thresholds": pr_thr.tolist()},
    }


def evaluate_scores(labels, scores, threshold: float | None = None) -> dict:
    """Everything at once; ``threshold`` defaults to the best-accuracy one on these very scores."""
    thresholds = best_thresholds(labels, scores)
    chosen = thresholds["accuracy"] if threshold is None else threshold
    return {**ranking_metrics(labels, scores), **threshold_metrics(labels, scores, chosen),
            "best_thresholds": thresholds}


# ---- uncertainty -------------------------------------------------------------------------------
@dataclass(frozen=True)
class PairedComparison:
    """Scorer A against scorer B on the same labelled pairs."""

    verdict: str  # BETTER, NO_DIFFERENCE or WORSE (A against B)
    difference: float  # ROC AUC of A minus ROC AUC of B on all the pairs
    interval: tuple[float, float]  # 95 % bootstrap interval of that difference
    pairs: int  # how many pairs both were scored on

    def as_dict(self) -> dict:
        return {**asdict(self), "interval": list(self.interval)}


def resample_weights(n: int, rounds: int, seed: int, groups: np.ndarray | None = None):
    """Yield (r, n) arrays of row weights, ``rounds`` rows in all: row i's weight is how many times the
    bootstrap drew it. With ``groups`` (a group id per row), whole groups are drawn with replacement and each
    row carries its group's count."""
    rng = np.random.default_rng(seed)
    units, group_of_row = n, None
    if groups is not None:
        codes, group_of_row = np.unique(np.asarray(groups), return_inverse=True)
        units = len(codes)
    for start in range(0, rounds, _ROUNDS_PER_CHUNK):
        r = min(_ROUNDS_PER_CHUNK, rounds - start)
        drawn = rng.integers(0, units, size=(r, units))
        counts = np.zeros((r, units))
        np.add.at(counts, (np.arange(r)[:, None], drawn), 1.0)
        yield counts if groups is None else counts[:, group_of_row]


def weighted_roc_auc(labels: np.ndarray, scores: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """ROC AUC of (labels, scores) under each row of ``weights`` (r, n): the weighted share of
    (duplicate, non-duplicate) pairs ordered correctly, ties counted half. NaN where a class has no weight.
    (r,)"""
    labels = np.asarray(labels).astype(bool)
    order = np.argsort(scores, kind="stable")
    sorted_scores = np.asarray(scores, dtype=np.float64)[order]
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])  # one block per distinct score
    w = weights[:, order]
    positive = np.add.reduceat(w * labels[order], starts, axis=1)  # (r, distinct)
    negative = np.add.reduceat(w * ~labels[order], starts, axis=1)
    negatives_below = np.cumsum(negative, axis=1) - negative
    ordered = (positive * (negatives_below + 0.5 * negative)).sum(axis=1)
    total = positive.sum(axis=1) * negative.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, ordered / np.where(total > 0, total, 1.0), np.nan)


def _percentiles(values: np.ndarray) -> tuple[float, float] | None:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def metric_intervals(labels, scores, threshold: float, groups=None, rounds: int = BOOTSTRAP_ROUNDS,
                     seed: int = 0) -> dict:
    """``{"roc_auc": (lo, hi), "accuracy": (lo, hi), "f1": (lo, hi)}``: 95 % percentile-bootstrap intervals over
    the pairs (over ``groups`` of pairs when given), accuracy and F1 at ``threshold``. A metric with no finite
    value in any round (one class) is left out; empty for no pairs."""
    labels, scores = _arrays(labels, scores)
    if labels.size == 0:
        return {}
    auc, accuracy, f1 = [], [], []
    predicted, actual = scores > threshold, labels.astype(bool)
    for weights in resample_weights(labels.size, rounds, seed, groups):
        auc.append(weighted_roc_auc(labels, scores, weights))
        tp, fp, fn = weights @ (predicted & actual), weights @ (predicted & ~actual), weights @ (~predicted & actual)
        accuracy.append((weights.sum(axis=1) - fp - fn) / weights.sum(axis=1))
        with np.errstate(invalid="ignore", divide="ignore"):
            f1.append(np.where(tp > 0, 2 * tp / (2 * tp + fp + fn), 0.0))
    found = {name: _percentiles(np.concatenate(values))
             for name, values in (("roc_auc", auc), ("accuracy", accuracy), ("f1", f1))}
    return {name: interval for name, interval in found.items() if interval is not None}


def paired_verdict(labels, scores_a, scores_b, groups=None, seed: int = 0) -> PairedComparison | None:
    """Is scorer A's ROC AUC above scorer B's beyond what resampling the pairs explains? Both are resampled with
    the same weights; A is BETTER when the 2.5th percentile of (AUC_A - AUC_B) is above zero, WORSE when the
    97.5th is below zero, else NO_DIFFERENCE. None when the labels hold one class."""
    (labels, a), (_, b) = _arrays(labels, scores_a), _arrays(labels, scores_b)
    if len(np.unique(labels)) < 2:
        return None
    everything = np.ones((1, labels.size))
    difference = float(weighted_roc_auc(labels, a, everything)[0] - weighted_roc_auc(labels, b, everything)[0])
    rounds_diff = [weighted_roc_auc(labels, a, w) - weighted_roc_auc(labels, b, w)
                   for w in resample_weights(labels.size, BOOTSTRAP_ROUNDS, seed, groups)]
    interval = _percentiles(np.concatenate(rounds_diff))
    if interval is None:
        return None
    verdict = BETTER if interval[0] > 0 else WORSE if interval[1] < 0 else NO_DIFFERENCE
    return PairedComparison(verdict, difference, interval, int(labels.size))


# Scoring a model on labelled pairs, then the metrics above.
def pair_scores(model: PairEncoder, table: PairTable, batch_size: int = 256, progress=None) -> np.ndarray:
    """(N,) the model's score of every pair of a tokenised table; ``progress(pairs_done, pairs)``."""
    return model.score_tables(table.first, table.second, batch_size, progress)


@dataclass
class Calibration:
    thresholds: dict  # {"accuracy": t, "f1": t}: the best thresholds on these pairs
    metrics: dict  # ranking metrics, and threshold metrics at the best-accuracy threshold
    scores: np.ndarray | None = field(default=None, repr=False)  # (N,) the scores they were measured on


def calibrate(model: PairEncoder, table: PairTable, batch_size: int = 256, progress=None) -> Calibration:
    """Score ``table`` and pick the thresholds that maximise accuracy and F1 on it."""
    scores = pair_scores(model, table, batch_size, progress)
    metrics = evaluate_scores(table.labels, scores)  # at the best-accuracy threshold
    return Calibration(metrics["best_thresholds"], metrics, scores)


def scorer_scores(model, pairs: pd.DataFrame, batch_size: int = 256, progress=None) -> np.ndarray:
    """(N,) scores of ``pairs`` under any scorer: a ``PairEncoder``'s, else a vectorless scorer's ``score_pairs``."""
    from core.models.base import PairEncoder
    from core.text.pair_table import PairTable

    if isinstance(model, PairEncoder):
        return pair_scores(model, PairTable(pairs, model.tokenizer), batch_size, progress)
    first, second = pairs["question1"].astype(str).tolist(), pairs["question2"].astype(str).tolist()
    scores = np.asarray(model.score_pairs(first, second), dtype=np.float64)
    if progress is not None:
        progress(len(scores), len(scores))
    return scores
