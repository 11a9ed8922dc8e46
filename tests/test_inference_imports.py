"""Inference never goes through training: loading and scoring a model imports neither the trainer,
the training pipeline, the spec builder nor the job queue (the losses may load: the heatmap reads them)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lab.navigation import COMPARE, MAP, SEARCH, SIMILARITY, VERDICT

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TRAINING_MODULES = ["core.training.trainer", "core.training.pipeline", "core.training.specs", "core.training.jobs"]

# Runs in a fresh interpreter, so modules imported by other tests cannot hide an import.
SCRIPT = r"""
import json, sys
sys.path.insert(0, {root!r})
from streamlit.testing.v1 import AppTest
from core.cli.main import main

for command in ({commands}):
    assert main(command) == 0, command
after_commands = sorted(name for name in sys.modules if name.startswith("core"))
for page in {pages!r}:
    at = AppTest.from_file({root!r} + "/app.py", default_timeout=120).run()
    at.switch_page(page).run()
    assert not at.exception, (page, at.exception)
print(json.dumps([after_commands, sorted(name for name in sys.modules if name.startswith("core"))]))
"""


def training_modules(modules: list[str]) -> list[str]:
    return [name for name in modules if any(name == t or name.startswith(t + ".") for t in TRAINING_MODULES)]


@pytest.fixture(scope="module")
def imported(tmp_path_factory, train_tiny_model) -> tuple[list[str], list[str]]:
    """The core modules loaded in one fresh interpreter after the CLI's inference commands, then after the
    inference pages as well (one interpreter for both: its start and imports are most of the cost)."""
    folder = train_tiny_model("lstm", tmp_path_factory.mktemp("runs"))
    sample = str(ROOT / "assets" / "sample_pairs.csv")
    commands = [
        ["predict", "--model", str(folder), "How old are you?", "What is your age?"],
        ["evaluate", "--model", str(folder), "--data", sample, "--max-rows", "50"],
        ["search", "--model", str(folder), "--corpus", sample, "-k", "3", "How do I learn Python?"],
        ["embed", "--model", str(folder), "--data", sample, "--out", str(tmp_path_factory.mktemp("vectors") / "vectors.npy")],
    ]
    pages = [page.path for page in (SIMILARITY, VERDICT, SEARCH, COMPARE, MAP)]
    script = SCRIPT.format(root=str(ROOT), commands="".join(f"{c!r}," for c in commands), pages=pages)
    env = {"SIAMESE_LAB_WORKSPACES": str(folder.parent), "PATH": "/usr/bin:/bin", "OMP_WAIT_POLICY": "PASSIVE",
           "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    after_commands, after_pages = json.loads(done.stdout.strip().splitlines()[-1])
    return after_commands, after_pages


def test_cli_inference_commands_do_not_import_training(imported):
    after_commands, _ = imported
    assert "core.models.registry" in after_commands and "core.saving" in after_commands  # real imports seen
    assert not training_modules(after_commands)


def test_inference_pages_do_not_import_training(imported):
    # Exact once the commands' test passes: what the pages load adds to what the commands loaded.
    _, after_pages = imported
    assert "core.models.registry" in after_pages
    assert not training_modules(after_pages)
