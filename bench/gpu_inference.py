"""Inference on a device: MiniLM's encoding throughput in float32 and float16, a whole ``dedup`` timed, and how
closely the device's clusters agree with the CPU's.

The corpus is the distinct questions of a pairs file (question1 / question2 columns, TSV or CSV, plain or gzip;
default: the shared Quora pairs), in the order they first appear, the first ``--limit`` of them.

* Encoding: ``--encode-questions`` of them encoded by the model (``core.models.load_model`` on ``--device``)
  in float32 and, on CUDA, under float16 autocast (what ``--device cuda`` does), the two alternated for
  ``--rounds`` rounds after one untimed warm-up each; questions/s as the median with the slowest and the fastest
  round, and the lowest cosine between a question's float16 and float32 vectors.
* Dedup: ``python -m core dedup --device D --threshold T`` on the ``--limit`` questions in a fresh process with an
  empty lab cache, so the wall time counts the start, the model's load, the encoding, the neighbour search (exact
  on the GPU when the vectors fit) and the clustering; the command's own phase seconds are kept.
* Agreement: the same command on the first ``--f1-questions`` questions with ``--device cpu`` and with
  ``--device D``, each encoding on its own; pair F1 of the two clusterings, where a pair is two questions put in
  one cluster (1.0: the same clusters). On the CPU both sides are the CPU: a smoke run of the code path.

Printed: a header line, then one compact JSON object.

    .venv/bin/python bench/gpu_inference.py --device cuda --limit 100000 --threshold 0.8
    .venv/bin/python bench/gpu_inference.py --corpus assets/sample_pairs.csv --limit 300 --f1-questions 300 \\
        --encode-questions 256 --rounds 1        # a smoke run on the CPU
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    from bench.common import DATA, REPO, header, median, parser
except ModuleNotFoundError:  # run as a script: bench/ is on sys.path, the repo is added by common
    from common import DATA, REPO, header, median, parser


def distinct_questions(path: Path, limit: int) -> list[str]:
    """The first ``limit`` distinct questions of the pairs file ``path``, one line each."""
    from core.data import corpus_questions, load_pairs

    pairs, _ = load_pairs(path)
    return [" ".join(text.split()) for text in corpus_questions(pairs)[:limit]]


def write_corpus(texts: list[str], folder: Path, name: str) -> Path:
    path = folder / f"{name}.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return path


def encoding_throughput(model_name: str, device: str, texts: list[str], rounds: int, batch_size: int) -> dict:
    """Questions/s of float32 and (on CUDA) float16 encoding, alternated round by round, and the lowest cosine
    between the two precisions' vectors of a question."""
    import torch

    from core.models import load_model

    model, _ = load_model(model_name, device=device)
    precisions = {"fp32": torch.float32}
    if model.device.type == "cuda" and model.half_precision_encoding:
        precisions["fp16"] = torch.float16
    seconds: dict[str, list[float]] = {name: [] for name in precisions}
    vectors = {}
    for round_number in range(rounds + 1):  # round 0 warms up (kernels, allocator) and is not timed
        for name, dtype in precisions.items():
            model.encoding_dtype = dtype
            started = time.perf_counter()
            vectors[name] = model.encode(texts, batch_size=batch_size)  # a CPU tensor: the device has finished
            if round_number:
                seconds[name].append(time.perf_counter() - started)
    figures = {name: {"questions_per_s": round(len(texts) / median(times)),
                      "slowest": round(len(texts) / max(times)), "fastest": round(len(texts) / min(times))}
               for name, times in seconds.items()}
    if "fp16" in vectors:
        cosines = torch.nn.functional.cosine_similarity(vectors["fp16"], vectors["fp32"], dim=1)
        figures["min_cosine_fp16_fp32"] = round(float(cosines.min()), 6)
        figures["fp16_over_fp32"] = round(median(seconds["fp32"]) / median(seconds["fp16"]), 2)
    return {"device": str(model.device), "questions": len(texts), "batch_size": batch_size, "rounds": rounds,
            **figures}


def run_dedup(model: str, corpus: Path, device: str, threshold: float, out: Path) -> dict:
    """Wall seconds and the summary of one ``python -m core dedup`` in a fresh process with an empty lab cache."""
    command = [sys.executable, "-m", "core", "dedup", "--model", model, "--questions", str(corpus), "--device", device,
               "--threshold", str(threshold), "--out", str(out), "--overwrite"]
    with tempfile.TemporaryDirectory(prefix="gpu-inference-cache-") as cache:
        started = time.perf_counter()
        done = subprocess.run(command, cwd=REPO, env={**os.environ, "SIAMESE_LAB_CACHE": cache}, capture_output=True,
                              text=True)
        wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"dedup failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return {"wall_seconds": round(wall, 1), "seconds": summary["seconds"], "phase_seconds": summary["phase_seconds"],
            "questions": summary["questions"], "clusters": summary["clusters"],
            "clustered_questions": summary["clustered_questions"], "search": summary["search"],
            "search_device": summary["index"].get("device", "cpu")}


def cluster_labels(path: Path) -> dict[str, int]:
    """Question -> cluster id of a dedup CSV (questions in no cluster are absent)."""
    import pandas as pd

    frame = pd.read_csv(path, keep_default_na=False)
    return dict(zip(frame["question"].astype(str), frame["cluster_id"].astype(int)))


def pair_f1(first: dict[str, int], second: dict[str, int]) -> float:
    """F1 of the pairs of questions put in one cluster by ``second`` against those of ``first``, counted from
    cluster sizes (a cluster of m questions holds m(m-1)/2 pairs) without listing the pairs; 1.0 when neither
    clusters anything."""
    from collections import Counter

    def pairs(counts) -> int:
        return sum(n * (n - 1) // 2 for n in counts.values())

    both = pairs(Counter((first[q], second[q]) for q in first.keys() & second.keys()))
    total = pairs(Counter(first.values())) + pairs(Counter(second.values()))
    return 1.0 if total == 0 else round(2 * both / total, 6)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--corpus", type=Path, default=DATA, help="pairs file (question1, question2), TSV/CSV, .gz too")
    p.add_argument("--limit", type=int, default=100_000, help="distinct questions deduplicated (--quick: 20,000)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--threshold", type=float, default=0.8, help="dedup's cosine threshold")
    p.add_argument("--model", default="minilm", help="'minilm' (zero-shot) or a saved model folder")
    p.add_argument("--f1-questions", type=int, default=20_000, help="questions clustered on the CPU and the device")
    p.add_argument("--encode-questions", type=int, default=8_192, help="questions per timed encoding")
    p.add_argument("--rounds", type=int, default=5, help="timed encodings per precision")
    p.add_argument("--batch-size", type=int, default=256, help="encoding batch size")
    args = p.parse_args()
    limit = 20_000 if args.quick else args.limit
    if not args.corpus.is_file():
        sys.exit(f"no corpus at {args.corpus}: give --corpus, a pairs file with question1 and question2 columns")
    from core.device import resolve_device

    device = str(resolve_device(args.device))
    header(f"gpu_inference: encoding, dedup and its agreement with the CPU on {device}", args.quick)
    texts = distinct_questions(args.corpus, max(limit, args.f1_questions, args.encode_questions))
    result = {"corpus": str(args.corpus), "model": args.model, "device": device, "threshold": args.threshold,
              "encoding": encoding_throughput(args.model, device, texts[:args.encode_questions], args.rounds,
                                              args.batch_size)}
    with tempfile.TemporaryDirectory(prefix="gpu-inference-") as folder:
        folder = Path(folder)
        full = write_corpus(texts[:limit], folder, "corpus")
        result["dedup"] = run_dedup(args.model, full, device, args.threshold, folder / "full.csv")
        sample = write_corpus(texts[:args.f1_questions], folder, "first")
        on_cpu = run_dedup(args.model, sample, "cpu", args.threshold, folder / "cpu.csv")
        on_device = run_dedup(args.model, sample, device, args.threshold, folder / "device.csv")
        f1 = pair_f1(cluster_labels(folder / "cpu.csv"), cluster_labels(folder / "device.csv"))
    result["agreement"] = {"questions": on_cpu["questions"], "pair_f1": f1,
                           "clusters": {"cpu": on_cpu["clusters"], "device": on_device["clusters"]},
                           "wall_seconds": {"cpu": on_cpu["wall_seconds"], "device": on_device["wall_seconds"]}}
    print(json.dumps(result, separators=(",", ":")))


if __name__ == "__main__":
    main()
