"""Metrics against scikit-learn computed independently, and thresholds against brute force."""

import math

import numpy as np
import pytest
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    f1_score,
    precision_score,
    recall_score,
    roc_auc_score,
)

from core.inference.metrics import (
    best_thresholds,
    curves,
    evaluate_scores,
    predict,
    ranking_metrics,
    threshold_metrics,
)

N = 211  # odd and not a round number


def _data(seed: int, n: int = N, ties: bool = False):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    scores = np.tanh(rng.normal(0.0, 0.6, n) + 0.5 * labels)  # informative but overlapping, in (-1, 1)
    if ties:
        scores = np.round(scores, 1)  # many exact ties
    return labels, scores


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ranking_metrics_equal_sklearn(seed):
    labels, scores = _data(seed)
    m = ranking_metrics(labels, scores)
    assert m["roc_auc"] == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    assert m["average_precision"] == pytest.approx(average_precision_score(labels, scores), abs=1e-12)
    assert 0.5 < m["roc_auc"] < 1.0  # the data is informative, not perfect


@pytest.mark.parametrize("seed,threshold", [(0, 0.0), (1, 0.25), (2, -0.3), (3, 0.9)])
def test_threshold_metrics_equal_sklearn_with_strict_greater(seed, threshold):
    labels, scores = _data(seed)
    m = threshold_metrics(labels, scores, threshold)
    predicted = (scores > threshold).astype(int)
    assert m["accuracy"] == pytest.approx(accuracy_score(labels, predicted))
    assert m["precision"] == pytest.approx(precision_score(labels, predicted, zero_division=0))
    assert m["recall"] == pytest.approx(recall_score(labels, predicted, zero_division=0))
    assert m["f1"] == pytest.approx(f1_score(labels, predicted, zero_division=0))
    assert m["tp"] == int(((predicted == 1) & (labels == 1)).sum())
    assert m["fp"] == int(((predicted == 1) & (labels == 0)).sum())
    assert m["tn"] == int(((predicted == 0) & (labels == 0)).sum())
    assert m["fn"] == int(((predicted == 0) & (labels == 1)).sum())
    assert m["tp"] + m["fp"] + m["tn"] + m["fn"] == m["n"] == N
    assert m["threshold"] == threshold


def test_threshold_is_strict():
    # A score exactly at the threshold is NOT a duplicate.
    np.testing.assert_array_equal(predict([0.5, 0.50001, 0.49999], 0.5), [0, 1, 0])
    m = threshold_metrics([1, 1, 0], [0.5, 0.7, 0.2], 0.5)
    assert (m["tp"], m["fn"], m["tn"], m["fp"]) == (1, 1, 1, 0)
    assert m["accuracy"] == pytest.approx(2 / 3)
    assert m["recall"] == pytest.approx(0.5)


def _brute_force_best(labels, scores):
    """Best accuracy and F1 over every possible verdict split (numpy, independent of core).

    With "score > t", every split is reached by t equal to one of the scores or below all of them.
    """
    grid = np.concatenate([[scores.min() - 1.0], np.unique(scores)])
    predicted = scores[None, :] > grid[:, None]  # (G, N)
    y = labels.astype(bool)[None, :]
    tp = (predicted & y).sum(1)
    fp = (predicted & ~y).sum(1)
    fn = (~predicted & y).sum(1)
    accuracy = (predicted == y).mean(1)
    f1 = np.where(tp > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0)
    return accuracy.max(), f1.max()


@pytest.mark.parametrize("seed,ties", [(0, False), (4, False), (5, True), (6, True)])
def test_best_thresholds_maximise_accuracy_and_f1(seed, ties):
    labels, scores = _data(seed, ties=ties)
    best = best_thresholds(labels, scores)
    acc_at_best = accuracy_score(labels, predict(scores, best["accuracy"]))
    f1_at_best = f1_score(labels, predict(scores, best["f1"]), zero_division=0)
    best_accuracy, best_f1 = _brute_force_best(labels, scores)
    assert acc_at_best == pytest.approx(best_accuracy)
    assert f1_at_best == pytest.approx(best_f1)
    # Calibrated thresholds sit between scores, so > and >= agree on the calibration data.
    for t in best.values():
        assert not np.any(scores == t)


def test_best_thresholds_on_separable_data():
    labels = np.array([0, 0, 0, 1, 1])
    scores = np.array([0.1, 0.2, 0.3, 0.8, 0.9])
    best = best_thresholds(labels, scores)
    assert best["accuracy"] == pytest.approx(0.55)
    assert best["f1"] == pytest.approx(0.55)
    assert threshold_metrics(labels, scores, best["accuracy"])["accuracy"] == 1.0


@pytest.mark.parametrize("label", [0, 1])
def test_single_class_gives_nan_ranking_metrics(label):
    labels = np.full(17, label)
    scores = np.linspace(-1, 1, 17)
    m = ranking_metrics(labels, scores)
    assert math.isnan(m["roc_auc"]) and math.isnan(m["average_precision"])
    full = evaluate_scores(labels, scores, threshold=0.0)
    assert math.isnan(full["roc_auc"])
    assert full["accuracy"] == pytest.approx(8 / 17 if label else 9 / 17)


def test_mismatched_lengths_raise():
    with pytest.raises(ValueError, match="labels"):
        ranking_metrics([0, 1, 1], [0.1, 0.2])


def test_curves_lengths_and_endpoints():
    labels, scores = _data(7)
    c = curves(labels, scores)
    roc, pr = c["roc"], c["pr"]
    assert len(roc["fpr"]) == len(roc["tpr"]) == len(roc["thresholds"])
    assert len(pr["precision"]) == len(pr["recall"]) == len(pr["thresholds"]) + 1
    assert roc["fpr"][0] == 0.0 and roc["fpr"][-1] == 1.0 and roc["tpr"][-1] == 1.0
    assert pr["recall"][-1] == 0.0 and pr["precision"][-1] == 1.0
    # trapezoid area under the returned ROC equals sklearn's AUC
    assert np.trapezoid(roc["tpr"], roc["fpr"]) == pytest.approx(roc_auc_score(labels, scores))
    assert all(isinstance(v, float) for v in roc["fpr"])


def test_evaluate_scores_defaults_to_best_accuracy_threshold():
    labels, scores = _data(8)
    result = evaluate_scores(labels, scores)
    best = best_thresholds(labels, scores)
    assert result["threshold"] == best["accuracy"]
    assert result["best_thresholds"] == best
    assert result["roc_auc"] == pytest.approx(roc_auc_score(labels, scores))
    fixed = evaluate_scores(labels, scores, threshold=0.123)
    assert fixed["threshold"] == 0.123
    assert fixed["accuracy"] == pytest.approx(accuracy_score(labels, (scores > 0.123).astype(int)))
