"""Peak memory (RSS) of the two heavy workloads on the whole shared corpus, each in a fresh process.

(a) lstm: `core.training.pipeline.train_run` of the Siamese LSTM (embedding 128, hidden 128, triplet, batch
    256, 10 % validation, nothing saved) on all 323,000 rows, cancelled through the Trainer's stop
    flag after N steps (quick 200, default 500: about one epoch). Loading, splitting, the word
    vocabulary and tokenising every question are what dominate.
(b) minilm: every distinct question of the corpus (quick: the first 20,000; default: 100,000)
    embedded with MiniLM (`model.encode`, batch 256) in chunks of 5,000, each chunk written to a
    float32 numpy memmap in /tmp (opened per chunk, so written pages leave this process' RSS).
    The current RSS is printed at every 10,000 questions to show it stays bounded.

Each workload runs in its own subprocess; peak = `resource.getrusage(RUSAGE_SELF).ru_maxrss`,
current = VmRSS (anon + file) from /proc.

    .venv/bin/python bench/memory.py --quick     # 200 steps; 20,000 questions
    .venv/bin/python bench/memory.py             # 500 steps; 100,000 questions
    .venv/bin/python bench/memory.py --only minilm --questions 30000
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    from bench.common import (
        current_rss_mb,
        header,
        load_real_pairs,
        parser,
        peak_rss_mb,
        report,
        setup_torch,
    )
except ModuleNotFoundError:  # run as a script: bench/ is on sys.path, the repo is added by common
    from common import (
        current_rss_mb,
        header,
        load_real_pairs,
        parser,
        peak_rss_mb,
        report,
        setup_torch,
    )

CHUNK = 5_000
MARK_EVERY = 10_000


def rss_breakdown() -> str:
    fields = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key = line.split(":")[0]
            if key in ("RssAnon", "RssFile"):
                fields[key] = int(line.split()[1]) / 1024
    except OSError:
        return ""
    return f"anon {fields.get('RssAnon', 0):.0f} + file {fields.get('RssFile', 0):.0f}"


class Stages:
    """Current and peak RSS at named points of a child run."""

    def __init__(self):
        self.rows, self.started = [], time.perf_counter()

    def mark(self, name: str) -> None:
        self.rows.append((name, round(current_rss_mb()), round(peak_rss_mb()), rss_breakdown(),
                          round(time.perf_counter() - self.started, 1)))


def child_lstm(steps: int) -> dict:
    stages = Stages()
    setup_torch()
    import torch  # noqa: F401

    from core.training.pipeline import train_run
    from core.training.specs import spec_from_options

    stages.mark("imports")
    pairs = load_real_pairs()
    stages.mark(f"load_pairs ({len(pairs):,} rows)")

    class StopAfter:
        def on_train_start(self, trainer):
            stages.mark(f"train start: vocab + tokenised tables ({trainer.steps_per_epoch} steps/epoch)")

        def on_batch_end(self, trainer):
            if trainer.step >= steps:
                stages.mark(f"after step {trainer.step}")
                trainer.cancel()

        def on_train_end(self, trainer):
            stages.mark(f"train end ({trainer.outcome.status}, {trainer.step} steps)")

    spec = spec_from_options(model="lstm", loss="triplet", model_options=dict(embedding_dim=128, hidden_size=128),
                             epochs=1, batch_size=256, lr=2e-3, seed=0, device="cpu", patience=0)
    result = train_run(spec, pairs, callbacks=[StopAfter()], save=False)
    stages.mark(f"train_run returned (validation scored on {result.validation.get('n', 0):,} pairs)")
    return {"stages": stages.rows, "peak_mb": round(peak_rss_mb())}


def child_minilm(questions: int) -> dict:
    stages = Stages()
    setup_torch()
    import numpy as np
    import pandas as pd

    from core.models import MiniLM

    stages.mark("imports")
    pairs = load_real_pairs()
    stages.mark(f"load_pairs ({len(pairs):,} rows)")
    texts = pd.unique(pd.concat([pairs["question1"], pairs["question2"]]).to_numpy()).tolist()
    distinct = len(texts)
    del pairs
    texts = texts[:questions]
    stages.mark(f"distinct questions ({distinct:,}; embedding {len(texts):,})")
    model = MiniLM.pretrained().eval()
    stages.mark("MiniLM loaded")
    dim = model.embedding_dim
    path = Path(tempfile.gettempdir()) / f"bench_memory_vectors_{os.getpid()}.f32"
    row_bytes = dim * np.dtype(np.float32).itemsize
    with open(path, "wb") as handle:
        handle.truncate(len(texts) * row_bytes)
    next_mark = MARK_EVERY
    try:
        for start in range(0, len(texts), CHUNK):
            chunk = texts[start : start + CHUNK]
            vectors = model.encode(chunk, batch_size=256).numpy()  # (c, d) float32
            out = np.memmap(path, dtype=np.float32, mode="r+", offset=start * row_bytes, shape=(len(chunk), dim))
            out[:] = vectors
            out.flush()
            del out  # unmap: the written pages stay in the page cache, not in this process
            done = start + len(chunk)
            if done >= next_mark or done == len(texts):
                stages.mark(f"embedded {done:,}")
                next_mark = (done // MARK_EVERY + 1) * MARK_EVERY
        check = np.memmap(path, dtype=np.float32, mode="r", shape=(len(texts), dim))
        norms = np.linalg.norm(np.asarray(check[-3:]), axis=1).round(4).tolist()
        del check
    finally:
        path.unlink(missing_ok=True)
    return {"stages": stages.rows, "peak_mb": round(peak_rss_mb()), "last_norms": norms,
            "vectors_mb": round(len(texts) * row_bytes / 2**20)}


def run_child(kind: str, amount: int) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--amount", str(amount)]
    print("  running:", " ".join(Path(c).name if i < 2 else c for i, c in enumerate(command)), flush=True)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "TQDM_DISABLE": "1"})
    if done.returncode != 0:
        raise SystemExit(f"{kind} child failed:\n{done.stderr[-3000:]}")
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
    result = json.loads(line[len("RESULT "):])
    result["seconds"] = time.perf_counter() - started
    return result


def show(title: str, result: dict) -> None:
    figures = {}
    for name, current, peak, breakdown, seconds in result["stages"]:
        figures[f"{name} [{seconds:.0f} s]"] = f"current {current} MB ({breakdown}), peak {peak} MB"
    figures["PEAK RSS MB"] = result["peak_mb"]
    for key in ("vectors_mb", "last_norms"):
        if key in result:
            figures[key] = result[key]
    figures["child wall s"] = result["seconds"]
    report(title, figures)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--only", choices=("lstm", "minilm"))
    p.add_argument("--steps", type=int, help="LSTM steps (default 200 quick / 500)")
    p.add_argument("--questions", type=int, help="questions to embed (default 20,000 quick / 100,000)")
    p.add_argument("--child", choices=("lstm", "minilm"), help=argparse_hidden())
    p.add_argument("--amount", type=int, help=argparse_hidden())
    args = p.parse_args()
    if args.child:
        result = child_lstm(args.amount) if args.child == "lstm" else child_minilm(args.amount)
        print("RESULT " + json.dumps(result), flush=True)
        return
    steps = args.steps or (200 if args.quick else 500)
    questions = args.questions or (20_000 if args.quick else 100_000)
    header("memory: peak RSS per workload, one fresh process each", args.quick)
    if args.only in (None, "lstm"):
        show(f"(a) LSTM training, all rows, {steps} steps", run_child("lstm", steps))
    if args.only in (None, "minilm"):
        show(f"(b) MiniLM embedding of {questions:,} distinct questions, chunks of {CHUNK:,}",
             run_child("minilm", questions))


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
