"""Loader speed: core.data.load_pairs vs a bare pandas.read_csv on all 323,000 shared Quora rows.

The two are alternated (load_pairs, read_csv, load_pairs, read_csv, ...) in one process and the
medians compared. load_pairs does more -- delimiter/header sniffing, binary check, label parsing,
stripping, drop accounting -- so the goal is a ratio of at most 1.5.

    .venv/bin/python bench/load_speed.py --quick     # 2 runs each
    .venv/bin/python bench/load_speed.py             # 5 runs each
"""
from __future__ import annotations

import gc
import time

try:
    from bench.common import alternate, data_path, header, median, parser, report
except ModuleNotFoundError:  # run as a script: bench/ is on sys.path, the repo is added by common
    from common import alternate, data_path, header, median, parser, report


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--runs", type=int, help="runs per side (default 2 quick / 5)")
    args = p.parse_args()
    runs = args.runs or (2 if args.quick else 5)
    header("load_speed: load_pairs vs pandas.read_csv (all rows)", args.quick)
    path = data_path()

    import pandas as pd

    from core.data import load_pairs

    rows = {}

    def ours() -> float:
        gc.collect()
        started = time.perf_counter()
        pairs, report_ = load_pairs(path)
        seconds = time.perf_counter() - started
        rows["ours"] = (len(pairs), report_.summary())
        return seconds

    def bare() -> float:
        gc.collect()
        started = time.perf_counter()
        frame = pd.read_csv(path, sep="\t", keep_default_na=False)
        seconds = time.perf_counter() - started
        rows["bare"] = len(frame)
        return seconds

    times = alternate({"load_pairs": ours, "read_csv": bare}, runs)
    ours_s, bare_s = median(times["load_pairs"]), median(times["read_csv"])
    report("load_speed (alternated runs)", {
        "rows (read_csv)": rows["bare"],
        "rows kept (load_pairs)": rows["ours"][0],
        "load_pairs report": rows["ours"][1],
        "load_pairs seconds": times["load_pairs"],
        "read_csv seconds": times["read_csv"],
        "median load_pairs s": ours_s,
        "median read_csv s": bare_s,
        "ratio load_pairs/read_csv (goal <= 1.5)": ours_s / bare_s,
    })


if __name__ == "__main__":
    main()
