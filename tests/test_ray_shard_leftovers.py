"""The folder of Ray's vector shards beside ``--out`` follows the lab's rule for temporaries
(core.saving.temp_files): it bears the lab's temporary mark, is removed at the run's end (failed or not), and a
run killed before its end leaves one that the next run there removes once it is a day old; a fresher one is kept.

A local embed or dedup into that folder removes such leftovers too: the next writer beside a temporary does,
whichever its engine. Ray itself is never started: the encoding and gathering are replaced, the folder's
handling is the CLI's own (core.cli.common.ray_vectors, remove_stale_shards)."""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pytest

from core.cli.common import ray_vectors
from core.cli.main import main
from core.inference import ray_engine
from core.saving.temp_files import STALE_SECONDS, TEMP_MARK
from lab.session import SAMPLE_PATH


def shards_folder(parent: Path, token: str, dead: bool) -> Path:
    """A shards folder as a run names it, one shard file in it; a day old when its run is ``dead``."""
    folder = parent / f".tmp-ray-shards{TEMP_MARK}{token}"
    folder.mkdir()
    (folder / "shard-000000000000.vectors.npy").write_bytes(b"x" * 100)
    if dead:
        then = time.time() - STALE_SECONDS - 60
        os.utime(folder, (then, then))
    return folder


@pytest.fixture
def encoding(monkeypatch):
    """Ray's encoding replaced: records the folder it was given (which must exist) and what it held then."""
    seen = {}

    def encode(load, texts, out_dir, **options):
        seen["folder"] = Path(out_dir)
        seen["beside"] = sorted(entry.name for entry in Path(out_dir).parent.iterdir())
        assert Path(out_dir).is_dir()
        if seen.get("fail"):
            raise RuntimeError("an encoder failed")
        return []

    monkeypatch.setattr(ray_engine, "ray_encode", encode)
    monkeypatch.setattr(ray_engine, "gather_shards", lambda stems, total: (np.zeros((0, 0), np.float32), None))
    return seen


def test_a_killed_runs_shards_go_with_the_next_run_and_a_living_runs_stay(tmp_path, encoding):
    (tmp_path / "vec.npy").write_bytes(b"user")
    dead = shards_folder(tmp_path, "0123abcd", dead=True)
    living = shards_folder(tmp_path, "4567abcd", dead=False)  # perhaps another run still going
    ray_vectors(argparse.Namespace(workers=1), [], tmp_path, unit=False)
    ours = encoding["folder"]
    assert ours.parent == tmp_path and ours.name.startswith(f".tmp-ray-shards{TEMP_MARK}")
    assert dead.name not in encoding["beside"]  # gone before the run's encoding began
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["vec.npy", living.name])
    assert (living / "shard-000000000000.vectors.npy").read_bytes() == b"x" * 100


def test_a_failed_run_removes_its_own_shards(tmp_path, encoding):
    encoding["fail"] = True
    with pytest.raises(RuntimeError, match="an encoder failed"):
        ray_vectors(argparse.Namespace(workers=1), [], tmp_path, unit=False)
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def lstm_folder(train_tiny_model, tmp_path_factory) -> Path:
    return train_tiny_model("lstm", tmp_path_factory.mktemp("runs"))


@pytest.mark.parametrize("command", ["embed", "dedup"])
def test_a_local_run_into_the_folder_removes_a_killed_ray_runs_shards_too(command, lstm_folder, tmp_path):
    dead = shards_folder(tmp_path, "0123abcd", dead=True)
    living = shards_folder(tmp_path, "4567abcd", dead=False)
    out = tmp_path / ("vec.npy" if command == "embed" else "clusters.csv")
    source = ["--data", str(SAMPLE_PATH)] if command == "embed" else ["--questions", str(SAMPLE_PATH)]
    assert main([command, "--model", str(lstm_folder), *source, "--out", str(out)]) == 0
    assert out.exists() and not dead.exists() and living.is_dir()
