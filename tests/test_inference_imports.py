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
for page in {pages!r}:
    at = AppTest.from_file({root!r} + "/app.py", default_timeout=120).run()
    at.switch_page(page).run()
    assert not at.exception, (page, at.exception)
print(json.dumps(sorted(name for name in sys.modules if name.startswith("core"))))
"""


@pytest.fixture(scope="module")
def lstm_folder(tmp_path_factory, train_tiny_model):
    return train_tiny_model("lstm", tmp_path_factory.mktemp("runs"))


def imported_after(commands: list[list[str]], pages: list[str], env_runs: Path) -> list[str]:
    script = SCRIPT.format(root=str(ROOT), commands="".join(f"{c!r}," for c in commands), pages=pages)
    env = {"SIAMESE_LAB_WORKSPACES": str(env_runs), "PATH": "/usr/bin:/bin", "OMP_WAIT_POLICY": "PASSIVE",
           "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_cli_inference_commands_do_not_import_training(lstm_folder, tmp_path):
    folder = str(lstm_folder)
    modules = imported_after([
        ["predict", "--model", folder, "How old are you?", "What is your age?"],
        ["evaluate", "--model", folder, "--data", str(ROOT / "assets" / "sample_pairs.csv"), "--max-rows", "50"],
        ["search", "--model", folder, "--corpus", str(ROOT / "assets" / "sample_pairs.csv"), 
         "-k", "3", "How do I learn Python?"],
        ["embed", "--model", folder, "--data", str(ROOT / "assets" / "sample_pairs.csv"), "--out",
         str(tmp_path / "vectors.npy")],
    ], [], lstm_folder.parent)
    assert "core.models.registry" in modules and "core.saving" in modules  # the check sees real imports
    assert not [name for name in modules if any(name == t or name.startswith(t + ".") for t in TRAINING_MODULES)]


def test_inference_pages_do_not_import_training(lstm_folder):
    pages = [page.path for page in (SIMILARITY, VERDICT, SEARCH, COMPARE, MAP)]
    modules = imported_after([], pages, lstm_folder.parent)
    assert "core.models.registry" in modules
    assert not [name for name in modules if any(name == t or name.startswith(t + ".") for t in TRAINING_MODULES)]
