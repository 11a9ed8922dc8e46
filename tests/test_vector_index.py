"""core.inference.search's index kinds (flat, HNSW and the compressed IVF-PQ index, kept on disk by stamp) and the
``--index`` option of ``python -m core dedup`` / ``search``."""
from __future__ import annotations

import json
import shutil

import faiss
import numpy as np
import pandas as pd
import pytest

from core.cli.main import main
from core.inference.dedup_graph import NeighbourGraph
from core.inference.search import INDEX_FILE, INDEX_KINDS, SavedIndex, new_index, pq_codes, training_sample
from lab.session import SAMPLE_PATH


def unit(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def separated(groups: int = 40, members: int = 40, dim: int = 64, spread: float = 1.0, seed: int = 0):
    """(centres (G, d), vectors (G * (members + 1), d)): each group is its centre (row g * (members + 1))
    and ``members`` unit vectors around it at cosine about 1 / sqrt(1 + spread²); centres are near orthogonal."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.normal(size=(groups, dim)))
    rows = [np.vstack([c, unit(c + spread * rng.normal(size=(members, dim)) / np.sqrt(dim))]) for c in centres]
    return centres, np.vstack(rows)


def serialised_bytes(index: faiss.Index) -> int:
    """What ``index`` holds in memory, within its headers: its serialised size."""
    return int(faiss.serialize_index(index).size)


def build(kind: str, vectors: np.ndarray, seed: int = 0) -> faiss.Index:
    sample = training_sample(vectors, seed) if kind == "ivfpq" else None
    index = new_index(kind, vectors.shape[1], len(vectors), sample, seed)
    for shard in np.array_split(vectors, 3):  # shard by shard
        index.add(shard)
    return index


def test_the_automatic_kind_is_flat_then_hnsw_and_pq_codes_divide_the_width():
    assert INDEX_KINDS == ("flat", "hnsw", "ivfpq")
    assert pq_codes(384) == 96 and pq_codes(32) == 8 and pq_codes(10) == 2 and pq_codes(7) == 1


@pytest.mark.parametrize("kind", INDEX_KINDS)
def test_each_kind_finds_the_exact_nearest_neighbour_on_separated_clusters(kind):
    centres, vectors = separated()
    index = build(kind, vectors)
    assert index.ntotal == len(vectors)
    scores, ids = index.search(centres, 5)
    assert scores.shape == ids.shape == (len(centres), 5)
    assert (ids[:, 0] == np.arange(len(centres)) * 41).all()  # each centre is its own nearest
    found = ids >= 0  # an IVF search sees only the cells it probes: it may find fewer than 5
    assert ((ids // 41 == np.arange(len(centres))[:, None]) | ~found).all()  # the others are its group's
    assert found.all() or kind == "ivfpq"
    if kind != "ivfpq":
        np.testing.assert_allclose(scores[:, 0], 1, atol=1e-5)


def test_ivfpq_stores_a_vector_in_at_least_8_times_less_than_float32():
    rng = np.random.default_rng(1)
    vectors = unit(rng.normal(size=(4000, 128)))
    flat, ivfpq = build("flat", vectors), build("ivfpq", vectors)
    empty = new_index("ivfpq", 128, 4000, training_sample(vectors))  # trained quantisers, no vector
    per_vector = (serialised_bytes(ivfpq) - serialised_bytes(empty)) / 4000
    assert serialised_bytes(flat) >= 4000 * 128 * 4
    assert per_vector <= 128 * 4 / 8  # 24 code bytes (32 codes of 6 bits for 4,000 vectors) and an 8-byte id
    assert ivfpq.nprobe >= 8 and ivfpq.nlist == 4000 // 39


@pytest.mark.parametrize("kind", INDEX_KINDS)
def test_save_and_load_give_the_same_answers_and_a_stale_stamp_gives_none(tmp_path, kind):
    centres, vectors = separated(groups=10, members=30, seed=2)
    index = build(kind, vectors)
    saved = SavedIndex(tmp_path, "m1", "c1", len(vectors))
    assert saved.load_or_build(kind, {}, lambda: index) is index and not saved.reused
    loaded = saved.load_or_build(kind, {}, lambda: None)
    assert saved.reused and type(loaded) is type(index) and loaded.ntotal == len(vectors)
    for got, want in zip(loaded.search(centres, 7), index.search(centres, 7)):
        np.testing.assert_array_equal(got, want)
    for other in (SavedIndex(tmp_path, "m1", "c2", len(vectors)), SavedIndex(tmp_path, "m1", "c1", 7)):
        other.load_or_build(kind, {}, lambda: index)
        assert not other.reused
    saved.load_or_build(kind, {"nlist": 1}, lambda: index)
    assert not saved.reused


@pytest.mark.parametrize("seed", [0, 1])
def test_the_graph_on_ivfpq_gives_the_flat_graphs_clusters(seed):
    _, vectors = separated(groups=30, members=12, spread=0.4, seed=seed)  # member to member: cosine ~0.86
    exact = NeighbourGraph(vectors, k=20, index_kind="flat")
    compressed = NeighbourGraph(vectors, k=20, index_kind="ivfpq")
    assert exact.kind == "flat" and compressed.kind == "ivfpq"
    for threshold in (0.75, 0.85):
        want, got = exact.cluster(threshold), compressed.cluster(threshold)
        assert [(c.representative, c.members.tolist()) for c in got] == \
            [(c.representative, c.members.tolist()) for c in want]
        for a, b in zip(got, want):  # re-scored exactly: the same similarities, not PQ estimates
            np.testing.assert_allclose(a.similarities, b.similarities, atol=1e-5)


GROUPS = [["How do I learn Python quickly?", "What is the fastest way to learn Python?",
           "How can I learn Python fast?"],
          ["How do I lose weight?", "What is the best way to lose weight?", "How can I lose weight fast?"],
          ["What is the capital of France?", "Which city is the capital of France?"]]
LONERS = ["Why is the sky blue?", "How do airplanes fly?", "What do cats eat?", "Who wrote Hamlet?"]


def test_cli_dedup_with_ivfpq_writes_the_flat_clusters(tmp_path, capsys):
    questions = tmp_path / "questions.txt"
    questions.write_text("\n".join([q for group in GROUPS for q in group] + LONERS) + "\n", encoding="utf-8")
    tables = {}
    for kind in ("flat", "ivfpq"):
        out = tmp_path / f"{kind}.csv"
        assert main(["dedup", "--model", "minilm", "--questions", str(questions), "--out", str(out),
                     "--threshold", "0.75", "--index", kind]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["search"] == ("exact" if kind == "flat" else "ivfpq (approximate)")
        tables[kind] = pd.read_csv(out, keep_default_na=False)
    clusters = tables["flat"].groupby("cluster_id")["question"].apply(sorted).tolist()
    assert clusters == [sorted(group) for group in GROUPS]  # the clear groups, and nothing else
    pd.testing.assert_frame_equal(tables["ivfpq"], tables["flat"], atol=1e-5)


def test_cli_search_with_an_index_kind_saves_and_reuses_it(tiny_models, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SIAMESE_LAB_CACHE", str(tmp_path / "lab-cache"))
    model = shutil.copytree(tiny_models["lstm"], tmp_path / "lstm")
    before = sorted(path.name for path in model.iterdir())
    runs, saved = [], []
    for kind in ("flat", "ivfpq", "ivfpq"):  # the second ivfpq run reads the saved index
        assert main(["search", "--model", str(model), "--corpus", str(SAMPLE_PATH), "--index", kind, "-k", "3",
                     "How do I learn Python?"]) == 0
        runs.append([json.loads(line) for line in capsys.readouterr().out.splitlines()])
        assert [r["rank"] for r in runs[-1]] == [1, 2, 3]
        cache = tmp_path / "lab-cache" / "search"  # the lab's cache, never the model folder
        saved.append({path.name: path.stat().st_mtime_ns for path in cache.glob(f"search-{kind}-*/{INDEX_FILE}")})
    assert len(saved[0]) == len(saved[1]) == 1 and saved[2] == saved[1]  # not written again
    assert runs[2] == runs[1] and sorted(path.name for path in model.iterdir()) == before
