"""Evaluation of similarity scores against duplicate labels (scikit-learn). A pair is a duplicate when its score
is strictly above the threshold; calibrated thresholds sit halfway between two neighbouring distinct scores, so
">" and ">=" agree on the data they were calibrated on.
"""
from __future__ import annotations

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    confusion_matrix,
    f1_score,
    precision_recall_curve,
    precision_score,
    recall_score,
    roc_auc_score,
    roc_curve,
)


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
    y, s = _arrays(labels, scores)
    if len(np.unique(y)) < 2:
        return {"roc_auc": float("nan"), "average_precision": float("nan")}
    return {"roc_auc": float(roc_auc_score(y, s)), "average_precision": float(average_precision_score(y, s))}


def threshold_metrics(labels, scores, threshold: float) -> dict:
    """Accuracy, precision, recall, F1 and the confusion counts at one threshold."""
    y, s = _arrays(labels, scores)
    p = predict(s, threshold)
    tn, fp, fn, tp = confusion_matrix(y, p, labels=[0, 1]).ravel()
    return {
        "threshold": float(threshold),
        "accuracy": float(accuracy_score(y, p)),
        "precision": float(precision_score(y, p, zero_division=0)),
        "recall": float(recall_score(y, p, zero_division=0)),
        "f1": float(f1_score(y, p, zero_division=0)),
        "tp": int(tp), "fp": int(fp), "tn": int(tn), "fn": int(fn),
        "n": int(len(y)),
    }


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
