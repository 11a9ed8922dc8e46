"""Zero-shot MiniLM's clustering threshold: ``core.inference.calibration.ZERO_SHOT_CLUSTER_THRESHOLD``.

Zero-shot all-MiniLM-L6-v2 scores a seeded sample of the shared Quora pairs (3,000, seed 0); the clustering
threshold is ``precision_threshold`` at ``CLUSTER_PRECISION`` on them: the lowest cosine above which that share of
the pairs are duplicates. Precision and recall are printed at the pair threshold (``ZERO_SHOT_THRESHOLD``) and at
the clustering one, measured and rounded as the constant holds it. Exits 0 with a message without the data.

    nice -n 10 .venv/bin/python bench/clustering_threshold.py [--pairs 3000] [--seed 0]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import DATA, header, parser, report, setup_torch  # noqa: E402


def precision_recall(labels: np.ndarray, scores: np.ndarray, threshold: float) -> str:
    """Precision and recall of "duplicate when the score is strictly above ``threshold``"."""
    predicted, truth = scores > threshold, labels == 1
    tp = int((predicted & truth).sum())
    precision = tp / max(int(predicted.sum()), 1)
    recall = tp / max(int(truth.sum()), 1)
    return f"precision {precision:.4f}, recall {recall:.4f} ({int(predicted.sum()):,} pairs above)"


def main() -> None:
    p = parser("zero-shot MiniLM's clustering threshold on the shared Quora pairs")
    p.add_argument("--pairs", type=int, default=3_000, help="pairs drawn from the shared file")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    header(f"clustering_threshold: zero-shot MiniLM, {args.pairs:,} Quora pairs, seed {args.seed}", args.quick)
    if not DATA.is_file():
        print(f"skipped: the shared data is not at {DATA}")
        return
    setup_torch()
    from core.data import load_pairs
    from core.inference.calibration import (
        CLUSTER_PRECISION,
        ZERO_SHOT_CLUSTER_THRESHOLD,
        precision_threshold,
    )
    from core.models import ZERO_SHOT_THRESHOLD, MiniLM

    pairs, _ = load_pairs(DATA)
    sample = pairs.sample(n=min(args.pairs, len(pairs)), random_state=args.seed).reset_index(drop=True)
    labels = sample["is_duplicate"].to_numpy().astype(int)
    model = MiniLM.pretrained()
    scores = np.asarray(model.score_pairs(sample["question1"].tolist(), sample["question2"].tolist()),
                        dtype=np.float64)
    measured = precision_threshold(labels, scores, CLUSTER_PRECISION)
    figures = {"pairs": len(sample), "of them duplicates": f"{labels.mean():.1%}",
               "wanted precision": CLUSTER_PRECISION,
               "clustering threshold (measured)": "never reached" if measured is None else f"{measured:.4f}",
               "ZERO_SHOT_CLUSTER_THRESHOLD (in the code)": ZERO_SHOT_CLUSTER_THRESHOLD,
               f"at the pair threshold {ZERO_SHOT_THRESHOLD}": precision_recall(labels, scores, ZERO_SHOT_THRESHOLD)}
    if measured is not None:
        figures[f"at the measured threshold {measured:.4f}"] = precision_recall(labels, scores, measured)
        rounded = round(measured, 2)
        figures[f"at the rounded threshold {rounded:.2f}"] = precision_recall(labels, scores, rounded)
    report("zero-shot MiniLM on Quora pairs", figures)


if __name__ == "__main__":
    main()
