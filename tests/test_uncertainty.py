"""Bootstrap intervals and paired verdicts (core.inference.metrics) against scikit-learn and hand counts."""
import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

from core.inference.run_quality import judge_run
from core.inference.metrics import (
    BETTER,
    NO_DIFFERENCE,
    WORSE,
    metric_intervals,
    paired_verdict,
    resample_weights,
    weighted_roc_auc,
)


def test_weighted_roc_auc_is_sklearns_on_the_resampled_rows_ties_included():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 57)
    scores = np.round(rng.random(57) + 0.3 * labels, 1)  # rounded: many ties
    drawn = rng.integers(0, 57, size=(5, 57))
    weights = np.stack([np.bincount(row, minlength=57) for row in drawn]).astype(float)
    expected = [roc_auc_score(labels[row], scores[row]) for row in drawn]
    np.testing.assert_allclose(weighted_roc_auc(labels, scores, weights), expected, rtol=1e-12)


@pytest.mark.slow
def test_intervals_are_the_percentiles_of_sklearns_metrics_on_the_same_resamples():
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 2, 40)
    scores = rng.random(40) + 0.4 * labels
    threshold = 0.6
    intervals = metric_intervals(labels, scores, threshold, rounds=300, seed=11)
    # The same draws, one resample at a time, scored by scikit-learn.
    draws = np.random.default_rng(11)
    auc, accuracy, f1 = [], [], []
    for _ in range(3):  # 300 rounds come in chunks of 100
        for row in draws.integers(0, 40, size=(100, 40)):
            y, s = labels[row], scores[row]
            if len(set(y)) == 2:
                auc.append(roc_auc_score(y, s))
            accuracy.append(accuracy_score(y, s > threshold))
            f1.append(f1_score(y, s > threshold, zero_division=0))
    for name, values in (("roc_auc", auc), ("accuracy", accuracy), ("f1", f1)):
        np.testing.assert_allclose(intervals[name], np.percentile(values, [2.5, 97.5]), rtol=1e-12)


def test_accuracy_interval_of_four_pairs_with_one_wrong_matches_the_binomial_by_hand():
    # One wrong pair in four: a resample holds k ~ Binomial(4, 1/4) copies of it, accuracy (4 - k) / 4.
    # P(k = 4) = 0.4 % and P(k >= 3) = 5.1 %, so the 2.5th percentile is 0.25; P(k = 0) = 31.6 % puts the
    # 97.5th at 1.0.
    labels, scores = [0, 0, 1, 1], [0.1, 0.9, 0.8, 0.7]  # the second pair is the wrong one at 0.5
    intervals = metric_intervals(labels, scores, threshold=0.5, rounds=2000, seed=0)
    assert intervals["accuracy"] == (0.25, 1.0)


def test_group_resampling_moves_linked_pairs_together():
    # Two groups, each one right and one wrong pair: any resample of whole groups is exactly half right,
    # while resampling pairs one by one is not.
    labels = np.array([1, 1, 0, 0])
    scores = np.array([0.9, 0.1, 0.2, 0.8])
    groups = np.array([0, 0, 1, 1])
    assert metric_intervals(labels, scores, 0.5, groups=groups, seed=1)["accuracy"] == (0.5, 0.5)
    low, high = metric_intervals(labels, scores, 0.5, seed=1)["accuracy"]
    assert low < 0.5 < high


def test_group_weights_count_a_drawn_group_on_each_of_its_rows():
    groups = np.array([5, 5, 9, 2, 9])
    for weights in resample_weights(5, 20, seed=4, groups=groups):
        assert weights.shape == (20, 5)
        np.testing.assert_array_equal(weights[:, 0], weights[:, 1])  # group 5
        np.testing.assert_array_equal(weights[:, 2], weights[:, 4])  # group 9
        assert set((weights[:, [0, 2, 3]].sum(axis=1)).tolist()) == {3.0}  # three groups drawn per round


def test_paired_verdicts_say_no_difference_for_noise_and_better_or_worse_for_a_clear_gap():
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 2, 400)
    good = labels + rng.normal(0, 0.8, 400)
    twin = labels + rng.normal(0, 0.8, 400)  # as good, with its own noise
    weak = labels + rng.normal(0, 3.0, 400)
    same = paired_verdict(labels, twin, good, seed=0)
    assert same.verdict == NO_DIFFERENCE and same.interval[0] < 0 < same.interval[1] and same.pairs == 400
    assert paired_verdict(labels, good, weak, seed=0).verdict == BETTER
    worse = paired_verdict(labels, weak, good, seed=0)
    assert worse.verdict == WORSE and worse.interval[1] < 0
    assert worse.difference == pytest.approx(roc_auc_score(labels, weak) - roc_auc_score(labels, good))
    assert paired_verdict([1, 1, 1], [0.1, 0.2, 0.3], [0.3, 0.2, 0.1]) is None  # one class: no ROC AUC


def _metrics_with(verdict: str, difference: float, interval: list) -> dict:
    return {"validation": {"roc_auc": 0.871}, "baselines": {
        "tfidf": {"roc_auc": 0.70, "pairs": 123,
                  "verdict": {"verdict": BETTER, "difference": 0.171, "interval": [0.1, 0.24], "pairs": 123}},
        "zero_shot": {"roc_auc": 0.807, "pairs": 123,
                      "verdict": {"verdict": verdict, "difference": difference, "interval": interval, "pairs": 123}}}}


def test_a_run_not_measurably_better_than_zero_shot_is_flagged_and_says_so():
    quality = judge_run(_metrics_with(NO_DIFFERENCE, 0.064, [-0.01, 0.14]))
    assert quality.flagged and quality.not_better == ("zero_shot",) and quality.below == ()
    assert quality.short == "no measurable difference from zero-shot MiniLM"
    assert "No measurable difference from zero-shot MiniLM" in quality.message and "123 validation pairs" in quality.message
    assert quality.as_dict()["verdicts"]["zero_shot"]["verdict"] == NO_DIFFERENCE


def test_a_measurably_better_run_is_not_flagged_and_a_measurably_worse_one_is_below():
    better = judge_run(_metrics_with(BETTER, 0.064, [0.02, 0.11]))
    assert not better.flagged and better.message == "" and "Better than TF-IDF cosine (difference" in better.comparison
    worse = judge_run(_metrics_with(WORSE, -0.05, [-0.09, -0.01]))
    assert worse.flagged and worse.below == ("zero_shot",)


def test_every_better_or_worse_verdict_shows_its_interval():
    better = judge_run(_metrics_with(BETTER, 0.064, [0.02, 0.11]))
    assert ("Better than TF-IDF cosine (difference +0.171, 95 % interval +0.100 to +0.240) and zero-shot MiniLM "
            "(difference +0.064, 95 % interval +0.020 to +0.110) at 95 % (paired bootstrap over 123 pairs)."
            in better.comparison)
    worse = judge_run(_metrics_with(WORSE, -0.05, [-0.09, -0.01]))
    assert ("below zero-shot MiniLM (0.807; difference -0.050, 95 % interval -0.090 to -0.010) on the same "
            "validation pairs" in worse.message)


def test_the_advice_after_a_weak_run_fits_the_data_it_trained_on():
    metrics = _metrics_with(NO_DIFFERENCE, 0.064, [-0.01, 0.14])
    upload = judge_run(metrics).message
    assert "the auto preset" in upload and "a validation file" in upload and "more labelled pairs" in upload
    assert "sample-demo" not in upload  # a preset for the bundled sample, not for a user's own data
    with_file = judge_run(metrics, has_val_file=True).message
    assert "validation file" not in with_file and "More validation pairs would tell them apart." in with_file
    assert "sample-demo" in judge_run(metrics, bundled_sample=True).message


def test_a_point_difference_inside_the_interval_is_not_below_when_the_verdict_says_no_difference():
    # The run's ROC AUC is under zero-shot's, but the paired bootstrap cannot tell them apart: not "below".
    metrics = _metrics_with(NO_DIFFERENCE, -0.01, [-0.05, 0.03])
    metrics["baselines"]["zero_shot"]["roc_auc"] = 0.881
    quality = judge_run(metrics)
    assert quality.below == () and quality.not_better == ("zero_shot",)


def test_resampling_groups_link_pairs_that_share_a_question_and_fall_back_to_the_anchor_when_they_chain():
    import pandas as pd

    from core.data import resampling_groups

    linked = pd.DataFrame({"question1": ["a", "A ", "c", "d"], "question2": ["x", "y", "z", "w"], "is_duplicate": 1})
    groups = resampling_groups(linked)
    assert groups[0] == groups[1] and len(set(groups.tolist())) == 3  # "a" and "A " are one question
    assert resampling_groups(linked.iloc[2:]) is None  # no question repeats: every pair on its own
    # Two anchors, each with four candidates, the candidates shared: connected groups would chain all eight pairs
    # into one, so the pairs go by their anchor (the first question).
    chained = pd.DataFrame({"question1": ["q1"] * 4 + ["q2"] * 4, "question2": ["r1", "r2", "r3", "r4"] * 2,
                            "is_duplicate": 0})
    groups = resampling_groups(chained)
    assert groups.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
