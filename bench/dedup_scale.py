"""Deduplicate every distinct question of the shared Quora file with a trained Siamese LSTM (issue 13's
scale target: under 5 minutes end to end on this 2-core machine, peak RSS under 3 GB).

The model: ``--model DIR``, or an LSTM trained here first (not timed) with the plain defaults
(``core.training.specs.spec_from_options(model="lstm", loss="contrastive")``) on the first 20,000 pairs.
The timed part is exactly what a user runs, in a fresh process:

    python -m core dedup --model M --questions <shared pairs file> --out clusters.csv [--backend B]

Reported: the command's wall time, its peak RSS (``RUSAGE_CHILDREN``: the largest resident set of the
child), and the command's own JSON line (questions, clusters, search kind, threshold).

``--recall N`` then measures, in this process and untimed, how much of the truth the k-NN graph finds:
for N random questions, the neighbours above the threshold that the graph's neighbourhoods hold against
an exact scan of every question (capped at the graph's ``max_neighbourhood``, as the clusters are), and
how large the exact neighbourhoods are.

    .venv/bin/python bench/dedup_scale.py [--quick] [--model DIR] [--backend torch|onnx] [--recall 1000]
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import REPO, data_path, header, neighbourhood_sizes, parser, report, setup_torch  # noqa: E402

TRAIN_ROWS = 20_000


def train_lstm(folder: Path, rows: int) -> Path:
    """An LSTM trained with the plain contrastive defaults on the first ``rows`` pairs, saved in ``folder``."""
    from bench.common import load_real_pairs
    from core.training.pipeline import train_run
    from core.training.specs import spec_from_options

    spec = spec_from_options(model="lstm", loss="contrastive", data_name=f"quora first {rows:,}")
    result = train_run(spec, load_real_pairs(max_rows=rows), out_dir=folder)
    return Path(result.folder)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", help="a saved model folder (default: train an LSTM on the first 20,000 pairs)")
    p.add_argument("--backend", choices=("torch", "onnx"), default="torch")
    p.add_argument("--recall", type=int, default=0, help="questions whose neighbourhoods are checked exactly")
    args = p.parse_args()
    header("dedup_scale: every distinct question of the shared file, one CLI run", args.quick)
    source = data_path()
    work = Path(tempfile.mkdtemp(prefix="dedup-scale-"))
    setup_torch()
    model = Path(args.model) if args.model else train_lstm(work / "lstm", 2_000 if args.quick else TRAIN_ROWS)
    questions = source
    if args.quick:  # the first 20,000 rows as their own file, so the command still reads a file
        import pandas as pd

        questions = work / "first-rows.tsv"
        pd.read_csv(source, sep="\t", keep_default_na=False, nrows=20_000).to_csv(questions, sep="\t", index=False)
    out = work / "clusters.csv"
    command = [sys.executable, "-m", "core", "dedup", "--model", str(model), "--questions", str(questions),
               "--out", str(out), "--backend", args.backend]
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if done.returncode != 0:
        sys.exit(f"dedup failed ({done.returncode}): {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    report("python -m core dedup, end to end", {
        "questions file": questions.name, "backend": args.backend, "model": model.name,
        "distinct questions": result["questions"], "clusters": result["clusters"],
        "clustered questions": result["clustered_questions"], "largest cluster": result["largest_cluster"],
        "threshold": result["threshold"], "search": result["search"],
        "wall seconds (goal < 300 on all of them)": seconds,
        "peak RSS of the command, MB (goal < 3,000)": peak_mb,
        "questions whose neighbourhood hit the cap": result.get("capped_questions"),
        "seconds per phase (encode, neighbours, cluster)": " / ".join(
            str(result.get("phase_seconds", {}).get(phase, "?")) for phase in ("encode", "neighbours", "cluster")),
    })
    if args.recall:
        report(f"the k-NN graph against an exact scan, {args.recall:,} random questions",
               neighbourhood_recall(model, questions, result["threshold"], args.recall))


def neighbourhood_recall(model_dir: Path, questions: Path, threshold: float, sample: int, seed: int = 0) -> dict:
    """Neighbours above ``threshold`` that the graph finds, over those an exact scan finds, for ``sample``
    random questions (each side counted up to the graph's max_neighbourhood), and the exact sizes."""
    import numpy as np

    from core.data import load_questions
    from core.inference.dedup_graph import NeighbourGraph
    from core.inference.search import corpus_vectors
    from core.models import load_model

    model, _ = load_model(model_dir)
    texts, _ = load_questions(questions)
    vectors, queries = corpus_vectors(texts, model).for_clustering()
    queries = vectors if queries is None else queries
    graph = NeighbourGraph(vectors, queries=queries)
    found = neighbourhood_sizes(graph, threshold)  # (N,) rows, itself included, capped
    rows = np.random.default_rng(seed).choice(len(texts), size=min(sample, len(texts)), replace=False)
    exact = np.concatenate([(queries[rows[i : i + 100]] @ vectors.T > np.float32(threshold)).sum(axis=1)
                            for i in range(0, len(rows), 100)])
    exact = np.maximum(exact, 1)  # itself, as the graph counts it
    cap = graph.max_neighbourhood
    return {"graph search": graph.kind, "max_neighbourhood": cap,
            "neighbour recall (capped)": float(np.minimum(found[rows], cap).sum() / np.minimum(exact, cap).sum()),
            "questions with every neighbour found (capped)": float((np.minimum(found[rows], cap)
                                                                   >= np.minimum(exact, cap)).mean()),
            "exact neighbourhood size: median": float(np.median(exact)),
            "exact neighbourhood size: 90th percentile": float(np.percentile(exact, 90)),
            "exact neighbourhood size: largest": int(exact.max()),
            f"share of questions with more than {cap:,} neighbours": float((exact > cap).mean())}


if __name__ == "__main__":
    main()
