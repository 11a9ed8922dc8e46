"""The command line starts where FAISS is not installed: only the commands that search import it, and such a
command then says so in one line."""
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "assets" / "sample_pairs.csv"

# Runs ``python -m core ARGS`` in a fresh interpreter in which ``import faiss`` fails as it does where the
# package is absent: a finder ahead of every other one refuses the name.
WITHOUT_FAISS = r"""
import runpy, sys

class NoFaiss:
    def find_spec(self, name, path=None, target=None):
        if name == "faiss" or name.startswith("faiss."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoFaiss())
sys.argv = ["python -m core", *sys.argv[1:]]
runpy.run_module("core", run_name="__main__", alter_sys=True)
"""


def run_without_faiss(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_FAISS, *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "OMP_WAIT_POLICY": "PASSIVE",
                                                       "HF_HUB_OFFLINE": "1"})


def test_every_command_builds_its_parser_and_score_runs_without_faiss(tmp_path):
    # One interpreter for both: main() builds the whole parser for each command, then --help exits; then
    # `python -m core score` runs as the shell starts it.
    out = tmp_path / "scored.csv"
    script = WITHOUT_FAISS.replace("sys.argv =", r"""from core.cli.main import main
for command in ("train", "score", "predict", "evaluate", "calibrate", "export", "embed", "search", "dedup", "suggest"):
    try:
        main([command, "--help"])
    except SystemExit as end:
        assert end.code == 0, command
sys.argv =""")
    done = subprocess.run([sys.executable, "-c", script, "score", "--model", "tfidf", "--pairs", str(SAMPLE), "--out",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("usage:") == 10 and "Traceback" not in done.stderr
    assert out.read_text(encoding="utf-8").splitlines()[0].endswith("similarity,predicted_duplicate")


def test_a_command_that_searches_says_faiss_is_missing_in_one_line(tmp_path):
    done = run_without_faiss("search", "--model", "minilm", "--corpus", SAMPLE, "a question")
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "faiss-cpu" in lines[0]
