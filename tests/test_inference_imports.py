"""Inference never goes through training: loading and scoring a model imports neither the trainer,
the training pipeline, the spec builder nor the job queue (the losses may load: the heatmap reads them).
Nor does local work import Ray: the dedup command and page, with core.inference.ray_engine loaded."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.navigation import COMPARE, DEDUPLICATE, MAP, SEARCH, SIMILARITY, VERDICT

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
after_pages = sorted(name for name in sys.modules if name.startswith("core"))
# Then Ray: loading its engine, a local dedup and the Deduplicate page leave it unimported.
import core.inference.ray_engine
dedup = main({dedup!r})
at = AppTest.from_file({root!r} + "/app.py", default_timeout=120).run()
at.switch_page({dedup_page!r}).run()
print(json.dumps([after_commands, after_pages, [dedup, "ray" in sys.modules, [c.value for c in at.caption],
                  [e.value for e in at.exception]]]))
"""


def training_modules(modules: list[str]) -> list[str]:
    return [name for name in modules if any(name == t or name.startswith(t + ".") for t in TRAINING_MODULES)]


@pytest.fixture(scope="module")
def imported(tmp_path_factory, tiny_lstm) -> tuple[list[str], list[str], list]:
    """The core modules loaded in one fresh interpreter after the CLI's inference commands, then after the
    inference pages as well, then (dedup's exit code, whether Ray loaded, the Deduplicate page's captions and
    errors) after a local dedup (one interpreter for all: its start and imports are most of the cost)."""
    folder = tiny_lstm
    sample = str(ROOT / "assets" / "sample_pairs.csv")
    commands = [
        ["predict", "--model", str(folder), "How old are you?", "What is your age?"],
        ["evaluate", "--model", str(folder), "--data", sample, "--max-rows", "50"],
        ["search", "--model", str(folder), "--corpus", sample, "-k", "3", "How do I learn Python?"],
        ["embed", "--model", str(folder), "--data", sample, "--out", str(tmp_path_factory.mktemp("vectors") / "vectors.npy")],
    ]
    pages = [page.path for page in (SIMILARITY, VERDICT, SEARCH, COMPARE, MAP)]
    dedup = ["dedup", "--model", str(folder), "--questions", sample,
             "--out", str(tmp_path_factory.mktemp("clusters") / "c.csv")]
    script = SCRIPT.format(root=str(ROOT), commands="".join(f"{c!r}," for c in commands), pages=pages,
                           dedup=dedup, dedup_page=DEDUPLICATE.path)
    env = {"SIAMESE_LAB_WORKSPACES": str(folder.parent), "SIAMESE_LAB_CACHE": os.environ["SIAMESE_LAB_CACHE"],
           "PATH": "/usr/bin:/bin", "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


def test_cli_inference_commands_do_not_import_training(imported):
    after_commands, _, _ = imported
    assert "core.models.registry" in after_commands and "core.saving" in after_commands  # real imports seen
    assert not training_modules(after_commands)


def test_inference_pages_do_not_import_training(imported):
    # Exact once the commands' test passes: what the pages load adds to what the commands loaded.
    _, after_pages, _ = imported
    assert "core.models.registry" in after_pages
    assert not training_modules(after_pages)


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
def test_the_app_page_and_the_local_commands_never_import_ray(imported):
    _, _, (code, ray_imported, captions, errors) = imported
    assert code == 0 and not errors and not ray_imported
    [engine] = [c for c in captions if c.startswith("Engine: local")]
    assert "python -m core dedup --engine ray" in engine  # Ray is installed here: the page offers it
