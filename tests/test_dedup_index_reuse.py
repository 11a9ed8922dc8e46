"""``python -m core dedup`` keeps its neighbour index on disk (core.inference.dedup_index): a second run of the same
model on the same corpus loads it and writes the same clusters; another corpus or model builds its own; an index
whose vectors are not the corpus's, or that is not byte for byte what the lab wrote, is never used."""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from core.cli.main import main
from core.data import load_questions
from core.inference.dedup_graph import NeighbourGraph
from core.inference.search import SavedIndex
from core.inference.search import INDEX_FILE
from lab.session import SAMPLE_PATH

QUESTIONS = 240


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A plain-text corpus of the sample's first questions, with 12 of them repeated (so clusters exist)."""
    texts = load_questions(SAMPLE_PATH)[0][:QUESTIONS]
    path = tmp_path_factory.mktemp("corpus") / "questions.txt"
    path.write_text("\n".join(texts + texts[:12]) + "\n", encoding="utf-8")
    return path


def dedup(capsys, model, questions, out, *extra) -> dict:
    assert main(["dedup", "--model", str(model), "--questions", str(questions), "--out", str(out),
                 "--threshold", "0.95", *map(str, extra)]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def index_file(summary: dict):
    return f"{summary['index']['folder']}/{INDEX_FILE}"


@pytest.mark.parametrize("kind", [None, "hnsw", "ivfpq"])
def test_a_second_run_on_the_same_model_and_corpus_reuses_the_index(tiny_models, corpus, tmp_path, capsys, kind):
    extra = ["--index", kind] if kind else []
    first = dedup(capsys, tiny_models["lstm"], corpus, tmp_path / "first.csv", *extra)
    written = os.stat(index_file(first)).st_mtime_ns
    second = dedup(capsys, tiny_models["lstm"], corpus, tmp_path / "second.csv", *extra)
    assert first["index"]["kind"] == second["index"]["kind"] == (kind or "flat")
    assert (first["index"]["reused"], second["index"]["reused"]) == (False, True)
    assert second["index"]["folder"] == first["index"]["folder"]
    assert os.stat(index_file(second)).st_mtime_ns == written  # read, not written again
    assert first["clusters"] >= 12  # the 12 repeated questions at least
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "second.csv"), pd.read_csv(tmp_path / "first.csv"))


def test_another_corpus_or_model_builds_its_own_index(tiny_models, corpus, tmp_path, capsys):
    lstm, dual = tiny_models["lstm"], tiny_models["dual-transformer"]
    first = dedup(capsys, lstm, corpus, tmp_path / "first.csv")
    changed = tmp_path / "changed.txt"
    changed.write_text(corpus.read_text(encoding="utf-8") + "How do I bake bread at home?\n", encoding="utf-8")
    other_corpus = dedup(capsys, lstm, changed, tmp_path / "changed.csv")
    other_model = dedup(capsys, dual, corpus, tmp_path / "dual.csv")
    again = dedup(capsys, lstm, corpus, tmp_path / "again.csv")
    assert not other_corpus["index"]["reused"] and not other_model["index"]["reused"]
    assert len({first["index"]["folder"], other_corpus["index"]["folder"], other_model["index"]["folder"]}) == 3
    assert again["index"]["reused"]  # the others did not replace the first corpus's index
    assert other_corpus["questions"] == first["questions"] + 1
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "again.csv"), pd.read_csv(tmp_path / "first.csv"))


def groups(n_groups: int = 30, members: int = 4, dim: int = 32, seed: int = 0) -> np.ndarray:
    """Unit rows in tight groups: each group's members within cosine ~0.99 of its centre."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_groups, dim))
    rows = np.repeat(centres, members, axis=0) + 0.05 * rng.normal(size=(n_groups * members, dim))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("kind", ["flat", "ivfpq"])
def test_a_saved_index_gives_the_clusters_of_a_fresh_one_and_a_torn_one_is_built_again(tmp_path, kind):
    vectors = groups()
    store = SavedIndex(tmp_path, model="m" * 64, corpus="c" * 40, count=len(vectors))
    expected = [c.members.tolist() for c in NeighbourGraph(vectors, k=8, index_kind=kind).cluster(0.9)]
    assert len(expected) >= 20  # of the 30 groups (ivfpq misses a few at k=8 on 120 vectors)
    NeighbourGraph(vectors, k=8, index_kind=kind, index_store=store)
    assert store.reused is False and (store.folder(kind) / INDEX_FILE).is_file()
    graph = NeighbourGraph(vectors, k=8, index_kind=kind, index_store=store)
    assert store.reused is True and [c.members.tolist() for c in graph.cluster(0.9)] == expected
    data = (store.folder(kind) / INDEX_FILE).read_bytes()
    (store.folder(kind) / INDEX_FILE).write_bytes(data[: len(data) // 2])
    graph = NeighbourGraph(vectors, k=8, index_kind=kind, index_store=store)
    assert store.reused is False and [c.members.tolist() for c in graph.cluster(0.9)] == expected
    NeighbourGraph(vectors, k=8, index_kind=kind, index_store=store)
    assert store.reused is True  # written again whole, used again
