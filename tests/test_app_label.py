"""The Label page (AppTest): every answer is written to the label database at once, Undo takes it back, Skip writes
nothing, the count survives a visit to another page, an answer is changed from the list of the last ones, another
tab's different answer is said and shown, the labels download as a pairs CSV, Retrain now waits until the labels
can train and queues a run from the current model on the labels' fixed splits, whose held-out score joins
zero-shot MiniLM's on the learning curve against the labels it trained on.

A tiny Siamese LSTM is the active model (picked before the first run), so the corpus encodes in a blink."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import core.training.jobs
from core.data import Splits, load_pairs
from core.model_names import ZERO_SHOT
from core.saving.label_store import LabelStore
from core.status import DONE
from core.training.active_rounds import (
    held_out_mask,
    labels_path,
    read_curve,
    retrain_problem,
    round_splits,
)
from core.training.pipeline import RunResult
from core.training.trainer import TrainOutcome
from app_support import TEST_WORKSPACE
from test_label_store import answers_in
from lab.navigation import DATA, LABEL
from lab.session import (
    ACTIVE_MODEL,
    ACTIVE_MODEL_PICKED,
    SAMPLE_NAME,
    data_key,
    job_queue,
    load_sample,
)


@pytest.fixture
def label_page(runs_with_models, open_page):
    """(AppTest on the Label page with the tiny LSTM picked, its labels file, the LSTM's folder)."""
    root, folders = runs_with_models
    at = open_page(LABEL.path, **{ACTIVE_MODEL: str(folders["lstm"]), ACTIVE_MODEL_PICKED: True})
    assert not at.exception and not at.error, (at.exception, at.error)
    pairs, _ = load_sample()
    return at, labels_path(root, SAMPLE_NAME, "pairs:" + data_key(pairs)), folders["lstm"]


def shown_pair(at) -> tuple[str, str]:
    return at.text[0].value, at.text[1].value


def count_line(at) -> str:
    return next(m.value for m in at.markdown if " labelled, " in m.value)


def test_an_answer_is_written_at_once_and_undo_takes_it_back(label_page):
    at, labels_file, _ = label_page
    assert count_line(at).startswith("**0 labelled, 0 held out**")
    first = shown_pair(at)
    at.button(key="label_duplicate").click().run()
    assert not at.exception, at.exception
    saved = LabelStore(labels_file).pairs()
    assert saved[["question1", "question2", "is_duplicate"]].values.tolist() == [[*first, 1]]
    assert saved["labelled_by"][0] == at.session_state["label_session_id"]
    assert count_line(at).startswith("**1 labelled, ")
    second = shown_pair(at)
    assert second != first and not set(second) & set(first)  # a round asks no question twice

    at.button(key="label_not_duplicate").click().run()
    assert LabelStore(labels_file).pairs()[["question1", "question2", "is_duplicate"]].values.tolist() == [
        [*first, 1], [*second, 0]]
    at.button(key="label_undo").click().run()
    assert not at.exception, at.exception
    assert LabelStore(labels_file).pairs()[["question1", "question2"]].values.tolist() == [list(first)]
    assert shown_pair(at) == second  # the pair taken back is asked again
    assert count_line(at).startswith("**1 labelled, ")


def test_skip_shows_the_next_pair_and_writes_nothing(label_page):
    at, labels_file, _ = label_page
    first = shown_pair(at)
    at.button(key="label_skip").click().run()
    assert not at.exception, at.exception
    assert shown_pair(at) != first
    assert not labels_file.exists() or len(LabelStore(labels_file)) == 0
    assert count_line(at).startswith("**0 labelled, 0 held out**")
    assert at.button(key="label_undo").disabled  # nothing of this session to take back


def test_the_count_survives_a_visit_to_another_page(label_page):
    at, labels_file, _ = label_page
    for _ in range(3):
        at.button(key="label_duplicate").click().run()
    assert count_line(at).startswith("**3 labelled, ")
    at.switch_page(DATA.path).run()
    assert not at.exception, at.exception
    at.switch_page(LABEL.path).run()
    assert not at.exception, at.exception
    held = int(held_out_mask(LabelStore(labels_file).pairs()).sum())
    assert count_line(at).startswith(f"**3 labelled, {held} held out**")
    assert len(LabelStore(labels_file)) == 3


class RecordingRun:
    """Stands in for core.training.jobs.train_run: keeps what it was given and "trains" by saving a copy of a tiny
    model (with a validation ROC AUC of 0.9, so it is never flagged) in the models folder."""

    def __init__(self, folder: Path):
        self.folder, self.calls = folder, []

    def __call__(self, spec, pairs, runs_root, callbacks, stop_event, val=None, test=None, **_):
        self.calls.append((spec, pairs))
        saved = Path(shutil.copytree(self.folder, Path(runs_root) / "label-retrain"))
        config = json.loads((saved / "config.json").read_text())
        config.update(name=saved.name, metrics={"validation": {"roc_auc": 0.9}})
        (saved / "config.json").write_text(json.dumps(config))
        return RunResult(saved, TrainOutcome(DONE, "done after 1 epoch", 1, {"roc_auc": 0.9}), {}, {"roc_auc": 0.9}, {})


def test_retrain_now_queues_a_run_from_the_current_model_on_the_labels_splits(label_page, monkeypatch, rerun_until,
                                                                                  plotly_figures):
    at, labels_file, lstm = label_page
    pairs, _ = load_sample()
    labels = LabelStore(labels_file)
    for q1, q2, y in pairs[["question1", "question2", "is_duplicate"]].head(60).itertuples(index=False):
        labels.add(q1, q2, int(y), labelled_by="someone else")
    assert retrain_problem(labels.pairs()) is None
    fake = RecordingRun(lstm)
    monkeypatch.setattr(core.training.jobs, "train_run", fake)
    at.run()
    assert count_line(at).startswith("**60 labelled, ")

    at.button(key="label_retrain").click().run()
    assert not at.exception and not at.error, (at.exception, [error.value for error in at.error])
    job = job_queue().jobs[at.session_state.jobs[-1]]
    assert job.spec.init_model == str(lstm) and job.spec.model == "lstm" and job.spec.loss.name == "contrastive"
    expected = round_splits(labels.pairs())
    assert isinstance(job.pairs, Splits)
    pd.testing.assert_frame_equal(job.pairs.train, expected.train)
    pd.testing.assert_frame_equal(job.pairs.val, expected.val)
    # Zero-shot MiniLM is the curve's first point, scored on the same held-out labels, at 0 labels learned.
    zero_shot = read_curve(labels_file)[0]  # the fake run may be over and on the curve already
    assert zero_shot["model"] == ZERO_SHOT and zero_shot["labels"] == 0 and zero_shot["held_out"] == len(expected.val)

    rerun_until(at, lambda at: job.finished)
    at.run()
    assert not at.exception, at.exception
    assert len(fake.calls) == 1 and job.status == DONE
    curve = read_curve(labels_file)
    assert [(p["model"], p["labels"], p["held_out"]) for p in curve] == [
        (ZERO_SHOT, 0, len(expected.val)), (str(job.result.folder), 60, len(expected.val))]
    [figure] = plotly_figures(at)
    trained = len(expected.train)  # the x-axis: labels trained on, the held-out ones never
    assert [trace["x"] for trace in figure["data"]] == [[0, trained], [0, trained]] and trained < 60
    assert figure["data"][0]["y"] == [curve[0]["roc_auc"], curve[1]["roc_auc"]]
    # The newest model's held-out figures with their intervals, and a word on how few labels they rest on.
    figures = next(m.value for m in at.markdown if "held-out labels: ROC AUC" in m.value)
    assert f"on {len(expected.val)} held-out labels" in figures and "95 % interval" in figures
    assert any(w.value.startswith(f"Only {len(expected.val)} labels are held out") for w in at.warning)
    at.run()  # the point is added once
    assert len(read_curve(labels_file)) == 2


def test_a_queued_retrain_is_cancelled_at_once(label_page, monkeypatch):
    """With the one training slot taken by another workspace's run, a retrain waits; its Cancel takes it out of the
    queue at once, without waiting for the run ahead."""
    from core.status import CANCELLED, RUNNING, WAITING
    from core.training.jobs import TrainingJob
    from core.training.specs import RunSpec
    from tests.test_jobs import HeldUntilCancelled

    at, labels_file, _ = label_page
    pairs, _ = load_sample()
    labels = LabelStore(labels_file)
    for q1, q2, y in pairs[["question1", "question2", "is_duplicate"]].head(60).itertuples(index=False):
        labels.add(q1, q2, int(y), labelled_by="someone else")
    held = HeldUntilCancelled()
    monkeypatch.setattr(core.training.jobs, "train_run", held)
    queue = job_queue()
    ahead = queue.submit(TrainingJob(RunSpec(), pd.DataFrame(), "another workspace's models"))
    try:
        assert held.started.acquire(timeout=60) and ahead.status == RUNNING
        at.run()
        at.button(key="label_retrain").click().run()
        retrain = queue.jobs[at.session_state.jobs[-1]]
        assert retrain.status == WAITING and any(i.value.startswith("Waiting — ") for i in at.info)
        at.button(key="label_cancel_retrain").click().run()
        assert retrain.status == CANCELLED and retrain.error == "cancelled before it started"
        assert ahead.status == RUNNING and held.calls == 1  # cancelled while the run ahead still trains
        at.run()
        assert any(w.value.startswith("Cancelled before it started") for w in at.warning)
        assert not at.button(key="label_retrain").disabled  # a new retrain can be asked for
    finally:
        ahead.cancel()
        assert queue.wait(ahead, timeout=60)


def round_progress(at) -> list[str]:
    return [element.proto.text for element in at.get("progress") if element.proto.text.startswith("This round")]


def page_text(at) -> str:
    return "\n".join(str(element.value) for kind in ("markdown", "caption", "info", "warning", "text")
                     for element in getattr(at, kind))


def test_duplicate_and_not_duplicate_weigh_the_same_and_the_round_shows_its_progress(label_page):
    at, _, _ = label_page
    assert at.button(key="label_duplicate").proto.type == at.button(key="label_not_duplicate").proto.type
    assert at.button(key="label_duplicate").proto.type != "primary"
    assert round_progress(at) == ["This round: 0 of 10 pairs answered or skipped"]
    at.button(key="label_duplicate").click().run()
    at.button(key="label_skip").click().run()
    assert round_progress(at) == ["This round: 2 of 10 pairs answered or skipped"]


def test_retrain_is_offered_only_when_the_labels_can_train_and_says_what_it_needs(label_page):
    at, labels_file, _ = label_page
    assert at.button(key="label_retrain").disabled
    assert any(c.value.startswith("Retrain needs labels") for c in at.caption)
    pairs, _ = load_sample()
    store = LabelStore(labels_file)
    for q1, q2 in pairs[["question1", "question2"]].head(12).itertuples(index=False):
        store.add(q1, q2, 1, labelled_by="someone else")  # duplicates only
    at.run()
    assert at.button(key="label_retrain").disabled
    needs = retrain_problem(store.pairs())
    assert "more non-duplicates" in needs and any(c.value == needs for c in at.caption)


def test_an_answer_is_changed_from_the_list_of_the_last_answers(label_page):
    at, labels_file, _ = label_page
    first = shown_pair(at)
    at.button(key="label_duplicate").click().run()
    assert "**Duplicate**  \nby you" in [m.value for m in at.markdown]
    at.button(key="label_change_0").click().run()
    assert not at.exception, at.exception
    store = LabelStore(labels_file)
    assert store.pairs()[["question1", "question2", "is_duplicate"]].values.tolist() == [[*first, 0]]
    assert "**Not duplicate**  \nby you" in [m.value for m in at.markdown]
    assert answers_in(labels_file, *first)["is_duplicate"].tolist() == [1, 0]  # the correction is kept as history
    assert count_line(at).startswith("**1 labelled, ") and not at.info  # one's own change is no news


def test_two_tabs_answering_one_pair_differently_show_the_later_answer_and_say_so(label_page):
    at, labels_file, _ = label_page
    other_tab = LabelStore(labels_file)
    first = shown_pair(at)
    at.button(key="label_duplicate").click().run()
    other_tab.add(*first, 0, labelled_by="session-other")  # another tab answers the same pair later
    at.run()
    assert any("Another tab or session changed your answer" in i.value and "Not duplicate" in i.value for i in at.info)
    assert "**Not duplicate**  \nby another session" in [m.value for m in at.markdown]
    second = shown_pair(at)
    other_tab.add(*second, 0, labelled_by="session-other")  # the other tab answers first this time
    at.button(key="label_duplicate").click().run()
    assert any("had been answered Not duplicate in another tab" in i.value and "replaced it" in i.value
               for i in at.info)
    labels = other_tab.pairs()
    assert labels[["question1", "question2", "is_duplicate"]].values.tolist() == [[*first, 0], [*second, 1]]
    at.run()
    assert not at.info  # each change is told once


def test_the_labels_download_as_a_pairs_file_and_no_server_path_is_shown(label_page):
    at, labels_file, _ = label_page
    at.button(key="label_duplicate").click().run()
    at.button(key="label_not_duplicate").click().run()
    [download] = at.get("download_button")
    assert download.proto.label == "Download the labels (CSV)"
    pairs, _ = load_pairs(LabelStore(labels_file).export_csv())
    assert pairs.values.tolist() == LabelStore(labels_file).pairs()[["question1", "question2", "is_duplicate"]
                                                                     ].values.tolist()
    shown = page_text(at)
    assert shown.count(" labelled, ") == 1 and str(labels_file.parent.parent) not in shown  # no server path


def test_a_pairs_file_added_from_the_uploader_is_merged_once_and_counted_in_the_same_run(label_page):
    at, labels_file, _ = label_page
    content = b"question1,question2,is_duplicate\nHow do I swim?,How can I learn to swim?,1\nIs tea hot?,Why is ice cold?,0\n"
    at.file_uploader(key="label_upload").set_value(("mine.csv", content, "text/csv")).run()
    assert not at.exception and not at.error, (at.exception, at.error)
    assert any("From that file: 2 labels added, 0 changed, 0 already so." in info.value for info in at.info)
    assert count_line(at).startswith("**2 labelled, ")
    at.run()  # the file stays in the uploader: it is not merged again
    assert not any("From that file" in info.value for info in at.info) and len(LabelStore(labels_file)) == 2


def test_the_label_page_asks_around_the_verdict_pages_threshold(runs_root, open_page):
    """One threshold per model and dataset: zero-shot MiniLM has none of its own, so both pages calibrate it on the
    active dataset's labelled pairs, the same value (not MiniLM's fixed 0.800 on one page), shown as applied."""
    from core.inference.metrics import best_thresholds
    from core.models import ZERO_SHOT_THRESHOLD
    from lab.navigation import VERDICT
    from lab.session import get_model

    pairs, _ = load_sample()
    scores = get_model(ZERO_SHOT)[0].score_pairs(pairs["question1"].tolist(), pairs["question2"].tolist())
    expected = round(best_thresholds(pairs["is_duplicate"].to_numpy(), scores)["accuracy"], 3)
    assert expected != ZERO_SHOT_THRESHOLD
    at = open_page(LABEL.path, **{ACTIVE_MODEL: ZERO_SHOT, ACTIVE_MODEL_PICKED: True})
    assert not at.exception and not at.error
    [line] = [c.value for c in at.caption if c.value.startswith("Similarity ")]
    assert f"(threshold {expected:.3f})" in line
    at.switch_page(VERDICT.path).run()
    assert not at.exception
    assert at.slider(key="threshold").value == pytest.approx(expected, abs=1e-9)
    assert any(c.value.startswith(f"Calibrated threshold of this model: {expected:.3f} ") for c in at.caption)


def test_a_page_run_reads_counts_and_keys_never_the_whole_table(label_page, monkeypatch):
    at, labels_file, _ = label_page

    def whole_table(self, *args):
        raise AssertionError("a Label page run read every label")

    monkeypatch.setattr(LabelStore, "pairs", whole_table)
    answered = []
    for button in ["label_duplicate", "label_not_duplicate"] * 6 + ["label_skip", "label_undo", "label_change_0"]:
        answered.append(shown_pair(at))
        at.button(key=button).click().run()  # twelve answers: the first round ends and a second is chosen
        assert not at.exception, at.exception
    assert count_line(at).startswith("**11 labelled, ")
    assert len(set(answered[:12])) == 12  # no pair asked twice: the second round left the first's answers out
    monkeypatch.undo()
    assert len(LabelStore(labels_file)) == 11


def test_earlier_answers_read_as_yours_after_a_reload_and_the_download_says_who_and_when(label_page, open_page):
    at, labels_file, folder = label_page
    first = shown_pair(at)
    at.button(key="label_duplicate").click().run()
    LabelStore(labels_file).add("Another person's question?", "Their pair?", 0, labelled_by="workspace-other/s-1")
    reloaded = open_page(LABEL.path, **{ACTIVE_MODEL: str(folder), ACTIVE_MODEL_PICKED: True})  # a new session
    assert not reloaded.exception, reloaded.exception
    assert reloaded.session_state["label_session_id"] != at.session_state["label_session_id"]
    verdicts = [m.value for m in reloaded.markdown if m.value.startswith("**") and "by " in m.value]
    assert verdicts == ["**Not duplicate**  \nby another session", "**Duplicate**  \nby you"]
    exported = LabelStore(labels_file).export_csv().decode("utf-8").split("\r\n")
    assert exported[0] == "question1,question2,is_duplicate,labelled_by,labelled_at"
    mine = next(line for line in exported if line.startswith(first[0]) or line.startswith('"' + first[0]))
    who, when = mine.split(",")[-2:]
    assert who == at.session_state["label_session_id"] and who.startswith("workspace-") and when.endswith("+00:00")
    assert TEST_WORKSPACE not in "\n".join(exported)  # the workspace's id opens it: never in a file
