"""Scoring a whole file of pairs: every input column kept, similarity equal to score_pairs, the verdict at
the threshold, metrics equal to evaluate, streamed in chunks, formula safe, and bad input in one line."""
import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.cli.main import main
from core.inference.metrics import evaluate_scores
from core.inference.scoring import ScoreSteps, score_file
from core.models import load_model

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "assets" / "sample_pairs.csv"


@pytest.fixture(scope="module")
def lstm(tiny_lstm):
    return tiny_lstm, *load_model(tiny_lstm)


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("chunk_rows", [7, 100_000])
def test_scores_equal_score_pairs_and_metrics_equal_evaluate(lstm, tmp_path, sample_pairs, chunk_rows):
    _, model, config = lstm
    pairs, _ = sample_pairs
    threshold = 0.37
    seen = []
    report = score_file(model, SAMPLE, tmp_path / "out.csv", threshold, chunk_rows=chunk_rows,
                        steps=ScoreSteps(writing=lambda done, _: seen.append(done)))
    out = pd.read_csv(tmp_path / "out.csv", keep_default_na=False)
    source = pd.read_csv(SAMPLE, keep_default_na=False)
    assert list(out.columns) == [*source.columns, "similarity", "predicted_duplicate"]
    assert len(out) == len(source) == report.rows == report.scored == report.labelled == 479
    expected = model.score_pairs(pairs["question1"].tolist(), pairs["question2"].tolist())
    np.testing.assert_allclose(out["similarity"], expected, atol=1e-6)
    assert (out["predicted_duplicate"] == (out["similarity"] > threshold).astype(int)).all()
    reference = evaluate_scores(pairs["is_duplicate"].to_numpy(), expected, threshold)
    for key in ("roc_auc", "accuracy", "f1", "tp", "fp", "tn", "fn"):
        assert report.metrics[key] == pytest.approx(reference[key], abs=1e-6)
    assert seen[-1] == 479 and len(seen) == -(-479 // chunk_rows)  # one progress call per chunk


def test_unlabelled_gzip_tsv_with_empty_and_formula_cells(lstm, tmp_path):
    _, model, _ = lstm
    path = tmp_path / "pairs.tsv.gz"
    rows = "q1\tq2\tnote\nHow old are you?\tWhat is your age?\t=HYPERLINK(1)\n\tWhy?\tx\n+1 trick?\t@me\ty\n"
    path.write_bytes(gzip.compress(rows.encode()))
    report = score_file(model, path, tmp_path / "out.csv", 0.5)
    assert (report.rows, report.scored, report.skipped_empty, report.metrics) == (3, 2, 1, {})
    text = (tmp_path / "out.csv").read_text()
    assert "'=HYPERLINK(1)" in text and "'+1 trick?" in text and "'@me" in text
    out = pd.read_csv(tmp_path / "out.csv", keep_default_na=False)
    assert out["similarity"].iloc[1] == "" and out["predicted_duplicate"].iloc[1] == ""


def test_the_cli_prints_metrics_and_refuses_to_clobber(capsys, lstm, tmp_path):
    folder, _, config = lstm
    out = tmp_path / "scored.csv"
    code, stdout, err = run_cli(capsys, "score", "--model", folder, "--pairs", SAMPLE, "--out", out)
    assert code == 0, err
    metrics = json.loads(stdout)
    assert metrics["n"] == 479 and metrics["threshold"] == pytest.approx(config["thresholds"]["accuracy"])
    assert "scored 479 of 479 pairs" in err
    before = out.read_bytes()
    code, _, err = run_cli(capsys, "score", "--model", folder, "--pairs", SAMPLE, "--out", out)
    assert code == 2 and err.strip() == f"error: --out {out} exists; choose a new file or add --overwrite"
    assert out.read_bytes() == before
    assert run_cli(capsys, "score", "--model", folder, "--pairs", SAMPLE, "--out", out, "--overwrite",
                   "--threshold", "0.9")[0] == 0


@pytest.mark.parametrize("content,message", [
    ("", "is empty"),
    ("a,b\n1,2\n", "missing column(s) for question1, question2; found columns: a, b"),
])
def test_bad_files_are_one_line_and_leave_no_output(capsys, lstm, tmp_path, content, message):
    folder, _, _ = lstm
    path = tmp_path / "bad.csv"
    path.write_text(content)
    code, out, err = run_cli(capsys, "score", "--model", folder, "--pairs", path, "--out", tmp_path / "o.csv")
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]
