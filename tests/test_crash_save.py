"""A save killed with SIGKILL leaves the OLD model or the NEW one, whole (reliability case "crash during save").

Every case replaces an existing saved SiameseLSTM ("old", seed 1) with a different one ("new",
seed 2, other weights and other vocabulary) and kills the saving process:

  * at every filesystem step of ``save_model``: the child process counts Python audit events
    (mkdir, open, rename, rmtree...) and SIGKILLs itself just before the N-th one, for every N. The
    new folder takes the target's place by two renames; a kill between them (the one window) leaves
    the target missing and the old model whole in the ``.old-*`` folder ``list_runs`` names;
  * at random moments during a large save (vocabulary 200k x 64, ~50 MB of weights), spread over
    the save's measured duration, to land inside the safetensors write itself.

Afterwards the target folder loads, and weights, vocabulary and config are all the old model's or
all the new one's; ``list_runs`` lists the target and reports every ``.tmp-*`` / ``.old-*`` leftover,
and the next save removes the ``.tmp-*`` folders the killed one left once they are a day old.

The saving processes are forked from one driver subprocess (this file run as a script) so torch is
imported once; nothing in ``core`` knows it is being tested.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script (the driver), not by pytest
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402
import torch  # noqa: E402

from core.models import (  # noqa: E402
    SiameseLSTM,
    SiameseLSTMConfig,
    load_model,  # noqa: E402
)
from core.saving import list_runs, save_model  # noqa: E402
from core.text.word_tokenizer import WordTokenizer  # noqa: E402
import pytest

pytestmark = pytest.mark.slow

OLD_SEED, NEW_SEED = 1, 2
TARGET = "run"
SMALL = {"vocab_size": 99, "embedding_dim": 16, "hidden_size": 32}  # every dimension different
LARGE = {"vocab_size": 200_000, "embedding_dim": 64, "hidden_size": 8}  # ~51 MB embedding table
TIMED_ATTEMPTS = 5
# Audit events that mark a filesystem step of a save (see "Audit events table" in the Python docs).
WATCHED_EVENTS = frozenset(
    {"os.mkdir", "open", "os.listdir", "os.scandir", "os.rename", "os.remove", "os.rmdir",
     "shutil.rmtree", "shutil.move", "os.link", "os.symlink"}
)


def build_model(seed: int, vocab_size: int, embedding_dim: int, hidden_size: int) -> SiameseLSTM:
    """Same seed, same model, in any process: seeded weights and a seed-specific vocabulary."""
    torch.manual_seed(seed)
    vocab = [WordTokenizer.pad_token, WordTokenizer.unk_token] + [f"s{seed}w{i}" for i in range(vocab_size - 2)]
    config = SiameseLSTMConfig(vocab_size=vocab_size, embedding_dim=embedding_dim, hidden_size=hidden_size)
    return SiameseLSTM(config, WordTokenizer(vocab, max_length=7))


# ---------------------------------------------------------------------------------------------
# The driver: runs in a subprocess, forks one saving child per case
# ---------------------------------------------------------------------------------------------


def _driver(args: dict) -> list[dict]:
    torch.set_num_threads(1)  # no intra-op thread pool to inherit across fork()
    new = build_model(NEW_SEED, **args["model"])
    results, measured = [], None
    for case in args["cases"]:
        pid = os.fork()
        if pid == 0:
            _child(new, case)  # never returns
        started = time.perf_counter()
        delay = case.get("kill_after")
        if "kill_at_fraction" in case:  # of the duration of the last whole save in this driver
            delay = case["kill_at_fraction"] * measured
        if delay is not None:
            time.sleep(delay)
            os.kill(pid, signal.SIGKILL)  # the child may be done already: then it is a zombie, no harm
        _, status = os.waitpid(pid, 0)
        seconds = time.perf_counter() - started
        if delay is None:
            measured = seconds
        results.append(
            {
                "killed": os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL,
                "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                "seconds": seconds,
                "delay": delay,
            }
        )
    return results


def _child(model, case: dict) -> None:
    try:
        events: list[str] = []
        kill_at = case.get("kill_at")

        def audit(event, _args):
            if event in WATCHED_EVENTS:
                events.append(event)
                if len(events) == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)  # just before the kill_at-th step happens

        sys.addaudithook(audit)
        save_model(model, case["folder"], metadata={"generation": "new"})
        recorded = list(events)
        if case.get("events_file"):
            Path(case["events_file"]).write_text(json.dumps(recorded))
        os._exit(0)
    except BaseException:
        import traceback

        traceback.print_exc()
        os._exit(1)


def run_driver(model: dict, cases: list[dict]) -> list[dict]:
    completed = subprocess.run(
        [sys.executable, __file__, json.dumps({"model": model, "cases": cases})],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# Checks (in the pytest process)
# ---------------------------------------------------------------------------------------------


def prepare_cases(tmp_path: Path, model: dict, count: int) -> tuple[SiameseLSTM, list[Path]]:
    """``count`` roots, each holding the old model saved as ``TARGET``."""
    old = build_model(OLD_SEED, **model)
    snapshot = tmp_path / "snapshot"
    save_model(old, snapshot / TARGET, metadata={"generation": "old"})
    roots = []
    for index in range(count):
        root = tmp_path / f"case-{index:03d}"
        shutil.copytree(snapshot, root, symlinks=True)
        roots.append(root)
    return old, roots


def leftovers(root: Path) -> list[str]:
    return sorted(path.name for path in root.iterdir() if path.name.startswith((".tmp-", ".old-")))


def rename_back(root: Path) -> None:
    """What ``list_runs`` asks after a kill between the two renames: the ``.old-*`` folder renamed back."""
    (displaced,) = [name for name in leftovers(root) if name.startswith(".old-")]
    assert any(problem.startswith(f"{displaced}:") and "rename" in problem for problem in list_runs(root)[1])
    os.rename(root / displaced, root / TARGET)


def assert_old_or_new_whole(root: Path, old: SiameseLSTM, new: SiameseLSTM) -> str:
    """The target loads and every part of it is the old model's or every part the new one's."""
    runs, problems = list_runs(root)
    assert [run["name"] for run in runs] == [TARGET], problems
    for name in leftovers(root):
        assert any(problem.startswith(f"{name}:") for problem in problems), (name, problems)
    assert not any(problem.startswith(f"{TARGET}:") for problem in problems), problems

    model, config = load_model(root / TARGET)
    generation = config["generation"]
    expected = {"old": old, "new": new}[generation]
    assert torch.equal(model.embedding.weight, expected.embedding.weight)
    loaded, wanted = model.state_dict(), expected.state_dict()
    assert loaded.keys() == wanted.keys()
    assert all(torch.equal(loaded[key], wanted[key]) for key in wanted)
    assert model.tokenizer.vocab == expected.tokenizer.vocab
    assert config["model_config"]["vocab_size"] == expected.config.vocab_size
    return generation


def save_steps(tmp_path: Path, model: dict) -> list[str]:
    """The filesystem steps of one whole save over the old model, in order."""
    _, (root,) = prepare_cases(tmp_path / "count", model, 1)
    events_file = tmp_path / "events.json"
    (result,) = run_driver(model, [{"folder": str(root / TARGET), "events_file": str(events_file)}])
    assert result["exit_code"] == 0
    events = json.loads(events_file.read_text())
    assert events.count("os.rename") == 2, events  # the old folder aside, the new one into its place
    return events


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


def test_sigkill_before_every_filesystem_step_leaves_old_or_new_model(tmp_path):
    events = save_steps(tmp_path, SMALL)
    steps = len(events)
    assert steps >= 8  # mkdir, writes, fsync opens, renames...: the count is real
    first_rename, second_rename = (index + 1 for index, event in enumerate(events) if event == "os.rename")
    old, roots = prepare_cases(tmp_path / "cases", SMALL, steps)
    new = build_model(NEW_SEED, **SMALL)
    cases = [{"folder": str(root / TARGET), "kill_at": step} for step, root in zip(range(1, steps + 1), roots)]
    results = run_driver(SMALL, cases)

    generations, missing = [], []
    for step, root, result in zip(range(1, steps + 1), roots, results):
        assert result["killed"], f"step {step} of {steps} was never reached"
        if not (root / TARGET).exists():
            # Killed after the old folder went aside, before the new one took its place: the one window.
            assert first_rename < step <= second_rename, f"target missing after a kill before step {step}"
            missing.append(step)
            rename_back(root)
        generations.append(assert_old_or_new_whole(root, old, new))

    print(f"{steps} crash points -> {generations.count('old')} old, {generations.count('new')} new, "
          f"{len(missing)} missing until renamed back")
    assert "old" in generations and "new" in generations  # the kills span the whole save
    assert missing == list(range(first_rename + 1, second_rename + 1))  # every kill in the window, and only those

    # The next save to the same place removes the temporary folders the killed saves left, once a day old.
    left = [root for root in roots if any(name.startswith(".tmp-") for name in leftovers(root))]
    assert left, "no kill left a temporary folder"
    day_ago = time.time() - 2 * 24 * 3600
    for root in left:
        for name in leftovers(root):
            os.utime(root / name, (day_ago, day_ago))
        save_model(new, root / TARGET, metadata={"generation": "new"})
        assert not any(name.startswith(".tmp-") for name in leftovers(root)), leftovers(root)
        assert assert_old_or_new_whole(root, old, new) == "new"


def test_sigkill_at_random_moments_during_a_large_save(tmp_path):
    old, (measure_root, *roots) = prepare_cases(tmp_path, LARGE, 1 + TIMED_ATTEMPTS)
    new = build_model(NEW_SEED, **LARGE)
    rng = random.Random(0)
    # The driver first saves whole once to time it, then kills one save in each fifth of that
    # time, at a random point within the fifth.
    fractions = [(index + rng.random()) / TIMED_ATTEMPTS for index in range(TIMED_ATTEMPTS)]
    cases = [{"folder": str(measure_root / TARGET)}] + [
        {"folder": str(root / TARGET), "kill_at_fraction": fraction} for root, fraction in zip(roots, fractions)
    ]
    measured, *results = run_driver(LARGE, cases)
    assert measured["exit_code"] == 0
    duration = measured["seconds"]
    assert assert_old_or_new_whole(measure_root, old, new) == "new"
    shutil.rmtree(measure_root)

    outcome = []
    for root, result in zip(roots, results):
        assert result["killed"] or result["exit_code"] == 0
        if not (root / TARGET).exists():  # killed in the one window between the renames
            rename_back(root)
        outcome.append((result["killed"], assert_old_or_new_whole(root, old, new), leftovers(root)))
        shutil.rmtree(root)  # ~100 MB per case
    print(f"save takes {duration:.3f} s; (killed, generation, leftovers) per attempt: {outcome}")


if __name__ == "__main__":
    print(json.dumps(_driver(json.loads(sys.argv[1]))))
