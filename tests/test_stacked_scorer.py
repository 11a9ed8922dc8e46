"""``python -m core calibrate --stacked``: a logistic regression on an encoder's cosine and three lexical features,
checked against values computed by hand and against scikit-learn fitted here; its folder (JSON only) loads in every
command that scores pairs, is refused by those that need vectors, and refuses a parent that changed."""
import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest
from conftest import one_error_line, run_cli, synthetic_pairs
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

from core.inference.stacked_scorer import StackedScorer, fit_stacked, load_stacked
from core.inference.tfidf_scorer import TfidfScorer
from core.models import load_model
from core.saving import ModelLoadError, list_runs


class FixedCosines:
    """An encoder stand-in whose cosine of the i-th pair is ``cosines[i]``."""

    def __init__(self, cosines):
        self.cosines = np.asarray(cosines, dtype=np.float64)

    def score_pairs(self, first, second, batch_size=256):
        return self.cosines[:len(first)]


THREE_PAIRS = [("How do I learn Python?", "how to learn python"), ("red apple", "Red apple"),
               ("green tea", "black coffee today")]


def test_the_features_of_three_pairs_are_those_computed_by_hand():
    first, second = zip(*THREE_PAIRS)
    tfidf = TfidfScorer.fit([*first, *second])
    scorer = StackedScorer(FixedCosines([0.9, 0.8, 0.1]), tfidf, np.zeros(4), np.ones(4), np.zeros(4), 0.0)
    # TF-IDF's words (two letters or more, lower-cased) in 6 texts: how, learn, python in 2 (IDF a = ln(7/3) + 1),
    # do and to in 1 (b = ln(7/2) + 1); the first pair shares how, learn and python, each side has one more word.
    a, b = math.log(7 / 3) + 1, math.log(7 / 2) + 1
    expected = np.array([[0.9, 3 * a * a / (3 * a * a + b * b), 3 / 6, 4 / 5],  # {how learn python} of 6 words
                         [0.8, 1.0, 1.0, 1.0],  # the same words, case aside
                         [0.1, 0.0, 0.0, 2 / 3]])  # no shared word; 2 words against 3
    np.testing.assert_allclose(scorer.features(first, second), expected, rtol=1e-12)


def test_the_score_is_sklearns_logistic_probability_on_the_standardised_features():
    pairs = synthetic_pairs(120, seed=3)
    rng = np.random.default_rng(0)
    cosines = np.clip(0.5 + 0.3 * (pairs["is_duplicate"] - 0.5) + rng.normal(0, 0.2, len(pairs)), -1, 1)
    scorer = fit_stacked(FixedCosines(cosines), pairs, cosines)

    first, second = pairs["question1"].tolist(), pairs["question2"].tolist()
    features = scorer.features(first, second)
    scaler = StandardScaler().fit(features)
    reference = LogisticRegression().fit(scaler.transform(features), pairs["is_duplicate"])
    expected = reference.predict_proba(scaler.transform(features))[:, 1]
    np.testing.assert_allclose(scorer.score_pairs(first, second), expected, rtol=1e-9, atol=1e-12)


def test_an_encoder_cosine_that_varies_only_by_float_rounding_decides_no_score():
    pairs = synthetic_pairs(120, seed=3)
    rounding = 1.0 + np.random.default_rng(0).normal(0, 1e-7, len(pairs))  # a collapsed encoder: all cosines 1
    scorer = fit_stacked(FixedCosines(rounding), pairs, rounding)
    assert scorer.scale[0] == 1.0  # taken as constant, as StandardScaler takes a feature of no variance
    first, second = pairs["question1"].tolist(), pairs["question2"].tolist()
    exact = StackedScorer(FixedCosines(np.ones(len(pairs))), scorer.tfidf, scorer.mean, scorer.scale,
                          scorer.coefficients, scorer.intercept)
    np.testing.assert_allclose(scorer.score_pairs(first, second), exact.score_pairs(first, second), atol=1e-6)


@pytest.fixture
def lstm_folder(tiny_models, tmp_path):
    """A copy of the tiny Siamese LSTM this test may change."""
    return shutil.copytree(tiny_models["lstm"], tmp_path / "runs" / "lstm-parent")


@pytest.fixture
def pair_files(tmp_path):
    """Synthetic train, validation and test files (paths)."""
    paths = {}
    for name, n, seed in (("train", 200, 1), ("val", 60, 2), ("test", 80, 3)):
        paths[name] = tmp_path / f"{name}.csv"
        synthetic_pairs(n, seed=seed).to_csv(paths[name], index=False)
    return paths


def test_stacked_then_evaluate_predict_and_score_equal_scoring_in_process(capsys, tmp_path, lstm_folder, pair_files):
    stacked = tmp_path / "stacked"
    code, out, err = run_cli(capsys, "calibrate", "--model", lstm_folder, "--data", pair_files["train"],
                             "--val", pair_files["val"], "--stacked", "--out", stacked)
    assert code == 0, err
    shown = json.loads(out)
    assert shown["stacked"]["fit"] == {"data": "train.csv", "pairs": 200, "thresholds_on": "val.csv (--val, 60 pairs)"}
    assert shown["calibration"]["data"] == "val.csv" and shown["calibration"]["pairs"] == 60
    config = json.loads((stacked / "config.json").read_text())
    assert config["model_type"] == "stacked" and config["calibrated_from"]["source"] == str(lstm_folder)
    assert config["model_card"]["what"].endswith("cosine, TF-IDF cosine, word overlap and length ratio, fitted on "
                                                 "200 pairs of train.csv")
    # JSON only: the coefficients in config.json, the TF-IDF fit beside it; no pickle, no weights of its own.
    names = sorted(p.name for p in stacked.iterdir())
    assert {"config.json", "tfidf.json"} <= set(names) and all(name.endswith(".json") for name in names), names
    for path in stacked.iterdir():
        json.loads(path.read_text())  # the lab's record of its own files is JSON too
    assert set(json.loads((stacked / "tfidf.json").read_text())) == {"vocabulary", "idf"}

    scorer, _ = load_stacked(stacked)
    test = pd.read_csv(pair_files["test"])
    expected = scorer.score_pairs(test["question1"].tolist(), test["question2"].tolist())
    assert ((expected > 0) & (expected < 1)).all()

    code, out, err = run_cli(capsys, "evaluate", "--model", stacked, "--data", pair_files["test"])
    assert code == 0, err
    measured = json.loads(out)
    assert measured["roc_auc"] == pytest.approx(roc_auc_score(test["is_duplicate"], expected), abs=1e-9)
    assert measured["threshold"] == pytest.approx(config["thresholds"]["accuracy"])

    code, _, err = run_cli(capsys, "score", "--model", stacked, "--pairs", pair_files["test"],
                           "--out", tmp_path / "scored.csv")
    assert code == 0, err
    np.testing.assert_allclose(pd.read_csv(tmp_path / "scored.csv")["similarity"], expected, atol=1e-6)

    code, out, err = run_cli(capsys, "predict", "--model", stacked, test["question1"][0], test["question2"][0])
    assert code == 0, err
    assert json.loads(out)["similarity"] == pytest.approx(expected[0], abs=1e-6)

    # calibrate takes it as a model too: new thresholds, the same fit and scores.
    again = tmp_path / "again"
    assert run_cli(capsys, "calibrate", "--model", stacked, "--data", pair_files["val"], "--out", again)[0] == 0
    rescored, config_again = load_stacked(again)
    np.testing.assert_allclose(rescored.score_pairs(test["question1"].tolist(), test["question2"].tolist()), expected)
    assert config_again["stacked"] == config["stacked"]


def test_without_val_the_thresholds_come_from_a_held_out_share_of_the_training_pairs(capsys, tmp_path, lstm_folder,
                                                                                   pair_files):
    code, out, err = run_cli(capsys, "calibrate", "--model", lstm_folder, "--data", pair_files["train"], "--stacked",
                             "--out", tmp_path / "stacked")
    assert code == 0, err
    fit = json.loads(out)["stacked"]["fit"]
    assert fit["pairs"] == 160 and fit["thresholds_on"] == ("a seeded 20% of train.csv (40 pairs, seed 0) that the "
                                                            "fit did not see")
    assert json.loads(out)["calibration"]["pairs"] == 40


def test_commands_that_need_vectors_refuse_a_stacked_scorer_and_a_changed_parent_is_one_line(
        capsys, tmp_path, runs_root, lstm_folder, pair_files):
    stacked = runs_root / "stacked"
    assert run_cli(capsys, "calibrate", "--model", lstm_folder, "--data", pair_files["train"], "--stacked",
                   "--out", stacked)[0] == 0
    data = pair_files["test"]
    for argv in (["embed", "--data", data, "--out", tmp_path / "v.npy"],
                 ["search", "--corpus", data, "topic1"],
                 ["dedup", "--questions", data, "--out", tmp_path / "c.csv"],
                 ["export", "--format", "onnx", "--out", tmp_path / "x"],
                 ["suggest", "--questions", data, "--n", "5", "--out", tmp_path / "s.csv"]):
        one_error_line(run_cli(capsys, argv[0], "--model", stacked, *argv[1:]), "stacked scorer", "no vectors")
    one_error_line(run_cli(capsys, "predict", "--model", stacked, "--backend", "onnx", "a", "b"), "ONNX")
    with pytest.raises(ModelLoadError, match="stacked scorer"):
        load_model(stacked)
    runs, problems = list_runs(runs_root)  # the app's pages need vectors: named, not listed
    assert runs == [] and problems == ["stacked: a stacked scorer: the command line scores pairs with it (evaluate, "
                                       "score, predict); the app's pages need a model with vectors"]

    weights = lstm_folder / "model.safetensors"
    original = weights.read_bytes()
    weights.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # one bit of the parent's weights
    one_error_line(run_cli(capsys, "evaluate", "--model", stacked, "--data", data), str(stacked), "changed since")
    weights.write_bytes(original)
    load_stacked(stacked)  # the same bytes again: the same parent


def test_calibrate_refuses_what_cannot_be_stacked_in_one_line(capsys, tmp_path, lstm_folder, pair_files):
    out = tmp_path / "stacked"
    one_error_line(run_cli(capsys, "calibrate", "--model", "tfidf", "--data", pair_files["train"], "--stacked",
                           "--out", out), "--stacked needs an encoder's cosine")
    one_error_line(run_cli(capsys, "calibrate", "--model", lstm_folder, "--data", pair_files["train"],
                           "--val", pair_files["val"], "--out", out), "add --stacked")
    small = tmp_path / "small.csv"
    synthetic_pairs(40, seed=5).to_csv(small, index=False)  # 32 to fit, 8 held out: too few to pick a threshold
    one_error_line(run_cli(capsys, "calibrate", "--model", lstm_folder, "--data", small, "--stacked", "--out", out),
                   "held-out", "--val")
    assert not out.exists()


def test_a_hand_edited_stacked_folder_is_refused_in_one_line(capsys, tmp_path, lstm_folder, pair_files):
    stacked = tmp_path / "stacked"
    assert run_cli(capsys, "calibrate", "--model", lstm_folder, "--data", pair_files["train"], "--stacked",
                   "--out", stacked)[0] == 0
    config_path = stacked / "config.json"
    original = json.loads(config_path.read_text())
    config = json.loads(config_path.read_text())
    config["stacked"]["scale"][1] = 0.0
    config_path.write_text(json.dumps(config))
    one_error_line(run_cli(capsys, "predict", "--model", stacked, "a", "b"), "stacked.scale must be positive")
    config["stacked"]["coefficients"] = [1.0, "x", 0.0, 0.0]
    config_path.write_text(json.dumps(config))
    one_error_line(run_cli(capsys, "predict", "--model", stacked, "a", "b"), "stacked.coefficients must be 4 finite")
    config_path.write_text(json.dumps(original))
    load_stacked(stacked)  # as written, it loads
    (stacked / "tfidf.json").unlink()
    one_error_line(run_cli(capsys, "predict", "--model", stacked, "a", "b"), "no tfidf.json")
