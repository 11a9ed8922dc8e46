"""Ctrl-C in `python -m core train` cancels after the current step and keeps the best model so far."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from core.models import load_model
from lab.session import SAMPLE_PATH
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def test_first_ctrl_c_saves_the_best_model_so_far(tmp_path):
    out = tmp_path / "model"
    command = [sys.executable, "-m", "core", "train", "--data", str(SAMPLE_PATH), "--model", "lstm",
               "--epochs", "500", "--patience", "0", "--batch-size", "8", "--device", "cpu", "--out", str(out),
               "--model-options", '{"hidden_size": 16, "embedding_dim": 12}']
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # Wait until an epoch has finished (the CLI writes "epoch N: val ..." lines to stderr).
    seen = ""
    deadline = time.time() + 240
    while "epoch 1:" not in seen and time.time() < deadline and process.poll() is None:
        seen += process.stderr.read(1)
    assert "epoch 1:" in seen, seen[-500:]
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == 0, stderr[-1000:]
    summary = json.loads(stdout)
    assert summary["status"] == "cancelled"
    config = json.loads((out / "config.json").read_text())
    assert config["training"]["status"] == "cancelled"
    assert 1 <= config["training"]["best_epoch"] < 500
    model, _ = load_model(out)  # whole and loadable
    assert model.encode(["How old are you?"]).shape == (1, 16)
