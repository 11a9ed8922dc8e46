"""``python -m core``: help, a train -> evaluate -> predict round trip per model and loss, and errors."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.cli.main import main
from core.models import ZERO_SHOT_THRESHOLD, load_model

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "assets" / "sample_pairs.csv"
SAMPLE_PAIRS = 479

TINY = {
    "lstm": ["--epochs", "1", "--model-options", json.dumps({"hidden_size": 16, "embedding_dim": 12})],
    "dual-transformer": ["--epochs", "1", "--model-options", json.dumps(
        {"d_model": 32, "num_heads": 2, "num_layers": 1, "ff_dim": 64, "projection_dim": 16})],
    # MiniLM steps cost seconds on a CPU: a handful of rows, and each loss trains for 3 steps at most.
    "minilm": ["--batch-size", "8", "--max-length", "24", "--max-steps", "3"],
}
# Rows used per (model, loss); None = the whole sample. 48 rows are the fewest whose validation split (by question,
# the rule for the sample) holds two pairs of each class, the least a run is measured on.
MINILM_ROWS = {"triplet": 48, "softmax": 48, "contrastive": 48, "cosent": 48, "multitask": 48}
EVALUATE_KEYS = {"roc_auc", "average_precision", "accuracy", "precision", "recall", "f1", "threshold", "n"}


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---- help ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command,defaults", [
    ("train", ["(default: the --init-model's, else lstm)", "(default: triplet)", "(default: 64)", "(default: auto)", "(default: 20.0)",
               "(default: squared_hinge)", "(default: runs)", "(default: 1)"]),
    ("evaluate", ["(default: auto)", "--threshold"]),
    ("predict", ["(default: auto)", "question1", "question2"]),
])
def test_help_exits_zero_and_shows_defaults(capsys, command, defaults):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python -m core {command}")
    for text in defaults:
        assert text in " ".join(out.split()), text


def test_top_level_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in ("train", "evaluate", "predict"):
        assert command in out


# ---- round trips -------------------------------------------------------------------------------------
# Every loss once through the CLI (on the cheap LSTM) and every model family once: a loss sees only embeddings,
# so its path through train, evaluate and predict is the same for every model (tests/test_losses*.py train each).
ROUND_TRIPS = [*(("lstm", loss) for loss in ("triplet", "contrastive", "softmax", "cosent", "multitask")),
               ("dual-transformer", "softmax"), ("minilm", "contrastive")]


@pytest.mark.slow
@pytest.mark.parametrize("model,loss", ROUND_TRIPS)
def test_train_evaluate_predict_round_trip(capsys, tmp_path, model, loss):
    rows = MINILM_ROWS[loss] if model == "minilm" else None
    row_args = ["--max-rows", rows] if rows else []
    n_pairs = rows or SAMPLE_PAIRS
    out_dir = tmp_path / "model"

    code, out, err = run_cli(capsys, "train", "--data", SAMPLE, "--model", model, "--loss", loss, "--device", "cpu",
                             "--out", out_dir, *row_args, *TINY[model])
    assert code == 0, err
    summary = json.loads(out)
    assert summary["status"] == "done"
    assert summary["folder"] == str(out_dir)
    config = json.loads((out_dir / "config.json").read_text())
    assert config["model_type"] == model and config["loss"]["name"] == loss
    assert config["data"]["pairs"] == n_pairs
    assert config["training"]["epochs_run"] == 1
    calibrated = config["thresholds"]["accuracy"]
    assert summary["thresholds"]["accuracy"] == calibrated

    code, out, err = run_cli(capsys, "evaluate", "--model", out_dir, "--data", SAMPLE, *row_args)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 1
    metrics = json.loads(lines[0])
    assert EVALUATE_KEYS <= set(metrics)
    assert metrics["threshold"] == calibrated
    assert metrics["n"] == n_pairs
    assert metrics["tp"] + metrics["fp"] + metrics["tn"] + metrics["fn"] == n_pairs
    assert metrics["accuracy"] == pytest.approx((metrics["tp"] + metrics["tn"]) / n_pairs)
    assert 0.0 <= metrics["roc_auc"] <= 1.0

    question1, question2 = "How old are you?", "What is your age?"
    code, out, err = run_cli(capsys, "predict", "--model", out_dir, question1, question2)
    assert code == 0, err
    verdict = json.loads(out)
    assert verdict["threshold"] == calibrated
    expected_verdict = "DUPLICATE" if verdict["similarity"] > calibrated else "NOT DUPLICATE"
    assert verdict["verdict"] == expected_verdict
    loaded, _ = load_model(out_dir)
    assert verdict["similarity"] == pytest.approx(float(loaded.score_pairs([question1], [question2])[0]), abs=1e-6)

    if model == "minilm":
        return  # the override below does not depend on the model; spare two MiniLM loads
    # an explicit threshold overrides the calibrated one, on both sides of the score
    for threshold, expected in ((verdict["similarity"] - 0.01, "DUPLICATE"), (verdict["similarity"] + 0.01, "NOT DUPLICATE")):
        code, out, _ = run_cli(capsys, "predict", "--model", out_dir, "--threshold", threshold, question1, question2)
        assert code == 0 and json.loads(out)["verdict"] == expected


def test_a_time_budget_ends_the_run_with_a_final_validation(capsys, tmp_path):
    out_dir = tmp_path / "model"
    # 0.00001 min = 0.6 ms: spent by the first step, so the run stops before the second
    code, out, err = run_cli(capsys, "train", "--data", SAMPLE, "--model", "lstm", "--device", "cpu", "--out", out_dir,
                             "--epochs", "3", "--max-minutes", "0.00001", *TINY["lstm"][2:])
    assert code == 0, err
    assert json.loads(out)["status"] == "done" and json.loads(out)["folder"] == str(out_dir)
    config = json.loads((out_dir / "config.json").read_text())
    assert config["train_config"]["max_minutes"] == 0.00001 and config["run"]["keep_unvalidated"] is False
    training = config["training"]
    assert training["message"].startswith("stopped by the time budget of 1e-05 min at step 1 of ")
    assert training["epochs_run"] == 1 and training["best_epoch"] == 1
    assert set(training["epochs"][0]["metrics"]) >= {"roc_auc", "accuracy"}  # the final validation
    assert f"done: {training['message']}" in err


def test_train_help_names_the_time_budget_and_keep_flags(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--max-minutes MAX_MINUTES time budget" in out and "--keep-unvalidated save a run cancelled" in out


def test_evaluate_zero_shot_minilm_uses_zero_shot_threshold(capsys):
    code, out, err = run_cli(capsys, "evaluate", "--model", "minilm", "--data", SAMPLE, "--max-rows", 40)
    assert code == 0, err
    metrics = json.loads(out)
    assert metrics["threshold"] == ZERO_SHOT_THRESHOLD
    assert metrics["n"] == 40
    assert metrics["roc_auc"] > 0.8  # the pretrained encoder already ranks paraphrases well


def test_predict_zero_shot_minilm(capsys):
    code, out, err = run_cli(capsys, "predict", "--model", "minilm", "How do I learn Python?", "How can I learn Python?")
    assert code == 0, err
    verdict = json.loads(out)
    assert verdict["threshold"] == ZERO_SHOT_THRESHOLD
    assert verdict["similarity"] > ZERO_SHOT_THRESHOLD and verdict["verdict"] == "DUPLICATE"


# ---- errors: exit 2 and one line ---------------------------------------------------------------------
def _assert_one_error_line(code, out, err, *fragments):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error:")
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in err and out == ""


def test_missing_data_file(capsys, tmp_path):
    _assert_one_error_line(*run_cli(capsys, "train", "--data", tmp_path / "nope.csv"), "file not found", "nope.csv")


def test_binary_data_file(capsys, tmp_path):
    binary = tmp_path / "pairs.csv"
    binary.write_bytes(bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8)))
    _assert_one_error_line(*run_cli(capsys, "train", "--data", binary), "binary")


def test_missing_model_folder(capsys, tmp_path):
    _assert_one_error_line(*run_cli(capsys, "evaluate", "--model", tmp_path / "no-model", "--data", SAMPLE),
                           "no model folder")
    _assert_one_error_line(*run_cli(capsys, "predict", "--model", tmp_path / "no-model", "a", "b"), "no model folder")


def test_unknown_option(capsys):
    _assert_one_error_line(*run_cli(capsys, "train", "--data", SAMPLE, "--frobnicate", "3"), "--frobnicate")


@pytest.mark.parametrize("command", [["train", "--data", SAMPLE], ["evaluate", "--model", "minilm", "--data", SAMPLE],
                                     ["predict", "--model", "minilm", "a", "b"]])
def test_bad_device_value(capsys, command):
    _assert_one_error_line(*run_cli(capsys, *command, "--device", "tpu"), "--device", "tpu")


@pytest.mark.parametrize("command", [["train", "--data", SAMPLE], ["predict", "--model", "minilm", "a", "b"]])
def test_cuda_without_cuda(capsys, command):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    _assert_one_error_line(*run_cli(capsys, *command, "--device", "cuda"), "CUDA")


@pytest.mark.parametrize("argv,fragment", [
    (["train", "--data", SAMPLE, "--model-options", "{not json"], "error:"),
    (["train", "--data", SAMPLE, "--loss", "cosine"], "cosine"),
    (["train", "--data", SAMPLE, "--epochs", "0"], "epochs"),
    (["train", "--data", SAMPLE, "--model", "gpt"], "gpt"),
    (["evaluate", "--data", SAMPLE], "--model"),
])
def test_other_bad_arguments(capsys, argv, fragment):
    _assert_one_error_line(*run_cli(capsys, *argv), fragment)


@pytest.mark.slow
def test_subprocess_error_has_exit_code_2_and_no_traceback(tmp_path):
    result = subprocess.run([sys.executable, "-m", "core", "train", "--data", str(tmp_path / "missing.tsv")],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"error: file not found: {tmp_path / 'missing.tsv'}"]
    assert result.stdout == ""


def test_train_names_the_gpu_preset_only_on_a_gpu_with_data_enough(capsys):
    from core.cli.train import _offer_gpu_preset

    _offer_gpu_preset(479, cuda=True)
    _offer_gpu_preset(323_000, cuda=False)
    assert capsys.readouterr().err == ""
    _offer_gpu_preset(323_000, cuda=True)
    assert capsys.readouterr().err.startswith("note: a CUDA GPU is here; --preset minilm-quora-gpu ")


def test_a_data_path_that_is_no_regular_file_is_said_as_it_is(tmp_path, capsys):
    folder = tmp_path / "pairs.csv"
    folder.mkdir()
    for command in (["evaluate", "--model", "minilm", "--data", folder], ["score", "--model", "minilm", "--pairs",
                    "/dev/zero", "--out", tmp_path / "out.csv"]):
        assert main([str(part) for part in command]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and ("is a directory, not a file" in err[0] or "is not a regular file" in err[0]), err


@pytest.mark.parametrize("where", ["itself", "a parent", "a device"])
def test_runs_that_is_a_file_is_said_so_before_training(tmp_path, capsys, monkeypatch, where):
    """It was "its folder cannot be created (File exists)", of a run folder the user never named."""
    import core.cli.train

    regular = tmp_path / "models"
    regular.write_text("a user's notes\n", encoding="utf-8")
    runs = {"itself": regular, "a parent": regular / "sub" / "runs", "a device": "/dev/null"}[where]
    monkeypatch.setattr(core.cli.train, "load_data", lambda *a, **k: pytest.fail("the data was read"))
    code, out, err = run_cli(capsys, "train", "--data", SAMPLE, "--runs", runs, "--device", "cpu", *TINY["lstm"])
    said = {"itself": f"--runs {runs} is a file", "a parent": f"--runs {runs}: {regular} is a file",
            "a device": "--runs /dev/null is a pipe, a device or a broken link"}[where]
    _assert_one_error_line(code, out, err, f"{said}, not a folder")
    assert "cannot be created" not in err and regular.read_text(encoding="utf-8") == "a user's notes\n"


def test_out_under_a_file_names_the_file_in_the_way(tmp_path, capsys, monkeypatch):
    """It was "its folder cannot be created (File exists)", which did not say which part was a file."""
    import core.cli.train

    regular = tmp_path / "notes"
    regular.write_text("a user's notes\n", encoding="utf-8")
    monkeypatch.setattr(core.cli.train, "load_data", lambda *a, **k: pytest.fail("the data was read"))
    out_path = regular / "sub" / "m1"
    code, out, err = run_cli(capsys, "train", "--data", SAMPLE, "--out", out_path, "--device", "cpu", *TINY["lstm"])
    _assert_one_error_line(code, out, err, f"--out {out_path}: {regular} is a file, not a folder")
    assert regular.read_text(encoding="utf-8") == "a user's notes\n"
