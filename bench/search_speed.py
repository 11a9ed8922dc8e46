"""Search over every distinct question of the shared data: FAISS HNSW against exact brute force.

Encodes all distinct questions (several hundred thousand) with a model, builds the index the app
and the CLI use (`core.inference.search.SearchIndex`, HNSW above 50,000 texts), then for the same queries
measures p50/p99 latency of the index and of an exact numpy search, and recall@10 against exact.

    .venv/bin/python bench/search_speed.py [--quick] [--model DIR]   # default: a fresh Siamese LSTM

Query latency includes encoding the query, as a user waits for it. Without --model the vectors
come from a freshly initialised Siamese LSTM (fast to encode on a CPU); the index does not care
what produced the vectors, and untrained vectors are, if anything, harder to separate.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import load_real_pairs, parser, peak_rss_mb, setup_torch  # noqa: E402


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", default=None, help="a saved model folder (default: a fresh Siamese LSTM)")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--ef-search", default="", help="comma-separated HNSW efSearch values to measure on the same "
                                                  "index (default: the library's)")
    args = p.parse_args()
    setup_torch()
    import pandas as pd
    import torch

    from core.data import corpus_questions
    from core.inference.search import encode_unit_rows, load_or_build
    from core.models import build_model, load_model
    from core.training.specs import spec_from_options

    pairs = load_real_pairs(max_rows=60000 if args.quick else None)
    texts = corpus_questions(pairs)
    if args.model:
        model, _ = load_model(args.model)
    else:
        torch.manual_seed(0)
        # Default LSTM sizes; the word vocabulary comes from every question of the loaded pairs.
        train_texts = pd.concat([pairs["question1"], pairs["question2"]]).tolist()
        model = build_model(spec_from_options(model="lstm", loss="triplet", max_length=32), train_texts).eval()
    started = time.perf_counter()
    index = load_or_build(model, texts, None, batch_size=512)
    build_s = time.perf_counter() - started
    vectors = index.index.reconstruct_n(0, index.index.ntotal) if index.kind == "flat" else None
    # Exact reference: the same unit vectors, brute force in numpy.
    all_vectors = (encode_unit_rows(model, texts, tower=1, batch_size=512, progress=None) if vectors is None
                   else vectors)

    rng = np.random.default_rng(0)
    queries = [texts[i] for i in rng.choice(len(texts), size=args.queries, replace=False)]
    print(f"corpus: {len(texts):,} distinct questions; index {index.kind}; build {build_s:.1f} s "
          f"(encoding included); peak RSS {peak_rss_mb():.0f} MB")
    exact_ms, exact_sets = [], []
    for query in queries:
        t1 = time.perf_counter()
        q = encode_unit_rows(model, [query], tower=0, batch_size=1, progress=None)  # (1, d)
        top = np.argpartition(-(all_vectors @ q[0]), 10)[:10]
        exact_ms.append((time.perf_counter() - t1) * 1000)
        exact_sets.append({texts[i] for i in top})
    print(f"exact numpy : p50 {np.percentile(exact_ms, 50):.2f} ms, p99 {np.percentile(exact_ms, 99):.2f} ms")
    settings = [int(v) for v in args.ef_search.split(",") if v] or [None]
    for ef in settings:
        if ef is not None and index.kind == "hnsw":
            index.index.hnsw.efSearch = ef
        index_ms, recalls = [], []
        for query, exact in zip(queries, exact_sets):
            t0 = time.perf_counter()
            found = [text for text, _ in index.search(query, 10)[0]]
            index_ms.append((time.perf_counter() - t0) * 1000)
            recalls.append(len(exact & set(found)) / 10)
        label = f"efSearch {index.index.hnsw.efSearch}" if index.kind == "hnsw" else "flat"
        print(f"FAISS {index.kind} ({label}): p50 {np.percentile(index_ms, 50):.2f} ms, "
              f"p99 {np.percentile(index_ms, 99):.2f} ms, recall@10 vs exact {np.mean(recalls):.4f} "
              f"over {len(queries)} queries")


if __name__ == "__main__":
    main()
