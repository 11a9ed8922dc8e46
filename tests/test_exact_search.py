"""``core.inference.search``'s device index: torch's exact neighbours equal FAISS's exact index and numpy's brute force, and
the neighbour graph and the candidate pairs built on them (as on a GPU, here forced onto the CPU) are the FAISS
path's."""
import faiss
import numpy as np
import pandas as pd
import pytest

from core.inference import search as exact_search
from core.inference.candidates import EmbeddedCorpus
from core.inference.dedup_graph import NeighbourGraph
from core.inference.search import DeviceIndex


def device_search(vectors, k: int, queries=None) -> tuple[np.ndarray, np.ndarray]:
    """What a ``DeviceIndex`` of ``vectors`` answers for ``queries`` (default: the vectors themselves)."""
    return DeviceIndex(vectors, "cpu").search(vectors if queries is None else queries, k)


def unit_rows(n: int, dim: int, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def clustered_rows(groups: int, per_group: int, dim: int = 16, spread: float = 0.15, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(groups, dim))
    rows = np.repeat(centres, per_group, axis=0) + spread * rng.normal(size=(groups * per_group, dim))
    rows = rows[rng.permutation(len(rows))].astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize("chunk_rows", [7, 4096])
def test_same_neighbours_and_scores_as_faiss_and_numpy(chunk_rows, monkeypatch):
    monkeypatch.setattr(exact_search, "CHUNK_ROWS", chunk_rows)
    vectors = unit_rows(400, 24)
    scores, ids = device_search(vectors, 10)
    index = faiss.IndexFlatIP(24)
    index.add(vectors)
    faiss_scores, faiss_ids = index.search(vectors, 10)
    assert (ids == faiss_ids).all()
    assert np.abs(scores - faiss_scores).max() < 1e-5
    brute = vectors @ vectors.T  # (N, N)
    numpy_ids = np.argsort(-brute, axis=1, kind="stable")[:, :10]
    assert (ids == numpy_ids).all()
    assert np.abs(scores - np.take_along_axis(brute, numpy_ids, 1)).max() < 1e-5


def test_queries_other_than_the_vectors_and_unnormalised_rows():
    vectors, queries = unit_rows(300, 16, seed=1), unit_rows(50, 16, seed=2)
    scores, ids = device_search(vectors * 3.0, 5, queries=queries * 0.5)  # rows are normalised first
    index = faiss.IndexFlatIP(16)
    index.add(vectors)
    faiss_scores, faiss_ids = index.search(queries, 5)
    assert (ids == faiss_ids).all() and np.abs(scores - faiss_scores).max() < 1e-5


def test_more_neighbours_than_rows_are_missing_as_faiss_says():
    vectors = unit_rows(6, 8)
    scores, ids = device_search(vectors, 9)
    assert (ids[:, 6:] == -1).all() and np.isneginf(scores[:, 6:]).all()
    assert (np.sort(ids[:, :6], axis=1) == np.arange(6)).all()


def test_equal_scores_come_by_lower_index():
    vectors = np.array([[1, 0], [0, 1], [0, 1], [0, 1]], dtype=np.float32)
    _, ids = device_search(vectors, 3, queries=np.array([[0, 1]], dtype=np.float32))
    assert ids.tolist() == [[1, 2, 3]]


def test_device_index_is_only_offered_on_a_cuda_device():
    assert exact_search.device_index(unit_rows(10, 4), "cpu") is None
    assert exact_search.device_index(unit_rows(10, 4), None) is None


@pytest.fixture
def searched_on_torch(monkeypatch):
    """``device_index`` as on a GPU the vectors fit on, but on the CPU: the path dedup and suggest take on CUDA."""
    monkeypatch.setattr(exact_search, "fits_on_device", lambda *args, **kwargs: True)


@pytest.mark.parametrize("threshold", [0.8, 0.9])
def test_graph_on_the_device_index_clusters_as_faiss(searched_on_torch, threshold):
    vectors = clustered_rows(60, 8)
    vectors = np.vstack([vectors, vectors[:5]])  # repeated rows too
    on_device = NeighbourGraph(vectors, k=4, device="cpu")
    assert isinstance(on_device.index, DeviceIndex) and on_device.kind == "flat"
    with_faiss = NeighbourGraph(vectors, k=4)
    assert not isinstance(with_faiss.index, DeviceIndex)
    mine, theirs = on_device.cluster(threshold), with_faiss.cluster(threshold)
    assert len(mine) == len(theirs) > 10
    for a, b in zip(mine, theirs):
        assert a.representative == b.representative and (a.members == b.members).all()
        assert np.abs(a.similarities - b.similarities).max() < 1e-5


def test_two_tower_rows_on_the_device_index(searched_on_torch):
    from core.inference.search import clustering_rows

    second, first = clustered_rows(30, 6, seed=3), clustered_rows(30, 6, seed=3) * 0.9 + unit_rows(180, 16) * 0.1
    vectors, queries = clustering_rows(second, first / np.linalg.norm(first, axis=1, keepdims=True))
    mine = NeighbourGraph(vectors, k=5, queries=queries, device="cpu").cluster(0.7)
    theirs = NeighbourGraph(vectors, k=5, queries=queries).cluster(0.7)
    assert [c.members.tolist() for c in mine] == [c.members.tolist() for c in theirs]


def test_candidate_neighbours_on_the_device_index_are_faiss_ones(searched_on_torch):
    vectors = unit_rows(200, 12, seed=4)
    questions = [f"question {i}" for i in range(200)]
    ids, scores = EmbeddedCorpus(questions, vectors, device="cpu").neighbours(6)
    faiss_ids, faiss_scores = EmbeddedCorpus(questions, vectors).neighbours(6)
    assert (ids == faiss_ids).all() and np.abs(scores - faiss_scores).max() < 1e-5


def test_dedup_command_on_the_device_index_writes_the_faiss_clusters(tiny_models, tmp_path, capsys, monkeypatch):
    import json
    from pathlib import Path

    from core.cli.main import main

    sample = Path(__file__).resolve().parents[1] / "assets" / "sample_pairs.csv"
    model, vectors = str(tiny_models["lstm"]), tmp_path / "vectors.npy"
    assert main(["embed", "--model", model, "--data", str(sample), "--out", str(vectors)]) == 0
    outputs, summaries = {}, {}
    for side in ("faiss", "torch"):
        if side == "torch":
            monkeypatch.setattr(exact_search, "fits_on_device", lambda *args, **kwargs: True)
        capsys.readouterr()
        out = tmp_path / f"{side}.csv"
        assert main(["dedup", "--model", model, "--questions", str(sample), "--vectors", str(vectors),
                     "--threshold", "0.9", "--out", str(out)]) == 0
        outputs[side], summaries[side] = pd.read_csv(out), json.loads(capsys.readouterr().out)
    assert summaries["torch"]["clusters"] == summaries["faiss"]["clusters"] > 0
    assert summaries["torch"]["index"]["device"] == "cpu" and "folder" not in summaries["torch"]["index"]
    mine, theirs = outputs["torch"], outputs["faiss"]
    columns = ["cluster_id", "cluster_size", "representative", "question"]
    assert mine[columns].equals(theirs[columns])
    assert (mine["similarity_to_representative"] - theirs["similarity_to_representative"]).abs().max() < 1e-5
