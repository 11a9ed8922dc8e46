"""Shared helpers for the speed benchmarks: the data path, thread setup, side-by-side timing, peak RSS.

Absolute times on a shared 2-core machine are noise; every ratio is measured by alternating the two
sides in one process (A, B, A, B, ...) and comparing medians.
"""
from __future__ import annotations

import argparse
import datetime
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

# OpenMP's default active spin-wait makes 2 torch threads 4-10x slower than 1 when the 2 cores are
# shared with other busy processes (measured 2026-11-22, load ~10). Passive waiting keeps the figures
# usable; export OMP_WAIT_POLICY=ACTIVE to measure the default. Must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # so `python bench/x.py` can import core
    sys.path.insert(0, str(REPO))

# The Quora pairs live next to the project, never inside it (not redistributable).
DATA = Path(__file__).resolve().parents[2] / "shared/data/quora_pairs_part_a.tsv.gz"


def data_path() -> Path:
    """The shared Quora file, or exit with a clear message when it is absent."""
    if not DATA.is_file():
        sys.exit(f"benchmark data not found: {DATA}\n"
                 "These benchmarks need the shared Quora pairs (quora_pairs_part_a.tsv.gz) next to the project.")
    return DATA


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes, well under 2 minutes")
    return p


def add_ray_corpus_options(p: argparse.ArgumentParser, questions: int, quick_questions: int) -> None:
    """The Ray benchmarks' corpus options: how many distinct Quora questions (fewer with --quick) and the model."""
    p.add_argument("--questions", type=int, default=questions, help=f"distinct questions (--quick: {quick_questions:,})")
    p.add_argument("--model", default="minilm", help="'minilm' (zero-shot) or a saved model folder")
    p.set_defaults(quick_questions=quick_questions)


def ray_corpus_args(p: argparse.ArgumentParser):
    """Parsed arguments with --quick's corpus size applied; None (after saying so) without the shared data."""
    args = p.parse_args()
    if args.quick:
        args.questions = args.quick_questions
    if not DATA.is_file():
        print(f"skipped: the shared Quora pairs are not at {DATA}")
        return None
    return args


def setup_torch(threads: int = 2) -> None:
    import torch

    torch.set_num_threads(threads)


def load_real_pairs(max_rows: int | None = None):
    """The shared pairs as (question1, question2, is_duplicate), through the project's loader."""
    from core.data import load_pairs

    pairs, _ = load_pairs(data_path(), max_rows=max_rows)
    return pairs


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, MB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    """Resident set size right now, MB (VmRSS from /proc; the peak when /proc is unavailable)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return peak_rss_mb()


def alternate(sides: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Run each side once per round, in turn (A, B, A, B, ...); seconds per call, per side.

    A side may return a number of seconds itself (to exclude its own setup); otherwise its wall
    time is used.
    """
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, run in sides.items():
            started = time.perf_counter()
            result = run()
            elapsed = time.perf_counter() - started
            times[name].append(float(result) if isinstance(result, (int, float)) and not isinstance(result, bool) else elapsed)
    return times


def median(values) -> float:
    return float(statistics.median(values))


def header(title: str, quick: bool) -> None:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"# {title} -- {datetime.date.today().isoformat()} -- mode={'quick' if quick else 'default'} "
          f"-- cpus={os.cpu_count()} -- load avg {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"-- OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'default')}", flush=True)


def _format(value) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "nan"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.3g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_format(v) for v in value) + "]"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def report(name: str, figures: dict) -> None:
    """Print one block of figures: a title line, then `key: value` lines."""
    print(f"\n== {name} ==")
    width = max((len(str(k)) for k in figures), default=0)
    for key, value in figures.items():
        print(f"  {str(key).ljust(width)} : {_format(value)}")
    sys.stdout.flush()


def pairs_above(graph, threshold: float):
    """Every (i, j, cosine) above ``threshold`` that ``graph`` finds, both directions: for measuring recall."""
    return graph.pairs_above(threshold)


def neighbourhood_sizes(graph, threshold: float):
    """(N,) how many rows lie above ``threshold`` of each row of a ``NeighbourGraph``, itself included, capped."""
    import numpy as np

    sizes, _, graph.capped = graph._neighbourhoods(np.float32(threshold))
    return sizes[graph.inverse]
