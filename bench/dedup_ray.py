"""Deduplication on Ray against the local path: the first N distinct questions of the shared Quora pairs,
clustered by ``core.inference`` locally (``corpus_vectors``, ``NeighbourGraph``) and with ``--engine ray``'s code
(``core.inference.ray_engine``: a local Ray sized to this machine, ``--workers`` encoder actors, the first k-NN
search in Ray tasks), each side in its own process so that its peak memory is its own.

Reported per side: wall time by phase (Ray's start-up separately), the driver's peak RSS and, for Ray, the peak
RSS of the largest worker and of all Ray processes together (sampled with psutil every 0.2 s), the clusters;
then the pair F1 of each side's clustering against the first side's (pairs of questions put in one cluster; 1.0 =
the same clusters). ``--sides local,local,ray`` runs the local path twice: above ``EXACT_LIMIT`` questions the
graph searches an HNSW index, whose parallel build is not deterministic, so two local runs differ too, and their
F1 is the yardstick for Ray's. ``--recall N`` checks N random questions' neighbourhoods against an exact scan
(untimed): the neighbours above the threshold the graph finds, over those that exist (each counted up to the
graph's neighbourhood cap).

The model is zero-shot MiniLM by default (a fresh tiny model makes meaningless clusters) or any saved folder
(``--model runs/lstm-quora``); the threshold is the model's clustering threshold unless given. The issue's target
is all 448k questions (``--questions 448316``): on this 2-core machine that takes tens of minutes a side.

    .venv/bin/python bench/dedup_ray.py [--quick] [--questions N] [--model M] [--workers W] [--threshold T]
                                        [--sides local,ray] [--recall N]
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from datetime import date
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import add_ray_corpus_options, neighbourhood_sizes, peak_rss_mb, ray_corpus_args  # noqa: E402
from bench.common import setup_torch  # noqa: E402
from bench.common import parser as bench_parser  # noqa: E402


class RaySampler:
    """Peak RSS (MB) of the largest process this driver started (Ray's workers, raylet, GCS) and of all of them
    together, sampled."""

    def __init__(self, every: float = 0.2):
        self.every, self.worker_mb, self.total_mb = every, 0.0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        driver = psutil.Process()
        while not self._stop.is_set():
            sizes = []
            for process in driver.children(recursive=True):  # the local Ray this driver started, all of it
                try:
                    sizes.append(process.memory_info().rss / 2**20)
                except psutil.Error:  # ended between the listing and the reading
                    pass
            self.worker_mb = max([self.worker_mb, *sizes])
            self.total_mb = max(self.total_mb, sum(sizes))
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def run_side(args) -> dict:
    """One side's run (in this process): timings, memory and clusters as JSON-ready values."""
    from bench.dedup_speed import load_corpus
    from core.inference.calibration import clustering_threshold
    from core.inference.dedup_graph import NeighbourGraph
    from core.inference.search import corpus_vectors
    from core.models import load_model

    setup_torch()
    texts = load_corpus(args.questions)[0]
    model, config = load_model(args.model)
    threshold = args.threshold if args.threshold is not None else clustering_threshold(config).threshold
    phases: dict[str, float] = {}
    result = {"side": args.side, "questions": len(texts), "threshold": float(threshold)}
    started = time.perf_counter()
    if args.side == "local":
        vectors, queries = corpus_vectors(texts, model).for_clustering()
        phases["encode"] = time.perf_counter() - started
        graph = NeighbourGraph(vectors, queries=queries)
    else:
        from core.inference.ray_engine import RayGraph, ray_encode, ray_session

        del model  # the actors load their own; the driver needs only the config
        with RaySampler() as sampler, ray_session():
            phases["ray start"] = time.perf_counter() - started
            vectors, queries = ray_encode(lambda: load_model(args.model, device="cpu")[0], texts, workers=args.workers)
            phases["encode"] = time.perf_counter() - started - sum(phases.values())
            graph = RayGraph(vectors, workers=args.workers, queries=queries)
        result.update(ray_worker_peak_mb=round(sampler.worker_mb), ray_all_peak_mb=round(sampler.total_mb))
    phases["neighbours"] = time.perf_counter() - started - sum(phases.values())
    clusters = graph.cluster(threshold)
    phases["cluster"] = time.perf_counter() - started - sum(phases.values())
    result.update(seconds=round(time.perf_counter() - started, 1),
                  phases={name: round(value, 1) for name, value in phases.items()},
                  driver_peak_mb=round(peak_rss_mb()), clusters=[c.members.tolist() for c in clusters])
    if args.recall:  # after the timings: not part of the run
        result["recall"] = neighbour_recall(graph, vectors, queries, threshold, args.recall)
    return result


def neighbour_recall(graph, vectors, queries, threshold: float, sample: int, seed: int = 0) -> float:
    """Neighbours above ``threshold`` the graph finds, over those an exact scan finds, for ``sample`` random
    questions, each side counted up to the graph's neighbourhood cap (as clustering uses them)."""
    import numpy as np

    queries = vectors if queries is None else queries
    found = neighbourhood_sizes(graph, threshold)  # (N,) itself included, capped
    rows = np.random.default_rng(seed).choice(len(found), size=min(sample, len(found)), replace=False)
    exact = np.concatenate([(queries[rows[i: i + 100]] @ vectors.T > np.float32(threshold)).sum(axis=1)
                            for i in range(0, len(rows), 100)])
    cap = graph.max_neighbourhood
    exact = np.minimum(np.maximum(exact, 1), cap)  # itself, as the graph counts it
    return float(np.minimum(found[rows], cap).sum() / exact.sum())


def co_clustered(clusters) -> set[tuple[int, int]]:
    return {pair for members in clusters for pair in combinations(sorted(members), 2)}


def pair_f1(first, second) -> float:
    a, b = co_clustered(first), co_clustered(second)
    if not a and not b:
        return 1.0
    both = len(a & b)
    return 2 * both / (len(a) + len(b))


def main() -> int:
    p = bench_parser(__doc__)
    add_ray_corpus_options(p, 20_000, 2_000)
    p.add_argument("--workers", type=int, default=2, help="Ray encoder actors and search tasks")
    p.add_argument("--threshold", type=float, default=None, help="default: the model's clustering threshold")
    p.add_argument("--sides", default="local,ray", help="the runs, in order, e.g. local,local,ray")
    p.add_argument("--recall", type=int, default=0, help="questions whose neighbourhoods are checked exactly")
    p.add_argument("--side", choices=("local", "ray"), help=None)  # internal: run one side, print its JSON
    args = ray_corpus_args(p)
    if args is None:
        return 0
    if args.side:
        print(json.dumps(run_side(args)))
        return 0
    results = []
    for side in args.sides.split(","):
        command = [sys.executable, __file__, "--side", side, "--questions", str(args.questions), "--model",
                   args.model, "--workers", str(args.workers), "--recall", str(args.recall)]
        if args.threshold is not None:
            command += ["--threshold", str(args.threshold)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"{side} side failed:\n{done.stderr[-3000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    first = results[0]
    print(f"dedup_ray.py, {date.today()}: {first['questions']:,} questions, model {args.model}, threshold "
          f"{first['threshold']:.4g}, Ray with {args.workers} workers")
    for number, result in enumerate(results, start=1):
        memory = f"driver peak {result['driver_peak_mb']:,} MB"
        if "ray_worker_peak_mb" in result:
            memory += (f", largest Ray process {result['ray_worker_peak_mb']:,} MB, all Ray processes "
                       f"{result['ray_all_peak_mb']:,} MB")
        recall = f"; neighbour recall {result['recall']:.4f}" if "recall" in result else ""
        print(f"  {number}. {result['side']:5s} {result['seconds']:7.1f} s {result['phases']}  {memory}; "
              f"{len(result['clusters']):,} clusters{recall}")
        if number > 1:
            print(f"     pair F1 against run 1: {pair_f1(first['clusters'], result['clusters']):.4f}; wall time "
                  f"{result['seconds'] / first['seconds']:.2f}x run 1's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
