"""A training never loses a user's file: outputs are claimed before training, refused when they are not
ours, replaced only with --overwrite, never by a worse unfinished run, and written by one training at a time."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from core.cli.main import main
from core.models import load_model
from core.saving import OutputError, claim_new_run, claim_output
from core.status import CANCELLED

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "assets" / "sample_pairs.csv"
TINY = ["--model-options", json.dumps({"hidden_size": 10, "embedding_dim": 12}), "--max-length", "16",
        "--device", "cpu"]


def tree_digest(root: Path) -> dict:
    """Every path under ``root`` with its content hash (folders as None): what "unchanged" means."""
    digest = {}
    for path in sorted(root.rglob("*")):
        relative = str(path.relative_to(root))
        digest[relative] = None if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def user_folder(tmp_path) -> Path:
    """The issue's folder: notes, a sub-folder with a file, and the training data itself."""
    folder = tmp_path / "u"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("x\n")
    (folder / "sub" / "a.csv").write_text("y\n")
    shutil.copy(SAMPLE, folder / "sample_pairs.csv")
    return folder


# ---- the four that lost work --------------------------------------------------------------------------
def test_out_on_a_folder_that_is_not_a_model_is_refused_and_nothing_changes(capsys, user_folder):
    before = tree_digest(user_folder.parent)
    code, out, err = run_cli(capsys, "train", "--data", user_folder / "sample_pairs.csv", "--epochs", "1",
                             "--out", user_folder, *TINY)
    assert code == 2 and out == ""
    assert "is not a model folder" in one_error_line(err)
    assert tree_digest(user_folder.parent) == before


def test_out_on_a_file_is_refused_and_the_file_stays(capsys, user_folder):
    before = tree_digest(user_folder.parent)
    code, _, err = run_cli(capsys, "train", "--data", SAMPLE, "--epochs", "1", "--out", user_folder / "notes.txt", *TINY)
    assert code == 2 and "is not a model folder" in one_error_line(err)
    assert tree_digest(user_folder.parent) == before


def train_into(capsys, out: Path, *extra) -> dict:
    code, stdout, err = run_cli(capsys, "train", "--data", SAMPLE, "--epochs", "1", "--out", out, *TINY, *extra)
    assert code == 0, err
    return json.loads(stdout)


def test_replacing_a_model_needs_overwrite(capsys, tmp_path):
    out = tmp_path / "model"
    train_into(capsys, out, "--seed", "1")
    before = tree_digest(tmp_path)
    code, _, err = run_cli(capsys, "train", "--data", SAMPLE, "--epochs", "1", "--out", out, *TINY)
    assert code == 2 and "holds a saved model; add --overwrite to replace it" in one_error_line(err)
    assert tree_digest(tmp_path) == before
    summary = train_into(capsys, out, "--seed", "2", "--overwrite")
    assert summary["status"] == "done" and summary["folder"] == str(out)
    assert json.loads((out / "config.json").read_text())["train_config"]["seed"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no lock, temp or old folder left


def test_an_empty_folder_is_a_fine_output(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    assert train_into(capsys, tmp_path / "empty")["folder"] == str(tmp_path / "empty")
    load_model(tmp_path / "empty")


class CancelAtFirstStep:
    def __init__(self, stop: threading.Event):
        self.stop = stop

    def on_batch_end(self, trainer):
        self.stop.set()


def set_validation_auc(folder: Path, auc: float) -> None:
    """Make the saved model look better (or worse) than any new run: the rule compares this figure."""
    config = json.loads((folder / "config.json").read_text())
    config["metrics"]["validation"]["roc_auc"] = auc
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("saved_auc,replaced", [(0.99, False), (0.0, True)])
def test_a_cancelled_run_replaces_a_model_only_when_better(tmp_path, sample_pairs, saved_auc, replaced):
    from core.training.pipeline import train_run
    from core.training.specs import spec_from_options

    pairs, _ = sample_pairs
    out = tmp_path / "model"
    # keep_unvalidated: a run cancelled at its first step is a candidate at all (it is dropped otherwise, below)
    spec = spec_from_options(model="lstm", epochs=2, batch_size=32, device="cpu", keep_unvalidated=True,
                             model_options={"hidden_size": 10, "embedding_dim": 12})
    train_run(spec, pairs, out_dir=out)
    set_validation_auc(out, saved_auc)
    before = tree_digest(out)
    stop = threading.Event()
    cancelled = train_run(spec, pairs, out_dir=out, overwrite=True, stop_event=stop, callbacks=[CancelAtFirstStep(stop)])
    assert cancelled.outcome.status == CANCELLED and cancelled.outcome.best_epoch == 0
    if replaced:
        assert cancelled.folder == out and cancelled.note == ""
        assert json.loads((out / "config.json").read_text())["training"]["status"] == CANCELLED
    else:
        assert cancelled.folder is None and "is not better" in cancelled.note and str(out) in cancelled.note
        assert tree_digest(out) == before


def test_a_run_cancelled_before_its_first_validation_never_replaces_a_model(tmp_path, sample_pairs):
    from core.training.pipeline import train_run
    from core.training.specs import spec_from_options

    pairs, _ = sample_pairs
    out = tmp_path / "model"
    spec = spec_from_options(model="lstm", epochs=2, batch_size=32, device="cpu",
                             model_options={"hidden_size": 10, "embedding_dim": 12})
    assert spec.keep_unvalidated is False  # the default
    train_run(spec, pairs, out_dir=out)
    set_validation_auc(out, 0.0)  # even a model any run would beat stays
    before = tree_digest(out)
    stop = threading.Event()
    cancelled = train_run(spec, pairs, out_dir=out, overwrite=True, stop_event=stop, callbacks=[CancelAtFirstStep(stop)])
    assert cancelled.outcome.status == CANCELLED and cancelled.folder is None
    assert cancelled.note == (f"kept the model already in {out}: this run was cancelled before its first validation "
                              "(the keep-unvalidated option keeps such runs)")
    assert tree_digest(out) == before

    fresh = tmp_path / "fresh"  # and into a new folder: nothing at all
    stop.clear()
    result = train_run(spec, pairs, out_dir=fresh, stop_event=stop, callbacks=[CancelAtFirstStep(stop)])
    assert result.folder is None and result.note.startswith("nothing saved: this run was cancelled")
    assert not fresh.exists()


def test_the_cli_ctrl_c_with_overwrite_keeps_the_trained_model(tmp_path, capsys):
    out = tmp_path / "model"
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    args = ["train", "--data", str(SAMPLE), "--out", str(out), "--batch-size", "8", *TINY]
    code, _, err = run_cli(capsys, *args, "--epochs", "1")  # the model to keep, trained in this process
    assert code == 0, err
    set_validation_auc(out, 0.99)
    base = [sys.executable, "-m", "core", *args]
    before = tree_digest(out)
    process = subprocess.Popen([*base, "--epochs", "500", "--overwrite"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    seen = ""
    while "step" not in seen and process.poll() is None:  # the progress bar shows the first steps
        seen += process.stderr.read(1)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-2000:]
    assert json.loads(stdout)["status"] == "cancelled" and json.loads(stdout)["folder"] is None
    assert "note: kept the model already in" in stderr
    assert tree_digest(out) == before


# ---- one writer per folder ------------------------------------------------------------------------------
def test_a_second_writer_to_the_same_folder_is_refused_at_once(capsys, tmp_path):
    out = tmp_path / "model"
    with claim_output(out):
        with pytest.raises(OutputError) as refused:
            claim_output(out)
        assert refused.value.reason == "busy"
        code, _, err = run_cli(capsys, "train", "--data", SAMPLE, "--epochs", "1", "--out", out, *TINY)
        assert code == 2 and "another process is writing this folder" in one_error_line(err)
    with claim_output(out) as claim:  # released: free again
        assert claim.target == out and claim.existing is None
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_killed_writer_leaves_no_lock_behind(tmp_path):
    out = tmp_path / "model"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, %r)\n"
        "from core.saving import claim_output\n"
        "claim = claim_output(%r); print('claimed', flush=True); time.sleep(600)") % (str(ROOT), str(out))],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "claimed"
    with pytest.raises(OutputError, match="another process"):
        claim_output(out)
    holder.kill()
    holder.wait(timeout=30)
    assert [p.name for p in tmp_path.iterdir()] == [".model.lock"]  # the file stays; its flock went with it
    claim_output(out).release()
    assert list(tmp_path.iterdir()) == []  # the next writer took the lock file over and removed it


@pytest.mark.parametrize("content", [b"my notes on m1\n", b""], ids=["notes", "empty"])
def test_a_users_file_named_like_the_lock_is_never_removed_or_rewritten(capsys, tmp_path, content):
    mine = tmp_path / ".m1.lock"
    mine.write_bytes(content)
    os.utime(mine, (1_000_000_000, 1_000_000_000))
    train_into(capsys, tmp_path / "m1")
    assert mine.read_bytes() == content and mine.stat().st_mtime == 1_000_000_000
    with claim_output(tmp_path / "m1", overwrite=True):  # it still keeps a second writer out
        with pytest.raises(OutputError, match="another process"):
            claim_output(tmp_path / "m1", overwrite=True)
    assert mine.read_bytes() == content and sorted(p.name for p in tmp_path.iterdir()) == [".m1.lock", "m1"]


def test_a_link_named_like_the_lock_is_refused_not_followed(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    (tmp_path / ".m1.lock").symlink_to(target)
    with pytest.raises(OutputError, match="cannot lock it") as refused:
        claim_output(tmp_path / "m1")
    assert refused.value.reason == "unwritable" and target.read_text() == "keep me"
    assert (tmp_path / ".m1.lock").is_symlink()


def test_new_runs_claimed_at_once_get_distinct_folders(tmp_path):
    claims = [claim_new_run(tmp_path, "lstm", "triplet") for _ in range(3)]
    names = [claim.target.name for claim in claims]
    assert len(set(names)) == 3 and names[1] == names[0] + "-2" and names[2] == names[0] + "-3"
    for claim in claims:
        claim.release()


@pytest.mark.parametrize("where", ["parent_is_a_file", "proc"])
def test_an_unwritable_output_is_found_before_training(capsys, tmp_path, where):
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "model" if where == "parent_is_a_file" else Path("/proc/siamese-lab/model")
    code, out_text, err = run_cli(capsys, "train", "--data", SAMPLE, "--epochs", "1", "--out", out, *TINY)
    assert code == 2 and out_text == ""
    line = one_error_line(err)
    said = f"{tmp_path / 'file'} is a file, not a folder" if where == "parent_is_a_file" else "cannot"
    assert said in line and "epoch" not in err  # refused before any training step


def test_a_folder_name_too_long_for_a_save_is_refused_before_training(capsys, tmp_path):
    from core.saving import claim_output, write_folder_atomically
    from core.saving.atomic import FOLDER_NAME_MAX_BYTES

    code, out_text, err = run_cli(capsys, "train", "--data", SAMPLE, "--epochs", "1", "--out",
                                  tmp_path / ("m" * (FOLDER_NAME_MAX_BYTES + 1)), *TINY)
    assert code == 2 and out_text == ""
    assert f"longer than the {FOLDER_NAME_MAX_BYTES} bytes" in one_error_line(err) and "epoch" not in err
    assert list(tmp_path.iterdir()) == []
    longest = tmp_path / ("é" * (FOLDER_NAME_MAX_BYTES // 2) + "m" * (FOLDER_NAME_MAX_BYTES % 2))  # the longest name
    with claim_output(longest):  # the longest name that fits is saved, and saved again
        for text in ("1", "2"):
            write_folder_atomically(longest, lambda temp: (temp / "a.txt").write_text(text))
    assert (longest / "a.txt").read_text() == "2"


def test_the_app_runs_folder_follows_the_same_rule(tmp_path, sample_pairs):
    from core.training.pipeline import train_run
    from core.training.specs import spec_from_options

    root = tmp_path / "runs"
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    spec = spec_from_options(model="lstm", epochs=1, batch_size=32, device="cpu",
                             model_options={"hidden_size": 10, "embedding_dim": 12})
    results = [train_run(spec, sample_pairs[0], runs_root=root) for _ in range(2)]
    assert results[0].folder != results[1].folder and all(r.folder.parent == root for r in results)
    assert (root / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in root.iterdir()) == sorted(["notes.txt", *(r.folder.name for r in results)])
