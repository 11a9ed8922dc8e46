"""core.inference.honest_pairs' comparison table: the TF-IDF cosine baseline, the table's rows and order (the
common pairs of a comparison: tests/test_honest_pairs.py)."""
import math

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    f1_score,
    roc_auc_score,
)
from sklearn.metrics.pairwise import cosine_similarity

from core.inference.honest_pairs import (
    COMPARE_COLUMNS,
    comparison_row,
    comparison_table,
    sort_table,
)
from core.inference.tfidf_scorer import TfidfScorer


# ---- TF-IDF cosine ----------------------------------------------------------------------------------
def test_tfidf_cosine_equals_a_hand_computation():
    fit = ["cat dog", "cat fish", "bird"]  # 3 documents: df(cat) = 2, df(dog) = df(fish) = df(bird) = 1
    idf_cat, idf_one = math.log(4 / 3) + 1, math.log(4 / 2) + 1  # smooth idf: ln((1 + n) / (1 + df)) + 1
    scores = TfidfScorer.fit(fit).score_pairs(["cat dog", "dog", "cat", "zebra", "Cat DOG"],
                                              ["cat fish", "bird", "cat cat", "cat", "dog cat"])
    # (cat dog) . (cat fish) = idf_cat^2 over |(idf_cat, idf_one)|^2: the two vectors have the same length
    assert scores[0] == pytest.approx(idf_cat**2 / (idf_cat**2 + idf_one**2))
    assert scores[1] == pytest.approx(0.0)  # no word in common
    assert scores[2] == pytest.approx(1.0)  # the same direction, whatever the counts
    assert scores[3] == pytest.approx(0.0)  # "zebra" is unknown to the fitted vocabulary: a zero vector
    assert scores[4] == pytest.approx(1.0)  # lower-cased, order-free bag of words


def test_tfidf_cosine_equals_sklearn_cosine_similarity(sample_pairs):
    pairs, _ = sample_pairs
    fit, scored = pairs.iloc[:300], pairs.iloc[300:]
    scores = TfidfScorer.fit(fit["question1"].tolist() + fit["question2"].tolist()).score_pairs(
        scored["question1"], scored["question2"])
    vectorizer = TfidfVectorizer().fit(fit["question1"].tolist() + fit["question2"].tolist())
    expected = np.diag(cosine_similarity(vectorizer.transform(scored["question1"]),
                                         vectorizer.transform(scored["question2"])))
    np.testing.assert_allclose(scores, expected, atol=1e-12)
    # unfitted, the vectorizer is fitted on the scored questions themselves
    own = TfidfVectorizer().fit(scored["question1"].tolist() + scored["question2"].tolist())
    expected_own = np.diag(cosine_similarity(own.transform(scored["question1"]), own.transform(scored["question2"])))
    np.testing.assert_allclose(TfidfScorer().score_pairs(scored["question1"], scored["question2"]), expected_own,
                               atol=1e-12)


def test_tfidf_cosine_of_texts_without_words_is_zero():
    np.testing.assert_array_equal(TfidfScorer().score_pairs(["?", "!"], ["a", "."]), [0.0, 0.0])
    with pytest.raises(ValueError):
        TfidfScorer().score_pairs(["one question"], [])


# ---- rows, table, order -----------------------------------------------------------------------------
def test_comparison_row_matches_sklearn():
    labels = np.array([0, 0, 1, 1, 0, 1, 0, 1])
    scores = np.array([0.1, 0.4, 0.35, 0.8, 0.7, 0.9, 0.2, 0.3])
    row = comparison_row("m", "trained Siamese LSTM", labels, scores, 0.5, "its own validation split")
    predicted = (scores > 0.5).astype(int)
    assert row["ROC AUC"] == pytest.approx(roc_auc_score(labels, scores))
    assert row["avg precision"] == pytest.approx(average_precision_score(labels, scores))
    assert row["accuracy"] == pytest.approx(accuracy_score(labels, predicted)) == 0.625  # 5 of 8
    assert row["F1"] == pytest.approx(f1_score(labels, predicted))
    assert (row["model"], row["kind"], row["threshold"]) == ("m", "trained Siamese LSTM", 0.5)

    calibrated = comparison_row("t", "reference", labels, scores, None, "these pairs")
    # calibrated on these scores: the best accuracy any threshold reaches on them
    best = max(accuracy_score(labels, (scores > t).astype(int)) for t in np.linspace(0, 1, 1001))
    assert calibrated["accuracy"] == pytest.approx(best) and calibrated["threshold from"] == "these pairs"


def test_every_verdict_against_zero_shot_shows_its_interval():
    from core.inference.metrics import paired_verdict

    labels = np.array([0, 1] * 30)
    rng = np.random.default_rng(0)
    strong, weak = labels + rng.normal(0, 0.3, 60), labels + rng.normal(0, 1.5, 60)
    for scores, reference in ((strong, weak), (weak, strong), (strong, strong + rng.normal(0, 0.01, 60))):
        verdict = paired_verdict(labels, scores, reference)
        text = comparison_row("m", "trained", labels, scores, 0.5, "", reference)["vs zero-shot"]
        low, high = verdict.interval
        assert text == f"{verdict.verdict} ({verdict.difference:+.3f}, {low:+.3f} to {high:+.3f})"
    assert {paired_verdict(labels, s, r).verdict for s, r in ((strong, weak), (weak, strong))} == {"better", "worse"}


def test_sort_table_sorts_by_any_column_with_nan_last():
    table = comparison_table([
        {"model": "b", "ROC AUC": 0.7, "F1": 0.2}, {"model": "a", "ROC AUC": float("nan"), "F1": 0.9},
        {"model": "c", "ROC AUC": 0.9, "F1": 0.5},
    ])
    assert table.columns.tolist() == COMPARE_COLUMNS
    assert sort_table(table, "ROC AUC")["model"].tolist() == ["c", "b", "a"]
    assert sort_table(table, "ROC AUC", ascending=True)["model"].tolist() == ["b", "c", "a"]
    assert sort_table(table, "F1", ascending=True)["model"].tolist() == ["b", "c", "a"]
    assert sort_table(table, "model", ascending=True)["model"].tolist() == ["a", "b", "c"]
    assert sort_table(table, "ROC AUC").index.tolist() == [0, 1, 2]
