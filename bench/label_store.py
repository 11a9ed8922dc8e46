"""How long one answer takes to save, and the labels to open, with 100,000 labels in the label database.

    .venv/bin/python bench/label_store.py [--existing 100000] [--adds 1000] [--folder DIR]

Fills a new ``LabelStore`` (SQLite, WAL, ``synchronous=FULL``) with ``--existing`` made-up labels in one merge,
then times:

* opening: what the Label page does with the labels on a run, on a store object of its own (a new connection):
  the current labels (``pairs``), their keys (``keys``), the held-out count (``held_out_mask``), the last answers
  (``recent``) and this session's last answer (Undo's ``recent(1, labelled_by=...)``); repeated ``--opens`` times;
* saving: ``--adds`` answers (``LabelStore.add``, each a new pair, each its own fsynced transaction), and as
  many corrections of pairs already labelled.

Prints the median, p99 and largest milliseconds of each. Needs no data. The folder defaults to a temporary one
under the runs folder's file system (the system temporary folder may be a RAM disk, where fsync costs nothing).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.saving.label_store import LabelStore
from core.training.active_rounds import held_out_mask


def summary(name: str, ms: list[float]) -> str:
    values = np.array(ms)
    return (f"{name}: median {np.median(values):.2f} ms, p99 {np.percentile(values, 99):.2f} ms, "
            f"max {values.max():.2f} ms ({len(values):,} timed)")


def open_like_the_page(path: Path) -> None:
    store = LabelStore(path)
    frame = store.pairs()
    store.keys()
    int(held_out_mask(frame).sum())
    store.recent(5)
    store.recent(1, labelled_by="bench")
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--existing", type=int, default=100_000, help="labels in the database before timing")
    parser.add_argument("--adds", type=int, default=1000, help="new answers timed (and as many corrections)")
    parser.add_argument("--opens", type=int, default=5, help="page-like opens timed")
    parser.add_argument("--folder", default=None, help="where the database is written (removed after)")
    args = parser.parse_args()
    parent = Path(args.folder) if args.folder else Path(__file__).resolve().parent.parent / "runs"
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".bench-labels-", dir=parent))
    try:
        path = folder / "labels.sqlite3"
        store = LabelStore(path)
        started = time.perf_counter()
        store.merge(pd.DataFrame({"question1": [f"Existing question number {i} about something?"
                                                for i in range(args.existing)],
                                  "question2": [f"Another question {i}?" for i in range(args.existing)],
                                  "is_duplicate": [i % 2 for i in range(args.existing)]}), labelled_by="bench")
        print(f"{args.existing:,} labels merged in {time.perf_counter() - started:.1f} s into {path.parent.parent}")
        opens = []
        for _ in range(args.opens):
            started = time.perf_counter()
            open_like_the_page(path)
            opens.append((time.perf_counter() - started) * 1000)
        adds, corrections = [], []
        for i in range(args.adds):
            started = time.perf_counter()
            replaced = store.add(f"New question number {i} about something?", f"Its pair {i}?", i % 2, "bench")
            adds.append((time.perf_counter() - started) * 1000)
            assert replaced is None
            started = time.perf_counter()
            replaced = store.add(f"Existing question number {i} about something?", f"Another question {i}?",
                                 1 - i % 2, "bench")
            corrections.append((time.perf_counter() - started) * 1000)
            assert replaced is not None
        assert len(store) == args.existing + args.adds
        print(summary("opening as the Label page does", opens))
        print(summary(f"saving a new answer with {args.existing:,}+ labels", adds))
        print(summary("saving a correction", corrections))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
