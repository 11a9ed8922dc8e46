"""Where a threshold comes from: one rule for every page and command. The **pair threshold** is the best-accuracy
one; the **clustering threshold** wants precision, since one false edge can merge two unrelated groups: the lowest
threshold above which at least ``CLUSTER_PRECISION`` of the pairs are duplicates. Each comes as a ``Calibrated``:
the value and a sentence saying where it came from.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.inference.metrics import best_thresholds, evaluate_scores, scorer_scores
from core.inference.run_quality import finite_number
from core.notices import notice

MIN_CALIBRATION_PAIRS = 20  # fewer labelled pairs than this calibrate nothing worth trusting
CLUSTER_PRECISION = 0.9  # the share of true duplicates wanted among the pairs above a clustering threshold


@dataclass(frozen=True)
class Calibrated:
    threshold: float  # duplicate when the cosine similarity is strictly above it
    source: str  # where it came from, in words, e.g. "best accuracy on 480 of your labelled pairs"
    pairs: int = 0  # how many labelled pairs it was calibrated on (0: not calibrated on the user's pairs)


def can_calibrate(labels) -> bool:
    """At least ``MIN_CALIBRATION_PAIRS`` labels, both classes present."""
    y = np.asarray(labels).astype(int).ravel()
    return len(y) >= MIN_CALIBRATION_PAIRS and len(np.unique(y)) == 2


def pair_threshold(config: dict, labels=None, scores=None) -> Calibrated:
    """The pair threshold of a model with this ``config``: its own calibrated one; else calibrated on the user's
    ``labels``/``scores`` when ``can_calibrate(labels)``; else ``ZERO_SHOT_THRESHOLD`` for MiniLM, 0.5 otherwise."""
    from core.models.minilm import ZERO_SHOT_THRESHOLD

    zero_shot = bool(config.get("zero_shot"))
    saved = None if zero_shot else finite_number((config.get("thresholds") or {}).get("accuracy"))
    if saved is not None:
        return Calibrated(saved, "best accuracy on " + (calibrated_on(config) or "the model's own validation split"))
    if labels is not None and scores is not None and can_calibrate(labels):
        threshold = best_thresholds(labels, scores)["accuracy"]
        return Calibrated(threshold, f"best accuracy on {len(np.asarray(labels)):,} of your labelled pairs",
                          pairs=len(np.asarray(labels)))
    if zero_shot or config.get("model_type") == "minilm":
        return Calibrated(float(ZERO_SHOT_THRESHOLD), "MiniLM's fixed default (no labelled pairs to calibrate on)")
    return Calibrated(0.5, "a plain default (the model has no calibrated threshold)")


def precision_threshold(labels, scores, precision: float = CLUSTER_PRECISION) -> float | None:
    """The lowest threshold t with precision(s > t) >= ``precision`` on these pairs, or None if none reaches it.

    >>> precision_threshold([1, 1, 0, 1], [0.9, 0.8, 0.7, 0.6], 0.9)  # above 0.65: 2 of 3; above 0.75: 2 of 2
    0.75
    """
    from sklearn.metrics import precision_recall_curve

    y = np.asarray(labels).astype(int).ravel()
    if not y.any():
        return None
    # precision of the pairs scored at or above each distinct score, the scores ascending
    reached, _, cuts = precision_recall_curve(y, np.asarray(scores, dtype=np.float64).ravel())
    low = np.flatnonzero(reached[:-1] >= precision)[:1]  # the most pairs above while the precision holds
    if not len(low):
        return None
    return float((cuts[low[0]] + cuts[low[0] - 1]) / 2 if low[0] else cuts[0] - 1e-6)


# Zero-shot MiniLM's clustering threshold when no labelled pairs calibrate it: precision CLUSTER_PRECISION on Quora
# pairs, rounded up (bench/clustering_threshold.py; docs/BENCHMARKS.md, "Clustering thresholds").
ZERO_SHOT_CLUSTER_THRESHOLD = 0.954


def clustering_threshold(config: dict, labels=None, scores=None) -> Calibrated:
    """The default dedup threshold of a model with this ``config``: its recorded ``thresholds.clusters``; else
    ``precision_threshold`` on the user's labelled pairs; else MiniLM's default; last its pair threshold, said so."""
    zero_shot = bool(config.get("zero_shot"))
    saved = None if zero_shot else finite_number((config.get("thresholds") or {}).get("clusters"))
    if saved is not None:
        where = calibrated_on(config) or "the model's own validation split"
        return Calibrated(saved, f"precision {CLUSTER_PRECISION:.0%} on {where}")
    unreached = ""  # said when the user's pairs were tried: the fallback is not for want of labels
    if labels is not None and scores is not None and can_calibrate(labels):
        threshold = precision_threshold(labels, scores)
        n = len(np.asarray(labels))
        if threshold is not None:
            return Calibrated(threshold, f"precision {CLUSTER_PRECISION:.0%} on {n:,} of your labelled pairs", pairs=n)
        unreached = f"; your {n:,} labelled pairs reach precision {CLUSTER_PRECISION:.0%} at no threshold"
    if zero_shot or config.get("model_type") == "minilm":
        return Calibrated(ZERO_SHOT_CLUSTER_THRESHOLD, f"MiniLM's fixed clustering default (precision "
                          f"{CLUSTER_PRECISION:.0%} on Quora pairs){unreached}")
    pair = pair_threshold(config, labels, scores)
    return Calibrated(pair.threshold, f"the model's pair threshold ({pair.source}){unreached}; it recorded no "
                      "clustering threshold, so clusters at it may chain unrelated questions", pairs=pair.pairs)


# ---- a calibrated copy (python -m core calibrate) and evaluate --calibrate-on ---------------------------
def calibrated_on(config: dict) -> str:
    """"the 480 labelled pairs of FILE (calibrated copy)" for a calibrated copy's config, else ""."""
    record = config.get("calibration")
    if not isinstance(record, dict) or not isinstance(record.get("pairs"), int):
        return ""
    return f"the {record['pairs']:,} labelled pairs of {record.get('data', '?')} (calibrated copy)"


@dataclass(frozen=True)
class FileCalibration:
    """The operating points of a scorer calibrated on a labelled file."""

    thresholds: dict  # "accuracy", "f1", and "clusters" when some threshold reaches CLUSTER_PRECISION
    data: str  # the labelled file's name
    pairs: int
    duplicates: int
    metrics: dict  # ranking metrics, and those at the accuracy threshold, on the calibration pairs

    def record(self) -> dict:
        """What a calibrated config's ``calibration`` holds (``core.saving.model_folder``)."""
        return {"data": self.data, "pairs": self.pairs, "duplicates": self.duplicates, "metrics": self.metrics}


def calibration_problem(labels, data: str) -> str:
    """Why the labelled pairs of the file named ``data`` cannot calibrate a threshold (``can_calibrate``), or ""."""
    y = np.asarray(labels).astype(int).ravel()
    if can_calibrate(y):
        return ""
    return (f"{data}: {len(y):,} labelled pairs, {int(y.sum()):,} duplicates; calibrating needs at least "
            f"{MIN_CALIBRATION_PAIRS} pairs with both duplicates and non-duplicates")


def calibrate_on(labels, scores, data: str) -> FileCalibration:
    """The thresholds of best accuracy and F1 and for clusters of ``scores`` on the labelled pairs of the file named
    ``data`` (``calibration_problem`` says first whether they can), a notice when the threshold means nothing."""
    y = np.asarray(labels).astype(int).ravel()
    thresholds = best_thresholds(y, scores)
    clusters = precision_threshold(y, scores)
    if clusters is not None:
        thresholds["clusters"] = clusters
    measured = evaluate_scores(y, scores, thresholds["accuracy"])
    if measured["roc_auc"] < 0.5:  # a threshold that means nothing is said so
        notice(f"{data}: the model ranks these pairs worse than chance (ROC AUC {measured['roc_auc']:.3f}), so its "
               f"threshold {measured['threshold']:.4f} tells nothing apart; train or pick another model")
    elif measured["tp"] == 0:
        notice(f"{data}: the best threshold ({measured['threshold']:.4f}) is above every duplicate, so it calls "
               f"nothing a duplicate; this model's scores do not separate these pairs")
    metrics = {key: value for key, value in measured.items() if key != "best_thresholds"}
    return FileCalibration(thresholds, data, len(y), int(y.sum()), metrics)


def calibrate_scorer(model, pairs, data: str, progress=None):
    """(scorer, ``FileCalibration``) of ``model`` on the labelled ``pairs`` of the file named ``data``; the TF-IDF
    baseline is first fitted on their questions, and that fitted scorer comes back."""
    from core.inference.tfidf_scorer import TfidfScorer

    if isinstance(model, TfidfScorer):
        model = TfidfScorer.fit(pairs["question1"].astype(str).tolist() + pairs["question2"].astype(str).tolist())
    scores = scorer_scores(model, pairs, progress=progress)
    return model, calibrate_on(pairs["is_duplicate"].to_numpy(), scores, data)
