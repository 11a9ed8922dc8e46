"""Memory, build time and recall of the three vector indexes (``core.inference.search``).

    python bench/index_memory.py [--n 100000] [--dim 384] [--queries 1000] [--pairs-n 20000]

1. ``--n`` random unit vectors of width ``--dim`` (uniform on the sphere: no structure for IVF's cells to
   follow, so the recall here is a floor; real sentence vectors cluster): each index's serialised size
   per vector, times a million, its build time (IVF-PQ: training on its seeded sample included), and its
   recall@10 against the exact search for ``--queries`` of the vectors.
2. Dedup pairs: ``--pairs-n`` vectors in groups of 1 to 8 near duplicates (cosine ~0.9 to their group's
   centre): the pairs above the threshold that the neighbour graph (``NeighbourGraph``) finds on
   IVF-PQ, against the exact (flat) graph, and how many clusters come out identical.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import pairs_above  # noqa: E402
from core.inference.dedup_graph import NeighbourGraph  # noqa: E402
from core.inference.search import INDEX_KINDS, new_index, training_sample  # noqa: E402


def index_memory_bytes(index: faiss.Index) -> int:
    """The index's serialised size: what it holds in memory, within its headers."""
    return int(faiss.serialize_index(index).size)


def search_vectors(index: faiss.Index, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, ids), each (Q, k), best first; id -1 where fewer than ``k`` were found."""
    return index.search(np.ascontiguousarray(queries, dtype=np.float32), int(k))


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def memory_and_recall(n: int, dim: int, queries: int, seed: int = 0) -> None:
    vectors = unit(np.random.default_rng(seed).standard_normal((n, dim), dtype=np.float32))  # (n, d)
    asked = vectors[:queries]
    exact = None
    print(f"{n:,} random unit vectors of width {dim}; recall@10 over {queries:,} of them as queries")
    print(f"{'index':6} {'bytes/vector':>12} {'MB per 1M':>10} {'x below flat':>12} {'build s':>8} {'recall@10':>9}")
    flat_bytes = None
    for kind in INDEX_KINDS:
        started = time.perf_counter()
        sample = training_sample(vectors, seed) if kind == "ivfpq" else None
        index = new_index(kind, dim, n, sample, seed)
        empty = index_memory_bytes(index)
        for shard in np.array_split(vectors, 10):  # shard by shard, as from vector shards
            index.add(shard)
        built = time.perf_counter() - started
        size = index_memory_bytes(index)
        per_vector = size / n
        flat_bytes = flat_bytes or per_vector
        _, ids = search_vectors(index, asked, 10)
        if exact is None:
            exact = ids  # the flat index comes first: the exact answer
        recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact, ids)])
        extra = f"  (nlist {index.nlist}, nprobe {index.nprobe}, {index.pq.M} codes x {index.pq.nbits} bits; " \
                f"{(size - empty) / n:.1f} bytes/vector without the trained quantisers)" if kind == "ivfpq" else ""
        print(f"{kind:6} {per_vector:12.1f} {per_vector:10.0f} {flat_bytes / per_vector:12.1f} {built:8.1f} "
              f"{recall:9.3f}{extra}", flush=True)


def dedup_pairs(n: int, dim: int, threshold: float = 0.8, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, size=n)  # group sizes 1..8
    group = np.repeat(np.arange(n), sizes)[:n]  # (n,) each row's group
    centres = unit(rng.standard_normal((group.max() + 1, dim), dtype=np.float32))
    vectors = unit(centres[group] + 0.45 * rng.standard_normal((n, dim), dtype=np.float32) / np.sqrt(dim))
    times, pairs, clusters = {}, {}, {}
    for kind in ("flat", "ivfpq"):
        started = time.perf_counter()
        graph = NeighbourGraph(vectors, index_kind=kind)
        clusters[kind] = {(c.representative, tuple(sorted(c.members.tolist()))) for c in graph.cluster(threshold)}
        times[kind] = time.perf_counter() - started
        first, second, _ = pairs_above(graph, threshold)
        pairs[kind] = set(zip(first.tolist(), second.tolist()))
    found = len(pairs["flat"] & pairs["ivfpq"])
    print(f"\ndedup pairs: {n:,} vectors of width {dim} in {group.max() + 1:,} groups of 1-8, threshold {threshold}")
    print(f"pairs above it: exact {len(pairs['flat']):,}, ivfpq graph {len(pairs['ivfpq']):,}; "
          f"recall {found / max(len(pairs['flat']), 1):.4f}, extra {len(pairs['ivfpq'] - pairs['flat'])}")
    print(f"clusters: exact {len(clusters['flat']):,}, identical on ivfpq {len(clusters['flat'] & clusters['ivfpq']):,}; "
          f"graph + clusters s: flat {times['flat']:.1f}, ivfpq {times['ivfpq']:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--pairs-n", type=int, default=20_000)
    args = parser.parse_args()
    memory_and_recall(args.n, args.dim, args.queries)
    dedup_pairs(args.pairs_n, args.dim)


if __name__ == "__main__":
    main()
