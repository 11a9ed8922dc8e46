"""``python -m core suggest``: a hand-made corpus whose nearest pairs and most uncertain pair are known."""
from __future__ import annotations

import csv
import io
import json
import math
import os

import pytest
import torch

from core.cli import suggest as suggest_command
from core.cli.main import main
from core.saving.label_store import LabelStore
from core.saving.safe_csv import is_formula

# Three pairs of close questions on the unit circle, 10, 20 and 30 degrees apart, far from the others; with
# one neighbour each the candidates are exactly these three pairs.
QUESTIONS = ["How do I learn Python?", "What is the best way to learn Python?", "How tall is Everest?",
             "What is the height of Mount Everest?", "=Why is the sky blue?", "What makes the sky look blue?"]
ANGLES = [0, 10, 90, 110, 200, 230]
CONFIG = {"model_type": "lstm", "thresholds": {"accuracy": 0.8}}


class CircleModel:
    def encode(self, texts, tower=0, batch_size=256, progress=None):
        angles = [math.radians(ANGLES[QUESTIONS.index(text)]) for text in texts]
        return torch.tensor([[math.cos(a), math.sin(a)] for a in angles], dtype=torch.float32)


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    monkeypatch.setattr(suggest_command, "load_backend", lambda args: (CircleModel(), CONFIG))
    path = tmp_path / "questions.txt"
    path.write_text("\n".join(QUESTIONS + ["how do I learn  python?", ""]) + "\n", encoding="utf-8")
    return path


def run(capsys, *argv) -> tuple[int, dict | None, str]:
    code = main(["suggest", "--model", "fake", *map(str, argv)])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else None), captured.err


def read(path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8"), newline="")))


def test_the_most_uncertain_pair_under_the_models_threshold(corpus, tmp_path, capsys):
    out = tmp_path / "next.csv"
    code, summary, err = run(capsys, "--questions", corpus, "--n", 1, "-k", 1, "--out", out)
    assert code == 0, err
    # similarities cos 10 = .985, cos 20 = .940, cos 30 = .866: the last is closest to the threshold 0.8
    rows = read(out)
    assert rows[0] == ["question1", "question2", "similarity", "reason"]
    assert rows[1][:2] == ["'=Why is the sky blue?", "What makes the sky look blue?"]  # formula safe
    assert float(rows[1][2]) == pytest.approx(math.cos(math.radians(30)), abs=1e-6) and rows[1][3] == "uncertain"
    assert len(rows) == 2
    assert summary["questions"] == 6 and summary["candidates"] == 3 and summary["suggested"] == 1
    assert summary["threshold"] == 0.8 and summary["threshold_source"] == "best accuracy on the model's own validation split"
    assert "threshold: 0.8 (best accuracy" in err


def labels_in(kind: str, tmp_path):
    """The Label page's database, or the pairs CSV it downloads (its formula cell quoted), holding one label."""
    store = LabelStore(tmp_path / "labels.sqlite3")
    store.add("what makes the sky look blue?", "=why is the sky blue?", 1)  # other order and case
    if kind == "database":
        return store.path
    exported = tmp_path / "labels-download.csv"
    exported.write_bytes(store.export_csv())
    assert b"'=why is the sky blue?" in exported.read_bytes()
    return exported


@pytest.mark.parametrize("kind", ["database", "csv"])
def test_labelled_pairs_are_not_suggested_and_the_threshold_can_be_given(corpus, tmp_path, capsys, kind):
    labels = labels_in(kind, tmp_path)
    out = tmp_path / "next.csv"
    code, summary, _ = run(capsys, "--questions", corpus, "--labels", labels, "--n", 3, "-k", 1, "--out", out,
                           "--threshold", 0.95)
    assert code == 0
    # left: .985 (0.035 from 0.95) and .940 (0.010): the Everest pair first
    assert [row[:2] for row in read(out)[1:]] == [QUESTIONS[2:4], QUESTIONS[0:2]]
    assert summary["labelled"] == 1 and summary["suggested"] == 2 and summary["threshold_source"] == "given with --threshold"


def test_random_strategy_and_seed(corpus, tmp_path, capsys):
    outputs = []
    for seed in (1, 1, 2, 3, 4):
        out = tmp_path / f"r{len(outputs)}.csv"
        code, summary, _ = run(capsys, "--questions", corpus, "--n", 3, "-k", 5, "--strategy", "random", "--seed",
                               seed, "--out", out)
        assert code == 0 and summary["random"] == summary["suggested"] > 0
        rows = read(out)[1:]
        texts = [row[0] for row in rows] + [row[1] for row in rows]
        assert len(texts) == len(set(texts)) and {row[3] for row in rows} == {"random"}
        outputs.append(rows)
    assert outputs[0] == outputs[1] and any(rows != outputs[0] for rows in outputs[2:])


def test_out_is_never_overwritten_without_the_flag(corpus, tmp_path, capsys):
    out = tmp_path / "next.csv"
    out.write_text("mine", encoding="utf-8")
    code, _, err = run(capsys, "--questions", corpus, "--n", 1, "--out", out)
    assert code == 2 and "exists" in err and out.read_text() == "mine"
    assert run(capsys, "--questions", corpus, "--n", 1, "--out", out, "--overwrite")[0] == 0
    assert read(out)[0][0] == "question1"


@pytest.mark.parametrize("content, message", [
    ("", "empty"),
    ("Just one question?\njust ONE question?\n", "one distinct question"),
])
def test_a_corpus_without_two_questions_is_one_line(corpus, tmp_path, capsys, content, message):
    source = tmp_path / "small.txt"
    source.write_text(content, encoding="utf-8")
    code, _, err = run(capsys, "--questions", source, "--n", 1, "--out", tmp_path / "o.csv")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and message in lines[0]
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("content", [b"name,age\nann,3\n", b"\x00\x01binary\x02" * 10])
def test_labels_that_are_not_a_pairs_file_are_one_line(corpus, tmp_path, capsys, content):
    labels = tmp_path / "labels.csv"
    labels.write_bytes(content)
    code, _, err = run(capsys, "--questions", corpus, "--labels", labels, "--n", 1, "--out", tmp_path / "o.csv")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and str(labels) in lines[0]
    assert not (tmp_path / "o.csv").exists()


def test_a_labels_pipe_is_one_line_never_waited_on(corpus, tmp_path, capsys):
    fifo = tmp_path / "labels.csv"
    os.mkfifo(fifo)
    code, _, err = run(capsys, "--questions", corpus, "--labels", fifo, "--n", 1, "--out", tmp_path / "o.csv")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "not a regular file" in lines[0]


def test_a_folder_that_is_not_a_model_is_one_line(tmp_path, capsys):
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello", encoding="utf-8")
    questions = tmp_path / "q.txt"
    questions.write_text("a?\nb?\n", encoding="utf-8")
    code = main(["suggest", "--model", str(folder), "--questions", str(questions), "--n", "1",
                 "--out", str(tmp_path / "o.csv")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and "not-a-model" in lines[0]


def test_a_real_model_on_the_bundled_sample(tiny_models, tmp_path, capsys):
    from conftest import SAMPLE

    from core.data import load_questions
    from core.inference.candidates import candidate_pairs, choose_pairs, embed_corpus
    from core.models import load_model

    out = tmp_path / "next.csv"
    code = main(["suggest", "--model", str(tiny_models["lstm"]), "--questions", str(SAMPLE), "--n", "20",
                 "--out", str(out)])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["suggested"] == 20 and summary["uncertain"] == 18 and summary["random"] == 2
    model, _ = load_model(tiny_models["lstm"])
    expected = choose_pairs(candidate_pairs(embed_corpus(model, load_questions(SAMPLE)[0])), 20, summary["threshold"])
    rows = read(out)[1:]
    assert [row[:2] for row in rows] == [[a if not is_formula(a) else "'" + a, b if not is_formula(b) else "'" + b]
                                         for a, b in expected[["question1", "question2"]].values]


def test_a_label_database_is_asked_by_queries_never_read_whole(corpus, tmp_path, capsys, monkeypatch):
    labels = labels_in("database", tmp_path)
    store = LabelStore(labels)
    for i in range(30):  # labels of pairs outside the corpus, both classes: enough to calibrate on if they counted
        store.add(f"outside question {i}?", f"its pair {i}?", i % 2)
    store.add(QUESTIONS[2], QUESTIONS[3], 0)

    def whole_table(self, *args):
        raise AssertionError("suggest read every label")

    monkeypatch.setattr(LabelStore, "pairs", whole_table)
    monkeypatch.setattr(suggest_command, "load_backend", lambda args: (CircleModel(), {"model_type": "lstm"}))
    out = tmp_path / "next.csv"
    code, summary, err = run(capsys, "--questions", corpus, "--labels", labels, "--n", 3, "-k", 1, "--out", out)
    assert code == 0, err
    assert [row[:2] for row in read(out)[1:]] == [QUESTIONS[0:2]]  # the two labelled corpus pairs left out
    assert summary["labelled"] == 32 and summary["candidates"] == 1
    # Two labelled corpus pairs are too few to calibrate on: the plain default, as before, not the outside labels.
    assert summary["threshold_source"] == "a plain default (the model has no calibrated threshold)"
