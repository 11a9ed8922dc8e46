"""How long a round of the labelling loop takes once the corpus is embedded: ``candidate_pairs`` (each question's
nearest neighbours, searched once per model and corpus, then kept) and ``choose_pairs`` (100 pairs) on a corpus of
20,000 questions with 1,000 pairs already labelled (issue 24's goal: under 10 s on the CPU).

    .venv/bin/python bench/suggest_speed.py [--questions 20000] [--labelled 1000] [--n 100] [--threads 2]

The vectors are random unit vectors of MiniLM's width (384): the search and the choice cost the same whatever the
vectors mean, and encoding is left out (it happens once per model, before any round). Prints the first round (with
the neighbour search), a later round (new labels, same model), and the same first round with the exact search that
the HNSW index would give (what ``EXACT_LIMIT`` switches to above 50,000 questions), side by side.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import setup_torch  # noqa: E402
from core.data import pair_key  # noqa: E402
from core.inference import candidates as candidates_module  # noqa: E402
from core.inference.candidates import EmbeddedCorpus, candidate_pairs, choose_pairs  # noqa: E402


def one_round(corpus: EmbeddedCorpus, labelled: set, n: int) -> tuple[float, int]:
    started = time.perf_counter()
    chosen = choose_pairs(candidate_pairs(corpus, labelled=labelled), n, threshold=0.5)
    return time.perf_counter() - started, len(chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=20_000)
    parser.add_argument("--labelled", type=int, default=1_000)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    setup_torch(args.threads)
    import faiss

    faiss.omp_set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(args.questions, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    questions = [f"Made-up question number {i}?" for i in range(args.questions)]
    labelled = {pair_key(questions[i], questions[i + 1]) for i in range(0, 2 * args.labelled, 2)}

    corpus = EmbeddedCorpus(questions, vectors)
    first, chosen = one_round(corpus, labelled, args.n)
    later, _ = one_round(corpus, labelled, args.n)
    exact_limit = candidates_module.EXACT_LIMIT
    candidates_module.EXACT_LIMIT = 0  # the HNSW index, for comparison
    hnsw, _ = one_round(EmbeddedCorpus(questions, vectors), labelled, args.n)
    candidates_module.EXACT_LIMIT = exact_limit
    print(f"{args.questions:,} questions, {args.labelled:,} labelled, {args.n} asked ({chosen} chosen), "
          f"{args.threads} threads")
    print(f"first round (neighbour search + choice): {first:.2f} s")
    print(f"later round (kept neighbours + choice):  {later:.2f} s")
    print(f"first round with an HNSW index:          {hnsw:.2f} s ({hnsw / first:.1f}x)")


if __name__ == "__main__":
    main()
