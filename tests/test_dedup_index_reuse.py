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
from core.inference.dedup_index import SavedGraphIndex
from core.inference.vector_index import INDEX_FILE, META_FILE
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
def test_a_saved_index_of_other_vectors_is_built_again_never_used(tmp_path, kind):
    vectors = groups()
    store = SavedGraphIndex(tmp_path, model="m" * 64, corpus="c" * 40, count=len(vectors))
    expected = [c.members.tolist() for c in NeighbourGraph(vectors, k=8, index_kind=kind).cluster(0.9)]
    assert len(expected) >= 20  # of the 30 groups (ivfpq misses a few at k=8 on 120 vectors)
    NeighbourGraph(vectors, k=8, index_kind=kind, index_store=store)
    assert store.reused is False and (store.folder(kind) / INDEX_FILE).is_file()
    graph = NeighbourGraph(vectors, k=8, index_kind=kind, index_store=store)
    assert store.reused is True and [c.members.tolist() for c in graph.cluster(0.9)] == expected
    # Same stamp (model and corpus names), other vectors: the check against the fresh vectors refuses it.
    moved = groups(seed=1)
    graph = NeighbourGraph(moved, k=8, index_kind=kind, index_store=store)
    assert store.reused is False
    fresh = NeighbourGraph(moved, k=8, index_kind=kind).cluster(0.9)
    assert [c.members.tolist() for c in graph.cluster(0.9)] == [c.members.tolist() for c in fresh]


def forge(folder, data: bytes) -> None:
    """Write ``data`` as the index and its sha256 into meta.json: a wrong index whose hash agrees."""
    import hashlib

    (folder / INDEX_FILE).write_bytes(data)
    meta = json.loads((folder / META_FILE).read_text())
    meta["index_sha256"] = hashlib.sha256(data).hexdigest()
    (folder / META_FILE).write_text(json.dumps(meta, sort_keys=True))


def test_an_index_changed_since_the_lab_wrote_it_is_built_again(tmp_path):
    import faiss

    vectors = groups()
    store = SavedGraphIndex(tmp_path, model="m" * 64, corpus="c" * 40, count=len(vectors))
    expected = [c.members.tolist() for c in NeighbourGraph(vectors, k=8, index_kind="hnsw").cluster(0.9)]
    NeighbourGraph(vectors, k=8, index_kind="hnsw", index_store=store)
    folder = store.folder("hnsw")
    assert store.reused is False
    index = faiss.deserialize_index(np.frombuffer((folder / INDEX_FILE).read_bytes(), dtype=np.uint8))
    links = faiss.vector_to_array(index.hnsw.neighbors)
    links[:] = -1  # every link cut (a torn or stale file); the vectors kept
    faiss.copy_array_to_vector(links, index.hnsw.neighbors)
    (folder / INDEX_FILE).write_bytes(faiss.serialize_index(index).tobytes())
    graph = NeighbourGraph(vectors, k=8, index_kind="hnsw", index_store=store)
    assert store.reused is False  # its sha256 no longer matches: built again, and saved over
    assert [c.members.tolist() for c in graph.cluster(0.9)] == expected
    NeighbourGraph(vectors, k=8, index_kind="hnsw", index_store=store)
    assert store.reused is True  # the lab's own index, written again, is used again
