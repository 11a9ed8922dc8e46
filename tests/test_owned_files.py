"""``--overwrite`` replaces only what the lab wrote, and a killed writer's leftovers go with the next write to
the same place.

A folder holding anything the lab did not write (a user's ``NOTES.md``, ``plots/roc.png``, a nested folder, a
link inside the folder and a link out of it) is never replaced: ``train --overwrite`` and ``export --overwrite``
refuse in one line naming them, before any work, and change nothing; once the user has moved them away, the
same command replaces the folder. A folder without the lab's record of its files (saved before folders recorded
them, ``tests/fixtures/legacy/lstm_words``, or its record lost) holds nothing the lab wrote. (Crashes during the
replacement: tests/test_crash_save.py.)
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from core.cli.main import main
from core.export.manifest import MANIFEST_FILE
from core.saving import (
    CONFIG_FILE,
    RECORD_FILE,
    WEIGHTS_FILE,
    ForeignFilesError,
    write_folder_atomically,
)
from core.saving.atomic import owned_by, user_entries
from core.saving.atomic import TEMP_MARK, remove_stale_temps, temp_path
from core.text.word_tokenizer import WORD_TOKENIZER_FILE

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "assets" / "sample_pairs.csv"
LEGACY = ROOT / "tests" / "fixtures" / "legacy" / "lstm_words"
TINY = ["--model-options", json.dumps({"hidden_size": 10, "embedding_dim": 12}), "--max-length", "16",
        "--device", "cpu", "--epochs", "1"]
USER_ENTRIES = ["NOTES.md", "deep/", "latest.md", "outside", "plots/"]


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def add_user_files(folder: Path) -> Path:
    """The issue's NOTES.md and plots/roc.png, a nested folder, a link inside and a link out of the folder;
    returns the file the outside link points to."""
    (folder / "NOTES.md").write_text("# my notes\nthreshold looks high\n")
    (folder / "plots").mkdir()
    (folder / "plots" / "roc.png").write_bytes(bytes(range(256)) * 40)
    os.chmod(folder / "plots" / "roc.png", 0o600)
    (folder / "deep" / "er" / "still").mkdir(parents=True)
    (folder / "deep" / "er" / "still" / "data.csv").write_text("a,b\n1,2\n")
    (folder / "deep" / "empty").mkdir()
    os.symlink("NOTES.md", folder / "latest.md")
    outside = folder.parent / "outside-target.txt"
    outside.write_text("not in the folder")
    os.symlink(outside, folder / "outside")
    return outside


def user_snapshot(folder: Path, names=("NOTES.md", "plots", "deep", "latest.md", "outside")) -> dict:
    """Every user entry under ``folder``, never following a link: kind, bytes' hash, mode, link text."""
    snapshot = {}
    pending = list(names)
    while pending:
        relative = pending.pop()
        path = folder / relative
        info = os.lstat(path)
        if path.is_symlink():
            snapshot[relative] = ("link", os.readlink(path))
        elif path.is_dir():
            snapshot[relative] = ("folder", info.st_mode)
            pending.extend(f"{relative}/{name}" for name in os.listdir(path))
        else:
            snapshot[relative] = ("file", hashlib.sha256(path.read_bytes()).hexdigest(), info.st_mode, info.st_mtime_ns)
    return snapshot


def one_error(err: str) -> str:
    """The one line of a refused command: ``error: ...``, no traceback, nothing else."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def move_away(folder: Path, names, to: Path) -> None:
    to.mkdir()
    for name in names:
        os.rename(folder / name, to / name)


def assert_no_leftovers(parent: Path) -> None:
    assert [p.name for p in parent.iterdir() if p.name.startswith((".tmp-", ".old-")) or p.name.endswith(".lock")] == []


# ---- train --overwrite ----------------------------------------------------------------------------
def test_train_overwrite_refuses_a_model_holding_the_users_notes_until_they_are_moved(capsys, tmp_path):
    out = tmp_path / "model"
    code, _, err = run_cli(capsys, "train", "--data", SAMPLE, "--out", out, "--seed", "1", *TINY)
    assert code == 0, err
    (out / "NOTES.md").write_text("# my notes\nthreshold looks high\n")
    before = tree(out)

    code, stdout, err = run_cli(capsys, "train", "--data", SAMPLE, "--out", out, "--seed", "2", "--overwrite", *TINY)
    assert code == 2 and stdout == ""
    error = one_error(err)
    assert f"--out {out}: holds NOTES.md, which Siamese Lab did not write" in error and "move them out" in error
    assert tree(out) == before  # byte for byte, the same inodes: nothing was replaced
    assert_no_leftovers(tmp_path)

    move_away(out, ["NOTES.md"], tmp_path / "mine")
    code, stdout, err = run_cli(capsys, "train", "--data", SAMPLE, "--out", out, "--seed", "2", "--overwrite", *TINY)
    assert code == 0, err
    assert json.loads(stdout)["folder"] == str(out)
    assert json.loads((out / CONFIG_FILE).read_text())["train_config"]["seed"] == 2
    assert sorted(p.name for p in out.iterdir()) == sorted([CONFIG_FILE, WEIGHTS_FILE, WORD_TOKENIZER_FILE,
                                                            RECORD_FILE])
    assert (tmp_path / "mine" / "NOTES.md").read_text() == "# my notes\nthreshold looks high\n"
    assert_no_leftovers(tmp_path)


@pytest.mark.parametrize("folder", ["legacy model", "export without its record"])
def test_overwrite_refuses_a_folder_without_its_files_record_naming_its_files(capsys, tiny_models, tmp_path, folder):
    """Without the record nothing proves the lab wrote the files: they are the user's, and named."""
    out = tmp_path / "out"
    if folder == "legacy model":
        shutil.copytree(LEGACY, out)
        command = ["train", "--data", SAMPLE, "--out", out, "--seed", "2", "--overwrite", *TINY]
        named = "config.json, model.safetensors, word_vocab.txt"
    else:
        command = ["export", "--model", tiny_models["lstm"], "--format", "onnx", "--out", out]
        code, _, err = run_cli(capsys, *command)
        assert code == 0, err
        (out / RECORD_FILE).unlink()
        command.append("--overwrite")
        named = "README.md, model.onnx, siamese_lab.json and 1 more"
    before = tree(out)
    code, stdout, err = run_cli(capsys, *command)
    assert code == 2 and stdout == ""
    assert f"--out {out}: holds {named}, which Siamese Lab did not write" in one_error(err)
    assert tree(out) == before
    assert_no_leftovers(tmp_path)


# ---- export --overwrite ---------------------------------------------------------------------------
def test_export_overwrite_refuses_a_folder_holding_the_users_files_until_they_are_moved(capsys, tiny_models,
                                                                                         tmp_path):
    out = tmp_path / "export"
    code, _, err = run_cli(capsys, "export", "--model", tiny_models["lstm"], "--format", "onnx", "--out", out)
    assert code == 0, err
    outside = add_user_files(out)
    before, users, graph = tree(out), user_snapshot(out), (out / "model.onnx").read_bytes()
    again = ["export", "--model", tiny_models["lstm"], "--format", "onnx", "--out", out, "--overwrite",
             "--quantize", "int8"]

    code, stdout, err = run_cli(capsys, *again)
    assert code == 2 and stdout == ""
    # The first three in order, the rest counted.
    assert f"--out {out}: holds NOTES.md, deep, latest.md and 2 more, which Siamese Lab did not write" in one_error(err)
    assert tree(out) == before and outside.read_text() == "not in the folder"
    assert_no_leftovers(tmp_path)

    move_away(out, [name.rstrip("/") for name in USER_ENTRIES], tmp_path / "mine")
    code, stdout, err = run_cli(capsys, *again)
    assert code == 0, err
    assert json.loads((out / MANIFEST_FILE).read_text())["quantization"] == "int8-dynamic"
    assert (out / "model.onnx").read_bytes() != graph
    assert json.loads(stdout)["files"] == ["README.md", "model.onnx", "siamese_lab.json", "tokenizer.json"]
    assert user_snapshot(tmp_path / "mine") == users  # moved by the user, never touched by the lab
    assert_no_leftovers(tmp_path)


def test_a_link_where_the_export_writes_is_the_users_and_stops_the_overwrite(capsys, tiny_models, tmp_path):
    out = tmp_path / "export"
    code, _, err = run_cli(capsys, "export", "--model", tiny_models["lstm"], "--format", "onnx", "--out", out)
    assert code == 0, err
    # The user replaced the model card by a link to their own: a link is never the lab's.
    mine = tmp_path / "my-card.md"
    mine.write_text("my card")
    (out / "README.md").unlink()
    os.symlink(mine, out / "README.md")
    before = tree(out)
    code, stdout, err = run_cli(capsys, "export", "--model", tiny_models["lstm"], "--format", "onnx", "--out", out,
                                "--overwrite")
    assert code == 2 and stdout == ""
    assert "holds README.md, which Siamese Lab did not write" in one_error(err)
    assert tree(out) == before and mine.read_text() == "my card"
    assert_no_leftovers(tmp_path)


# ---- the rule itself, on folders the lab writes with sub-folders -----------------------------------
def _lab_writes(version: str):
    def write(folder: Path) -> None:
        (folder / "sub").mkdir()
        (folder / "sub" / "lab.txt").write_text(version)
        (folder / "top.txt").write_text(version)
    return write


def test_a_users_file_inside_a_lab_folder_stops_the_write_and_a_forged_record_is_not_trusted(tmp_path):
    target = tmp_path / "f"
    write_folder_atomically(target, _lab_writes("1"))
    (target / "sub" / "mine.txt").write_text("mine")
    (target / "sub" / "mine-link").symlink_to("/etc/hostname")
    before = tree(target)
    with pytest.raises(ForeignFilesError, match=r"f: holds sub/mine-link, sub/mine\.txt, which Siamese Lab did not"):
        write_folder_atomically(target, _lab_writes("2"))
    assert tree(target) == before and sorted(p.name for p in tmp_path.iterdir()) == ["f"]
    # A record that is a link, or names paths outside the folder, owns nothing it names.
    record = json.loads((target / RECORD_FILE).read_text())
    record["files"] += ["../f/sub/mine.txt", "/etc/passwd", "", "sub/../sub/mine.txt"]
    (target / RECORD_FILE).write_text(json.dumps(record))
    assert user_entries(target, owned_by(target)) == ["sub/mine-link", "sub/mine.txt"]
    (target / RECORD_FILE).unlink()
    (target / RECORD_FILE).symlink_to(tmp_path / "forged.json")
    (tmp_path / "forged.json").write_text(json.dumps({**record, "files": ["sub/mine.txt"]}))
    # ...so the folder owns nothing but the record's name, which a link never is: all of it is the user's.
    assert user_entries(target, owned_by(target)) == sorted([RECORD_FILE, "sub", "top.txt"])


def test_a_users_file_made_while_the_new_folder_was_written_stops_the_replacement(tmp_path):
    """Checked again once the old folder is aside, just before the new one takes its place: put back whole."""
    target = tmp_path / "f"
    write_folder_atomically(target, _lab_writes("1"))

    def write(temp: Path) -> None:
        _lab_writes("2")(temp)
        (target / "my_notes.txt").write_text("the only copy")

    with pytest.raises(ForeignFilesError, match=r"f: holds my_notes\.txt"):
        write_folder_atomically(target, write)
    assert (target / "my_notes.txt").read_text() == "the only copy" and (target / "top.txt").read_text() == "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_a_link_or_file_at_the_target_is_never_replaced(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "file").write_text("mine")
    for name in ("link", "file"):
        with pytest.raises(FileExistsError):
            write_folder_atomically(tmp_path / name, _lab_writes("1"))
    assert list((tmp_path / "elsewhere").iterdir()) == [] and (tmp_path / "file").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "file", "link"]


def test_a_folder_left_aside_by_a_writer_killed_between_its_renames_is_left_whole(tmp_path):
    """Killed between the two renames: the target is missing, its previous content whole in .old-*, which the
    next write leaves as it is (the user's to rename back or remove)."""
    target = tmp_path / "f"
    write_folder_atomically(target, _lab_writes("1"))
    os.rename(target, tmp_path / ".old-f-0123abcd")
    write_folder_atomically(target, _lab_writes("2"))
    assert (target / "top.txt").read_text() == "2" and (tmp_path / ".old-f-0123abcd" / "top.txt").read_text() == "1"


NAMES = ["top.txt", "sub", "lab.txt", "new.txt", "a", "b.png", RECORD_FILE]
user_trees = st.lists(st.tuples(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3),
                                st.sampled_from(["file", "folder", "link in", "link out", "fifo"])), max_size=8)


def tree(folder: Path) -> dict:
    """Every entry under ``folder``, links not followed: what "unchanged" means."""
    found = {}
    for here, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(here) / name
            relative = str(path.relative_to(folder))
            info = os.lstat(path)
            found[relative] = (("link", os.readlink(path)) if path.is_symlink() else ("folder",) if path.is_dir()
                               else ("file", path.read_bytes(), info.st_ino) if path.is_file() else ("other",))
    return found


def make_user_folders(root: Path, parts: list[str]) -> bool:
    """The folders ``parts`` under ``root``, made where missing; False when one is a link or a file (the
    test never writes through a link)."""
    here = root
    for part in parts:
        here = here / part
        if not os.path.lexists(here):
            here.mkdir()
        elif here.is_symlink() or not here.is_dir():
            return False
    return True


@settings(max_examples=100, deadline=None)
@given(entries=user_trees)
def test_any_user_tree_stops_the_rewrite_and_stays_as_it_was(entries):
    """Random user files, folders, links and FIFOs, at the top, inside the lab's folder and at the lab's
    names: a rewrite refuses and changes nothing when there is any, and replaces the folder when there is none."""
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch) / "f"
        write_folder_atomically(target, _lab_writes("1"))
        for parts, kind in entries:
            path = target.joinpath(*parts)
            if os.path.lexists(path) or not make_user_folders(target, parts[:-1]):
                continue
            if kind == "file":
                path.write_text("/".join(parts))
            elif kind == "folder":
                path.mkdir()
            elif kind == "fifo":
                os.mkfifo(path)
            else:
                path.symlink_to("../top.txt" if kind == "link in" else "/etc")
        users = user_entries(target, owned_by(target))
        before = tree(target)
        event("refused" if users else "replaced")
        if users:
            with pytest.raises(ForeignFilesError) as refused:
                write_folder_atomically(target, _lab_writes("2"))
            assert refused.value.entries == users and users[0][:200] in str(refused.value)
            assert tree(target) == before
        else:
            write_folder_atomically(target, _lab_writes("2"))
            assert (target / "top.txt").read_text() == "2" and (target / "sub" / "lab.txt").read_text() == "2"
        assert sorted(p.name for p in Path(scratch).iterdir()) == ["f"]


# ---- leftovers of a killed writer -------------------------------------------------------------------
HOLD_IN_WRITE = """
import os, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from core.saving import write_folder_atomically
{claim}
def write(folder):
    (folder / "part.bin").write_bytes(b"x" * 1000)
    print(os.path.basename(folder), flush=True)
    time.sleep(600)
write_folder_atomically(Path({target!r}), write)
"""


def start_writer(target: Path, claimed: bool) -> tuple[subprocess.Popen, str]:
    """A writer of ``target`` stopped inside its write (claimed as an export claims, or not); returns it and
    its temporary folder's name."""
    claim = (f"from core.saving.output import claim_output\nclaim = claim_output({str(target)!r}, False)"
             if claimed else "")
    process = subprocess.Popen([sys.executable, "-c", HOLD_IN_WRITE.format(root=str(ROOT), claim=claim,
                                                                            target=str(target))],
                               stdout=subprocess.PIPE, text=True)
    name = process.stdout.readline().strip()
    assert name.startswith(f".tmp-{target.name}{TEMP_MARK}"), name
    return process, name


def kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


def age(path: Path, days: float = 2) -> None:
    then = time.time() - days * 24 * 3600
    os.utime(path, (then, then), follow_symlinks=False)


def test_a_killed_exports_day_old_temporary_folder_and_its_lock_go_with_the_next_export(capsys, tiny_models,
                                                                                       tmp_path):
    out = tmp_path / "export"
    process, temp = start_writer(out, claimed=True)
    kill(process)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([temp, ".export.lock"])
    age(tmp_path / temp)
    backup = tmp_path / ".tmp-export-0123abcd"  # named without the lab's mark: nothing proves the lab made it
    backup.mkdir()
    age(backup)
    fresh = temp_path(tmp_path / "export-2", folder=True)  # another writer's, less than a day old: maybe alive
    fresh.mkdir()
    code, _, err = run_cli(capsys, "export", "--model", tiny_models["lstm"], "--format", "onnx", "--out", out)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["export", fresh.name, backup.name])


def test_a_live_writers_temporary_folder_stays_and_a_day_old_one_goes_with_the_next_save(tmp_path):
    target = tmp_path / "f"
    live, live_temp = start_writer(target, claimed=False)
    try:
        write_folder_atomically(target, _lab_writes("1"))
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["f", live_temp])
        assert (tmp_path / live_temp / "part.bin").read_bytes() == b"x" * 1000
    finally:
        kill(live)
    age(tmp_path / live_temp)
    write_folder_atomically(target, _lab_writes("2"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_only_the_labs_marked_temporaries_a_day_old_are_removed(tmp_path):
    file_temp, folder_temp = temp_path(tmp_path / "out.csv"), temp_path(tmp_path / "run", folder=True)
    assert file_temp.name.startswith(f".out.csv{TEMP_MARK}") and folder_temp.name.startswith(f".tmp-run{TEMP_MARK}")
    file_temp.write_text("partial")
    folder_temp.mkdir()
    link = tmp_path / f".x{TEMP_MARK}0123abcd"
    link.symlink_to(tmp_path / "elsewhere")
    mine = tmp_path / ".tmp-run-20251127"
    mine.mkdir()
    everything = sorted(p.name for p in tmp_path.iterdir())
    remove_stale_temps(tmp_path / "any")
    assert sorted(p.name for p in tmp_path.iterdir()) == everything  # less than a day old: perhaps being written
    for path in (file_temp, folder_temp, link, mine):
        age(path)
    remove_stale_temps(tmp_path / "any")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([link.name, mine.name])


@pytest.mark.parametrize("refused", [True, False])
def test_a_users_folder_named_like_an_old_temporary_is_kept(capsys, tiny_models, tmp_path, refused):
    """``.tmp-<name>-<8 hex>`` without a writer is also how a user may name a dated backup (``20251127``): it went
    with the next claim of ``<name>``, contents and all, even when the write was then refused."""
    out = tmp_path / "export"
    out.mkdir()
    (out / "mine.txt").write_text("not an export\n", encoding="utf-8")
    backup = tmp_path / ".tmp-export-20251127"
    backup.mkdir()
    (backup / "NOTES.md").write_text("a user's notes\n", encoding="utf-8")
    age(backup)
    if not refused:  # an empty folder is a fine output
        (out / "mine.txt").unlink()
    code, _, err = run_cli(capsys, "export", "--model", tiny_models["lstm"], "--format", "onnx", "--out", out)
    assert (code == 2) == refused, err
    assert (backup / "NOTES.md").read_text(encoding="utf-8") == "a user's notes\n"
