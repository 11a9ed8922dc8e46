"""Two cheap facts behind issue 4's recipes: how much padding length buckets remove, and how
training speed scales from 1 to 2 torch threads on this machine.

Padding: mean padded width of a batch (its longest pair, in tokens) over one epoch's batches of the
first N shared pairs, with and without `TrainConfig.length_buckets`; no model runs.
Threads: pairs/s of a short capped training run (max_steps) at 1 and at 2 threads, each in a fresh
subprocess, for the LSTM of the old `lstm-quora` recipe (2-layer biLSTM 192) and for MiniLM.

    .venv/bin/python bench/padding_and_threads.py --quick        # padding only
    .venv/bin/python bench/padding_and_threads.py                # padding and threads (~5 min)
"""
from __future__ import annotations

import json
import subprocess
import sys

from common import (  # common sets OMP_WAIT_POLICY before torch loads
    REPO,
    data_path,
    load_real_pairs,
    parser,
)

PROBES = {  # name -> (model, run options, training options), as core.training.specs.spec_from_options takes them
    "lstm 2-layer biLSTM 192": ("lstm", {"model_options": {"embedding_dim": 160, "hidden_size": 192, "num_layers": 2,
                                                           "bidirectional": True, "dropout": 0.1}, "max_length": 32},
                                {"batch_size": 256, "lr": 2e-3, "max_steps": 40}),
    "minilm": ("minilm", {"max_length": 40}, {"batch_size": 64, "lr": 2e-5, "max_steps": 8}),
}


def padding(n_pairs: int) -> None:
    import numpy as np

    from core.text.pair_table import PairTable
    from core.text.wordpiece_tokenizer import bert_wordpiece

    table = PairTable(load_real_pairs(n_pairs), bert_wordpiece(40))
    lengths = table.pair_lengths()
    print(f"padding, WordPiece max length 40, first {n_pairs:,} pairs, batch 64 "
          f"(pair length mean {lengths.mean():.1f}, median {np.median(lengths):.0f} tokens)")
    for buckets in (False, True):
        widths = [lengths[rows].max() for rows in table.index_batches("labelled", 64, 0, buckets)]
        print(f"  length_buckets={buckets!s:5}: mean padded width {np.mean(widths):.1f} tokens")


def probe(name: str, threads: int) -> float:
    """pairs/s of one capped run, in this process (called through a subprocess)."""
    import torch

    from core.data import Splits
    from core.training.pipeline import train_run
    from core.training.specs import spec_from_options

    torch.set_num_threads(threads)
    model, run, train = PROBES[name]
    pairs = load_real_pairs(41000)
    spec = spec_from_options(model=model, loss="contrastive", epochs=1, patience=0, max_val_pairs=200, **train, **run)
    result = train_run(spec, Splits(pairs.iloc[:40000], pairs.iloc[40000:40200], pairs.iloc[:0]), save=False)
    return result.outcome.pairs_per_second


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--probe":
        print(json.dumps(probe(sys.argv[2], int(sys.argv[3]))))
        return
    args = parser(__doc__).parse_args()
    data_path()
    padding(20000)
    if args.quick:
        return
    print("training speed, capped runs on the first 40,000 pairs (each in a fresh process):")
    for name in PROBES:
        speeds = {}
        for threads in (1, 2):
            out = subprocess.run([sys.executable, __file__, "--probe", name, str(threads)], capture_output=True,
                                 text=True, check=True, cwd=REPO).stdout
            speeds[threads] = json.loads(out.strip().splitlines()[-1])
        print(f"  {name}: {speeds[1]:.1f} pairs/s on 1 thread, {speeds[2]:.1f} on 2 (ratio {speeds[1] / speeds[2]:.2f})",
              flush=True)


if __name__ == "__main__":
    main()
