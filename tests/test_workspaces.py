"""Workspaces: the folder and its kept state (core.saving.workspaces), and the app keeping a person's choices
across sessions of one workspace while another workspace sees none of them (lab.workspace_state)."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
import time

import pandas as pd
import pytest

from app_support import TEST_WORKSPACE, open_app, open_page
from core.saving.workspaces import (
    WorkspaceError,
    is_workspace_id,
    new_workspace_id,
    open_workspace,
)
from lab.navigation import COMPARE, DATA, HOME, LABEL, SIMILARITY, TRAIN, VERDICT
from lab.workspace_state import NO_WORKSPACE, NOT_AN_ADDRESS

PRIVATE = b"question1,question2,is_duplicate\n" + b"".join(
    f"Private question number {i}?,Is private question {i} the same?,{i % 2}\n".encode() for i in range(40))


# ---- the folder ------------------------------------------------------------------------------------
def test_new_ids_are_long_random_and_valid():
    ids = {new_workspace_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(is_workspace_id(value) and len(value) == 22 for value in ids)


@pytest.mark.parametrize("value", [None, "", "short", "../../etc/passwd-xxxxxxxx", "a/b" * 10, "x" * 65, 12345,
                                   "with space in it 1234"])
def test_ids_that_could_name_another_folder_or_be_guessed_are_refused(tmp_path, value):
    assert not is_workspace_id(value)
    with pytest.raises(WorkspaceError):
        open_workspace(tmp_path, value)


def test_state_round_trips_and_an_unreadable_database_reads_as_empty(tmp_path):
    workspace = open_workspace(tmp_path, TEST_WORKSPACE)
    assert workspace.load_state() == {} and not workspace.exists()
    workspace.save_state({"threshold": 0.42, "dataset": {"sample": True}})
    workspace.save_state({"threshold": 0.5})  # only the changed key
    assert workspace.load_state() == {"threshold": 0.5, "dataset": {"sample": True}}
    assert {path.name for path in workspace.folder.iterdir()} <= {"models", "workspace.sqlite",
                                                                 "workspace.sqlite-wal", "workspace.sqlite-shm"}
    workspace.database.write_bytes(b"{cut sho")
    assert workspace.load_state() == {}


def test_two_writers_at_the_same_moment_both_keep_their_change(tmp_path):
    workspace = open_workspace(tmp_path, TEST_WORKSPACE)
    start = threading.Barrier(2)

    def change(key, tries):
        for value in range(tries):
            start.wait()
            open_workspace(tmp_path, TEST_WORKSPACE).save_state({key: value})

    lost = []
    for attempt in range(100):
        threads = [threading.Thread(target=change, args=(key, 1)) for key in (f"a{attempt}", f"b{attempt}")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        kept = workspace.load_state()
        lost += [key for key in (f"a{attempt}", f"b{attempt}") if key not in kept]
    assert lost == []
    assert len(workspace.load_state()) == 200


def test_two_processes_changing_one_workspace_lose_nothing(tmp_path):
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_keep_values, args=(str(tmp_path), name, 100)) for name in ("a", "b")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert [worker.exitcode for worker in workers] == [0, 0]
    kept = open_workspace(tmp_path, TEST_WORKSPACE).load_state()
    assert {key for key in kept} == {f"{name}{i}" for name in "ab" for i in range(100)}


def _keep_values(root, name, count):
    workspace = open_workspace(root, TEST_WORKSPACE)
    for i in range(count):
        workspace.save_state({f"{name}{i}": i})


def test_a_reader_beside_a_long_write_gets_the_last_committed_values(tmp_path):
    workspace = open_workspace(tmp_path, TEST_WORKSPACE)
    workspace.save_state({"threshold": 0.4})
    writer = sqlite3.connect(workspace.database, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE state SET value = '0.9' WHERE key = 'threshold'")
        assert workspace.load_state() == {"threshold": 0.4}  # returns (a hang is pytest-timeout's), committed value
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_read_writes_nothing_into_the_database(tmp_path):
    workspace = open_workspace(tmp_path, TEST_WORKSPACE)
    workspace.save_state({"k": 3})
    before = workspace.database.read_bytes()
    workspace.database.chmod(0o400)
    try:
        assert workspace.load_state() == {"k": 3}
    finally:
        workspace.database.chmod(0o600)
    assert workspace.database.read_bytes() == before


def test_one_upload_is_kept_and_only_uploads_the_lab_stored_are_read_or_removed(tmp_path):
    workspace = open_workspace(tmp_path, TEST_WORKSPACE)
    first = workspace.store_upload("a.csv", b"one")
    workspace.uploads.joinpath("notes.txt").write_text("the user's own")  # not a name the lab gives
    second = workspace.store_upload("b.tsv.gz", b"two")
    assert second.endswith(".gz") and first.endswith(".csv")
    assert sorted(path.name for path in workspace.uploads.iterdir()) == sorted([second, "notes.txt"])
    assert workspace.read_upload(second, max_bytes=10) == b"two"
    with pytest.raises(WorkspaceError):
        workspace.read_upload("notes.txt", max_bytes=10)
    with pytest.raises(WorkspaceError):
        workspace.read_upload("../state.json", max_bytes=10)
    with pytest.raises(WorkspaceError, match="cannot be read"):
        workspace.read_upload(second, max_bytes=2)  # grown past the cap since


def test_each_kind_of_upload_is_kept_apart(tmp_path):
    workspace = open_workspace(tmp_path, TEST_WORKSPACE)
    val = workspace.store_upload("val.csv", b"validation", "val")
    workspace.store_upload("test.csv", b"test", "test")
    train = workspace.store_upload("a.csv", b"training")
    assert workspace.read_upload(val, 100, "val") == b"validation" and workspace.read_upload(train, 100) == b"training"
    workspace.remove_uploads("val")
    with pytest.raises(WorkspaceError):
        workspace.read_upload(val, 100, "val")
    assert workspace.read_upload(train, 100) == b"training" and any((workspace.uploads / "test").iterdir())


def test_what_the_lab_creates_is_for_the_servers_user_only(tmp_path):
    import stat

    def mode(path):
        return stat.S_IMODE(path.stat().st_mode)

    root = tmp_path / "workspaces"
    workspace = open_workspace(root, TEST_WORKSPACE)
    workspace.save_state({"threshold": 0.5})
    stored = workspace.store_upload("a.csv", b"one")
    assert [mode(path) for path in (root, workspace.folder, workspace.models, workspace.uploads)] == [0o700] * 4
    assert mode(workspace.database) == 0o600 and mode(workspace.uploads / stored) == 0o600


def test_a_folder_named_like_an_upload_is_refused_in_one_error_and_kept(tmp_path):
    from core.saving.user_files import UserFileError

    workspace = open_workspace(tmp_path, TEST_WORKSPACE)
    first = workspace.store_upload("a.csv", b"one")
    squatter = workspace.uploads / workspace.store_upload("b.csv", b"two")
    squatter.unlink()
    squatter.mkdir()
    (squatter / "mine.txt").write_text("the user's")
    with pytest.raises(UserFileError, match="is a folder"):
        workspace.store_upload("b.csv", b"two")
    assert workspace.store_upload("a.csv", b"one") == first  # the next upload removes no folder
    assert (squatter / "mine.txt").read_text() == "the user's"


# ---- the app -----------------------------------------------------------------------------------
def address(at) -> str:
    """The ``ws`` the app puts into the address bar."""
    return at.query_params["ws"]


def upload_private(at):
    at.file_uploader(key="upload").set_value(("private_a.csv", PRIVATE, "text/csv")).run()
    assert not at.exception, at.exception
    return at


def test_a_new_session_of_the_workspace_finds_its_dataset_model_and_threshold(runs_with_models):
    runs_root, folders = runs_with_models
    at = upload_private(open_page(DATA.path))
    assert at.session_state.data_name == "private_a.csv (upload)"
    pairs = at.session_state.pairs
    at.switch_page(VERDICT.path).run()
    at.selectbox(key="active_model").set_value(str(folders["lstm"])).run()
    at.slider(key="threshold").set_value(0.37).run()
    assert not at.exception, at.exception

    again = open_page(VERDICT.path)  # a reload: a new session, the same ws=
    assert again.session_state.data_name == "private_a.csv (upload)"
    pd.testing.assert_frame_equal(again.session_state.pairs, pairs)
    assert again.session_state.active_model == str(folders["lstm"])
    assert again.slider(key="threshold").value == pytest.approx(0.37)
    assert again.session_state["workspace"].id == TEST_WORKSPACE


@pytest.mark.slow
def test_another_workspace_sees_nothing_of_the_first(runs_with_models):
    runs_root, folders = runs_with_models
    first = upload_private(open_page(DATA.path))
    first.switch_page(SIMILARITY.path).run()
    first.slider(key="sim_margin").set_value(0.6).run()

    other = open_page(HOME.path, workspace=None)
    new_id = address(other)
    assert is_workspace_id(new_id) and new_id != TEST_WORKSPACE
    assert other.session_state.runs_root != str(runs_root)
    for page in (HOME, DATA, TRAIN, SIMILARITY, VERDICT, COMPARE):
        other.switch_page(page.path).run()
        assert not other.exception, (page.path, other.exception)
        text = " ".join(str(element.value) for kind in ("markdown", "caption", "info", "warning", "success", "error",
                                                          "selectbox") for element in getattr(other, kind))
        text += " ".join(" ".join(map(str, box.options)) for box in other.selectbox)
        assert "private_a" not in text, page.path
        assert str(runs_root.parent) not in text and "/tmp/" not in text, page.path
        assert not any(folder.name in text for folder in folders.values()), page.path
    assert other.session_state.data_name.startswith("bundled sample")
    other.switch_page(SIMILARITY.path).run()
    assert other.slider(key="sim_margin").value == pytest.approx(0.25)  # the default, not the first's 0.6


def test_an_invalid_ws_starts_a_new_workspace_and_says_so(runs_root):
    at = open_page(HOME.path, workspace="../../etc")
    assert not at.exception, at.exception
    assert is_workspace_id(address(at)) and address(at) != "../../etc"
    assert [info.value for info in at.info if "No workspace with this address" in info.value] == [NOT_AN_ADDRESS]


def test_an_unknown_ws_is_said_on_the_page_until_the_workspace_keeps_something(runs_root):
    unknown = new_workspace_id()
    at = open_app(workspace=unknown)
    assert address(at) == unknown  # the address stays
    assert [info.value for info in at.info if "No workspace with this address" in info.value] == [NO_WORKSPACE]
    at.switch_page(SIMILARITY.path).run()
    at.slider(key="sim_margin").set_value(0.6).run()
    known = open_app(workspace=unknown)
    assert not [info for info in known.info if "No workspace with this address" in info.value]
    assert known.switch_page(SIMILARITY.path).run().slider(key="sim_margin").value == pytest.approx(0.6)


def test_a_new_workspace_started_from_the_sidebar_says_nothing_of_a_missing_one(runs_root):
    at = open_app()
    at.button(key="new_workspace").click().run()
    assert not at.exception, at.exception
    assert is_workspace_id(address(at)) and address(at) != TEST_WORKSPACE
    assert not [info for info in at.info if "No workspace with this address" in info.value]


def test_visits_that_keep_nothing_leave_no_folder(tmp_path, monkeypatch):
    root = tmp_path / "fresh-root"
    monkeypatch.setenv("SIAMESE_LAB_WORKSPACES", str(root))
    for workspace in (None, new_workspace_id()):
        at = open_page(HOME.path, workspace=workspace)
        for page in (DATA, TRAIN, SIMILARITY, VERDICT, COMPARE, LABEL, HOME):
            at.switch_page(page.path).run()
            assert not at.exception, (page.path, at.exception)
    assert list(root.iterdir()) == []


def test_two_tabs_each_keep_their_latest_change(runs_root):
    first, second = open_page(SIMILARITY.path), open_page(SIMILARITY.path)
    first.slider(key="sim_margin").set_value(0.6).run()
    second.slider(key="sim_batch_size").set_value(12).run()  # must not put the first's margin back to 0.25
    kept = open_workspace(runs_root.parent.parent, TEST_WORKSPACE).load_state()
    assert kept["sim_margin"] == pytest.approx(0.6) and kept["sim_batch_size"] == 12
    third = open_page(SIMILARITY.path)
    assert third.slider(key="sim_margin").value == pytest.approx(0.6)
    assert third.slider(key="sim_batch_size").value == 12


@pytest.mark.slow
def test_published_models_are_choices_in_every_workspace_and_stay_untouched(runs_root, tiny_models, tmp_path,
                                                                           monkeypatch):
    published = tmp_path / "published"
    shutil.copytree(tiny_models["lstm"], published / "team-model")
    before = sorted(path.relative_to(published) for path in published.rglob("*"))
    monkeypatch.setenv("SIAMESE_LAB_PUBLISHED", str(published))
    for workspace in (TEST_WORKSPACE, None):
        at = open_page(LABEL.path, workspace=workspace)
        choices = at.selectbox(key="active_model")
        published_labels = [label for label in choices.options if "published" in label]
        assert len(published_labels) == 1 and published_labels[0].startswith(tiny_models["lstm"].name), choices.options
    at.selectbox(key="active_model").set_value(str(published / "team-model")).run()
    assert not at.exception, at.exception
    assert sorted(path.relative_to(published) for path in published.rglob("*")) == before  # nothing written there


# ---- kept values a widget cannot take ------------------------------------------------------------
@pytest.mark.parametrize("key, good, bad", [
    ("k", 12, [500, 0, 12.5, True, "12", None, [1, 2]]),  # an int slider
    ("sim_margin", 0.5, [[1, 2], 1.5, -0.1, "0.5", False, float("inf")]),  # a float slider
    ("softmax_scale", 20.0, [0.0, 1000, {"a": 1}]),  # a float number_input
    ("pick", "by index", ["sideways", 1, None]),  # a radio's options
    ("map_colour", "cluster", ["colour", 0]),  # a selectbox's options
    ("verdict_model", ["minilm", 0.8], [["minilm"], "minilm", ["minilm", "0.8"], [1, 0.8], ["m", float("nan")]]),
])
def test_a_kept_value_its_widget_cannot_take_is_dropped(key, good, bad):
    from lab.workspace_state import checked

    assert checked({key: good, "dataset": {"sample": True}}) == {key: good, "dataset": {"sample": True}}
    for value in bad:
        assert checked({key: value, "dataset": {"sample": True}}) == {"dataset": {"sample": True}}, value


def test_an_int_kept_where_a_float_is_taken_comes_back_a_float():
    from lab.workspace_state import checked

    assert checked({"sim_margin": 1, "threshold": 0}) == {"sim_margin": 1.0, "threshold": 0.0}
    assert isinstance(checked({"sim_margin": 1})["sim_margin"], float)


def test_pages_open_on_their_defaults_over_values_they_cannot_take(runs_root):
    from lab.navigation import SEARCH

    open_workspace(runs_root.parent.parent, TEST_WORKSPACE).save_state(
        {"k": 500, "sim_margin": [1, 2], "sim_batch_size": "many", "softmax_scale": 1e9, "pick": "sideways"})
    at = open_page(SEARCH.path)
    assert not at.exception and not at.error, (at.exception, at.error)
    assert at.slider(key="k").value == 10
    at.switch_page(SIMILARITY.path).run()
    assert not at.exception and not at.error, (at.exception, at.error)
    assert at.slider(key="sim_margin").value == pytest.approx(0.25)
    assert at.slider(key="sim_batch_size").value == 8 and at.radio(key="pick").value == "random"
    assert at.number_input(key="softmax_scale").value == pytest.approx(1.0)


# ---- validation and test files -----------------------------------------------------------------------
VALIDATION = b"question1,question2,is_duplicate\nHow do I sleep?,How can I sleep?,1\nWhat is DNA?,Is tea good?,0\n"


def held_out_uploader(at, title: str) -> str:
    [uploader] = [box for box in at.get("file_uploader") if box.label == f"{title} pairs"]
    return uploader.key


def test_a_validation_file_survives_a_new_session_and_goes_with_its_dataset(runs_root):
    at = upload_private(open_page(DATA.path))
    at.toggle(key="held_out_files_on").set_value(True).run()
    at.file_uploader(key=held_out_uploader(at, "Validation")).set_value(("val.csv", VALIDATION, "text/csv")).run()
    assert not at.exception and not at.error, (at.exception, at.error)

    again = open_page(DATA.path)  # a reload, a restart or another tab: a new session of the workspace
    assert not again.exception, again.exception
    pairs, name = again.session_state.held_out_files["val"]
    assert name == "val.csv" and pairs["question1"].tolist() == ["How do I sleep?", "What is DNA?"]
    assert "test" not in again.session_state.held_out_files
    assert again.toggle(key="held_out_files_on").value
    assert "Validation: **2 pairs** from val.csv (50.0% duplicates)" in [caption.value for caption in again.caption]

    again.button(key="use_sample").click().run()  # letting the dataset go lets its validation file go
    assert again.session_state.held_out_files == {}
    workspace = open_workspace(runs_root.parent.parent, TEST_WORKSPACE)
    assert not any((workspace.uploads / "val").iterdir())
    assert open_page(DATA.path).session_state.get("held_out_files", {}) == {}


# ---- the operator's command ---------------------------------------------------------------------
def _age(folder, days: float) -> None:
    then = time.time() - days * 86_400
    for path in [*folder.rglob("*"), folder]:
        os.utime(path, (then, then), follow_symlinks=False)


def test_the_workspaces_command_lists_size_and_last_use_and_removes_the_idle(tmp_path, capsys):
    from core.cli.main import main

    root = tmp_path / "workspaces"
    idle, recent = open_workspace(root, new_workspace_id()), open_workspace(root, new_workspace_id())
    idle.store_upload("a.csv", b"x" * 1000)
    recent.save_state({"k": 3})
    (root / "not-a-workspace").mkdir()
    (root / "notes.txt").write_text("the operator's")
    _age(idle.folder, 40)
    _age(recent.folder, 2)

    assert main(["workspaces", "--root", str(root)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["workspace"] for row in rows] == [idle.id, recent.id]  # least recently used first
    assert rows[0]["bytes"] == 1000 and rows[0]["idle_days"] == pytest.approx(40, abs=0.01)
    assert rows[1]["bytes"] == recent.database.stat().st_size and not any(row["removed"] for row in rows)

    assert main(["workspaces", "--root", str(root), "--remove-idle-days", "30"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(row["workspace"], row["removed"]) for row in rows] == [(idle.id, True), (recent.id, False)]
    assert sorted(path.name for path in root.iterdir()) == sorted([recent.id, "not-a-workspace", "notes.txt"])
    assert recent.load_state() == {"k": 3}


def test_a_visit_counts_as_a_use(tmp_path, monkeypatch):
    from core.saving.workspaces import list_workspaces

    root = tmp_path / "workspaces"
    monkeypatch.setenv("SIAMESE_LAB_WORKSPACES", str(root))
    workspace = open_workspace(root, new_workspace_id())
    workspace.save_state({"k": 3})
    _age(workspace.folder, 40)
    open_app(workspace=workspace.id)
    assert list_workspaces(root)[0].last_used > time.time() - 30 * 86_400  # aged 40 days, then used: no longer idle


@pytest.mark.parametrize("argv, message", [(["--remove-idle-days", "-1"], "at least 0"),
                                           (["--remove-idle-days", "soon"], "number of days")])
def test_the_workspaces_command_refuses_a_bad_age_in_one_line(tmp_path, capsys, argv, message):
    from core.cli.main import main

    assert main(["workspaces", "--root", str(tmp_path), *argv]) == 2
    assert message in capsys.readouterr().err
    assert main(["workspaces", "--root", str(tmp_path / "missing")]) == 2
    assert "is not a folder" in capsys.readouterr().err
