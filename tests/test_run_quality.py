"""Honesty about a bad model and about data too small to train on: ``core.inference.run_quality`` and
``core.data.splitting``, and what ``python -m core train`` says with them."""
import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import inverted_pairs

from core.cli.main import main
from core.data import dataset_summary, min_pairs_for_validation, training_problems
from core.inference.run_quality import judge_run, validation_baselines

BAD_RUN = ["--model", "lstm", "--loss", "triplet", "--epochs", "1", "--max-steps", "1", "--lr", "1e-6",
           "--max-length", "16", "--model-options", json.dumps({"embedding_dim": 12, "hidden_size": 10})]


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---- the verdict --------------------------------------------------------------------------------------
def test_a_run_below_chance_and_tfidf_is_flagged_with_both():
    quality = judge_run({"validation": {"roc_auc": 0.23}, "baselines": {"tfidf": {"roc_auc": 0.285, "pairs": 48}}})
    assert quality.worse_than_chance and quality.below == ("tfidf",) and quality.flagged
    assert quality.short == "worse than chance"
    assert quality.message.startswith("Worse than chance: validation ROC AUC 0.230 is below 0.5")
    assert "below TF-IDF cosine (0.285) on the same validation pairs" in quality.message
    assert "Try the auto preset" in quality.message
    assert quality.as_dict() == {"worse_than_chance": True, "below_baselines": ["tfidf"],
                                 "no_measurable_difference": [], "baselines": {"tfidf": 0.285}, "verdicts": {},
                                 "message": quality.message}


def test_a_run_above_chance_but_below_tfidf_is_flagged_as_such():
    quality = judge_run({"validation": {"roc_auc": 0.70}, "baselines": {"tfidf": {"roc_auc": 0.75}}})
    assert not quality.worse_than_chance and quality.below == ("tfidf",) and quality.flagged
    assert quality.short == "below TF-IDF cosine"
    assert quality.message.startswith("Below the baseline: validation ROC AUC 0.700 is below TF-IDF cosine (0.750)")


@pytest.mark.parametrize("metrics", [
    {"validation": {"roc_auc": 0.9}, "baselines": {"tfidf": {"roc_auc": 0.75}}},
    {"validation": {"roc_auc": 0.5}},  # a coin flip is not below chance
    {"validation": {"roc_auc": 0.6}, "baselines": {"tfidf": {"roc_auc": 0.6}}},  # equal is not below
])
def test_a_run_at_or_above_chance_and_tfidf_is_not_flagged(metrics):
    quality = judge_run(metrics)
    assert not quality.flagged and quality.message == "" and quality.short == ""


@pytest.mark.parametrize("metrics", [
    None, [], {}, {"validation": []}, {"validation": {"roc_auc": float("nan")}}, {"validation": {"roc_auc": True}},
    {"validation": {"roc_auc": "0.2"}},
])
def test_no_usable_roc_auc_is_judged_against_nothing(metrics):
    quality = judge_run(metrics)
    assert quality.roc_auc is None and not quality.flagged


@pytest.mark.parametrize("baselines", [[], {"tfidf": 0.9}, {"tfidf": {"roc_auc": None}}, {"tfidf": {"roc_auc": math.inf}}])
def test_malformed_baselines_count_as_absent(baselines):
    quality = judge_run({"validation": {"roc_auc": 0.7}, "baselines": baselines})
    assert quality.baselines == {} and not quality.flagged


def test_validation_baselines_score_tfidf_and_zero_shot_minilm_on_the_validation_pairs():
    from sklearn.metrics import roc_auc_score

    from core.models import MiniLM

    pairs = inverted_pairs(40)
    val = pairs.iloc[20:]
    minilm = MiniLM.pretrained().eval()
    expected = roc_auc_score(val["is_duplicate"], minilm.score_pairs(list(val["question1"]), list(val["question2"])))
    baselines = validation_baselines(val)
    assert baselines["tfidf"] == {"roc_auc": 0.0, "pairs": 20}
    assert baselines["zero_shot"]["pairs"] == 20
    assert baselines["zero_shot"]["roc_auc"] == pytest.approx(expected, abs=1e-6)
    one_class = pairs[pairs["is_duplicate"] == 1]
    assert validation_baselines(one_class) == {}  # no ROC AUC on one class


def test_the_tfidf_baseline_is_fitted_on_the_pairs_it_scores_whatever_the_training_data(monkeypatch):
    """One fit everywhere: the validation pairs' own questions, so the baseline's figure is the same for a run
    trained on 5 pairs as for one trained on thousands (a fit on 5 training pairs' words made TF-IDF look weak)."""
    import core.inference.run_quality as run_quality
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics import roc_auc_score

    monkeypatch.setattr(run_quality, "_zero_shot_scores", lambda *args, **kwargs: None)
    # a non-duplicate sharing most words and a duplicate sharing one: an AUC strictly between 0 and 1
    val = pd.DataFrame({"question1": ["how do I bake bread", "how do I learn python", "where is paris",
                                      "how old is the moon", "how do I cook rice"],
                        "question2": ["how can I bake bread", "how do I learn java", "where is paris located",
                                      "what is a black hole", "rice cooking steps"],
                        "is_duplicate": [1, 0, 1, 0, 1]})
    vectorizer = TfidfVectorizer().fit(list(val["question1"]) + list(val["question2"]))
    first, second = vectorizer.transform(val["question1"]), vectorizer.transform(val["question2"])
    expected = roc_auc_score(val["is_duplicate"], np.asarray(first.multiply(second).sum(axis=1)).ravel())
    assert 0 < expected < 1
    assert validation_baselines(val)["tfidf"] == {"roc_auc": pytest.approx(expected), "pairs": 5}


def test_zero_shot_baseline_scores_a_seeded_sample_of_a_big_validation_split(monkeypatch):
    import core.inference.run_quality as run_quality

    scored = []  # the pairs zero-shot MiniLM was asked to score; it scores them by their labels
    monkeypatch.setattr(run_quality, "ZERO_SHOT_MAX_PAIRS", 12)
    monkeypatch.setattr(run_quality, "_zero_shot_scores",
                        lambda val, progress=None: scored.append(val) or val["is_duplicate"].to_numpy(float))
    pairs = inverted_pairs(40)
    first, again = validation_baselines(pairs, seed=3), validation_baselines(pairs, seed=3)
    assert first["zero_shot"] == {"roc_auc": 1.0, "pairs": 12} and first == again
    assert scored[0].equals(scored[1]) and first["tfidf"]["pairs"] == 40


def test_a_run_below_zero_shot_minilm_alone_is_flagged():
    quality = judge_run({"validation": {"roc_auc": 0.80},
                         "baselines": {"tfidf": {"roc_auc": 0.70}, "zero_shot": {"roc_auc": 0.85}}})
    assert quality.below == ("zero_shot",) and quality.flagged and quality.short == "below zero-shot MiniLM"
    assert "zero-shot MiniLM (0.850)" in quality.message


# ---- the data rule ------------------------------------------------------------------------------------
def test_min_pairs_for_validation_follows_the_split_rounding():
    assert min_pairs_for_validation(0.1) == 15 and min_pairs_for_validation(0.05) == 30
    assert min_pairs_for_validation(0.5) == 3  # round(1.5) == 2


def test_a_one_row_file_is_too_small_and_fatal_only_for_in_batch_losses():
    summary = {"pairs": 1, "duplicates": 1}
    page = training_problems(summary)
    assert [p.fatal for p in page] == [False, False, False]
    assert "need at least 2 duplicate pairs" in page[0].message
    assert page[1].message.startswith("the one pair is a duplicate")
    assert "use at least 15 pairs" in page[2].message
    assert training_problems(summary, in_batch_loss=True)[0].fatal
    # Without an in-batch loss only one class is fatal: such a run could never be measured.
    assert [p.fatal for p in training_problems(summary, in_batch_loss=False)] == [True, False]


def test_a_one_class_file_is_refused_for_training_warned_on_the_data_page_and_a_good_one_is_not(sample_pairs):
    problems = training_problems({"pairs": 200, "duplicates": 200}, in_batch_loss=True)
    assert [p.fatal for p in problems] == [True]
    assert [p.fatal for p in training_problems({"pairs": 200, "duplicates": 200})] == [False]
    assert problems[0].message.startswith("all 200 pairs are duplicates") and "add at least 1 non-duplicate" in problems[0].message
    assert training_problems(dataset_summary(sample_pairs[0])) == []
    assert training_problems({"pairs": 0, "duplicates": 0})[0].fatal


# ---- the CLI ------------------------------------------------------------------------------------------
def test_cli_train_says_a_run_is_worse_than_chance(capsys, tmp_path):
    data = tmp_path / "inverted.csv"
    inverted_pairs().to_csv(data, index=False)
    code, out, err = run_cli(capsys, "train", "--data", data, "--device", "cpu", "--out", tmp_path / "model", *BAD_RUN)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["status"] == "done" and summary["validation"]["roc_auc"] < 0.5
    quality = summary["quality"]
    assert quality["worse_than_chance"] is True and quality["message"].startswith("Worse than chance")
    warnings = [line for line in err.splitlines() if line.startswith("warning: Worse than chance")]
    assert warnings == [f"warning: {quality['message']}"]
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    recorded = config["metrics"]["baselines"]
    for key in ("tfidf", "zero_shot"):
        assert (recorded[key]["roc_auc"], recorded[key]["pairs"]) == (quality["baselines"][key], 12)
        assert recorded[key]["verdict"] == quality["verdicts"][key]  # the paired bootstrap, as the CLI printed it
    assert judge_run(config["metrics"]).worse_than_chance  # what the pages read back


def test_cli_train_refuses_a_one_row_file_before_training(capsys, tmp_path):
    data = tmp_path / "one.csv"
    data.write_text("question1,question2,is_duplicate\nHow old are you?,What is your age?,1\n")
    code, out, err = run_cli(capsys, "train", "--data", data, "--device", "cpu", "--out", tmp_path / "model", *BAD_RUN)
    assert code == 2 and out == ""
    assert err.splitlines() == [("error: one.csv: only 1 duplicate pair(s): the triplet and softmax losses need at "
                                 "least 2 duplicate pairs to form a batch (the contrastive, CoSENT and multitask "
                                 "losses train on both classes)")]
    assert not (tmp_path / "model").exists() or not any((tmp_path / "model").iterdir())


def test_cli_train_refuses_a_one_class_file_in_one_line(capsys, tmp_path):
    data = tmp_path / "duplicates.csv"
    pairs = inverted_pairs(40)
    pairs[pairs["is_duplicate"] == 1].to_csv(data, index=False)
    code, out, err = run_cli(capsys, "train", "--data", data, "--device", "cpu", "--out", tmp_path / "model", *BAD_RUN)
    assert code == 2 and out == ""  # a run on one class could never be validated: never "done"
    assert err.splitlines() == [("error: duplicates.csv: all 20 pairs are duplicates: a model learns to tell duplicates "
                                 "apart only from both classes, and validation ROC AUC needs both; add at least 1 "
                                 "non-duplicate pair (several, so the validation split holds one of each)")]
    assert not (tmp_path / "model").exists() or not any((tmp_path / "model").iterdir())


def test_a_good_run_is_set_beside_both_baselines_in_one_sentence():
    quality = judge_run({"validation": {"roc_auc": 0.918},
                         "baselines": {"tfidf": {"roc_auc": 0.285}, "zero_shot": {"roc_auc": 0.896}}})
    assert not quality.flagged
    assert quality.comparison == ("ROC AUC 0.918 against TF-IDF cosine 0.285 and zero-shot MiniLM 0.896 "
                                  "on the same validation pairs.")
    assert judge_run({"validation": {"roc_auc": 0.9}}).comparison == ""
