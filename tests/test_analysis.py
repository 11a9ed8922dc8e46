"""core.inference.analysis against hand-computed values: the worst errors at a threshold, scores by question
length, questions seen in training, accuracy per group, the seeded cap on held-out pairs."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from core.data import split_pairs
from core.inference import analysis
from core.inference.analysis import FALSE_NEGATIVE, FALSE_POSITIVE
from core.inference.honest_pairs import run_split


def words(count: int, word: str = "w") -> str:
    return " ".join([word] * count)


# Six pairs; at threshold 0.5 (duplicate when score > 0.5) the verdicts are 1 0 0 1 1 0:
#   row  label  score  verdict   longer question (words)
#   0    0      0.9    1  FP     3  -> 1–5
#   1    0      0.4    0  TN     7  -> 6–10
#   2    1      0.2    0  FN     5  -> 1–5 (an edge closes its bucket)
#   3    1      0.8    1  TP     6  -> 6–10
#   4    0      0.7    1  FP     31 -> 31+
#   5    1      0.5    0  FN     30 -> 21–30 (equal to the threshold is not above it)
PAIRS = pd.DataFrame({
    "question1": ["a b c", words(7), words(5), "x", words(31), words(2)],
    "question2": ["a", "y", "z", words(6), "q", words(30)],
    "is_duplicate": [0, 0, 1, 1, 0, 1],
})
SCORES = np.array([0.9, 0.4, 0.2, 0.8, 0.7, 0.5])


def test_false_positives_are_non_duplicates_above_the_threshold_highest_first():
    table = analysis.error_table(PAIRS, SCORES, 0.5, FALSE_POSITIVE)
    assert table.index.tolist() == [0, 4] and table.index.name == "pair"
    assert list(table.columns) == ["question1", "question2", "score", "label"]
    assert table["score"].tolist() == [0.9, 0.7] and table["label"].tolist() == [0, 0]
    assert table["question1"].tolist() == ["a b c", words(31)]


def test_false_negatives_are_duplicates_at_or_below_the_threshold_lowest_first():
    table = analysis.error_table(PAIRS, SCORES, 0.5, FALSE_NEGATIVE)
    assert table.index.tolist() == [2, 5]
    assert table["score"].tolist() == [0.2, 0.5] and table["label"].tolist() == [1, 1]
    # A lower threshold turns the 0.5 pair into a true positive and the 0.4 pair into a false positive.
    assert analysis.error_table(PAIRS, SCORES, 0.45, FALSE_NEGATIVE).index.tolist() == [2]
    assert analysis.error_table(PAIRS, SCORES, 0.3, FALSE_POSITIVE).index.tolist() == [0, 4, 1]
    assert analysis.error_table(PAIRS, SCORES, 1.0, FALSE_POSITIVE).empty


def test_error_ties_keep_the_pairs_order_and_extra_columns_follow():
    pairs = PAIRS.assign(**{"seen in training": list("abcdef")})
    scores = np.array([0.9, 0.4, 0.2, 0.8, 0.9, 0.2])
    positives = analysis.error_table(pairs, scores, 0.5, FALSE_POSITIVE)
    negatives = analysis.error_table(pairs, scores, 0.5, FALSE_NEGATIVE)
    assert positives.index.tolist() == [0, 4] and negatives.index.tolist() == [2, 5]
    assert list(positives.columns) == ["question1", "question2", "score", "label", "seen in training"]
    assert positives["seen in training"].tolist() == ["a", "e"]


def test_all_errors_lists_false_positives_then_false_negatives():
    table = analysis.all_errors(PAIRS, SCORES, 0.5)
    assert table["error"].tolist() == [FALSE_POSITIVE, FALSE_POSITIVE, FALSE_NEGATIVE, FALSE_NEGATIVE]
    assert table["pair"].tolist() == [0, 4, 2, 5]
    assert table["score"].tolist() == [0.9, 0.7, 0.2, 0.5]
    assert list(table.columns) == ["pair", "error", "question1", "question2", "score", "label"]


def test_lengths_and_buckets():
    assert analysis.longer_question_words(PAIRS).tolist() == [3, 7, 5, 6, 31, 30]
    assert analysis.length_bucket_names() == ["1–5", "6–10", "11–15", "16–20", "21–30", "31+"]
    assert analysis.length_buckets([3, 7, 5, 6, 31, 30]) == ["1–5", "6–10", "1–5", "6–10", "31+", "21–30"]
    assert analysis.length_buckets([0, 1, 5, 6, 99]) == ["1–5", "1–5", "1–5", "6–10", "31+"]


def test_scores_by_length_groups_by_bucket_then_label():
    summary = analysis.scores_by_length(PAIRS, SCORES)
    assert list(zip(summary["bucket"], summary["label"])) == [
        ("1–5", 0), ("1–5", 1), ("6–10", 0), ("6–10", 1), ("21–30", 1), ("31+", 0)]
    assert summary["pairs"].tolist() == [1] * 6
    assert summary["median"].tolist() == pytest.approx([0.9, 0.2, 0.4, 0.8, 0.5, 0.7])


def test_scores_by_length_quartiles_by_hand():
    # Four duplicates of 4 words and two non-duplicates of 12: linear quartiles of 0.1 0.2 0.3 0.4 are
    # 0.1 + 0.75 * 0.1 = 0.175, 0.25 and 0.325; of 0.6 and 1.0: 0.7, 0.8 and 0.9.
    pairs = pd.DataFrame({"question1": [words(4)] * 4 + [words(12)] * 2, "question2": ["a"] * 6,
                          "is_duplicate": [1, 1, 1, 1, 0, 0]})
    summary = analysis.scores_by_length(pairs, [0.4, 0.1, 0.3, 0.2, 1.0, 0.6])
    first, second = summary.to_dict("records")
    assert (first["bucket"], first["label"], first["pairs"]) == ("1–5", 1, 4)
    assert [first[k] for k in ("min", "q1", "median", "q3", "max", "mean")] == pytest.approx(
        [0.1, 0.175, 0.25, 0.325, 0.4, 0.25])
    assert (second["bucket"], second["label"], second["pairs"]) == ("11–15", 0, 2)
    assert [second[k] for k in ("min", "q1", "median", "q3", "max", "mean")] == pytest.approx(
        [0.6, 0.7, 0.8, 0.9, 1.0, 0.8])


def test_seen_in_training_counts_normalised_questions():
    train = pd.DataFrame({"question1": ["How do I learn Python?", "Is tea healthy?"],
                          "question2": ["Best way to learn Python?", "Is coffee healthy?"], "is_duplicate": [1, 0]})
    pairs = pd.DataFrame({"question1": ["how do I  learn python?", "Is tea healthy?", "New one?", "Another?"],
                          "question2": ["  IS COFFEE HEALTHY?", "Unseen?", "Is tea healthy?", "Unseen too?"],
                          "is_duplicate": [1, 0, 0, 1]}, index=[10, 11, 12, 13])
    seen = analysis.seen_in_training(train, pairs)
    assert seen.tolist() == ["both", "one", "one", "neither"] and seen.index.tolist() == [10, 11, 12, 13]
    assert seen.name == analysis.SEEN_COLUMN


def test_accuracy_by_group_by_hand():
    # Verdicts at 0.5: 1 0 0 1 1 0 against labels 0 0 1 1 0 1: right on rows 1 and 3 only.
    groups = ["x", "y", "x", "y", "z", "x"]
    table = analysis.accuracy_by_group(PAIRS["is_duplicate"], SCORES, 0.5, groups)
    assert table.to_dict("list") == {"group": ["x", "y", "z"], "pairs": [3, 2, 1], "errors": [3, 0, 1],
                                     "accuracy": [0.0, 1.0, 0.0]}
    ordered = analysis.accuracy_by_group(PAIRS["is_duplicate"], SCORES, 0.5, groups, order=["z", "w", "y", "x"])
    assert ordered["group"].tolist() == ["z", "y", "x"]  # "w" holds no pair


@pytest.mark.slow
def test_training_pairs_are_the_runs_own_training_split(tmp_path, sample_pairs, train_tiny_model):
    pairs, _ = sample_pairs
    folder = train_tiny_model("lstm", tmp_path, val_fraction=0.2, test_fraction=0.1, seed=7)
    config = json.loads((folder / "config.json").read_text())
    # the sample repeats questions, so the run split by question (the auto rule) and recorded it
    assert config["run"]["split_by"] == "question"
    expected = split_pairs(pairs, val_fraction=0.2, test_fraction=0.1, seed=7, by_question=True).train
    train = run_split(config, pairs).train
    pd.testing.assert_frame_equal(train, expected)
    assert len(train) == len(pairs) - config["data"]["val_pairs"] - config["data"]["test_pairs"]
    assert run_split(config, pairs.iloc[:300].reset_index(drop=True)) is None  # other data
    assert run_split({}, pairs) is None  # zero-shot MiniLM
