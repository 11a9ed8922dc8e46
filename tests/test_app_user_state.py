"""What belongs to one browser session (AppTest): its active model is zero-shot MiniLM or a run it trained
itself, never another user's; the models folder is the server's, not the session's; the folders that are not
models are one line; the Map's query and the worked example's edits survive a visit to another page."""
import json
import shutil

from pathlib import Path

import pytest

import core.training.jobs
from core.models import ZERO_SHOT
from core.status import CANCELLED, DONE
from core.training.pipeline import RunResult
from core.training.trainer import TrainOutcome
from lab.navigation import DATA, MAP, SIMILARITY, TRAIN
from lab.session import (
    ACTIVE_MODEL,
    ACTIVE_MODEL_PICKED,
    job_queue,
    not_models_sentence,
)

EARLY, LATE = "2020-01-01T00:00:00+00:00", "2999-01-01T00:00:00+00:00"  # config.json's saved_at, newest first


def saved_copy(folder, destination, saved_at: str, status: str = DONE):
    """A copy of a saved model as a finished run saved at ``saved_at``, with a validation ROC AUC of 0.9 and no
    baselines: core.inference.run_quality never flags it, whatever the tiny model really scored."""
    shutil.copytree(folder, destination)
    config_path = destination / "config.json"
    config = json.loads(config_path.read_text())
    config.update(name=destination.name, saved_at=saved_at, metrics={"validation": {"roc_auc": 0.9}})
    config["training"]["status"] = status
    config_path.write_text(json.dumps(config))
    return destination


class CopyingRun:
    """Stands in for core.training.jobs.train_run: "trains" by saving a copy of a tiny model in the models folder."""

    def __init__(self, folder, name: str, status: str = DONE, saved_at: str = EARLY):
        self.folder, self.name, self.status, self.saved_at = folder, name, status, saved_at

    def __call__(self, spec, pairs, runs_root, callbacks, stop_event, **_):
        from pathlib import Path

        saved = saved_copy(self.folder, Path(runs_root) / self.name, self.saved_at, self.status)
        outcome = TrainOutcome(self.status, f"{self.status} after 1 epoch", 1, {"roc_auc": 0.9})
        return RunResult(saved, outcome, {}, {"roc_auc": 0.9}, {})


def train_here(at, rerun_until):
    """Start a run on the Train page (``core.training.jobs.train_run`` patched) and wait for its end: this
    session's run."""
    at.switch_page(TRAIN.path).run()
    at.button(key="start").click().run()
    rerun_until(at, lambda at: job_queue().jobs[at.session_state.jobs[-1]].finished)
    return job_queue().jobs[at.session_state.jobs[-1]]


def picker(at):
    return at.selectbox(key="active_model")


def test_another_users_run_is_a_choice_and_this_sessions_run_the_default(runs_root, tiny_models, open_page,
                                                                        monkeypatch, rerun_until):
    at = open_page(SIMILARITY.path)
    assert picker(at).value == ZERO_SHOT

    # Another user's run finishes while this session is open: the newest finished run of the folder, not ours.
    theirs = saved_copy(tiny_models["lstm"], runs_root / "someone-elses-run", LATE)
    at.run()
    assert not at.exception, at.exception
    assert picker(at).value == ZERO_SHOT
    assert "someone-elses-run (val AUC 0.900)" in picker(at).options  # still pickable

    # This session trains a run (saved earlier than theirs): it becomes the active model.
    monkeypatch.setattr(core.training.jobs, "train_run", CopyingRun(tiny_models["lstm"], "my-run"))
    job = train_here(at, rerun_until)
    assert job.status == DONE and job.runs_root == str(runs_root)
    at.switch_page(SIMILARITY.path).run()
    assert not at.exception, at.exception
    assert picker(at).value == str(runs_root / "my-run")

    picker(at).set_value(str(theirs)).run()  # picked explicitly, another user's run is used and stays
    at.switch_page(DATA.path).run()
    at.switch_page(SIMILARITY.path).run()
    assert picker(at).value == str(theirs)


def test_a_cancelled_run_of_this_session_is_not_the_default(runs_root, tiny_models, open_page, monkeypatch,
                                                            rerun_until):
    at = open_page(TRAIN.path)
    monkeypatch.setattr(core.training.jobs, "train_run", CopyingRun(tiny_models["lstm"], "my-first-run"))
    assert train_here(at, rerun_until).status == DONE
    monkeypatch.setattr(core.training.jobs, "train_run",
                        CopyingRun(tiny_models["lstm"], "my-cancelled-run", CANCELLED, LATE))
    job = train_here(at, rerun_until)
    assert job.status == CANCELLED and job.result.folder == runs_root / "my-cancelled-run"  # kept, as when asked to
    at.switch_page(SIMILARITY.path).run()
    assert not at.exception, at.exception
    assert picker(at).value == str(runs_root / "my-first-run")  # the newest of this session's finished runs
    assert "my-cancelled-run (cancelled, val AUC 0.900)" in picker(at).options


def test_the_models_folder_is_the_servers_whatever_the_session_holds(runs_root, tmp_path, open_page):
    elsewhere = str(tmp_path / "elsewhere")
    at = open_page(TRAIN.path, runs_root=elsewhere)  # a stale or forged session value
    assert not at.exception, at.exception
    assert at.session_state.runs_root == str(runs_root)
    assert not [box for box in at.text_input if box.key == "runs_root" or "folder" in box.label.lower()]
    assert any("saved in this workspace" in caption.value for caption in at.caption)
    assert any("No saved model in this workspace" in caption.value for caption in at.caption)
    assert not any(str(runs_root.parent) in element.value for element in [*at.caption, *at.markdown])  # no path


def test_two_folders_that_are_not_models_make_one_warning_line(runs_root, open_page):
    (runs_root / "notes").mkdir()
    (runs_root / "half-copied").mkdir()
    (runs_root / "half-copied" / "config.json").write_text("{not json")
    at = open_page(TRAIN.path)
    assert not at.exception, at.exception
    assert [warning.value for warning in at.warning] == [
        "2 folders in the models folder are not models: `half-copied`, `notes`."]
    [why] = [expander for expander in at.expander if expander.label == "Why they are not models"]
    reasons = why.markdown[0].value.splitlines()
    assert [line.split(":")[0] for line in reasons] == ["- `half-copied`", "- `notes`"]


def test_the_not_models_line_names_a_few_folders_and_says_why_for_one():
    assert not_models_sentence(["old: no model.safetensors; ignored"]) == (
        "1 folder in the models folder is not a model: `old` (no model.safetensors; ignored).")
    problems = [f"run{i}: config.json is missing." for i in range(1, 6)]
    assert not_models_sentence(problems) == (
        "5 folders in the models folder are not models: `run1`, `run2`, `run3` and 2 more.")


def test_the_map_query_survives_a_visit_to_another_page(runs_with_models, open_page):
    folder = str(runs_with_models[1]["lstm"])  # a tiny model: the map encodes the sample in a moment
    at = open_page(MAP.path, **{ACTIVE_MODEL: folder, ACTIVE_MODEL_PICKED: True})
    assert not at.exception, at.exception
    at.text_input(key="map_query").input("How do I learn Python?").run()
    assert any(header.value == "Nearest neighbours" for header in at.subheader)
    at.switch_page(DATA.path).run()
    at.switch_page(MAP.path).run()
    assert not at.exception, at.exception
    assert at.text_input(key="map_query").value == "How do I learn Python?"
    assert any("the typed question “How do I learn Python?”" in caption.value for caption in at.caption)


def example_scores(at):
    [editor] = [table for table in at.data_editor if table.key == "example"]
    return editor.value.to_numpy(dtype=float)


def test_the_worked_examples_edits_survive_a_visit_to_another_page(runs_root, open_page):
    at = open_page(SIMILARITY.path, timeout=90)
    at.toggle(key="explain").set_value(True).run()
    at.session_state["example"] = {"edited_rows": {0: {"q2_1": 0.5}}, "added_rows": [], "deleted_rows": []}
    at.run()  # the user typed 0.5 over the first diagonal score (0.9)
    assert not at.exception and not at.error
    per_row = next(d.value for d in at.dataframe if "L_full" in d.value.columns and len(d.value) == 4)
    assert per_row["s(A,P)"][0] == pytest.approx(0.5)

    at.switch_page(DATA.path).run()
    at.switch_page(SIMILARITY.path).run()
    assert not at.exception and not at.error
    assert example_scores(at)[0].tolist() == pytest.approx([0.5, -0.8, 0.3, -0.5])
    per_row = next(d.value for d in at.dataframe if "L_full" in d.value.columns and len(d.value) == 4)
    assert per_row["s(A,P)"][0] == pytest.approx(0.5)


def test_no_remembered_widget_is_given_a_value_beside_its_kept_one():
    """A widget whose value is kept (``**kept(key)``) starts from ``REMEMBERED``'s default, set in session state:
    a ``value=`` beside it makes Streamlit warn that the widget has both (a served app logs it; AppTest does not)."""
    import ast

    root = Path(__file__).resolve().parents[1]
    both = []
    for path in [*sorted((root / "pages").glob("*.py")), *sorted((root / "lab").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and any(
                    keyword.arg is None and isinstance(keyword.value, ast.Call)
                    and getattr(keyword.value.func, "id", getattr(keyword.value.func, "attr", "")) == "kept"
                    for keyword in node.keywords):
                if any(keyword.arg in ("value", "index") for keyword in node.keywords):
                    both.append(f"{path.name}:{node.lineno}")
    assert both == []
