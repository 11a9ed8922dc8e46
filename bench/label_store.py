"""How long one answer takes to save: ``LabelStore.add`` (flock, one O_APPEND write, fsync) into a labels file
that already holds 5,000 labels, with the store reading the file on its first call as the Label page does.

    .venv/bin/python bench/label_store.py [--existing 5000] [--adds 1000] [--folder DIR]

Prints the median, p99 and largest milliseconds of the adds (each a new pair, each fsynced). Needs no data:
the questions are made up. The folder defaults to a temporary one under the runs folder's file system (the
system temporary folder may be a RAM disk, where fsync costs nothing).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.saving.label_store import LABEL_COLUMNS, LabelStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--existing", type=int, default=5000, help="labels in the file before timing")
    parser.add_argument("--adds", type=int, default=1000, help="adds timed")
    parser.add_argument("--folder", default=None, help="where the labels file is written (removed after)")
    args = parser.parse_args()
    parent = Path(args.folder) if args.folder else Path(__file__).resolve().parent.parent / "runs"
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".bench-labels-", dir=parent))
    try:
        path = folder / "labels.csv"
        lines = [",".join(LABEL_COLUMNS)]
        lines += [f"Existing question number {i} about something?,Another question {i}?,{i % 2},bench,"
                  "2025-01-01T00:00:00+00:00" for i in range(args.existing)]
        path.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
        store = LabelStore(path)
        times = []
        for i in range(args.adds):
            started = time.perf_counter()
            added = store.add(f"New question number {i} about something?", f"Its pair {i}?", i % 2, "bench")
            times.append((time.perf_counter() - started) * 1000)
            assert added
        assert len(store) == args.existing + args.adds
        ms = np.array(times)
        print(f"{args.adds:,} adds into a file of {args.existing:,} labels ({path.parent.parent}): median "
              f"{np.median(ms):.2f} ms, p99 {np.percentile(ms, 99):.2f} ms, max {ms.max():.2f} ms, "
              f"first {ms[0]:.2f} ms (reads the file)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
