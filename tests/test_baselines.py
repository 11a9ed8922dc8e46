"""core.inference.baselines: the common pairs of a comparison, the TF-IDF cosine baseline, the table's rows and order."""
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    f1_score,
    roc_auc_score,
)
from sklearn.metrics.pairwise import cosine_similarity

from core.data import pairs_fingerprint, split_pairs
from core.inference.baselines import (
    COMPARE_COLUMNS,
    common_pairs,
    comparison_row,
    comparison_table,
    model_scores,
    sort_table,
    tfidf_scores,
)


# ---- TF-IDF cosine ----------------------------------------------------------------------------------
def test_tfidf_cosine_equals_a_hand_computation():
    fit = ["cat dog", "cat fish", "bird"]  # 3 documents: df(cat) = 2, df(dog) = df(fish) = df(bird) = 1
    idf_cat, idf_one = math.log(4 / 3) + 1, math.log(4 / 2) + 1  # smooth idf: ln((1 + n) / (1 + df)) + 1
    scores = tfidf_scores(["cat dog", "dog", "cat", "zebra", "Cat DOG"],
                          ["cat fish", "bird", "cat cat", "cat", "dog cat"], fit_texts=fit)
    # (cat dog) . (cat fish) = idf_cat^2 over |(idf_cat, idf_one)|^2: the two vectors have the same length
    assert scores[0] == pytest.approx(idf_cat**2 / (idf_cat**2 + idf_one**2))
    assert scores[1] == pytest.approx(0.0)  # no word in common
    assert scores[2] == pytest.approx(1.0)  # the same direction, whatever the counts
    assert scores[3] == pytest.approx(0.0)  # "zebra" is unknown to the fitted vocabulary: a zero vector
    assert scores[4] == pytest.approx(1.0)  # lower-cased, order-free bag of words


def test_tfidf_cosine_equals_sklearn_cosine_similarity(sample_pairs):
    pairs, _ = sample_pairs
    fit, scored = pairs.iloc[:300], pairs.iloc[300:]
    scores = tfidf_scores(scored["question1"], scored["question2"],
                          fit_texts=fit["question1"].tolist() + fit["question2"].tolist())
    vectorizer = TfidfVectorizer().fit(fit["question1"].tolist() + fit["question2"].tolist())
    expected = np.diag(cosine_similarity(vectorizer.transform(scored["question1"]),
                                         vectorizer.transform(scored["question2"])))
    np.testing.assert_allclose(scores, expected, atol=1e-12)
    # without fit texts the vectorizer is fitted on the scored questions themselves
    own = TfidfVectorizer().fit(scored["question1"].tolist() + scored["question2"].tolist())
    expected_own = np.diag(cosine_similarity(own.transform(scored["question1"]), own.transform(scored["question2"])))
    np.testing.assert_allclose(tfidf_scores(scored["question1"], scored["question2"]), expected_own, atol=1e-12)


def test_tfidf_cosine_of_texts_without_words_is_zero():
    np.testing.assert_array_equal(tfidf_scores(["?", "!"], ["a", "."]), [0.0, 0.0])
    with pytest.raises(ValueError):
        tfidf_scores(["one question"], [])


# ---- the common pairs -------------------------------------------------------------------------------
def _config(pairs, name, val_fraction, seed, data_name="bundled sample"):
    """A config.json as core.training.pipeline writes it, for a model trained on ``pairs`` with these settings."""
    val = split_pairs(pairs, val_fraction=val_fraction, test_fraction=0.0, seed=seed).val
    return {"name": name, "data": {"name": data_name, "fingerprint": pairs_fingerprint(pairs),
                                   "validation_fingerprint": pairs_fingerprint(val)},
            "run": {"val_fraction": val_fraction, "test_fraction": 0.0, "split_by_question": False},
            "train_config": {"seed": seed}}


def _keys(frame):
    return list(zip(frame["question1"], frame["question2"], frame["is_duplicate"]))


def test_common_pairs_are_the_intersection_of_the_held_out_pairs(sample_pairs):
    pairs, _ = sample_pairs
    first, second = _config(pairs, "a", 0.4, seed=1), _config(pairs, "b", 0.4, seed=2)
    elsewhere = {"name": "c", "data": {"name": "quora", "fingerprint": "f" * 16}}  # trained on other data
    common = common_pairs([first, elsewhere, second], pairs)

    val_a = set(_keys(split_pairs(pairs, val_fraction=0.4, test_fraction=0.0, seed=1).val))
    val_b = set(_keys(split_pairs(pairs, val_fraction=0.4, test_fraction=0.0, seed=2).val))
    expected = [row for row in _keys(pairs) if row in val_a and row in val_b]  # in dataset order
    assert 0 < len(expected) < len(val_a)
    assert _keys(common.pairs) == expected and common.total == len(expected)
    assert common.constrained_by == ["a", "b"]
    assert common.description.startswith(f"the {len(expected)} pairs that both models trained on this dataset")
    assert str(len(expected)) in common.label
    # TF-IDF is fitted on the rest of the dataset: the side the models trained on
    rest = pairs[[row not in set(expected) for row in _keys(pairs)]]
    assert common.fit_texts(pairs) == rest["question1"].tolist() + rest["question2"].tolist()
    assert common.key == pairs_fingerprint(common.pairs)


def test_one_model_trained_here_gives_its_validation_split(sample_pairs):
    pairs, _ = sample_pairs
    common = common_pairs([_config(pairs, "only", 0.2, seed=3)], pairs)
    val = split_pairs(pairs, val_fraction=0.2, test_fraction=0.0, seed=3).val
    assert sorted(_keys(common.pairs)) == sorted(_keys(val))
    assert common.description.startswith(f"the {len(val)} validation pairs that only held out")


def test_without_a_model_trained_here_every_pair_is_compared(sample_pairs):
    pairs, _ = sample_pairs
    for configs in ([], [{"name": "z", "data": {"name": "quora", "fingerprint": "0" * 16}}]):
        common = common_pairs(configs, pairs)
        pd.testing.assert_frame_equal(common.pairs, pairs.reset_index(drop=True))
        assert common.description.startswith(f"all {len(pairs)} pairs of the active dataset")
        assert common.fit_texts(pairs) == pairs["question1"].tolist() + pairs["question2"].tolist()


def test_many_common_pairs_are_sampled_with_a_seed(sample_pairs):
    pairs, _ = sample_pairs
    common = common_pairs([], pairs, max_pairs=50, seed=4)
    again = common_pairs([], pairs, max_pairs=50, seed=4)
    assert len(common.pairs) == 50 and common.total == len(pairs)
    pd.testing.assert_frame_equal(common.pairs, again.pairs)
    assert set(_keys(common.pairs)) <= set(_keys(pairs))
    assert common.description.endswith("of which a seeded sample of 50 (seed 4)")
    assert common.label.startswith(f"50 of {len(pairs)} pairs")


def test_a_run_whose_split_no_longer_matches_constrains_nothing(sample_pairs):
    pairs, _ = sample_pairs
    val = split_pairs(pairs, val_fraction=0.3, test_fraction=0.0, seed=0).val
    doctored = _config(pairs, "b", 0.3, seed=5)
    doctored["data"]["validation_fingerprint"] = "0" * 16  # held_out_pairs cannot find its split again
    common = common_pairs([_config(pairs, "a", 0.3, seed=0), doctored], pairs)
    assert sorted(_keys(common.pairs)) == sorted(_keys(val)) and common.constrained_by == ["a"]


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
    with pytest.raises(ValueError):
        sort_table(table, "nope")


def test_model_scores_equal_pair_scores_and_report_both_towers(tiny_models, sample_pairs):
    from core.inference.evaluation import pair_scores
    from core.models import load_model
    from core.text.pair_table import PairTable

    pairs, _ = sample_pairs
    model, _ = load_model(tiny_models["dual-transformer"])
    chosen = pairs.iloc[:70]
    calls = []
    scores = model_scores(model, chosen, progress=lambda done, total: calls.append((done, total)), batch_size=32)
    np.testing.assert_allclose(scores, pair_scores(model, PairTable(chosen, model.tokenizer)), atol=1e-6)
    assert calls[-1] == (140, 140) and all(total == 140 for _, total in calls)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
