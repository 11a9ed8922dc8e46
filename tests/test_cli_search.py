"""`python -m core search` and `embed`: results, the on-disk index cache, chunked embedding files."""
import json
import shutil

import numpy as np
import pytest

from core.cli.main import main
from core.data import corpus_questions
from core.models import load_model
from lab.session import SAMPLE_PATH


@pytest.fixture
def lstm_folder(tiny_models, tmp_path):
    folder = tmp_path / "lstm"
    shutil.copytree(tiny_models["lstm"], folder)
    return folder


def run(capsys, *argv) -> list[str]:
    assert main(list(argv)) == 0
    return capsys.readouterr().out.strip().splitlines()


def test_search_finds_the_question_itself_and_caches_the_index(lstm_folder, capsys, sample_pairs, tmp_path,
                                                               monkeypatch):
    monkeypatch.setenv("SIAMESE_LAB_CACHE", str(tmp_path))
    inside = sorted(p.name for p in lstm_folder.iterdir())
    pairs, _ = sample_pairs
    question = pairs["question1"].iloc[7]
    lines = run(capsys, "search", "--model", str(lstm_folder), "--corpus", str(SAMPLE_PATH), question, "-k", "4")
    results = [json.loads(line) for line in lines]
    assert [r["rank"] for r in results] == [1, 2, 3, 4]
    assert results[0]["question"] == question and results[0]["score"] == pytest.approx(1.0, abs=1e-5)
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)

    [cache] = list((tmp_path / "search").glob("search-*"))  # the lab's cache: nothing written in the model folder
    assert sorted(p.name for p in lstm_folder.iterdir()) == inside
    stamp = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    again = run(capsys, "search", "--model", str(lstm_folder), "--corpus", str(SAMPLE_PATH), question, "-k", "4")
    assert again == lines
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == stamp  # reused, not rebuilt


def test_embed_writes_every_distinct_question_in_order(lstm_folder, capsys, sample_pairs, tmp_path):
    pairs, _ = sample_pairs
    [line] = run(capsys, "embed", "--model", str(lstm_folder), "--data", str(SAMPLE_PATH), "--out",
                 str(tmp_path / "out" / "vectors"))
    summary = json.loads(line)
    texts = corpus_questions(pairs)
    vectors = np.load(summary["vectors"])
    written = [json.loads(t) for t in open(summary["questions"], encoding="utf-8")]
    model, _ = load_model(lstm_folder)
    assert summary["n"] == len(texts) == vectors.shape[0] == len(written)
    assert vectors.shape == (len(texts), model.embedding_dim) and written == texts
    np.testing.assert_allclose(vectors[:50], model.encode(texts[:50], tower=1).numpy(), atol=1e-5)


def test_search_with_a_missing_model_is_a_one_line_error(capsys, tmp_path):
    assert main(["search", "--model", str(tmp_path / "nope"), "--corpus", str(SAMPLE_PATH), "q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")
