"""core.inference.ray_engine and ``--engine ray``: the same vectors and clusters as the local path, a killed
encoder worker retried without a question lost or doubled, and Ray never imported unless asked for.

One local Ray with 2 CPUs serves the whole module (started once, about 15 s); skipped where Ray is not installed.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.cli.main import main
from core.data import load_questions
from core.inference.dedup import encode_corpus
from core.inference.dedup_graph import NeighbourGraph
from core.models import load_model
from lab.session import SAMPLE_PATH

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")

ROOT = Path(__file__).resolve().parents[1]
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


def shard_ids(shards) -> np.ndarray:
    from core.inference.ray_engine import shard_file

    return np.concatenate([np.load(shard_file(stem, "ids")) for stem in shards])


def test_embed_on_ray_writes_the_local_vectors_in_the_local_order(ray_cluster, tiny_models, tmp_path, capsys):
    pairs = tmp_path / "pairs.csv"
    pd.read_csv(SAMPLE_PATH).head(150).to_csv(pairs, index=False)
    common = ["embed", "--model", tiny_models["lstm"], "--data", pairs]
    local = run(capsys, *common, "--out", tmp_path / "local" / "vectors")
    on_ray = run(capsys, *common, "--out", tmp_path / "ray" / "vectors", "--engine", "ray", "--workers", 2)
    assert (local["engine"], on_ray["engine"]) == ("local", "ray") and on_ray["n"] == local["n"] > 150
    np.testing.assert_allclose(np.load(on_ray["vectors"]), np.load(local["vectors"]), atol=1e-5)
    assert Path(on_ray["questions"]).read_text() == Path(local["questions"]).read_text()
    assert sorted(p.name for p in (tmp_path / "ray").iterdir()) == ["vectors.npy", "vectors.questions.jsonl"]


def test_dedup_on_ray_gives_the_local_clusters(ray_cluster, tiny_models, texts, tmp_path, capsys):
    questions = tmp_path / "questions.txt"
    questions.write_text("\n".join(texts) + "\n", encoding="utf-8")
    common = ["dedup", "--model", tiny_models["lstm"], "--questions", questions, "--threshold", 0.97, "-k", 5]
    local = run(capsys, *common, "--out", tmp_path / "local.csv")
    on_ray = run(capsys, *common, "--out", tmp_path / "ray.csv", "--engine", "ray")
    assert (local["engine"], on_ray["engine"], on_ray["workers"]) == ("local", "ray", 2)
    assert 5 <= on_ray["clusters"] == local["clusters"] and on_ray["clustered_questions"] < QUESTIONS / 2
    # -k 5 makes rows whose 5 neighbours are all above the threshold: searched deeper, here, after Ray's search
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "ray.csv"), pd.read_csv(tmp_path / "local.csv"))
    assert not list(tmp_path.glob(".ray-shards-*"))  # the shards' temporary folder is gone


def test_a_two_tower_model_encodes_and_clusters_on_ray_as_locally(ray_cluster, tiny_models, texts, tmp_path):
    from core.inference.ray_engine import gather_shards, ray_encode, ray_graph

    model, _ = load_model(tiny_models["dual-transformer"])
    vectors, queries = encode_corpus(model, texts)
    shards = ray_encode(str(tiny_models["dual-transformer"]), texts, tmp_path, batch_size=64, workers=2)
    assert len(shards) == -(-QUESTIONS // 64) and np.array_equal(shard_ids(shards), np.arange(QUESTIONS))
    got_vectors, got_queries = gather_shards(shards, QUESTIONS)
    np.testing.assert_allclose(got_vectors, vectors, atol=1e-5)
    np.testing.assert_allclose(got_queries, queries, atol=1e-5)
    threshold = float(np.quantile(vectors @ queries.T, 0.99))
    local = NeighbourGraph(vectors, k=10, queries=queries).cluster(threshold)
    on_ray = ray_graph(got_vectors, workers=2, k=10, queries=got_queries).cluster(threshold)
    assert local and [c.members.tolist() for c in on_ray] == [c.members.tolist() for c in local]


def test_a_killed_encoder_worker_is_retried_and_every_question_written_once(ray_cluster, tiny_models, texts,
                                                                             tmp_path):
    from core.inference.ray_engine import ShardEncoder, gather_shards, ray_encode

    killed = tmp_path / "killed"

    class DiesOnItsFirstBatch(ShardEncoder):  # defined here, so Ray ships the class itself to the workers
        def __call__(self, batch):
            if not killed.exists():  # the first batch of the run, in whichever worker: the process dies
                killed.write_text(str(os.getpid()))
                os._exit(1)
            return super().__call__(batch)

    shards = ray_encode(str(tiny_models["lstm"]), texts, tmp_path / "shards", batch_size=32, workers=2,
                        encoder=DiesOnItsFirstBatch)
    assert killed.exists()
    assert np.array_equal(np.sort(shard_ids(shards)), np.arange(QUESTIONS))  # each question once, none lost
    assert not [p for p in (tmp_path / "shards").iterdir() if p.name.endswith(".tmp")]
    model, _ = load_model(tiny_models["lstm"])
    vectors, queries = gather_shards(shards, QUESTIONS)
    assert queries is None
    np.testing.assert_allclose(vectors, encode_corpus(model, texts)[0], atol=1e-5)


def test_ray_neighbours_returns_every_edge_above_the_threshold_once_per_direction(ray_cluster, tmp_path):
    from core.inference.ray_engine import ray_neighbours

    # cosines: a.b = 0.8, b.c = 0.6, a.c = 0, a.d = -1, b.d = -0.8, c.d = 0
    vectors = np.array([[1, 0], [0.8, 0.6], [0, 1], [-1, 0]], dtype=np.float32)
    np.save(tmp_path / "second.npy", vectors[2:])
    rows, ids, scores = ray_neighbours(vectors, [vectors[:2], tmp_path / "second.npy"], k=4, threshold=0.5)
    edges = sorted(zip(rows.tolist(), ids.tolist(), np.round(scores.astype(np.float64), 6).tolist()))
    assert edges == [(0, 1, 0.8), (1, 0, 0.8), (1, 2, 0.6), (2, 1, 0.6)]
    scores, ids = ray_neighbours(vectors, [vectors[:3], vectors[3:]], k=2)
    assert ids.tolist() == [[0, 1], [1, 0], [2, 1], [3, 2]]


def test_the_app_page_and_the_local_commands_never_import_ray(tiny_models, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(tiny_models["lstm"], runs / tiny_models["lstm"].name)
    script = f"""
import sys, json
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'tests')!r}]
from core.cli.main import main
import core.inference.ray_engine
code = main(['dedup', '--model', {str(tiny_models['lstm'])!r}, '--questions', {str(SAMPLE_PATH)!r},
             '--out', {str(tmp_path / 'c.csv')!r}])
from app_support import open_page
from lab.navigation import DEDUPLICATE
at = open_page(DEDUPLICATE.path, timeout=120)
print(json.dumps([code, 'ray' in sys.modules, [c.value for c in at.caption], [e.value for e in at.exception]]))
"""
    env = {"PATH": "/usr/bin:/bin", "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1",
           "SIAMESE_LAB_RUNS": str(runs), "SIAMESE_LAB_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    code, imported, captions, errors = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 0 and not errors and not imported
    [engine] = [c for c in captions if c.startswith("Engine: local")]
    assert "python -m core dedup --engine ray" in engine  # Ray is installed here: the page offers it
