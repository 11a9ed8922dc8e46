"""What a pair costs: the MiniLM cross-encoder (one forward pass of the joined pair) against the MiniLM bi-encoder
(one pass per question, then a cosine), on the bundled sample's pairs, alternated in one process, 2 torch threads.

The cross-encoder's weights are the packaged all-MiniLM-L6-v2's under a fresh logit head: its cost does not depend
on what it was trained on. Prints milliseconds per pair (medians of the rounds) and their ratio.

    .venv/bin/python bench/cross_encoder_cost.py [--rounds 5] [--pairs 479]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import REPO, alternate, header, median, setup_torch  # noqa: E402
from core.data import load_pairs  # noqa: E402
from core.models import MiniLM  # noqa: E402
from core.models.cross_encoder import CrossEncoder  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--pairs", type=int, default=479)
    args = p.parse_args()
    setup_torch(2)
    header("cross-encoder cost per pair", quick=False)
    pairs = load_pairs(REPO / "assets" / "sample_pairs.csv")[0].head(args.pairs)
    first, second = pairs["question1"].tolist(), pairs["question2"].tolist()
    cross, bi = CrossEncoder.pretrained().eval(), MiniLM.pretrained().eval()
    cross.score_pairs(first[:32], second[:32]), bi.score_pairs(first[:32], second[:32])  # warm-up
    times = alternate({"cross-encoder": lambda: cross.score_pairs(first, second),
                       "bi-encoder": lambda: bi.score_pairs(first, second)}, args.rounds)
    per_pair = {name: 1000 * median(seconds) / len(first) for name, seconds in times.items()}
    for name, ms in per_pair.items():
        print(f"{name}: {ms:.2f} ms per pair ({len(first)} pairs, median of {args.rounds} rounds)")
    print(f"cross-encoder / bi-encoder: {per_pair['cross-encoder'] / per_pair['bi-encoder']:.2f}x "
          "(the bi-encoder encodes both questions of every pair; vectors kept from before cost it only the cosine)")


if __name__ == "__main__":
    main()
