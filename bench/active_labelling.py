"""Is the active-labelling loop worth it? Labels chosen by uncertainty against labels drawn at random (issue 24).

A simulated user labels pairs with the shared Quora labels as the oracle. The oracle only knows the pairs Quora
labelled, so the loop chooses from a *pool* of labelled pairs (pool-based active learning): each round, the current
model scores the pool's unlabelled pairs, ``core.inference.candidates.choose_pairs`` picks 100 (``uncertainty``:
closest to the model's threshold, no question twice, 10 % at random; or ``random``), the oracle answers, and the
model is fine-tuned from where it is (``--init-model``) on the labels so far with the loop's recipe
(``core.training.active_rounds.retrain_spec``: one epoch, so the CPU budget grows with the labels). Every
round's model is scored on a fixed set of labelled test pairs whose questions never occur in the pool.

Curves: labels (x) against test ROC AUC (y), from zero-shot MiniLM at 0 labels, for both strategies; plus one-shot
fine-tunes of zero-shot MiniLM on 1,000 / 2,000 / 5,000 random labels, to say how many random labels the loop's
1,000 are worth. Prints a markdown table and writes bench/out/active_labelling.json (``--plot`` draws docs/active_labelling.png).

    .venv/bin/python bench/active_labelling.py            # about 35 minutes on 2 threads
    .venv/bin/python bench/active_labelling.py --quick    # small sizes, a few minutes
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import load_real_pairs, parser, setup_torch  # noqa: E402
from core.data import Splits, split_pairs  # noqa: E402
from core.inference.calibration import pair_threshold  # noqa: E402
from core.inference.candidates import choose_pairs, embed_corpus  # noqa: E402
from core.inference.metrics import ranking_metrics  # noqa: E402
from core.models import load_model  # noqa: E402
from core.model_names import ZERO_SHOT  # noqa: E402
from core.training.active_rounds import held_out_mask, retrain_spec  # noqa: E402
from core.training.pipeline import train_run  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
COLUMNS = ["question1", "question2", "is_duplicate"]


def test_auc(model, test: pd.DataFrame) -> float:
    scores = model.score_pairs(test["question1"].tolist(), test["question2"].tolist())
    return ranking_metrics(test["is_duplicate"].to_numpy(), scores)["roc_auc"]


def fine_tune(init_model: str, labels: pd.DataFrame, work: Path, name: str, seed: int) -> str:
    """The loop's retraining: from ``init_model`` ("" = zero-shot MiniLM) on ``labels``, the held-out share as
    validation (it calibrates the threshold). Returns the new model's folder."""
    held = held_out_mask(labels)
    splits = Splits(labels[~held].reset_index(drop=True), labels[held].reset_index(drop=True), labels.iloc[:0])
    spec = retrain_spec(init_model, {"seed": seed})
    result = train_run(spec, splits, out_dir=work / name)
    return str(result.folder)


def threshold_of(model, config: dict, labels: pd.DataFrame) -> float:
    """The current model's pair threshold: its own (saved) one, or zero-shot's calibrated on the labels."""
    if not len(labels):
        return pair_threshold(config).threshold
    scores = model.score_pairs(labels["question1"].tolist(), labels["question2"].tolist())
    return pair_threshold(config, labels["is_duplicate"].to_numpy(), scores).threshold


def loop(strategy: str, pool: pd.DataFrame, test: pd.DataFrame, rounds: int, per_round: int, work: Path,
         seed: int) -> list[dict]:
    """Rounds of ``per_round`` labels chosen by ``strategy`` from ``pool``; one curve point per round."""
    folder, labelled = "", pool.iloc[:0]
    zero_shot, _ = load_model(ZERO_SHOT)
    curve = [{"labels": 0, "roc_auc": test_auc(zero_shot, test), "seconds": 0.0}]
    print(f"{strategy}: 0 labels, test ROC AUC {curve[0]['roc_auc']:.4f}", flush=True)
    for round_ in range(1, rounds + 1):
        started = time.perf_counter()
        model, config = load_model(folder or ZERO_SHOT)
        remaining = pool.drop(index=labelled.index)
        corpus = embed_corpus(model, pd.concat([remaining["question1"], remaining["question2"]]).tolist())
        candidates = remaining.assign(similarity=corpus.similarity(remaining["question1"].tolist(),
                                                                    remaining["question2"].tolist()))
        threshold = threshold_of(model, config, labelled)
        chosen = choose_pairs(candidates.reset_index(names="pool_row"), per_round, threshold, strategy=strategy,
                              seed=seed + round_)
        labelled = pd.concat([labelled, pool.loc[chosen["pool_row"].to_numpy()]])
        folder = fine_tune(folder, labelled[COLUMNS].reset_index(drop=True), work, f"{strategy}_{round_}", seed)
        model, _ = load_model(folder)
        point = {"labels": len(labelled), "roc_auc": test_auc(model, test), "threshold": threshold,
                 "duplicates": int(labelled["is_duplicate"].sum()), "seconds": time.perf_counter() - started}
        curve.append(point)
        print(f"{strategy}: {point['labels']} labels ({point['duplicates']} duplicates), threshold {threshold:.3f}, "
              f"test ROC AUC {point['roc_auc']:.4f}, {point['seconds']:.0f} s", flush=True)
    return curve


def one_shot(sizes: list[int], pool: pd.DataFrame, test: pd.DataFrame, work: Path, seed: int) -> list[dict]:
    """Zero-shot MiniLM fine-tuned once on ``size`` random labels of ``pool``, for each size."""
    points = []
    for size in sizes:
        started = time.perf_counter()
        labels = pool.sample(n=min(size, len(pool)), random_state=seed)[COLUMNS].reset_index(drop=True)
        model, _ = load_model(fine_tune("", labels, work, f"once_{size}", seed))
        points.append({"labels": len(labels), "roc_auc": test_auc(model, test), "seconds": time.perf_counter() - started})
        print(f"one-shot random: {len(labels)} labels, test ROC AUC {points[-1]['roc_auc']:.4f}", flush=True)
    return points


def worth(auc: float, once: list[dict]) -> str:
    """How many one-shot random labels give ``auc``, interpolated on the one-shot curve (labels, AUC)."""
    xs, ys = [p["labels"] for p in once], [p["roc_auc"] for p in once]
    if auc <= ys[0]:
        return f"at most {xs[0]:,}"
    if auc >= max(ys):
        return f"more than {xs[int(np.argmax(ys))]:,}"
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if y0 <= auc <= y1 and y1 > y0:
            return f"about {x0 + (auc - y0) / (y1 - y0) * (x1 - x0):,.0f}"
    return "not monotonic: see the table"


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--pool", type=int, default=4000, help="labelled pairs the loop may ask about")
    p.add_argument("--test", type=int, default=1500, help="labelled test pairs, their questions unseen in the pool")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--per-round", type=int, default=100)
    p.add_argument("--once", default="1000,2000,5000", help="one-shot random label counts")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--plot", action="store_true", help="also write docs/active_labelling.png")
    args = p.parse_args()
    if args.quick:
        args.pool, args.test, args.rounds, args.per_round, args.once = 600, 300, 2, 50, "100,300"
    setup_torch(args.threads)
    pairs = load_real_pairs()
    splits = split_pairs(pairs, val_fraction=0.0, test_fraction=0.1, seed=2026, by_question=True)
    test = splits.test.sample(n=min(args.test, len(splits.test)), random_state=args.seed).reset_index(drop=True)
    once_sizes = [int(size) for size in args.once.split(",")]
    train = splits.train.sample(n=max(args.pool, *once_sizes), random_state=args.seed).reset_index(drop=True)
    pool = train.iloc[: args.pool]
    results = {"date": str(date.today()), "threads": args.threads, "pool": len(pool), "test": len(test),
               "per_round": args.per_round}
    with tempfile.TemporaryDirectory(prefix="active_labelling_") as tmp:
        work = Path(tmp)
        for strategy in ("uncertainty", "random"):
            results[strategy] = loop(strategy, pool, test, args.rounds, args.per_round, work, args.seed)
        results["once"] = one_shot(once_sizes, train, test, work, args.seed)
    OUT.mkdir(exist_ok=True)
    (OUT / "active_labelling.json").write_text(json.dumps(results, indent=2))
    print(f"\n{results['date']}, {args.threads} threads; pool {len(pool):,} labelled Quora pairs, test {len(test):,} "
          f"pairs with unseen questions; rounds of {args.per_round}\n")
    print("| labels | uncertainty ROC AUC | random ROC AUC |\n|---|---|---|")
    for a, b in zip(results["uncertainty"], results["random"]):
        print(f"| {a['labels']:,} | {a['roc_auc']:.4f} | {b['roc_auc']:.4f} |")
    print("\n| one-shot random labels | ROC AUC |\n|---|---|")
    for point in results["once"]:
        print(f"| {point['labels']:,} | {point['roc_auc']:.4f} |")
    last = results["uncertainty"][-1]
    print(f"\nThe loop's {last['labels']:,} labels (ROC AUC {last['roc_auc']:.4f}) are worth "
          f"{worth(last['roc_auc'], results['once'])} one-shot random labels.")
    if args.plot:
        plot(results)


def plot(results: dict) -> None:
    """docs/active_labelling.png: the three curves (matplotlib, as bench/plot_curves.py draws its PNG)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: write the file only
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5))
    for key, name in (("uncertainty", "uncertainty loop"), ("random", "random loop"), ("once", "random, one fine-tune")):
        axes.plot([p["labels"] for p in results[key]], [p["roc_auc"] for p in results[key]], marker="o", label=name)
    axes.set(title="Labels against test ROC AUC (Quora pairs, unseen questions)", xlabel="labels", ylabel="ROC AUC")
    axes.grid(alpha=0.3)
    axes.legend()
    target = Path(__file__).resolve().parents[1] / "docs" / "active_labelling.png"
    figure.savefig(target, dpi=110, bbox_inches="tight")
    print(f"figure: {target}")


if __name__ == "__main__":
    main()
