"""``auto`` chooses among candidates by their validation interval against zero-shot MiniLM, within a time budget
(``core.training.auto_choice``), and saves the one it chose where any command and page can use it. The Train
page's auto run: ``test_app_train``."""
import json
from pathlib import Path

import pytest
from conftest import run_cli

from core.data import load_pairs
from core.inference.honest_pairs import honest_pairs
from core.inference.stacked_scorer import fit_stacked
from core.inference.metrics import paired_verdict
from core.saving import read_config
from core.training.auto_choice import FINE_TUNE_NAME, STACKED_NAME, ZERO_SHOT_NAME, Candidate, choose

SAMPLE = Path(__file__).resolve().parents[1] / "assets" / "sample_pairs.csv"
HALF = 240  # the bundled sample's first pairs: every candidate encodes half as many questions, each judged as before


@pytest.fixture(scope="module")
def half_sample(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("auto") / "half_sample.csv"
    load_pairs(SAMPLE)[0].head(HALF).to_csv(path, index=False)
    return path


def verdict(kind: str, low: float, high: float) -> dict:
    return {"verdict": kind, "difference": (low + high) / 2, "interval": [low, high], "pairs": 500}


def test_choose_keeps_the_reference_unless_another_is_better_beyond_resampling():
    zero = Candidate(ZERO_SHOT_NAME, 0.86, 1.0)
    higher_but_unsure = Candidate(STACKED_NAME, 0.88, 2.0, verdict("no measurable difference", -0.002, 0.04))
    assert choose([zero, higher_but_unsure]) is zero
    better = Candidate(STACKED_NAME, 0.87, 2.0, verdict("better", 0.001, 0.02))
    best = Candidate(FINE_TUNE_NAME, 0.89, 300.0, verdict("better", 0.01, 0.05))
    assert choose([zero, better, best]) is best and choose([zero, best, better]) is best
    assert choose([zero, better, Candidate(FINE_TUNE_NAME, None, 0.0, note="not started")]) is better


def test_auto_measures_the_cheap_candidates_and_saves_the_chosen_one_as_a_copy_of_minilm(capsys, tmp_path,
                                                                                        half_sample):
    # A budget too short for a fine-tune: zero-shot MiniLM and the stacked scorer are measured and judged.
    out = tmp_path / "auto"
    code, stdout, err = run_cli(capsys, "train", "--data", half_sample, "--budget-minutes", "1.6", "--out", out)
    assert code == 0, err
    shown = json.loads(stdout)
    assert [candidate["name"] for candidate in shown["candidates"]] == [ZERO_SHOT_NAME, STACKED_NAME, FINE_TUNE_NAME]
    zero, stacked, tuned = shown["candidates"]
    assert tuned["roc_auc"] is None and tuned["note"].startswith("not started: ")
    assert zero["verdict"] is None  # the reference itself
    assert shown["chosen"] == (STACKED_NAME if stacked["verdict"]["verdict"] == "better" else ZERO_SHOT_NAME)
    assert f"candidate: {STACKED_NAME}: validation ROC AUC {stacked['roc_auc']:.3f}" in err
    assert f"chosen: {shown['chosen']}, saved in {out}" in err

    # the figures are those of the validation split the copy records, recomputed from the lab's own parts
    pairs, _ = load_pairs(half_sample)
    config = read_config(out)
    val = honest_pairs([config], pairs).pairs  # the saved copy records its split: the pairs it never saw
    assert len(val) == config["data"]["val_pairs"] == stacked["verdict"]["pairs"] == 48
    seen = set(zip(val["question1"], val["question2"]))
    train = pairs[[pair not in seen for pair in zip(pairs["question1"], pairs["question2"])]].reset_index(drop=True)
    from sklearn.metrics import roc_auc_score

    from core.models import MiniLM

    encoder = MiniLM.pretrained().eval()
    cosines = encoder.score_pairs(list(val["question1"]), list(val["question2"]))
    assert zero["roc_auc"] == pytest.approx(roc_auc_score(val["is_duplicate"], cosines), abs=1e-6)
    scorer = fit_stacked(encoder, train, encoder.score_pairs(list(train["question1"]), list(train["question2"])))
    stacked_scores = scorer.score_pairs(list(val["question1"]), list(val["question2"]))
    assert stacked["roc_auc"] == pytest.approx(roc_auc_score(val["is_duplicate"], stacked_scores), abs=1e-6)
    expected = paired_verdict(val["is_duplicate"].to_numpy(), stacked_scores, cosines)
    assert stacked["verdict"]["difference"] == pytest.approx(expected.difference, abs=1e-6)

    # the saved folder is the chosen model, a small copy over the packaged MiniLM, and every command loads it
    assert config["auto"]["chosen"] == shown["chosen"] and config["auto"]["candidates"] == shown["candidates"]
    assert not (out / "model.safetensors").exists()
    code, stdout, err = run_cli(capsys, "predict", "--model", out, "How do I learn Python?",
                                "What is the best way to learn Python?")
    assert code == 0, err
    assert json.loads(stdout)["threshold"] == pytest.approx(shown["thresholds"]["accuracy"])


def test_a_budget_below_the_minutes_of_anything_is_refused_in_one_line(capsys, tmp_path):
    code, out, err = run_cli(capsys, "train", "--data", SAMPLE, "--budget-minutes", "0", "--out", tmp_path / "m")
    assert code == 2 and out == "" and "--budget-minutes: must be above 0" in err


@pytest.mark.slow
def test_with_time_left_auto_fine_tunes_and_lists_it_with_its_interval(capsys, tmp_path, half_sample):
    out = tmp_path / "auto"
    code, stdout, err = run_cli(capsys, "train", "--data", half_sample, "--budget-minutes", "4", "--max-steps", "2",
                                "--out", out)
    assert code == 0, err
    shown = json.loads(stdout)
    tuned = shown["candidates"][2]
    assert tuned["name"] == FINE_TUNE_NAME and tuned["roc_auc"] is not None
    assert set(tuned["verdict"]) == {"verdict", "difference", "interval", "pairs"}
    config = read_config(out)
    assert config["auto"]["chosen"] == shown["chosen"]
    if shown["chosen"] == FINE_TUNE_NAME:
        assert (out / "model.safetensors").exists() and config["train_config"]["max_steps"] == 2


def test_zero_shot_scores_already_known_are_not_scored_again(monkeypatch):
    import numpy as np

    import core.inference.run_quality as run_quality
    from core.inference.metrics import ranking_metrics

    def scored_again(*_args, **_kwargs):
        raise AssertionError("zero-shot MiniLM scored a second time")

    monkeypatch.setattr(run_quality, "_zero_shot_scores", scored_again)
    pairs, _ = load_pairs(SAMPLE)
    known = np.linspace(0.0, 1.0, len(pairs))
    baselines = run_quality.validation_baselines(pairs, zero_shot=known)
    rows = np.arange(len(pairs))  # fewer pairs than the sample's cap: every one is scored
    assert baselines["zero_shot"]["pairs"] == len(pairs)
    assert baselines["zero_shot"]["roc_auc"] == ranking_metrics(pairs["is_duplicate"].to_numpy(), known[rows])["roc_auc"]
