"""A fault run of ``--engine ray``'s encoding: one encoder actor kills its own process (``os._exit``) on its Nth
batch, once (a marker file keeps the actor Ray restarts from dying again), and the run must still give exactly
the vectors of an undisturbed run, byte for byte.

Both runs share one local Ray (``core.inference.ray_engine.ray_session``, sized to this machine) and encode the
first N distinct questions of the shared Quora pairs with ``ray_encode``; printed: each run's wall time, the
killed process, and whether the vectors are identical.

    .venv/bin/python bench/ray_fault.py [--quick] [--questions N] [--model M] [--workers W] [--kill-at B]
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import add_ray_corpus_options, ray_corpus_args  # noqa: E402
from bench.common import parser as bench_parser  # noqa: E402
from core.inference.ray_engine import BatchEncoder  # noqa: E402


class DiesOnce(BatchEncoder):
    """``BatchEncoder`` whose process exits on its ``kill_at``-th batch unless ``marker`` exists (it writes it
    first): Ray Data restarts the actor and retries the batch. Defined in the script, so Ray ships it by value."""

    kill_at, marker = 3, ""

    def __init__(self, *args):
        super().__init__(*args)
        self.batches = 0

    def __call__(self, batch):
        self.batches += 1
        if self.batches == self.kill_at and not os.path.exists(self.marker):
            Path(self.marker).write_text(str(os.getpid()))
            os._exit(1)
        return super().__call__(batch)


def main() -> int:
    p = bench_parser(__doc__)
    add_ray_corpus_options(p, 2_000, 500)
    p.add_argument("--workers", type=int, default=2, help="Ray encoder actors")
    p.add_argument("--batch-size", type=int, default=64, help="questions per encoder batch")
    p.add_argument("--kill-at", type=int, default=3, help="the batch of an actor on which it dies, once")
    args = ray_corpus_args(p)
    if args is None:
        return 0
    from bench.dedup_speed import load_corpus
    from core.inference.ray_engine import ray_encode, ray_session
    from core.models import load_model

    texts = load_corpus(args.questions)[0]
    seconds, vectors = {}, {}
    load = lambda: load_model(args.model, device="cpu")[0]  # noqa: E731 - Ray ships it to the actors
    with ray_session(), tempfile.TemporaryDirectory() as root:
        DiesOnce.kill_at, DiesOnce.marker = args.kill_at, os.path.join(root, "killed")
        for run, encoder in (("undisturbed", BatchEncoder), ("one actor killed", DiesOnce)):
            started = time.perf_counter()
            vectors[run] = ray_encode(load, texts, batch_size=args.batch_size, workers=args.workers,
                                      encoder=encoder)[0]
            seconds[run] = time.perf_counter() - started
        killed = Path(DiesOnce.marker).read_text() if os.path.exists(DiesOnce.marker) else None
        same = bool(np.array_equal(vectors["undisturbed"], vectors["one actor killed"]))
    print(f"ray_fault.py, {date.today()}: {len(texts):,} questions, model {args.model}, {args.workers} encoder "
          f"actors, batches of {args.batch_size}, an actor killed on its batch {args.kill_at}")
    for run, value in seconds.items():
        print(f"  {run:17s} {value:6.1f} s")
    print(f"  killed process: {killed or 'none (no actor reached that batch)'}; vectors identical: {same}")
    return 0 if same and killed else 1


if __name__ == "__main__":
    sys.exit(main())
