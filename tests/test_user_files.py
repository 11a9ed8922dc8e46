"""One way to write a user-visible file (``core.saving.user_files``), and every command that writes one
(``embed``, ``score``, ``dedup --out``) through it: claimed before any work, an existing file or link
refused without --overwrite, never a link followed at the target or at a temporary name, written to a
temporary of its own and renamed into place whole; on a full disk, a read-only folder or Ctrl-C one
``error:`` line, no temporary left and the old target byte-identical; SIGTERM or SIGKILL leave the old
target whole and a temporary that the next run removes. The data-loss cases of issue 22 (items 1 and 3) are tests here."""
from __future__ import annotations

import errno
import itertools
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from core.cli.main import main
from core.saving import atomic as temp_files, user_files
from core.saving.atomic import STALE_SECONDS, TEMP_MARK
from core.saving.user_files import UserFileError, claim_files

ROOT = Path(__file__).resolve().parents[1]
PAIRS = "question1,question2,is_duplicate\n" + "".join(
    f"How do I learn topic {i}?,What is the way to learn topic {i}?,{i % 2}\n" for i in range(8))


# ---- helpers ---------------------------------------------------------------------------------------
def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed): its kind and bytes, link text or nothing."""
    found = {}
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(folder) / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                found[str(path.relative_to(root))] = ("link", os.readlink(path))
            elif stat.S_ISDIR(mode):
                found[str(path.relative_to(root))] = ("folder",)
            elif stat.S_ISREG(mode):
                found[str(path.relative_to(root))] = ("file", path.read_bytes())
            else:  # a FIFO: never opened (it would wait for a writer)
                found[str(path.relative_to(root))] = ("special", stat.S_IFMT(mode))
    return found


def temporaries(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if TEMP_MARK in name)


def temp_name(target: Path, number: int) -> Path:
    """The name the claim's ``number``-th drawn token gives (with ``counting_tokens``)."""
    return target.parent / f".{target.name[:40]}{TEMP_MARK}{number:08x}"


def age(path: Path) -> None:
    """``path`` as a writer killed over a day ago left it."""
    then = time.time() - STALE_SECONDS - 60
    os.utime(path, (then, then), follow_symlinks=False)


def counting_tokens():
    """Tokens 00000000, 00000001, ...: temporary names a test can occupy beforehand."""
    numbers = itertools.count()
    return mock.patch.object(temp_files, "token", lambda: f"{next(numbers):08x}")


def cli(capsys, *argv) -> tuple[int, str, list[str]]:
    code = main([str(part) for part in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip().splitlines()


def one_error(code: int, err: list[str]) -> str:
    errors = [line for line in err if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and not any("Traceback" in line for line in err), err
    return errors[0]


def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class FullDisk:
    """A file whose writes meet a full disk (stands in for ``open`` on the claim's descriptor)."""

    def __init__(self, *args, **kwargs):
        pass

    write = staticmethod(no_space)

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


@pytest.fixture
def pairs_file(tmp_path) -> Path:
    path = tmp_path / "pairs.csv"
    path.write_text(PAIRS, encoding="utf-8")
    return path


@pytest.fixture
def lstm(tiny_models) -> Path:
    return tiny_models["lstm"]


# ---- the rule, on the library ------------------------------------------------------------------------
def test_a_new_file_appears_whole_with_the_usual_permissions(tmp_path):
    target = tmp_path / "out.csv"
    with claim_files([target]) as claim, claim.open(target) as handle:
        handle.write(b"new")
        assert not target.exists() and len(temporaries(tmp_path)) == 1  # written beside it, not in place
    assert target.read_bytes() == b"new" and temporaries(tmp_path) == []
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask


def test_an_existing_file_is_refused_without_overwrite_and_keeps_its_mode_with_it(tmp_path):
    target = tmp_path / "out.csv"
    target.write_bytes(b"keep")
    target.chmod(0o640)
    with pytest.raises(UserFileError, match="exists") as refused:
        claim_files([target])
    assert refused.value.reason == "exists" and target.read_bytes() == b"keep" and temporaries(tmp_path) == []
    with claim_files([target], overwrite=True) as claim, claim.open(target) as handle:
        handle.write(b"new")
    assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == 0o640


def test_a_link_at_the_target_is_refused_then_replaced_never_written_through(tmp_path):
    pointee = tmp_path / "target.bin"
    pointee.write_bytes(b"the user's file")
    link = tmp_path / "l.npy"
    link.symlink_to(pointee)
    with pytest.raises(UserFileError, match="exists"):
        claim_files([link])
    with claim_files([link], overwrite=True) as claim, claim.open(link) as handle:
        handle.write(b"new")
    assert not link.is_symlink() and link.read_bytes() == b"new"
    assert pointee.read_bytes() == b"the user's file"


@pytest.mark.parametrize("kind", ["folder", "fifo", "link to a folder"])
def test_what_is_not_a_file_is_refused_even_with_overwrite(tmp_path, kind):
    target = tmp_path / "out.csv"
    if kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    if kind == "link to a folder":
        (tmp_path / "d").mkdir()
        target.symlink_to(tmp_path / "d")
        with claim_files([target], overwrite=True) as claim, claim.open(target) as handle:  # the link goes
            handle.write(b"x")
        assert target.read_bytes() == b"x" and (tmp_path / "d").is_dir()
        return
    before = snapshot(tmp_path)
    with pytest.raises(UserFileError, match="folder|not a regular file"):
        claim_files([target], overwrite=True)
    assert snapshot(tmp_path) == before


def test_entries_at_the_temporary_names_are_never_opened_or_touched(tmp_path):
    target = tmp_path / "out.csv"
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"outside")
    with counting_tokens():
        temp_name(target, 0).symlink_to(outside)  # a link where the first temporary would be
        temp_name(target, 1).write_bytes(b"a file of that name")  # fresh: not a leftover
        temp_name(target, 2).mkdir()
        temp_name(target, 3).symlink_to(tmp_path / "missing")  # a dangling link
        before = snapshot(tmp_path)
        with claim_files([target]) as claim, claim.open(target) as handle:
            handle.write(b"new")
    after = snapshot(tmp_path)
    assert after.pop("out.csv") == ("file", b"new") and after == before


def test_a_missing_folder_is_refused_or_made_on_request(tmp_path):
    target = tmp_path / "missing" / "out.csv"
    with pytest.raises(UserFileError, match="does not exist") as refused:
        claim_files([target])
    assert refused.value.reason == "no_folder" and not target.parent.exists()
    with claim_files([target], create_folder=True) as claim, claim.open(target) as handle:
        handle.write(b"x")
    assert target.read_bytes() == b"x"


def test_an_exception_or_ctrl_c_mid_write_leaves_no_temporary_and_the_old_file(tmp_path):
    target = tmp_path / "out.csv"
    target.write_bytes(b"keep")
    for error in (RuntimeError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(error)):
            with claim_files([target], overwrite=True) as claim, claim.open(target) as handle:
                handle.write(b"half")
                raise error
        assert target.read_bytes() == b"keep" and temporaries(tmp_path) == []


def test_a_full_disk_at_any_step_is_one_error_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "out.bin"
    target.write_bytes(b"keep")
    for seam in ("write", "fallocate", "fsync"):
        with monkeypatch.context() as patch:
            if seam == "write":
                patch.setattr(user_files, "open", FullDisk, raising=False)
            elif seam == "fallocate":
                patch.setattr(os, "posix_fallocate", no_space)
            with pytest.raises(OSError, match="No space left on device") as failed:
                with claim_files([target], overwrite=True) as claim:
                    claim.allocate(target, 1 << 20)
                    with claim.open(target) as handle:
                        handle.write(b"new")
                    if seam == "fsync":
                        patch.setattr(os, "fsync", no_space)
        assert failed.value.errno == errno.ENOSPC
        assert target.read_bytes() == b"keep" and temporaries(tmp_path) == [], seam


def test_a_read_only_folder_is_one_error_before_any_work(tmp_path, monkeypatch):
    target = tmp_path / "out.csv"

    def read_only(path):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(user_files, "create_temporary", read_only)
    with pytest.raises(UserFileError, match="Read-only file system") as refused:
        claim_files([target])
    assert refused.value.reason == "unwritable" and os.listdir(tmp_path) == []


def test_a_chmod_0555_folder_is_refused(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "out.csv").write_bytes(b"keep")
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as root: a 0555 folder is writable")
        with pytest.raises(UserFileError, match="cannot write in"):
            claim_files([folder / "out.csv"], overwrite=True)
        assert (folder / "out.csv").read_bytes() == b"keep" and temporaries(folder) == []
    finally:
        folder.chmod(0o755)


def test_day_old_temporaries_are_removed_by_the_next_claim_and_nothing_else(tmp_path):
    target = tmp_path / "out.csv"
    dead = temp_name(target, 0xDEAD)
    dead.write_bytes(b"half a file")
    live = temp_name(tmp_path / "other.csv", 1)  # fresh: perhaps still being written
    live.write_bytes(b"in progress")
    link = tmp_path / f".y{TEMP_MARK}00000002"
    link.symlink_to(tmp_path / "other.csv")
    old_partial = tmp_path / ".out.csv.partial"  # the name score used before: it may be anyone's
    old_partial.write_bytes(b"user")
    for path in (dead, link, old_partial):
        age(path)
    with claim_files([target]) as claim, claim.open(target) as handle:
        handle.write(b"new")
    assert not dead.exists()
    assert live.exists() and link.is_symlink() and old_partial.read_bytes() == b"user"


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_writer_leaves_a_temporary_that_the_next_run_removes(tmp_path, signum):
    target = tmp_path / "out.csv"
    target.write_bytes(b"keep")
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from core.saving.user_files import claim_files
        claim = claim_files([{str(target)!r}], overwrite=True)
        claim.open({str(target)!r}).write(b"half")
        print("writing", flush=True)
        time.sleep(60)
    """)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "writing"
    finally:
        process.send_signal(signum)
        process.wait(timeout=30)
    assert len(temporaries(tmp_path)) == 1 and target.read_bytes() == b"keep"
    age(tmp_path / temporaries(tmp_path)[0])
    with claim_files([tmp_path / "next.csv"]) as claim, claim.open(tmp_path / "next.csv") as handle:
        handle.write(b"x")
    assert temporaries(tmp_path) == [] and target.read_bytes() == b"keep"


def test_two_writers_of_one_target_never_mix(tmp_path):
    target = tmp_path / "out.csv"
    first, second = claim_files([target], overwrite=True), claim_files([target], overwrite=True)
    first.open(target).write(b"A" * 100_000)
    with second, second.open(target) as handle:
        handle.write(b"B" * 4)
    assert target.read_bytes() == b"B" * 4
    with first:
        pass
    assert target.read_bytes() == b"A" * 100_000 and temporaries(tmp_path) == []  # the last rename wins, whole
    # without overwrite, the one that finishes second is refused and the first one's file stays
    other = tmp_path / "new.csv"
    first, second = claim_files([other]), claim_files([other])
    with second, second.open(other) as handle:
        handle.write(b"B")
    with pytest.raises(UserFileError, match="exists"):
        with first, first.open(other) as handle:
            handle.write(b"A")
    assert other.read_bytes() == b"B" and temporaries(tmp_path) == []


def test_several_files_go_in_place_together_or_not_at_all(tmp_path):
    one, two = tmp_path / "v.npy", tmp_path / "v.questions.jsonl"
    with pytest.raises(UserFileError, match="exists"):
        with claim_files([one, two]) as claim:
            claim.open(one).write(b"1")
            claim.open(two).write(b"2")
            two.write_bytes(b"appeared meanwhile")
    assert not one.exists() and two.read_bytes() == b"appeared meanwhile" and temporaries(tmp_path) == []


# ---- the rule, property-based ---------------------------------------------------------------------
KINDS = ("absent", "file", "link to a file", "dangling link", "folder", "link to a folder")


def make(path: Path, kind: str, outside: Path) -> None:
    if kind == "file":
        path.write_bytes(b"old " + path.name.encode())
    elif kind == "link to a file":
        path.symlink_to(outside / "precious.txt")
    elif kind == "dangling link":
        path.symlink_to(outside / "missing")
    elif kind == "folder":
        path.mkdir()
        (path / "inside.txt").write_bytes(b"inside")
    elif kind == "link to a folder":
        path.symlink_to(outside)


def world(root: Path, targets: list[Path], at_targets: list[str], at_temps: list[str]) -> None:
    """``root/outside`` (a user's files) and ``root/out`` holding what the draw put at each target and
    at the first temporary names each target's claim will draw."""
    outside = root / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_bytes(b"precious")
    (root / "out").mkdir()
    numbers = itertools.count()
    for target, kind in zip(targets, at_targets):
        make(target, kind, outside)
    for target in targets:
        for kind in at_temps:
            make(temp_name(target, next(numbers)), kind, outside)


def writable(kind: str, overwrite: bool) -> bool:
    return kind == "absent" or (overwrite and kind in ("file", "link to a file", "dangling link", "link to a folder"))


def check_outcome(root: Path, before: dict, targets: list[Path], at_targets: list[str], overwrite: bool,
                  succeeded: bool, expected: dict[str, bytes] | None) -> None:
    after = snapshot(root)
    names = {str(target.relative_to(root)) for target in targets}
    allowed = all(writable(kind, overwrite) for kind in at_targets)
    assert succeeded == allowed, (at_targets, overwrite)
    for name in set(before) | set(after):
        if name in names and succeeded:
            assert after[name] == ("file", expected[name])  # the new content, whole
        else:
            assert after.get(name) == before.get(name), name  # nothing outside the targets changes
    assert not [name for name in after if TEMP_MARK in name and name not in before]  # no temporary left


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(at_targets=st.lists(st.sampled_from(KINDS + ("absent", "file")), min_size=1, max_size=2),
       at_temps=st.lists(st.sampled_from(KINDS[1:]), max_size=3), overwrite=st.booleans(),
       fail=st.sampled_from([None, None, None, "error", "interrupt", "full disk"]))
def test_the_writing_rule(at_targets, at_temps, overwrite, fail):
    with tempfile.TemporaryDirectory() as folder, counting_tokens(), ExitStack() as patches:
        root = Path(folder)
        targets = [root / "out" / f"result{i}.bin" for i in range(len(at_targets))]
        world(root, targets, at_targets, at_temps)
        before = snapshot(root)
        new = {str(t.relative_to(root)): f"new {i}".encode() * 1000 for i, t in enumerate(targets)}
        if fail == "full disk":
            patches.enter_context(mock.patch.object(user_files, "open", FullDisk, create=True))
        try:
            with claim_files(targets, overwrite=overwrite) as claim:
                for target in targets:
                    with claim.open(target) as handle:
                        handle.write(new[str(target.relative_to(root))])
                if fail == "error":
                    raise RuntimeError("mid-run")
                if fail == "interrupt":
                    raise KeyboardInterrupt
        except UserFileError as error:
            event(f"refused: {error.reason}")
            check_outcome(root, before, targets, at_targets, overwrite, False, None)
            return
        except OSError:  # the full disk drawn: everything as it was
            event("full disk")
            assert fail == "full disk" and snapshot(root) == before
            return
        except (RuntimeError, KeyboardInterrupt):
            event("failed mid-run")
            assert snapshot(root) == before
            return
        event("written")
        assert fail is None
        check_outcome(root, before, targets, at_targets, overwrite, True, new)


# ---- the commands ------------------------------------------------------------------------------------
def command(name: str, model: Path, data: Path, out: Path, *extra) -> list[str]:
    if name == "embed":
        return ["embed", "--model", model, "--data", data, "--out", out, *extra]
    if name == "score":
        return ["score", "--model", model, "--pairs", data, "--out", out, *extra]
    return ["dedup", "--model", model, "--questions", data, "--out", out, "--threshold", "0.5", *extra]


def outputs(name: str, out: Path) -> list[Path]:
    from core.inference.embedding import embedding_paths

    return list(embedding_paths(out)) if name == "embed" else [out]


def test_embed_refuses_what_issue_22_saw_it_replace(capsys, lstm, pairs_file, tmp_path):
    (tmp_path / "u.npy").write_bytes(b"keep\n")
    (tmp_path / "target.bin").write_bytes(b"the user's binary")
    (tmp_path / "l.npy").symlink_to(tmp_path / "target.bin")
    (tmp_path / "notes.questions.jsonl").write_bytes(b"my notes\n")
    before = snapshot(tmp_path)
    for out in ("u.npy", "l.npy", "notes"):
        code, stdout, err = cli(capsys, *command("embed", lstm, pairs_file, tmp_path / out))
        line = one_error(code, err)
        assert "exists; choose a new file or add --overwrite" in line and stdout == ""
        assert snapshot(tmp_path) == before  # byte-identical, nothing new
    code, stdout, err = cli(capsys, *command("embed", lstm, pairs_file, tmp_path / "l.npy", "--overwrite"))
    assert code == 0, err
    assert not (tmp_path / "l.npy").is_symlink() and np.load(tmp_path / "l.npy").shape[0] == 16
    assert (tmp_path / "target.bin").read_bytes() == b"the user's binary" and temporaries(tmp_path) == []


def test_embed_keeps_the_suffix_it_was_given_and_never_writes_a_file_it_was_not_named(capsys, lstm, pairs_file,
                                                                                      tmp_path):
    (tmp_path / "emb.npy").write_bytes(b"the user's vectors")
    (tmp_path / "emb.questions.jsonl").write_bytes(b"the user's questions\n")
    code, _, err = cli(capsys, *command("embed", lstm, pairs_file, tmp_path / "emb.v2", "--overwrite"))
    assert code == 0, err
    assert (tmp_path / "emb.npy").read_bytes() == b"the user's vectors"
    assert (tmp_path / "emb.questions.jsonl").read_bytes() == b"the user's questions\n"
    assert np.load(tmp_path / "emb.v2.npy").shape[0] == 16 and (tmp_path / "emb.v2.questions.jsonl").is_file()


@pytest.mark.parametrize("name", ["embed", "score", "dedup"])
def test_a_link_at_the_output_is_refused_then_replaced_never_written_through(capsys, lstm, pairs_file, tmp_path,
                                                                             name):
    out = tmp_path / "res"
    pointee = tmp_path / "user2.txt"
    pointee.write_bytes(b"user two")
    links = outputs(name, out)
    for link in links:
        link.symlink_to(pointee)
    before = snapshot(tmp_path)
    code, _, err = cli(capsys, *command(name, lstm, pairs_file, out))
    assert "exists; choose a new file or add --overwrite" in one_error(code, err) and snapshot(tmp_path) == before
    code, _, err = cli(capsys, *command(name, lstm, pairs_file, out, "--overwrite"))
    assert code == 0, err
    assert pointee.read_bytes() == b"user two" and not any(link.is_symlink() for link in links)
    assert temporaries(tmp_path) == []


def test_score_never_touches_the_old_partial_name(capsys, lstm, pairs_file, tmp_path):
    """Issue 22 item 3: ``.res3.csv.partial`` was truncated through its link, then unlinked."""
    (tmp_path / "user2.txt").write_bytes(b"user two")
    (tmp_path / ".res3.csv.partial").symlink_to(tmp_path / "user2.txt")
    (tmp_path / ".res4.csv.partial").write_bytes(b"a user's file of that name")
    before = snapshot(tmp_path)
    for out in ("res3.csv", "res4.csv"):
        code, _, err = cli(capsys, *command("score", lstm, pairs_file, tmp_path / out))
        assert code == 0, err
    after = snapshot(tmp_path)
    assert after.pop("res3.csv")[0] == after.pop("res4.csv")[0] == "file" and after == before


def test_two_scores_to_one_out_never_mix(capsys, lstm, pairs_file, tmp_path, monkeypatch):
    """Issue 22 item 3: run B finished, then run A wrote its rows into B's file and died."""
    import core.cli.score as score_command

    out = tmp_path / "res.csv"
    short = tmp_path / "four.csv"
    short.write_text("\n".join(PAIRS.splitlines()[:5]) + "\n", encoding="utf-8")
    runs = []

    class RunBInTheMiddle:  # run A's progress bar: at A's first chunk, run B starts and finishes
        def __init__(self, *args, **kwargs):
            pass

        def __call__(self, done, total):
            if not runs:
                runs.append("B running")  # B's own progress bar is one of these too
                runs[0] = main([str(part) for part in command("score", lstm, short, out, "--overwrite")])
                runs.append(out.read_bytes())

        def close(self):
            pass

    monkeypatch.setattr(score_command, "TqdmCounter", RunBInTheMiddle)
    code, _, err = cli(capsys, *command("score", lstm, pairs_file, out))
    assert runs[0] == 0 and runs[1].count(b"\n") == 5  # B: its header and 4 rows, whole
    # A was started without --overwrite: B's file appeared meanwhile, so A is refused and B's file stays
    assert "exists; choose a new file or add --overwrite" in one_error(code, err)
    assert out.read_bytes() == runs[1] and temporaries(tmp_path) == []
    runs.clear()
    code, _, err = cli(capsys, *command("score", lstm, pairs_file, out, "--overwrite"))
    assert code == 0 and runs[0] == 0, err
    assert out.read_bytes().count(b"\n") == 9 and temporaries(tmp_path) == []  # A's file, whole: the last rename


@pytest.mark.parametrize("name", ["embed", "score", "dedup"])
@pytest.mark.parametrize("failure", ["full disk", "read-only", "ctrl-c"])
def test_a_failing_write_is_one_line_and_leaves_the_old_output(capsys, lstm, pairs_file, tmp_path, monkeypatch,
                                                             name, failure):
    out = tmp_path / "res"
    for path in outputs(name, out):
        path.write_bytes(b"old " + path.name.encode())
    before = snapshot(tmp_path)
    if failure == "full disk":
        monkeypatch.setattr(user_files, "open", FullDisk, raising=False)
        monkeypatch.setattr(os, "posix_fallocate", no_space)
    elif failure == "read-only":
        def read_only(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

        monkeypatch.setattr(user_files, "create_temporary", read_only)
    else:
        from core.models.base import PairEncoder

        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(PairEncoder, "encode", interrupted)
        monkeypatch.setattr(PairEncoder, "score_pairs", interrupted)
        # vectors an earlier run cached would spare dedup its encoding: an empty lab cache, beside tmp_path
        monkeypatch.setenv("SIAMESE_LAB_CACHE", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    code, stdout, err = cli(capsys, *command(name, lstm, pairs_file, out, "--overwrite"))
    if failure == "ctrl-c":
        assert code == 130 and err[-1] == "error: interrupted"
    else:
        line = one_error(code, err)
        assert ("No space left on device" if failure == "full disk" else "Read-only file system") in line, line
    assert snapshot(tmp_path) == before  # the old output byte-identical, no temporary


@pytest.mark.parametrize("name", ["embed", "score", "dedup"])
@pytest.mark.parametrize("where", ["missing", "proc"])
def test_an_impossible_place_is_one_line(capsys, lstm, pairs_file, tmp_path, name, where):
    out = tmp_path / "no" / "such" / "res.csv" if where == "missing" else Path("/proc/res.csv")
    code, _, err = cli(capsys, *command(name, lstm, pairs_file, out))
    if where == "missing" and name == "embed":  # embed makes its folder, as it always did
        assert code == 0 and outputs("embed", out)[0].is_file()  # res.csv.npy: the suffix given is kept
        return
    one_error(code, err)


def test_the_leftover_of_a_killed_score_is_removed_by_the_next_one(capsys, lstm, pairs_file, tmp_path):
    leftover = temp_name(tmp_path / "res.csv", 7)
    leftover.write_bytes(b"26,327 rows of zeros")
    age(leftover)
    code, _, err = cli(capsys, *command("score", lstm, pairs_file, tmp_path / "other.csv"))
    assert code == 0, err
    assert not leftover.exists() and temporaries(tmp_path) == []


@pytest.mark.slow
def test_a_real_file_size_limit_is_one_line_not_a_sigbus(lstm, pairs_file, tmp_path):
    """RLIMIT_FSIZE makes the kernel refuse to grow a file (EFBIG), as a full disk would (ENOSPC): embed's
    memory-mapped vectors died of SIGBUS there (now the space is reserved before the map), and train's weights
    writer raised safetensors' own error (now the OSError it is): each one line, nothing left behind."""
    (tmp_path / "u.npy").write_bytes(b"keep")
    (tmp_path / "s.csv").write_bytes(b"keep")
    before = snapshot(tmp_path)
    corpus = tmp_path / "corpus.csv"
    corpus.write_text("question1,question2,is_duplicate\n" + "".join(
        f"Question number {i} here?,Another question {i}?,0\n" for i in range(2000)), encoding="utf-8")
    script = textwrap.dedent(f"""
        import resource, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        from core.cli.main import main
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))
        codes = [main(["embed", "--model", {str(lstm)!r}, "--data", {str(corpus)!r}, "--out",
                       {str(tmp_path / "u.npy")!r}, "--overwrite"]),
                 main(["score", "--model", {str(lstm)!r}, "--pairs", {str(corpus)!r}, "--out",
                       {str(tmp_path / "s.csv")!r}, "--overwrite"]),
                 main(["train", "--data", {str(ROOT / "assets" / "sample_pairs.csv")!r}, "--model", "lstm",
                       "--epochs", "1", "--max-steps", "2", "--out", {str(tmp_path / "m")!r}])]
        print(codes)
    """)
    corpus_snapshot = snapshot(tmp_path)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    assert done.returncode == 0 and done.stdout.strip() == "[2, 2, 2]", (done.returncode, done.stderr[-2000:])
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 3 and all("File too large" in line for line in errors), done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert snapshot(tmp_path) == corpus_snapshot and before.items() <= corpus_snapshot.items()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["embed", "score", "dedup"])
def test_the_writing_rule_for_every_command(name, lstm, tmp_path_factory):
    """The property test above, through the command: random files, links and folders at the outputs and at
    the temporary names, with and without --overwrite; nothing outside the outputs changes, and each output
    is untouched or the command's whole result."""
    data = tmp_path_factory.mktemp("data") / "pairs.csv"
    data.write_text(PAIRS, encoding="utf-8")
    reference = tmp_path_factory.mktemp("reference")
    assert main([str(part) for part in command(name, lstm, data, reference / "res")]) == 0
    expected = {f"out/{path.name}": path.read_bytes() for path in outputs(name, reference / "res")}

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(at_targets=st.lists(st.sampled_from(KINDS + ("absent",)), min_size=2, max_size=2),
           at_temps=st.lists(st.sampled_from(KINDS[1:]), max_size=2), overwrite=st.booleans())
    def check(at_targets, at_temps, overwrite):
        with tempfile.TemporaryDirectory() as folder, counting_tokens():
            root = Path(folder)
            targets = outputs(name, root / "out" / "res")
            at_targets = at_targets[: len(targets)]
            world(root, targets, at_targets, at_temps)
            before = snapshot(root)
            with mock.patch("sys.stderr"), mock.patch("sys.stdout"):
                code = main([str(part) for part in command(name, lstm, data, root / "out" / "res",
                                                             *(["--overwrite"] if overwrite else []))])
            assert code in (0, 2)
            event("written" if code == 0 else "refused")
            check_outcome(root, before, targets, at_targets, overwrite, code == 0, expected)

    check()


# ---- the one whole-file write ------------------------------------------------------------------------
def test_write_file_atomically_replaces_whole_and_keeps_the_mode_or_gives_the_one_asked(tmp_path):
    from core.saving.user_files import write_file_atomically

    target = tmp_path / "state.json"
    target.write_bytes(b"old")
    os.chmod(target, 0o640)
    write_file_atomically(target, b"new content")
    assert target.read_bytes() == b"new content" and stat.S_IMODE(os.lstat(target).st_mode) == 0o640
    fresh = tmp_path / "key"
    write_file_atomically(fresh, b"k" * 32, mode=0o600)
    assert fresh.read_bytes() == b"k" * 32 and stat.S_IMODE(os.lstat(fresh).st_mode) == 0o600
    assert temporaries(tmp_path) == []


@pytest.mark.parametrize("name", ["score", "dedup", "suggest"])
def test_an_output_inside_the_model_folder_is_refused_and_the_model_untouched(capsys, lstm, pairs_file, tmp_path,
                                                                             name):
    model = tmp_path / "model"
    shutil.copytree(lstm, model)
    before = snapshot(model)
    for out in (model / "model.safetensors", model / "config.json", model / "scores.csv"):
        if name == "suggest":
            argv = ["suggest", "--model", model, "--questions", pairs_file, "--n", "2", "--out", out, "--overwrite"]
        else:
            argv = command(name, model, pairs_file, out, "--overwrite")
        code, stdout, err = cli(capsys, *argv)
        assert "is inside the model folder" in one_error(code, err) and stdout == ""
    assert snapshot(model) == before


def test_embed_never_writes_over_its_data_nor_into_the_model_folder(capsys, lstm, pairs_file, tmp_path):
    """``embed --out x`` writes ``x.npy`` and ``x.questions.jsonl``: a data file named ``x.questions.jsonl`` was
    replaced by the questions written (with ``--overwrite``), and ``--out`` inside the model folder was written."""
    data = tmp_path / "x.questions.jsonl"
    shutil.copyfile(pairs_file, data)
    before = data.read_bytes()
    code, stdout, err = cli(capsys, "embed", "--model", lstm, "--data", data, "--out", tmp_path / "x", "--overwrite")
    assert f"--out is {data}, an input" in one_error(code, err) and stdout == ""
    assert data.read_bytes() == before and not (tmp_path / "x.npy").exists()
    model = tmp_path / "model"
    shutil.copytree(lstm, model)
    snapshot_before = snapshot(model)
    code, stdout, err = cli(capsys, "embed", "--model", model, "--data", pairs_file, "--out", model / "vectors")
    assert "is inside the model folder" in one_error(code, err) and stdout == ""
    assert snapshot(model) == snapshot_before
