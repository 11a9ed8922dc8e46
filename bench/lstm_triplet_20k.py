"""Issue-2 check: the Siamese LSTM with the triplet loss on 20,000 real Quora pairs, through the CLI.

Trains with `python -m core train` on the first 20,000 pairs of the shared data, then runs
`python -m core evaluate` on 5,000 other pairs (rows 300,000-304,999), and prints both commands,
the wall time and the evaluation JSON. The held-out file is written to a temporary folder outside
the project (the data is not redistributable).

    .venv/bin/python bench/lstm_triplet_20k.py [--epochs 10] [extra train args...]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "quora_pairs_part_a.tsv.gz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(SHARED))
    parser.add_argument("--train-rows", type=int, default=20000)
    args, extra = parser.parse_known_args()
    if not Path(args.data).exists():
        sys.exit(f"shared data not found at {args.data}")
    with tempfile.TemporaryDirectory() as tmp:
        held_out = Path(tmp) / "held_out_5k.tsv"
        frame = pd.read_csv(args.data, sep="\t", keep_default_na=False)
        frame.iloc[300_000:305_000].to_csv(held_out, sep="\t", index=False)
        out = Path(tmp) / "model"
        train = [sys.executable, "-m", "core", "train", "--data", args.data, "--max-rows", str(args.train_rows),
                 "--model", "lstm", "--loss", "triplet", "--out", str(out), *extra]
        evaluate = [sys.executable, "-m", "core", "evaluate", "--model", str(out), "--data", str(held_out)]
        print("train:   ", " ".join(train[1:]))
        started = time.perf_counter()
        subprocess.run(train, check=True, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - started
        result = json.loads(subprocess.run(evaluate, check=True, capture_output=True, text=True).stdout)
        print("evaluate:", " ".join(evaluate[1:]).replace(str(held_out), "<rows 300000-304999>"))
        print(f"train wall time: {seconds:.0f} s")
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}))


if __name__ == "__main__":
    main()
