"""Inference on a CUDA GPU: half-precision encoding close to the CPU's float32, the exact neighbour search on the
GPU equal to the CPU's, and ``dedup --device cuda`` clustering as ``--device cpu`` does. Skipped without CUDA."""
import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from core.cli.main import main

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
ROOT = Path(__file__).resolve().parents[1]
SENTENCES = ["How do I learn Python quickly?", "What is the fastest way to learn Python?",
             "Why is the sky blue?", "What caused World War I?", "How old is the universe?",
             "Can dogs eat chocolate?", "what's the difference between weather and climate", "a"]


def test_half_precision_encoding_on_cuda_is_the_cpu_float32():
    from core.models import load_model

    on_gpu, _ = load_model("minilm", device="cuda")
    on_cpu, _ = load_model("minilm", device="cpu")
    assert on_gpu.encoding_dtype == torch.float16 and on_cpu.encoding_dtype == torch.float32
    gpu, cpu = on_gpu.encode(SENTENCES), on_cpu.encode(SENTENCES)
    assert gpu.dtype == torch.float32 and gpu.device.type == "cpu"
    cosines = torch.nn.functional.cosine_similarity(gpu, cpu, dim=1)
    assert cosines.min().item() >= 0.999, cosines


def test_exact_search_on_the_gpu_equals_the_cpu(monkeypatch):
    import faiss

    from core.inference import search as exact_search
    from core.inference.search import DeviceIndex

    rows = np.random.default_rng(0).normal(size=(3000, 64)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    cpu_scores, cpu_ids = DeviceIndex(rows, "cpu").search(rows, 20)
    monkeypatch.setattr(exact_search, "CHUNK_ROWS", 512)  # several chunks
    gpu_scores, gpu_ids = DeviceIndex(rows, "cuda").search(rows, 20)
    index = faiss.IndexFlatIP(64)
    index.add(rows)
    faiss_scores, faiss_ids = index.search(rows, 20)
    assert (gpu_ids == cpu_ids).all() and (gpu_ids == faiss_ids).all()
    assert np.abs(gpu_scores - cpu_scores).max() < 1e-5 and np.abs(gpu_scores - faiss_scores).max() < 1e-5


def clusters_of(path: Path) -> list[tuple[str, ...]]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    groups: dict[str, list[str]] = {}
    for row in rows:
        groups.setdefault(row["cluster_id"], []).append(row["question"])
    return sorted(tuple(sorted(members)) for members in groups.values())


def test_dedup_on_cuda_clusters_as_on_the_cpu(tmp_path, capsys):
    sample = ROOT / "assets" / "sample_pairs.csv"
    vectors = tmp_path / "vectors.npy"
    assert main(["embed", "--model", "minilm", "--data", str(sample), "--out", str(vectors)]) == 0
    summaries = {}
    for device in ("cpu", "cuda"):  # the same vectors: only the neighbour search differs
        capsys.readouterr()
        assert main(["dedup", "--model", "minilm", "--questions", str(sample), "--vectors", str(vectors),
                     "--threshold", "0.75", "--device", device, "--out", str(tmp_path / f"{device}.csv")]) == 0
        summaries[device] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summaries["cuda"]["index"]["device"].startswith("cuda") and summaries["cpu"]["index"]["device"] == "cpu"
    assert summaries["cuda"]["clusters"] == summaries["cpu"]["clusters"] > 0
    assert clusters_of(tmp_path / "cuda.csv") == clusters_of(tmp_path / "cpu.csv")
