"""What a newcomer's first run teaches: every loss on the bundled sample, against chance and the baselines.

The ``sample-demo`` preset is the first run most people make (the Train page's default on the bundled sample).
It must give a model clearly better than chance, than TF-IDF and, ideally, no worse than zero-shot MiniLM on
the sample's own validation pairs, in well under a minute on a 2-core CPU. This script trains the preset with
each loss of ``bench.quality.LOSSES`` (the preset's other settings unchanged) for a few split seeds, and the
Siamese LSTM recipe the preset used before issue 23 for comparison, and prints one markdown table: validation
ROC AUC of the run, of TF-IDF and of zero-shot MiniLM on the same validation pairs, and the training time.

    .venv/bin/python bench/sample_demo.py            # seeds 0, 1, 2 (about 6 minutes on 2 threads)
    .venv/bin/python bench/sample_demo.py --seeds 0  # the preset's own split only
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import REPO, setup_torch  # noqa: E402
from bench.quality import LOSSES  # noqa: E402
from core.data import load_pairs, split_pairs  # noqa: E402
from core.inference.metrics import pair_scores  # noqa: E402
from core.inference.metrics import ranking_metrics  # noqa: E402
from core.models import MiniLM  # noqa: E402
from core.text.pair_table import PairTable  # noqa: E402
from core.training.pipeline import train_run  # noqa: E402
from core.training.presets import PRESETS  # noqa: E402
from core.training.specs import spec_from_options  # noqa: E402

SAMPLE = REPO / "assets" / "sample_pairs.csv"
# The sample-demo recipe before issue 23: a small Siamese LSTM trained from scratch (validation ROC AUC 0.20-0.29).
OLD_LSTM_DEMO = {"model": "lstm", "loss": "triplet", "margin": 0.25, "epochs": 5, "batch_size": 32, "lr": 3e-3,
                 "patience": 0, "model_options": {"embedding_dim": 64, "hidden_size": 64}, "min_freq": 1,
                 "hard_negatives": True}


def rows_to_run() -> dict[str, dict]:
    """label -> run options: the preset as it is, the preset with each other loss, the old LSTM recipe."""
    preset = PRESETS["sample-demo"].options
    rows = {f"sample-demo ({preset['loss']})": dict(preset)}
    for label, (loss_options, hard_negatives) in LOSSES.items():
        options = {key: value for key, value in preset.items() if key not in ("loss", "form", "hard_negatives")}
        variant = {**options, **loss_options, "hard_negatives": hard_negatives}
        if variant != preset:  # the preset's own loss is its first row already
            rows[f"minilm {label}"] = variant
    rows["old lstm triplet+hn (before issue 23)"] = OLD_LSTM_DEMO
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2", help="split and training seeds, comma-separated")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    setup_torch(args.threads)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    pairs, _ = load_pairs(SAMPLE)
    zero_shot = MiniLM.pretrained().eval()
    results: dict[str, list[tuple[float, float, float, float]]] = {}
    for seed in seeds:
        for label, options in rows_to_run().items():
            spec = spec_from_options(**{**options, "seed": seed})
            splits = split_pairs(pairs, val_fraction=spec.val_fraction, test_fraction=spec.test_fraction, seed=seed)
            started = time.perf_counter()
            result = train_run(spec, splits, save=False)
            seconds = time.perf_counter() - started
            val = splits.val
            zero = ranking_metrics(val["is_duplicate"], pair_scores(zero_shot, PairTable(val, zero_shot.tokenizer)))
            row = (result.validation["roc_auc"], result.baselines["tfidf"]["roc_auc"], zero["roc_auc"], seconds)
            results.setdefault(label, []).append(row)
            print(f"seed {seed} {label}: val ROC AUC {row[0]:.3f}, TF-IDF {row[1]:.3f}, zero-shot {row[2]:.3f}, "
                  f"{seconds:.1f} s", flush=True)
    print(f"\n{date.today()}, {args.threads} threads, bundled sample ({len(pairs)} pairs), seeds {args.seeds}, "
          f"{len(splits.val)} validation pairs each\n")
    print("| run | val ROC AUC per seed | mean | TF-IDF (mean) | zero-shot MiniLM (mean) | seconds (mean, incl. "
          "loading) |\n|---|---|---|---|---|---|")
    for label, rows in results.items():
        aucs = " / ".join(f"{row[0]:.3f}" for row in rows)
        means = [statistics.mean(row[i] for row in rows) for i in range(4)]
        print(f"| {label} | {aucs} | {means[0]:.3f} | {means[1]:.3f} | {means[2]:.3f} | {means[3]:.1f} |")


if __name__ == "__main__":
    main()
