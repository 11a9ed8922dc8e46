"""core.inference.ray_engine and ``--engine ray``: the same vectors and clusters as the local path, a killed
encoder worker retried without a question lost or doubled. That local work never imports Ray is checked
in test_inference_imports.

One local Ray with 2 CPUs serves the whole module (started once, about 15 s); skipped where Ray is not installed.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.cli.main import main
from core.data import load_questions
from core.inference.dedup_graph import NeighbourGraph
from core.inference.search import corpus_vectors
from core.models import load_model
from lab.session import SAMPLE_PATH

pytestmark = [pytest.mark.ray,
              pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")]

QUESTIONS = 300


@pytest.fixture(scope="module")
def ray_cluster():
    from core.inference.ray_engine import ray_session

    with ray_session(num_cpus=2):
        yield


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return load_questions(SAMPLE_PATH)[0][:QUESTIONS]


def run(capsys, *argv) -> dict:
    assert main([str(arg) for arg in argv]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_embed_on_ray_writes_the_local_vectors_in_the_local_order(ray_cluster, tiny_models, tmp_path, capsys):
    pairs = tmp_path / "pairs.csv"
    pd.read_csv(SAMPLE_PATH).head(150).to_csv(pairs, index=False)
    common = ["embed", "--model", tiny_models["lstm"], "--data", pairs]
    local = run(capsys, *common, "--out", tmp_path / "local" / "vectors")
    on_ray = run(capsys, *common, "--out", tmp_path / "ray" / "vectors", "--engine", "ray", "--workers", 2)
    assert (local["engine"], on_ray["engine"]) == ("local", "ray") and on_ray["n"] == local["n"] > 150
    np.testing.assert_allclose(np.load(on_ray["vectors"]), np.load(local["vectors"]), atol=1e-5)
    assert Path(on_ray["questions"]).read_text() == Path(local["questions"]).read_text()
    assert sorted(p.name for p in (tmp_path / "ray").iterdir()) == ["vectors.npy", "vectors.npy.sha256",
                                                                   "vectors.questions.jsonl"]


def test_dedup_on_ray_gives_the_local_clusters(ray_cluster, tiny_models, texts, tmp_path, capsys):
    questions = tmp_path / "questions.txt"
    questions.write_text("\n".join(texts) + "\n", encoding="utf-8")
    common = ["dedup", "--model", tiny_models["lstm"], "--questions", questions, "--threshold", 0.97, "-k", 5]
    local = run(capsys, *common, "--out", tmp_path / "local.csv")
    shutil.rmtree(local["vectors"]["folder"])  # the local run's cached vectors: without them Ray encodes the corpus
    on_ray = run(capsys, *common, "--out", tmp_path / "ray.csv", "--engine", "ray")
    assert (local["engine"], on_ray["engine"], on_ray["workers"]) == ("local", "ray", 2)
    # The same model and corpus: the Ray run finds the local run's index on disk and checks it against its vectors.
    assert (local["index"]["reused"], on_ray["index"]["reused"]) == (False, True)
    assert on_ray["read_by"] == "driver"  # the driver reads the file; Ray gets its questions
    assert 5 <= on_ray["clusters"] == local["clusters"] and on_ray["clustered_questions"] < QUESTIONS / 2
    # -k 5 makes rows whose 5 neighbours are all above the threshold: searched deeper, here, after Ray's search
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "ray.csv"), pd.read_csv(tmp_path / "local.csv"))
    again = run(capsys, *common, "--out", tmp_path / "again.csv", "--engine", "ray")  # the vectors Ray's run kept
    assert again["read_by"] == "cache" and again["vectors"]["reused"] and not on_ray["vectors"]["reused"]
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "again.csv"), pd.read_csv(tmp_path / "local.csv"))


def test_a_two_tower_model_encodes_and_clusters_on_ray_as_locally(ray_cluster, tiny_models, texts, tmp_path):
    from core.inference.ray_engine import RayGraph, ray_encode

    model, _ = load_model(tiny_models["dual-transformer"])
    vectors, queries = corpus_vectors(texts, model).for_clustering()
    folder = str(tiny_models["dual-transformer"])
    got_vectors, got_queries = ray_encode(lambda: load_model(folder, device="cpu")[0], texts, batch_size=64, workers=2)
    np.testing.assert_allclose(got_vectors, vectors, atol=1e-5)
    np.testing.assert_allclose(got_queries, queries, atol=1e-5)
    threshold = float(np.quantile(vectors @ queries.T, 0.99))
    local = NeighbourGraph(vectors, k=10, queries=queries).cluster(threshold)
    on_ray = RayGraph(got_vectors, workers=2, k=10, queries=got_queries).cluster(threshold)
    assert local and [c.members.tolist() for c in on_ray] == [c.members.tolist() for c in local]


def test_an_encoder_killed_mid_run_is_restarted_and_gives_an_undisturbed_runs_vectors(ray_cluster, tiny_models,
                                                                                      texts, tmp_path):
    import torch

    from core.inference.ray_engine import BatchEncoder, ray_encode

    killed = tmp_path / "killed"

    class DiesOnItsThirdBatch(BatchEncoder):  # defined here, so Ray ships the class itself to the workers
        def __init__(self, *args):
            super().__init__(*args)
            self.batches = 0

        def __call__(self, batch):
            self.batches += 1
            if self.batches == 3 and not killed.exists():  # mid-run, once: its restarted self goes on
                killed.write_text(str(os.getpid()))
                os._exit(1)
            return super().__call__(batch)

    # 300 questions in batches of 32 over 2 actors: one of them reaches its third batch.
    folder = str(tiny_models["lstm"])
    vectors, queries = ray_encode(lambda: load_model(folder, device="cpu")[0], texts, batch_size=32, workers=2,
                                  encoder=DiesOnItsThirdBatch)
    assert killed.exists() and queries is None
    # The undisturbed run: the same encoder on the same batches, here, on one thread as an actor has.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        encoder = BatchEncoder(lambda: load_model(tiny_models["lstm"], device="cpu")[0], True, 32)
        expected = np.concatenate([encoder({"id": np.arange(start, min(start + 32, QUESTIONS)),
                                            "question": np.array(texts[start : start + 32], dtype=object)})["vectors"]
                                   for start in range(0, QUESTIONS, 32)])
    finally:
        torch.set_num_threads(threads)
    assert np.array_equal(vectors, expected)
