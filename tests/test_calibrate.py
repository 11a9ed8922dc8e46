"""``python -m core calibrate`` and ``evaluate --calibrate-on``: thresholds calibrated on a labelled file, checked
against ``core.inference`` calibration computed here on the same scores; the calibrated copy is a small folder
that every loader takes like a model, and that refuses to serve a parent that changed or went."""
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import one_error_line, run_cli, synthetic_pairs
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import roc_auc_score
from sklearn.metrics.pairwise import paired_cosine_distances

from core.inference.calibration import pair_threshold, precision_threshold
from core.inference.metrics import pair_scores
from core.inference.metrics import best_thresholds, evaluate_scores
from core.data import resampling_groups
from core.inference.metrics import metric_intervals
from core.models import load_model
from core.saving import ModelLoadError, list_runs
from core.text.pair_table import PairTable


@pytest.fixture
def sample_halves(sample_pairs, tmp_path):
    """The bundled sample cut in two files: a calibration half and an evaluation half (paths, frames)."""
    pairs, _ = sample_pairs
    halves = pairs.iloc[:240].reset_index(drop=True), pairs.iloc[240:].reset_index(drop=True)
    paths = tmp_path / "calibration.csv", tmp_path / "evaluation.csv"
    for path, frame in zip(paths, halves):
        frame[["question1", "question2", "is_duplicate"]].to_csv(path, index=False)
    return paths, halves


@pytest.fixture
def lstm_folder(tiny_models, tmp_path):
    """A copy of the tiny Siamese LSTM this test may change or remove."""
    return shutil.copytree(tiny_models["lstm"], tmp_path / "runs" / "lstm-parent")


def scores_of(model, frame) -> np.ndarray:
    return pair_scores(model, PairTable(frame, model.tokenizer))


def test_calibrate_then_evaluate_reproduces_the_thresholds_calibrated_directly(capsys, tmp_path, lstm_folder,
                                                                              sample_halves):
    (calibration, evaluation), (calibration_pairs, evaluation_pairs) = sample_halves
    copy = tmp_path / "runs" / "lstm-calibrated"
    code, out, err = run_cli(capsys, "calibrate", "--model", lstm_folder, "--data", calibration, "--out", copy)
    assert code == 0, err
    assert "calibrating" in err  # the progress bar, on stderr

    # the reference: the parent's scores of the calibration pairs, calibrated by core.inference directly
    parent, parent_config = load_model(lstm_folder)
    labels = calibration_pairs["is_duplicate"].to_numpy()
    scores = scores_of(parent, calibration_pairs)
    expected = best_thresholds(labels, scores)
    clusters = precision_threshold(labels, scores)
    config = json.loads((copy / "config.json").read_text())
    assert config["thresholds"]["accuracy"] == pytest.approx(expected["accuracy"], abs=1e-12)
    assert config["thresholds"]["f1"] == pytest.approx(expected["f1"], abs=1e-12)
    assert config["thresholds"].get("clusters") == (None if clusters is None else pytest.approx(clusters, abs=1e-12))
    assert config["thresholds"] != parent_config["thresholds"]  # new numbers, not the parent's
    assert config["calibration"]["data"] == "calibration.csv" and config["calibration"]["pairs"] == 240
    assert config["calibration"]["duplicates"] == int(labels.sum())
    assert config["calibrated_from"]["source"] == str(lstm_folder.resolve())
    assert json.loads(out)["thresholds"] == config["thresholds"]
    # the parent's training record comes along: the app still knows which pairs its weights trained on
    assert config["data"] == parent_config["data"] and config["model_type"] == "lstm"
    # a pointer, not a copy: no weights, no vocabulary
    assert sorted(p.name for p in copy.iterdir()) == [".siamese_lab_files.json", "config.json"]

    # evaluate on the other half measures at the calibrated threshold, and says where it came from
    code, out, err = run_cli(capsys, "evaluate", "--model", copy, "--data", evaluation)
    assert code == 0, err
    result = json.loads(out)
    held_labels, held_scores = evaluation_pairs["is_duplicate"].to_numpy(), scores_of(parent, evaluation_pairs)
    reference = evaluate_scores(held_labels, held_scores, expected["accuracy"])
    assert result["threshold"] == pytest.approx(expected["accuracy"], abs=1e-12)
    for key in ("roc_auc", "accuracy", "f1", "tp", "fp", "tn", "fn"):
        assert result[key] == pytest.approx(reference[key], abs=1e-9), key
    assert result["threshold_from"] == "best accuracy on the 240 labelled pairs of calibration.csv (calibrated copy)"
    # pairs that share a question are resampled together (core.data.resampling_groups)
    intervals = metric_intervals(held_labels, held_scores, expected["accuracy"],
                                 groups=resampling_groups(evaluation_pairs))
    assert result["intervals"] == {name: pytest.approx(list(bounds), abs=1e-12) for name, bounds in intervals.items()}
    assert set(result["intervals"]) == {"roc_auc", "accuracy", "f1"}

    # the one-off --calibrate-on gives the same numbers without writing a folder
    code, out, err = run_cli(capsys, "evaluate", "--model", lstm_folder, "--data", evaluation,
                             "--calibrate-on", calibration)
    assert code == 0, err
    one_off = json.loads(out)
    assert {k: one_off[k] for k in reference if k in one_off} == {k: result[k] for k in reference if k in result}
    assert one_off["threshold_from"] == "best accuracy on the 240 labelled pairs of calibration.csv (--calibrate-on)"
    assert one_off["calibrated_on"]["thresholds"] == config["thresholds"]
    assert one_off["calibrated_on"]["pairs"] == 240

    # predict and the pages' threshold rule take the copy's threshold too
    code, out, _ = run_cli(capsys, "predict", "--model", copy, "How old are you?", "What is your age?")
    assert json.loads(out)["threshold"] == config["thresholds"]["accuracy"]
    chosen = pair_threshold(config)
    assert chosen.threshold == config["thresholds"]["accuracy"] and "calibration.csv" in chosen.source

    # the runs folder lists it like a model; the copy of a copy points at the original
    runs, problems = list_runs(tmp_path / "runs")
    assert problems == [] and {Path(run["path"]).name for run in runs} == {"lstm-parent", "lstm-calibrated"}
    again = tmp_path / "again"
    assert run_cli(capsys, "calibrate", "--model", copy, "--data", evaluation, "--out", again)[0] == 0
    assert json.loads((again / "config.json").read_text())["calibrated_from"] == config["calibrated_from"]


def test_a_calibrated_copy_whose_parent_changed_or_went_is_a_one_line_error(capsys, tmp_path, lstm_folder,
                                                                           sample_halves):
    (calibration, evaluation), _ = sample_halves
    copy = tmp_path / "copy"
    assert run_cli(capsys, "calibrate", "--model", lstm_folder, "--data", calibration, "--out", copy)[0] == 0
    load_model(copy)  # the parent as calibrated: it loads

    weights = lstm_folder / "model.safetensors"
    original = weights.read_bytes()
    weights.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # one bit of the parent's weights
    one_error_line(run_cli(capsys, "evaluate", "--model", copy, "--data", evaluation), str(copy), "changed since")
    weights.write_bytes(original)
    load_model(copy)  # the same bytes again: the same parent

    shutil.rmtree(lstm_folder)
    one_error_line(run_cli(capsys, "predict", "--model", copy, "a", "b"), "which is gone")
    with pytest.raises(ModelLoadError, match="which is gone"):
        load_model(copy)
    shutil.move(copy, tmp_path / "runs" / "orphan")
    runs, problems = list_runs(tmp_path / "runs")
    assert runs == [] and len(problems) == 1 and problems[0].startswith("orphan: calibrated from")


def test_no_output_lands_in_a_calibrated_copys_parent(capsys, tmp_path, lstm_folder, sample_halves):
    (calibration, evaluation), _ = sample_halves
    copy = tmp_path / "copy"
    assert run_cli(capsys, "calibrate", "--model", lstm_folder, "--data", calibration, "--out", copy)[0] == 0
    weights = (lstm_folder / "model.safetensors").read_bytes()
    for target in (lstm_folder / "model.safetensors", lstm_folder / "scores.csv", copy / "scores.csv"):
        one_error_line(run_cli(capsys, "score", "--model", copy, "--pairs", evaluation, "--out", target,
                               "--overwrite"), "inside the model folder")
    assert (lstm_folder / "model.safetensors").read_bytes() == weights and not (lstm_folder / "scores.csv").exists()
    assert run_cli(capsys, "score", "--model", copy, "--pairs", evaluation, "--out", tmp_path / "scores.csv")[0] == 0


def test_a_threshold_that_would_mean_nothing_is_said(capsys, tmp_path):
    from conftest import inverted_pairs

    pairs = inverted_pairs()  # duplicates share no words, non-duplicates share most: TF-IDF ranks them backwards
    path = tmp_path / "inverted.csv"
    pairs[["question1", "question2", "is_duplicate"]].to_csv(path, index=False)
    code, _, err = run_cli(capsys, "calibrate", "--model", "tfidf", "--data", path, "--out", tmp_path / "c")
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert code == 0 and len(warnings) == 1, err
    assert "inverted.csv" in warnings[0] and "worse than chance (ROC AUC 0.000)" in warnings[0]
    code, _, err = run_cli(capsys, "calibrate", "--model", "tfidf", "--data", pairs.assign(
        is_duplicate=1 - pairs["is_duplicate"]).to_csv(tmp_path / "right.csv", index=False) or tmp_path / "right.csv",
        "--out", tmp_path / "d")
    assert code == 0 and "warning:" not in err, err


def test_calibrate_refuses_what_it_cannot_do_in_one_line(capsys, tmp_path, lstm_folder, sample_halves, sample_pairs):
    (calibration, evaluation), _ = sample_halves
    one_error_line(run_cli(capsys, "calibrate", "--model", lstm_folder, "--data", calibration, "--out", lstm_folder,
                           "--overwrite"), "is the model being calibrated")
    assert (lstm_folder / "model.safetensors").is_file()
    one_error_line(run_cli(capsys, "calibrate", "--model", "tfidf", "--data", calibration, "--out", lstm_folder),
                   "--out", "--overwrite")
    duplicates = sample_pairs[0].query("is_duplicate == 1").head(40)
    one_class = tmp_path / "one_class.csv"
    duplicates[["question1", "question2", "is_duplicate"]].to_csv(one_class, index=False)
    one_error_line(run_cli(capsys, "calibrate", "--model", "tfidf", "--data", one_class, "--out", tmp_path / "t"),
                   "one_class.csv", "both duplicates and non-duplicates")
    assert not (tmp_path / "t").exists()
    one_error_line(run_cli(capsys, "evaluate", "--model", "tfidf", "--data", evaluation, "--calibrate-on", one_class),
                   "both duplicates and non-duplicates")
    one_error_line(run_cli(capsys, "evaluate", "--model", "tfidf", "--data", evaluation, "--calibrate-on", calibration,
                           "--threshold", "0.5"), "give one of them")


def sklearn_cosines(first, second, fit_on) -> np.ndarray:
    vectorizer = TfidfVectorizer().fit(list(fit_on))
    return 1.0 - paired_cosine_distances(vectorizer.transform(list(first)), vectorizer.transform(list(second)))


def test_a_calibrated_tfidf_keeps_the_fit_of_its_calibration_file(capsys, tmp_path):
    calibration_pairs, evaluation_pairs = synthetic_pairs(60, seed=1), synthetic_pairs(50, seed=2, topics=60)
    calibration, evaluation = tmp_path / "cal.csv", tmp_path / "eval.csv"
    calibration_pairs.to_csv(calibration, index=False)
    evaluation_pairs.to_csv(evaluation, index=False)
    folder = tmp_path / "tfidf-calibrated"
    assert run_cli(capsys, "calibrate", "--model", "tfidf", "--data", calibration, "--out", folder)[0] == 0
    assert sorted(p.name for p in folder.iterdir()) == [".siamese_lab_files.json", "config.json", "tfidf.json"]

    fit_on = [*calibration_pairs["question1"], *calibration_pairs["question2"]]
    calibration_scores = sklearn_cosines(calibration_pairs["question1"], calibration_pairs["question2"], fit_on)
    expected = best_thresholds(calibration_pairs["is_duplicate"], calibration_scores)["accuracy"]
    code, out, err = run_cli(capsys, "evaluate", "--model", folder, "--data", evaluation)
    assert code == 0, err
    result = json.loads(out)
    scores = sklearn_cosines(evaluation_pairs["question1"], evaluation_pairs["question2"], fit_on)  # words of cal.csv
    labels = evaluation_pairs["is_duplicate"]
    assert result["threshold"] == pytest.approx(expected, abs=1e-12)
    assert result["roc_auc"] == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    assert result["accuracy"] == pytest.approx(np.mean((scores > expected) == labels), abs=1e-12)
    # fitted on the evaluated pairs instead, the scores differ: the fit is part of the copy
    own = sklearn_cosines(evaluation_pairs["question1"], evaluation_pairs["question2"],
                          [*evaluation_pairs["question1"], *evaluation_pairs["question2"]])
    assert not np.allclose(own, scores)

    code, _, err = run_cli(capsys, "score", "--model", folder, "--pairs", evaluation, "--out", tmp_path / "s.csv")
    assert code == 0, err
    scored = pd.read_csv(tmp_path / "s.csv")
    np.testing.assert_allclose(scored["similarity"], scores, atol=1e-6)  # the saved fit, not one on this file
    assert (scored["predicted_duplicate"] == (scored["similarity"] > expected)).all()

    code, out, err = run_cli(capsys, "evaluate", "--model", "tfidf", "--data", evaluation, "--calibrate-on", calibration)
    assert code == 0, err
    one_off = json.loads(out)
    assert one_off["threshold"] == result["threshold"] and one_off["roc_auc"] == result["roc_auc"]
    one_error_line(run_cli(capsys, "embed", "--model", folder, "--data", evaluation, "--out", tmp_path / "v.npy"),
                   "no vectors")
    runs, problems = list_runs(tmp_path)
    assert runs == [] and problems == [f"{folder.name}: a calibrated TF-IDF baseline: the command line scores pairs "
                                       "with it (evaluate, score, predict); the app's pages need a model with vectors"]


@pytest.mark.slow
def test_a_calibrated_zero_shot_minilm_is_a_small_folder_that_loads_with_its_thresholds(capsys, tmp_path,
                                                                                       sample_halves):
    (calibration, _), (calibration_pairs, _) = sample_halves
    folder = tmp_path / "minilm-calibrated"
    code, out, err = run_cli(capsys, "calibrate", "--model", "minilm", "--data", calibration, "--out", folder,
                             "--max-rows", 60)
    assert code == 0, err
    assert sum(path.stat().st_size for path in folder.iterdir()) < 10_000  # the 90 MB of weights stay in the package
    model, config = load_model(folder)
    assert type(model).__name__ == "MiniLM" and "zero_shot" not in config
    assert config["calibrated_from"]["source"] == "minilm"
    first = calibration_pairs.iloc[:60]
    expected = best_thresholds(first["is_duplicate"], scores_of(model, first))
    assert config["thresholds"]["accuracy"] == pytest.approx(expected["accuracy"], abs=1e-9)
    assert config["thresholds"]["f1"] == pytest.approx(expected["f1"], abs=1e-9)
    assert pair_threshold(config).threshold == config["thresholds"]["accuracy"]  # not zero-shot's fixed 0.8


def _picker_labels():
    import os

    import streamlit as st

    from lab.session import model_choices

    from app_support import TEST_WORKSPACE

    st.session_state.runs_root = os.path.join(os.environ["SIAMESE_LAB_WORKSPACES"], TEST_WORKSPACE, "models")
    for label, choice in model_choices().items():
        st.text(f"{label} -> {choice}")


def test_the_app_lists_a_calibrated_copy_and_names_its_file(capsys, runs_root, tiny_models, sample_halves):
    from streamlit.testing.v1 import AppTest

    from lab.compare_view import run_kind

    (calibration, _), _ = sample_halves
    copy = runs_root / "lstm-calibrated"
    assert run_cli(capsys, "calibrate", "--model", tiny_models["lstm"], "--data", calibration, "--out", copy)[0] == 0
    assert run_cli(capsys, "calibrate", "--model", "tfidf", "--data", calibration, "--out", runs_root / "tf")[0] == 0
    at = AppTest.from_function(_picker_labels, default_timeout=60).run()
    assert not at.exception, at.exception
    labels = [text.value for text in at.text]
    assert len(labels) == 2  # zero-shot MiniLM and the copy; the TF-IDF folder has no vectors for the pages
    assert labels[1].startswith("lstm-calibrated (") and "calibrated on calibration.csv" in labels[1]
    assert labels[1].endswith(f"-> {copy}")
    [run] = list_runs(runs_root)[0]
    assert run_kind(run) == "Siamese LSTM, calibrated copy"
    assert run_kind({"model_type": "minilm", "calibrated_from": {"source": "minilm"}}) == "MiniLM zero-shot, calibrated copy"
    assert run_kind({"model_type": "minilm"}) == "MiniLM (fine-tune)"


@pytest.mark.parametrize("record,message", [
    ("runs/x", "calibrated_from must be a mapping"),
    ({"source": ""}, "calibrated_from.source must name"),
    ({"source": "minilm", "sha256": "abc"}, "calibrated_from.sha256 must be 64 hex digits"),
    ({"source": "relative/folder", "sha256": "0" * 64}, "must be 'minilm', 'tfidf' or an absolute path"),
    ({"source": "minilm", "sha256": "0" * 64}, "another version of"),
])
def test_a_hand_made_calibration_record_is_checked_before_anything_loads(tmp_path, record, message):
    folder = tmp_path / "copy"
    folder.mkdir()
    config = {"format": "siamese-lab-model", "format_version": 1, "model_type": "minilm", "calibrated_from": record,
              "thresholds": {"accuracy": 0.5}}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=message):
        load_model(folder)


def test_a_copy_pointing_at_another_copy_is_refused(capsys, tmp_path, lstm_folder, sample_halves):
    (calibration, _), _ = sample_halves
    first = tmp_path / "first"
    assert run_cli(capsys, "calibrate", "--model", lstm_folder, "--data", calibration, "--out", first)[0] == 0
    second = tmp_path / "second"
    config = json.loads((first / "config.json").read_text())
    config["calibrated_from"] = {"source": str(first), "sha256": "0" * 64}  # by hand: calibrate points at the original
    second.mkdir()
    (second / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="itself a calibrated copy"):
        load_model(second)
