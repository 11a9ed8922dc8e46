"""Deduplication quality: "in the same cluster" scored as a duplicate prediction on labelled pairs.

The corpus is the first 20,000 distinct questions (--quick: 2,000) of the shared Quora pairs, encoded
once with zero-shot all-MiniLM-L6-v2 (or --model); the labelled pairs scored are the file's pairs
whose two questions are both in the corpus. On the same vectors and threshold (default the model's
clustering threshold; several with --thresholds) each method predicts "duplicate" for a pair when its two
questions land in one cluster:

- ours: ``core.inference.dedup_graph`` on the exact k-NN graph (FAISS flat), and on an HNSW graph (the index
  used above 50,000 questions), forced here with ``index_kind="hnsw"``;
- sentence-transformers' ``community_detection`` (given the next float32 above the threshold: its rule
  is >=, ours >);
- connected components of the above-threshold graph (chaining: a question joins a cluster through any
  member, not the representative);
- for reference, the plain pair verdict (cosine > threshold), which no clustering can beat on recall
  within one cluster per question.

Precision, recall and F1 per method, and how the HNSW graph compares with the exact one: the recall of
the above-threshold neighbour pairs, and how many exact clusters it reproduces exactly.

    .venv/bin/python bench/dedup_quality.py [--quick] [--questions N] [--thresholds 0.75,0.8] [--model DIR]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import DATA, header, pairs_above, parser, report, setup_torch  # noqa: E402
from bench.dedup_speed import as_sets, load_corpus, strictly_above  # noqa: E402


def labels_of(members: list, n: int) -> np.ndarray:
    """(n,) cluster number of each question, -1 when in none; ``members`` is one index list per cluster."""
    label = np.full(n, -1, dtype=np.int64)
    for number, cluster in enumerate(members):
        label[np.asarray(list(cluster), dtype=np.int64)] = number
    return label


def scores(same: np.ndarray, truth: np.ndarray) -> str:
    """Precision, recall and F1 of the "duplicate" predictions ``same`` against the labels ``truth``."""
    tp = int((same & truth).sum())
    fp = int((same & ~truth).sum())
    fn = int((~same & truth).sum())
    precision = tp / (tp + fp) if tp + fp else float("nan")
    recall = tp / (tp + fn) if tp + fn else float("nan")
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else float("nan")
    return f"P {precision:.4f}  R {recall:.4f}  F1 {f1:.4f}  (tp {tp:,}, fp {fp:,}, fn {fn:,})"


def components(first: np.ndarray, second: np.ndarray, n: int) -> list[list[int]]:
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(first), dtype=np.int8), (first, second)), shape=(n, n))
    _, label = connected_components(graph, directed=False)
    groups: dict[int, list[int]] = {}
    for row, group in enumerate(label.tolist()):
        groups.setdefault(group, []).append(row)
    return [members for members in groups.values() if len(members) >= 2]


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--questions", type=int, default=None, help="corpus size (default 20,000; --quick 2,000)")
    p.add_argument("--thresholds", default="", help="comma-separated cosines (default: the model's clustering threshold)")
    p.add_argument("--model", default="minilm", help="a saved model folder, or minilm (zero-shot)")
    p.add_argument("--device", default="cpu", help="where to encode (cpu or cuda)")
    args = p.parse_args()
    count = args.questions or (2_000 if args.quick else 20_000)
    header(f"dedup_quality: same cluster as a duplicate verdict, {count:,} questions", args.quick)
    loaded = load_corpus(count)
    if loaded is None:
        print(f"skipped: the shared data is not at {DATA}")
        return
    texts, frame = loaded
    setup_torch()
    import torch
    from sentence_transformers.util import community_detection

    from core.data import normalise_questions
    from core.inference.calibration import clustering_threshold
    from core.inference.dedup_graph import NeighbourGraph
    from core.inference.search import corpus_vectors
    from core.models import load_model

    position = {key: i for i, key in enumerate(normalise_questions(texts))}
    first = np.array([position.get(key, -1) for key in normalise_questions(frame["question1"])])
    second = np.array([position.get(key, -1) for key in normalise_questions(frame["question2"])])
    usable = (first >= 0) & (second >= 0) & (first != second)
    first, second = first[usable], second[usable]
    truth = frame["is_duplicate"].to_numpy()[usable].astype(int) == 1

    model, config = load_model(args.model, device=args.device)
    started = time.perf_counter()
    vectors, queries = corpus_vectors(texts, model).for_clustering()
    encode_s = time.perf_counter() - started
    exact = NeighbourGraph(vectors, queries=queries)
    started = time.perf_counter()
    approximate = NeighbourGraph(vectors, queries=queries, index_kind="hnsw")
    hnsw_s = time.perf_counter() - started
    pair_cosines = (exact.queries[first] * exact.vectors[second]).sum(1)  # (P,) what the model gives each pair
    report("corpus", {"questions": len(texts), "labelled pairs with both questions in it": int(usable.sum()),
                      "of them duplicates": int(truth.sum()), "encode (s)": encode_s,
                      "HNSW graph build + search (s)": hnsw_s})

    thresholds = [float(t) for t in args.thresholds.split(",") if t] or [clustering_threshold(config).threshold]
    for threshold in thresholds:
        ours = [c.members.tolist() for c in exact.cluster(threshold, 2)]
        hnsw = [c.members.tolist() for c in approximate.cluster(threshold, 2)]
        theirs = None if queries is not None else community_detection(
            torch.from_numpy(vectors), threshold=strictly_above(threshold), min_community_size=2)
        pairs_exact = pairs_above(exact, threshold)
        pairs_hnsw = pairs_above(approximate, threshold)
        methods = {"ours (exact k-NN graph)": ours, "ours (HNSW k-NN graph)": hnsw}
        if theirs is not None:  # community_detection needs one symmetric set of vectors
            methods["sentence-transformers community_detection"] = theirs
        methods["connected components (chained)"] = components(pairs_exact[0], pairs_exact[1], len(texts))
        figures = {}
        for name, members in methods.items():
            label = labels_of(members, len(texts))
            same = (label[first] >= 0) & (label[first] == label[second])
            figures[name] = (f"{scores(same, truth)}  {len(members):,} clusters, largest "
                             f"{max((len(m) for m in members), default=0)}")
        figures["pair verdict (cosine > threshold)"] = scores(pair_cosines > np.float32(threshold), truth)
        report(f"same cluster as duplicate, threshold {threshold:g}", figures)
        exact_edges = set(zip(pairs_exact[0].tolist(), pairs_exact[1].tolist()))
        hnsw_edges = set(zip(pairs_hnsw[0].tolist(), pairs_hnsw[1].tolist()))
        exact_sets, hnsw_sets = as_sets(ours), as_sets(hnsw)
        exact_label, hnsw_label = labels_of(ours, len(texts)), labels_of(hnsw, len(texts))
        together = [(i, j) for c in ours for i in c for j in c if i < j]
        kept = sum(1 for i, j in together if hnsw_label[i] >= 0 and hnsw_label[i] == hnsw_label[j])
        report(f"HNSW graph against the exact one, threshold {threshold:g}", {
            "above-threshold neighbour pairs: recall": len(exact_edges & hnsw_edges) / max(len(exact_edges), 1),
            "above-threshold neighbour pairs: exact / HNSW": f"{len(exact_edges) // 2:,} / {len(hnsw_edges) // 2:,}",
            "exact clusters found identical": f"{len(exact_sets & hnsw_sets):,} of {len(exact_sets):,}",
            "same-cluster pairs kept together": kept / max(len(together), 1),
            "community_detection == ours (exact)": None if theirs is None else as_sets(theirs) == exact_sets,
            "questions clustered, exact / HNSW":
                f"{int((exact_label >= 0).sum()):,} / {int((hnsw_label >= 0).sum()):,}",
        })


if __name__ == "__main__":
    main()
