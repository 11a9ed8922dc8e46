"""`train --preset auto` (and other recipes) on 20,000 Quora pairs: does auto keep its budget, what does it choose?

Quora part A, shuffled (seed 0): --train pairs train; the validation and test pairs come after them and share
no question with the training pairs nor with each other. One `python -m core train --preset auto --data TRAIN
--val VAL --test TEST` (default budget unless --budget-minutes), as a user would run it: its wall time, its
`candidate:` lines (each candidate's validation figure, interval against zero-shot MiniLM and seconds) and the
chosen model's test figures beside zero-shot MiniLM's on the same test pairs.

    .venv/bin/python bench/auto_quora.py [--quick] [--train 20000] [--val 2000] [--test 5000] [--budget-minutes M]
        [--recipes auto,cross-encoder,augmented,minilm-quora]
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import REPO, header, load_real_pairs, parser  # noqa: E402

OUT = REPO / "bench" / "out" / "auto_quora"  # ignored: the splits and the saved models stay here
RECIPES = {"auto": ["--preset", "auto"], "cross-encoder": ["--model", "cross-encoder"],
           "augmented": ["--preset", "augmented"], "minilm-quora": ["--preset", "minilm-quora"]}


def splits(train: int, val: int, test: int):
    """(train, val, test) pairs, the held-out ones sharing no question with any other split."""
    pairs = load_real_pairs().sample(frac=1.0, random_state=0).reset_index(drop=True)
    chosen, seen = [pairs.iloc[:train]], set(pairs["question1"].iloc[:train]) | set(pairs["question2"].iloc[:train])
    rest = pairs.iloc[train:]
    for size in (val, test):
        rest = rest[~rest["question1"].isin(seen) & ~rest["question2"].isin(seen)]
        chosen.append(rest.iloc[:size])
        seen |= set(chosen[-1]["question1"]) | set(chosen[-1]["question2"])
        rest = rest.iloc[size:]
    return chosen


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--train", type=int, default=20000)
    p.add_argument("--val", type=int, default=2000)
    p.add_argument("--test", type=int, default=5000)
    p.add_argument("--budget-minutes", type=float, default=None, help="auto's budget (default: the lab's)")
    p.add_argument("--recipes", default="auto", help=f"comma-separated: {', '.join(RECIPES)}")
    args = p.parse_args()
    if args.quick:
        args.train, args.val, args.test, args.budget_minutes = 2000, 500, 500, 2
    header(f"auto on {args.train:,} Quora pairs", args.quick)
    OUT.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, frame in zip(("train", "val", "test"), splits(args.train, args.val, args.test)):
        files[name] = OUT / f"{name}{len(frame)}.csv"
        frame.to_csv(files[name], index=False)
        print(f"{name}: {len(frame):,} pairs, {frame['is_duplicate'].mean():.1%} duplicates")
    zero_shot = subprocess.run([sys.executable, "-m", "core", "evaluate", "--model", "minilm", "--data",
                                str(files["test"])], cwd=REPO, capture_output=True, text=True)
    show("zero-shot MiniLM", json.loads(zero_shot.stdout))
    for recipe in args.recipes.split(","):
        argv = ["train", *RECIPES[recipe], "--data", str(files["train"]), "--val", str(files["val"]), "--test",
                str(files["test"]), "--out", str(OUT / f"{recipe}{args.train}"), "--overwrite", "--device", "cpu"]
        argv += ["--budget-minutes", str(args.budget_minutes)] if args.budget_minutes and recipe == "auto" else []
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "core", *argv], cwd=REPO, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        print(f"\npython -m core train {' '.join(RECIPES[recipe])} ...: exit {done.returncode}, {seconds:.0f} s wall")
        for line in done.stderr.splitlines():
            if line.startswith(("candidate:", "chosen:", "error:")):
                print("  " + line)
        if done.returncode:
            continue
        result = json.loads(done.stdout)
        (OUT / f"{recipe}{args.train}.json").write_text(json.dumps(result, indent=1))
        show(recipe + (f" (chose {result['chosen']})" if "chosen" in result else ""), result["test"])


def show(name: str, test: dict) -> None:
    low, high = test["intervals"]["roc_auc"]
    print(f"test ROC AUC {test['roc_auc']:.4f} [{low:.4f}, {high:.4f}], accuracy {test['accuracy']:.3f}, "
          f"F1 {test['f1']:.3f}: {name}", flush=True)


if __name__ == "__main__":
    main()
