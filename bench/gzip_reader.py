"""gzip reading: core.data.load_pairs through gzip.GzipFile (this tree) against the hand-written member parser it
replaced (the tree before commit 59de8a4), on all 323,000 shared Quora rows (a .tsv.gz).

Each load runs in a fresh interpreter after one warm-up load there; the two readers alternate round by round.

    .venv/bin/python bench/gzip_reader.py --quick     # 3 rounds
    .venv/bin/python bench/gzip_reader.py             # 7 rounds
"""
from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

try:
    from bench.common import data_path, header, median, parser, report
except ModuleNotFoundError:  # run as a script: bench/ is on sys.path, the repo is added by common
    from common import data_path, header, median, parser, report

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "59de8a4^"  # the last tree with the hand-written gzip member parser
ONE_LOAD = ("import sys, time; sys.path.insert(0, sys.argv[1]); from core.data import load_pairs; "
            "load_pairs(sys.argv[2]); t = time.perf_counter(); load_pairs(sys.argv[2]); "
            "print(time.perf_counter() - t)")


def old_tree(folder: Path) -> Path:
    """This checkout's ``core`` with the data reader (text_source, parsing) of ``BEFORE``."""
    archive = subprocess.run(["git", "archive", "HEAD", "core"], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder)
    for name in ("text_source.py", "parsing.py"):
        old = subprocess.run(["git", "show", f"{BEFORE}:core/data/{name}"], cwd=ROOT, capture_output=True,
                             check=True).stdout
        (folder / "core" / "data" / name).write_bytes(old)
    return folder


def one_load(root: Path, data: Path) -> float:
    done = subprocess.run([sys.executable, "-c", ONE_LOAD, str(root), str(data)], capture_output=True, text=True,
                          check=True, cwd=tempfile.gettempdir())
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    args = parser(__doc__).parse_args()
    rounds = 3 if args.quick else 7
    header("gzip_reader: gzip.GzipFile vs the hand-written member parser (load_pairs, all rows)", args.quick)
    data = data_path()
    with tempfile.TemporaryDirectory() as scratch:
        sides = {"GzipFile (now)": ROOT, "member parser (before)": old_tree(Path(scratch))}
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(rounds):
            for name, root in sides.items():
                times[name].append(one_load(root, data))
    now, before = (median(times[name]) for name in sides)
    report("gzip_reader (alternated rounds, fresh interpreters)", {
        **{f"{name} seconds": values for name, values in times.items()},
        "median GzipFile s": now, "median member parser s": before,
        "ratio GzipFile / member parser": now / before,
    })


if __name__ == "__main__":
    main()
