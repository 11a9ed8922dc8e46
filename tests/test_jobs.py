"""Background training jobs and the queue that caps how many run at once."""

import dataclasses
import gc
import json
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

import core.training.jobs
from core.models import load_model
from core.training.jobs import (
    CANCELLED,
    DONE,
    FAILED,
    INTERRUPTED,
    NOT_STARTED,
    RUNNING,
    SPEED_WINDOW,
    WAITING,
    JobQueue,
    Progress,
    TrainingJob,
    WaitEstimate,
    run_label,
)
from core.training.specs import RunSpec, spec_from_options
from core.training.trainer import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120  # generous: only a guard against a hang, never a speed assertion


@pytest.fixture(scope="module")
def pairs() -> pd.DataFrame:
    from core.data import load_pairs

    frame, _ = load_pairs(ROOT / "assets" / "sample_pairs.csv", max_rows=120)
    return frame


def tiny_spec(epochs: int = 1) -> RunSpec:
    return spec_from_options(model="lstm", loss="triplet", epochs=epochs, batch_size=16, device="cpu",
                             model_options={"hidden_size": 16, "embedding_dim": 12}, max_length=20)


class Gate:
    """Holds every job's ``train_run`` until the test opens it, so the queue can be observed."""

    def __init__(self):
        self.open = threading.Event()
        self.entered = threading.Semaphore(0)

    def install(self, monkeypatch):
        real = core.training.jobs.train_run

        def gated(*args, **kwargs):
            self.entered.release()
            assert self.open.wait(TIMEOUT)
            return real(*args, **kwargs)

        monkeypatch.setattr(core.training.jobs, "train_run", gated)
        return self


def test_queue_runs_one_at_a_time_and_both_finish(pairs, tmp_path, monkeypatch):
    gate = Gate().install(monkeypatch)
    queue = JobQueue(max_running=1)
    first = queue.submit(TrainingJob(tiny_spec(), pairs, str(tmp_path), label="first"))
    assert gate.entered.acquire(timeout=TIMEOUT)  # the first job is inside train_run
    second = queue.submit(TrainingJob(tiny_spec(), pairs, str(tmp_path), label="second"))

    assert first.status == RUNNING and queue.position(first) == 0
    assert second.status == WAITING and queue.position(second) == 1
    assert not second.finished

    gate.open.set()
    assert queue.wait(first, timeout=TIMEOUT) and queue.wait(second, timeout=TIMEOUT)
    assert (first.status, second.status) == (DONE, DONE), (first.error, second.error)
    assert queue.position(second) == 0
    folders = {first.result.folder, second.result.folder}
    assert len(folders) == 2 and all(folder.parent == tmp_path for folder in folders)
    for job in (first, second):
        model, config = load_model(job.result.folder)
        assert config["model_type"] == "lstm"
        assert job.progress.step == job.progress.total_steps > 0
        assert job.progress.fraction == 1.0
        assert [step for step, _ in job.progress.losses] == list(range(1, job.progress.step + 1))
        assert [e["epoch"] for e in job.progress.epochs] == [1]
        assert "roc_auc" in job.progress.epochs[0]


def test_queue_with_two_slots_runs_both_at_once(pairs, tmp_path, monkeypatch):
    gate = Gate().install(monkeypatch)
    queue = JobQueue(max_running=2)
    jobs = [queue.submit(TrainingJob(tiny_spec(), pairs, str(tmp_path))) for _ in range(2)]
    assert gate.entered.acquire(timeout=TIMEOUT) and gate.entered.acquire(timeout=TIMEOUT)
    assert [job.status for job in jobs] == [RUNNING, RUNNING]
    gate.open.set()
    assert all(queue.wait(job, timeout=TIMEOUT) for job in jobs)
    assert [job.status for job in jobs] == [DONE, DONE]


def models_in(runs_root: Path) -> list[Path]:
    """What a models folder holds besides the runs' records."""
    return [path for path in runs_root.iterdir() if path.name != core.training.jobs.RECORDS_FOLDER]


class PauseAtFirstStep:
    """Trainer callback that blocks after step 1 until released."""

    def __init__(self):
        self.reached = threading.Event()
        self.release = threading.Event()

    def on_batch_end(self, trainer):
        if trainer.step == 1:
            self.reached.set()
            assert self.release.wait(TIMEOUT)


@pytest.mark.parametrize("keep_unvalidated", [False, True])
def test_cancel_a_running_job(pairs, tmp_path, monkeypatch, keep_unvalidated):
    pause = PauseAtFirstStep()
    real = core.training.jobs.train_run

    def with_pause(*args, callbacks=(), **kwargs):
        return real(*args, callbacks=[*callbacks, pause], **kwargs)

    monkeypatch.setattr(core.training.jobs, "train_run", with_pause)
    queue = JobQueue(max_running=1)
    spec = dataclasses.replace(tiny_spec(epochs=3), keep_unvalidated=keep_unvalidated)
    job = queue.submit(TrainingJob(spec, pairs, str(tmp_path)))
    assert pause.reached.wait(TIMEOUT)
    assert job.status == RUNNING and job.progress.step == 1
    job.cancel()
    pause.release.set()
    assert queue.wait(job, timeout=TIMEOUT)
    assert job.status == CANCELLED
    assert job.result.outcome.status == "cancelled" and job.result.outcome.best_epoch == 0
    assert job.progress.step == 1 < job.progress.total_steps
    # Cancelled before its first validation: saved only when asked to
    if keep_unvalidated:
        assert models_in(tmp_path) == [job.result.folder]
        assert json.loads((job.result.folder / "config.json").read_text())["training"]["status"] == "cancelled"
    else:
        assert job.result.folder is None and models_in(tmp_path) == []
        assert job.result.note.startswith("nothing saved: this run was cancelled before its first validation")
        assert job.result.validation == {}  # nothing scored for a run that is not kept


def test_cancel_a_waiting_job(pairs, tmp_path, monkeypatch):
    gate = Gate().install(monkeypatch)
    queue = JobQueue(max_running=1)
    first = queue.submit(TrainingJob(tiny_spec(), pairs, str(tmp_path)))
    assert gate.entered.acquire(timeout=TIMEOUT)
    second = queue.submit(TrainingJob(tiny_spec(), pairs, str(tmp_path)))
    second.cancel()
    gate.open.set()
    assert queue.wait(first, timeout=TIMEOUT) and queue.wait(second, timeout=TIMEOUT)
    assert first.status == DONE
    assert second.status == CANCELLED and second.result is None
    assert "before it started" in second.error


class HeldUntilCancelled:
    """Stands in for ``train_run``: counts its calls and holds each one until its job is cancelled (then fails, as a
    run that never trained), so no test here trains a model to watch the queue."""

    def __init__(self):
        self.started = threading.Semaphore(0)
        self.calls = 0

    def __call__(self, spec, pairs, runs_root, callbacks, stop_event, **_):
        self.calls += 1
        self.started.release()
        assert stop_event.wait(TIMEOUT)
        raise RuntimeError("held by the test")


def test_cancelling_a_waiting_job_takes_it_out_of_the_line_at_once(monkeypatch):
    held = HeldUntilCancelled()
    monkeypatch.setattr(core.training.jobs, "train_run", held)
    queue = JobQueue(max_running=1)
    first, second, third = (queue.submit(TrainingJob(RunSpec(), pd.DataFrame(), "unused")) for _ in range(3))
    try:
        assert held.started.acquire(timeout=TIMEOUT)
        assert [queue.position(job) for job in (first, second, third)] == [0, 1, 2]
        second.cancel()
        # Cancelled now, with the run ahead of it still training: not when that run ends.
        assert second.status == CANCELLED and second.finished and second.error == "cancelled before it started"
        assert first.status == RUNNING and queue.position(second) == 0 and queue.position(third) == 1
        assert queue.wait_estimate(second) is None
    finally:
        first.cancel()
        assert queue.wait(first, timeout=TIMEOUT)
        assert held.started.acquire(timeout=TIMEOUT)  # the third job starts next; the second one never does
        third.cancel()
        assert queue.wait(third, timeout=TIMEOUT)
    assert held.calls == 2 and second.result is None


def test_a_job_cancelled_before_it_reaches_the_queue_never_trains(monkeypatch):
    held = HeldUntilCancelled()
    monkeypatch.setattr(core.training.jobs, "train_run", held)
    job = TrainingJob(RunSpec(), pd.DataFrame(), "unused")
    job.cancel()  # not submitted yet: only its stop flag is set
    assert job.status == WAITING
    queue = JobQueue(max_running=1)
    queue.submit(job)  # started as usual: its worker finds the stop flag before training
    assert queue.wait(job, timeout=TIMEOUT)
    assert job.status == CANCELLED and job.error == "cancelled before it started" and held.calls == 0


def test_stop_all_cancels_every_unfinished_job(monkeypatch):
    held = HeldUntilCancelled()
    monkeypatch.setattr(core.training.jobs, "train_run", held)
    queue = JobQueue(max_running=1)
    running, waiting = (queue.submit(TrainingJob(RunSpec(), pd.DataFrame(), "unused")) for _ in range(2))
    assert held.started.acquire(timeout=TIMEOUT)
    assert queue.stop_all() == [running]  # what a caller may wait for: the waiting job is done with already
    assert waiting.status == NOT_STARTED and waiting.error == "the server stopped before it started"
    assert queue.wait(running, timeout=TIMEOUT) and running.finished
    assert held.calls == 1 and queue.stop_all() == []


def test_a_failing_job_reports_its_error(tmp_path):
    # no duplicate pair at all: neither a triplet batch nor a validation can be formed
    bad = pd.DataFrame({"question1": [f"question {i}" for i in range(20)],
                        "question2": [f"other {i}" for i in range(20)], "is_duplicate": [0] * 20})
    queue = JobQueue(max_running=1)
    job = queue.submit(TrainingJob(tiny_spec(), bad, str(tmp_path)))
    assert queue.wait(job, timeout=TIMEOUT)
    assert job.status == FAILED
    # refused before training: its validation split could never measure it
    assert job.error.startswith("ValueError: the validation pairs hold 0 duplicate(s) and 2 non-duplicate(s)")
    assert job.finished and job.result is None


# ---- what the page shows while a run trains ---------------------------------------------------------
class FakeTrainer:
    """The trainer attributes the recorder reads, moved by hand."""

    def __init__(self, total_steps: int, max_minutes: float = 0.0, batch: int = 32):
        self.total_steps, self.total_epochs, self.batch = total_steps, 2, batch
        self.config = TrainConfig(max_minutes=max_minutes)
        self.step, self.epoch, self.pairs_seen, self.loss = 0, 1, 0, 1.0
        self.loss_step = 0  # the step whose loss ``loss`` is
        self.read_every = 1  # the Trainer's read_loss_every: 1 on the CPU, more on CUDA
        self.validation_progress = None

    def advance(self):
        self.step += 1
        self.pairs_seen += self.batch
        if self.step % self.read_every == 0:
            self.loss, self.loss_step = 1.0 / self.step, self.step


class Clock:
    def __init__(self):
        self.now = 500.0

    def __call__(self):
        return self.now


def test_speed_and_time_left_follow_the_last_steps_not_the_whole_run():
    clock, trainer, progress = Clock(), FakeTrainer(total_steps=100), Progress()
    recorder = core.training.jobs._Recorder(progress, clock=clock)
    assert progress.phase == "" and progress.seconds_left is None  # the page says "Starting…"
    recorder.on_train_start(trainer)
    assert (progress.total_steps, progress.total_epochs) == (100, 2)
    for seconds in [10.0] * 10 + [2.0] * SPEED_WINDOW:  # slow at first (another user's run), then 2 s a step
        clock.now += seconds
        trainer.advance()
        recorder.on_batch_end(trainer)
    assert progress.phase == "training" and progress.step == 30
    assert progress.seconds_per_step == pytest.approx(2.0)  # the last 20 steps only, not (100 + 40) / 30
    assert progress.pairs_per_second == pytest.approx(16.0)  # 32 pairs in 2 s
    assert progress.seconds_left == pytest.approx(70 * 2.0)

    trainer.validation_progress = (1200, 3000)
    recorder.on_validation_progress(trainer)
    assert progress.phase == "scoring validation 1,200/3,000"


class StageLog:
    """A pipeline callback that keeps every stage it is told of, in order."""

    def __init__(self):
        self.stages = []

    def on_stage(self, stage):
        self.stages.append(stage)


def test_the_recorder_says_each_stage_and_times_the_speed_after_the_first_step():
    clock, trainer, progress = Clock(), FakeTrainer(total_steps=100), Progress()
    recorder = core.training.jobs._Recorder(progress, clock=clock)
    recorder.on_stage("loading the pretrained encoder")
    assert progress.phase == "loading the pretrained encoder"
    recorder.on_train_start(trainer)
    assert progress.phase == "the first training step" and progress.seconds_left is None
    trainer.validation_progress = (40, 200)
    recorder.on_validation_progress(trainer)  # the starting weights, scored before any step
    assert progress.phase == "scoring the starting weights on validation 40/200"
    clock.now += 45.0  # the first step warms up: not a step's true time
    trainer.advance()
    recorder.on_batch_end(trainer)
    assert progress.phase == "training" and progress.pairs_per_second == 0.0 and progress.seconds_left is None
    for _ in range(4):
        clock.now += 2.0
        trainer.advance()
        recorder.on_batch_end(trainer)
    assert progress.seconds_per_step == pytest.approx(2.0)  # (45 + 8) / 5 with the first step counted
    assert progress.pairs_per_second == pytest.approx(16.0)


def test_a_run_reports_its_stages_before_and_after_training(pairs, tmp_path):
    from core.training.pipeline import train_run

    log = StageLog()
    spec = spec_from_options(model="lstm", epochs=1, batch_size=16, device="cpu", max_steps=2, max_length=20,
                             model_options={"hidden_size": 16, "embedding_dim": 12})
    train_run(spec, pairs, runs_root=tmp_path, callbacks=[log])
    assert log.stages[:2] == ["splitting the pairs", "building the model"]
    assert log.stages[2].startswith("tokenising ") and log.stages[2].endswith(" validation pairs")
    assert log.stages[-2:] == ["finishing: scoring the baselines (TF-IDF, zero-shot MiniLM)",
                               "finishing: saving the model"]


def test_the_loss_curve_has_one_point_per_loss_read():
    clock, progress = Clock(), Progress()
    recorder = core.training.jobs._Recorder(progress, clock=clock)
    every_step, every_third = FakeTrainer(total_steps=10), FakeTrainer(total_steps=10)
    every_third.read_every = 3  # as on CUDA: the loss is read back every few steps
    recorder.on_train_start(every_step)
    for _ in range(7):
        every_step.advance()
        recorder.on_batch_end(every_step)
    assert progress.losses == [(s, 1.0 / s) for s in range(1, 8)]
    progress = Progress()
    recorder = core.training.jobs._Recorder(progress, clock=clock)
    recorder.on_train_start(every_third)
    for _ in range(7):
        every_third.advance()
        recorder.on_batch_end(every_third)
    assert progress.losses == [(3, 1.0 / 3), (6, 1.0 / 6)]  # no point before the first read, none repeated


def test_the_speed_counts_only_steps_whose_loss_was_read():
    """On CUDA the steps between loss reads return at once (queued) and the read waits for all of them: the speed
    comes from the reads, not from the queueing."""
    clock, trainer, progress = Clock(), FakeTrainer(total_steps=100), Progress()
    trainer.read_every = 4
    recorder = core.training.jobs._Recorder(progress, clock=clock)
    recorder.on_train_start(trainer)
    for _ in range(14):  # three steps queued in 0.01 s each, then a read that waits 3.97 s: 1 s a step in truth
        clock.now += 3.97 if (trainer.step + 1) % 4 == 0 else 0.01
        trainer.advance()
        recorder.on_batch_end(trainer)
    assert progress.step == 14  # two steps queued since the last read at step 12: they do not count yet
    assert progress.seconds_per_step == pytest.approx(1.0)  # counting them would give 12.02 s / 14 steps
    assert progress.seconds_left == pytest.approx(86 * 1.0)


def test_time_left_stays_within_the_time_budget():
    clock, trainer, progress = Clock(), FakeTrainer(total_steps=1000, max_minutes=2.0), Progress()
    recorder = core.training.jobs._Recorder(progress, clock=clock)
    recorder.on_train_start(trainer)
    for _ in range(30):
        clock.now += 3.0
        trainer.advance()
        recorder.on_batch_end(trainer)
    assert progress.seconds == 90.0 and progress.budget_seconds == 120.0
    assert progress.seconds_left == pytest.approx(30.0)  # 970 steps at 3 s would be far longer


def test_the_job_label_names_labelled_hard_negatives_only_when_used():
    plain = spec_from_options(loss="triplet", data_name="quora")
    assert run_label(plain) == "Siamese LSTM · triplet (mean + closest negative, alpha=0.25) · quora"
    with_negatives = spec_from_options(loss="triplet", hard_negatives=True, data_name="quora")
    assert run_label(with_negatives) == \
        "Siamese LSTM · triplet (mean + closest negative, alpha=0.25) + labelled hard negatives · quora"
    assert TrainingJob(with_negatives, pd.DataFrame(), ".").label == run_label(with_negatives)


def test_a_running_job_records_phase_epochs_and_speed(pairs, tmp_path):
    queue = JobQueue(max_running=1)
    job = queue.submit(TrainingJob(spec_from_options(model="lstm", epochs=2, batch_size=16, device="cpu", max_steps=5,
                                                     model_options={"hidden_size": 16, "embedding_dim": 12},
                                                     max_length=20), pairs, str(tmp_path)))
    assert queue.wait(job, timeout=TIMEOUT) and job.status == DONE, job.error
    p = job.progress
    assert (p.step, p.total_steps, p.total_epochs) == (5, 5, 2)  # the step cap ends it in the second epoch
    assert p.seconds_per_step > 0 and p.pairs_per_second > 0 and p.seconds_left == 0.0
    assert p.phase.startswith("finishing")
    assert job.result.outcome.message == "stopped at the step cap of 5 steps"


def test_a_waiting_run_is_told_its_place_and_when_it_should_start(monkeypatch):
    release = threading.Event()

    def held(spec, pairs, runs_root, callbacks, stop_event, **_):
        assert release.wait(60)
        raise RuntimeError("held by the test")

    monkeypatch.setattr(core.training.jobs, "train_run", held)
    queue = JobQueue(max_running=1)
    jobs = [queue.submit(TrainingJob(RunSpec(), pd.DataFrame(), "unused")) for _ in range(3)]
    try:
        assert queue.wait(jobs[0], timeout=30, until=lambda job: job.status == RUNNING)
        assert queue.wait_estimate(jobs[0]) is None  # training: no wait
        assert queue.wait_estimate(jobs[1]) == WaitEstimate(1, None, False)  # the run ahead has no speed yet
        p = jobs[0].progress
        p.step, p.total_steps, p.seconds_per_step = 25, 100, 2.0
        assert queue.wait_estimate(jobs[1]) == WaitEstimate(1, 150.0, False)
        assert queue.wait_estimate(jobs[2]) == WaitEstimate(2, 150.0, True)  # plus the run ahead's own time
    finally:
        release.set()
        for job in jobs:
            assert queue.wait(job, timeout=60)


# ---- records: a run outlives the server process -------------------------------------------------------
class StoppedAsCancelDoes:
    """Stands in for ``train_run``: holds until its job is stopped, then ends as a cancelled run whose best model
    so far was saved (what the pipeline does on Cancel), at step 3 of 10."""

    def __init__(self):
        self.started = threading.Semaphore(0)

    def __call__(self, spec, pairs, runs_root, callbacks, stop_event, **_):
        callbacks[0].progress.step, callbacks[0].progress.total_steps = 3, 10
        self.started.release()
        assert stop_event.wait(TIMEOUT)
        outcome = SimpleNamespace(status=CANCELLED, message="cancelled at step 3", best_epoch=1)
        return SimpleNamespace(outcome=outcome, folder=Path(runs_root) / "lstm-triplet-20260101-120000")


def records_by_label(runs_root, live_here=frozenset()) -> dict:
    return {record.label: record for record in core.training.jobs.read_records(runs_root, live_here)}


def test_a_server_stop_records_the_running_run_interrupted_and_the_queued_one_not_started(tmp_path, monkeypatch):
    held = StoppedAsCancelDoes()
    monkeypatch.setattr(core.training.jobs, "train_run", held)
    queue = JobQueue(max_running=1)
    running, waiting = (queue.submit(TrainingJob(RunSpec(), pd.DataFrame(), str(tmp_path), label=label))
                        for label in ("first", "second"))
    assert held.started.acquire(timeout=TIMEOUT)
    live = {running.id, waiting.id}
    assert {label: record.status for label, record in records_by_label(tmp_path, live).items()} == \
        {"first": RUNNING, "second": WAITING}
    assert queue.stop_all() == [running]  # the server goes down
    assert queue.wait(running, timeout=TIMEOUT) and queue.join([running], TIMEOUT)
    assert (running.status, waiting.status) == (INTERRUPTED, NOT_STARTED)
    records = records_by_label(tmp_path)
    first, second = records["first"], records["second"]
    assert (first.status, first.folder, first.step, first.total_steps) == \
        (INTERRUPTED, "lstm-triplet-20260101-120000", 3, 10)
    assert first.summary == ("interrupted by a server stop at step 3 of 10: the best model so far was saved as "
                             "lstm-triplet-20260101-120000.")
    assert second.status == NOT_STARTED and second.summary.startswith("not started: the server stopped")
    # The restarted server: a new queue over the same models folder lists both, once the old one is gone.
    assert core.training.jobs.earlier_runs(str(tmp_path)) == []  # this process still holds them
    del queue, running, waiting
    gc.collect()
    JobQueue(max_running=1)
    assert [(record.label, record.status) for record in core.training.jobs.earlier_runs(str(tmp_path))] == \
        [("second", NOT_STARTED), ("first", INTERRUPTED)]  # newest first


def test_a_user_cancel_is_recorded_as_cancelled_not_interrupted(tmp_path, monkeypatch):
    monkeypatch.setattr(core.training.jobs, "train_run", StoppedAsCancelDoes())
    queue = JobQueue(max_running=1)
    job = queue.submit(TrainingJob(RunSpec(), pd.DataFrame(), str(tmp_path), label="mine"))
    assert queue.wait(job, timeout=TIMEOUT, until=lambda job: job.status == RUNNING)
    job.cancel()
    assert queue.wait(job, timeout=TIMEOUT) and queue.join([job], TIMEOUT)
    assert job.status == CANCELLED and records_by_label(tmp_path)["mine"].status == CANCELLED


LEFT_BY_A_KILLED_SERVER = """
import sys
from core.training.jobs import RunRecord, write_record
for status in ("running", "waiting"):
    write_record(sys.argv[1], RunRecord(id=status, label=f"{status} run", status=status, created=float(len(status))))
"""


def test_the_records_a_gone_process_left_unfinished_read_as_interrupted_and_not_started(tmp_path):
    # A real process writes them and ends without a word more, as a killed server would.
    subprocess.run([sys.executable, "-c", LEFT_BY_A_KILLED_SERVER, str(tmp_path)], cwd=ROOT, check=True,
                   timeout=TIMEOUT)
    records = records_by_label(tmp_path)
    assert (records["running run"].status, records["waiting run"].status) == (INTERRUPTED, NOT_STARTED)
    assert records["running run"].summary == "interrupted by a server stop: no model of it was saved."
    assert [record.label for record in core.training.jobs.earlier_runs(str(tmp_path))] == \
        ["waiting run", "running run"]


def test_a_record_no_queue_of_this_process_holds_is_read_as_gone(tmp_path):
    """Whoever wrote it (an earlier process, one that got this pid again), a running record no queue here holds was
    left by a stopped server; fields of older records (host, pid) are ignored."""
    core.training.jobs.write_record(tmp_path, core.training.jobs.RunRecord(id="old", label="old", status=RUNNING, created=1.0))
    path = tmp_path / core.training.jobs.RECORDS_FOLDER / "old.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "host": "abc123", "pid": 1, "process": "before"}))
    assert [record.status for record in core.training.jobs.read_records(tmp_path)] == [INTERRUPTED]
    assert [record.status for record in core.training.jobs.read_records(tmp_path, {"old"})] == [RUNNING]
    assert core.training.jobs.read_records(tmp_path / "missing") == []  # no records folder: none
    path.write_text("{not json")
    assert core.training.jobs.read_records(tmp_path) == []  # a damaged record is skipped


def test_records_are_skipped_without_a_models_folder_and_old_ones_are_pruned(tmp_path):
    assert not core.training.jobs.write_record(tmp_path / "missing", core.training.jobs.RunRecord("a", "a", DONE, 1.0))
    assert not (tmp_path / "missing").exists()  # a record never creates the models folder
    for number in range(5):
        core.training.jobs.write_record(tmp_path, core.training.jobs.RunRecord(f"r{number}", "r", DONE, float(number)))
    core.training.jobs.write_record(tmp_path, core.training.jobs.RunRecord("live", "r", RUNNING, 0.0))
    core.training.jobs.remove_old_records(tmp_path, keep=2)
    assert sorted(path.stem for path in (tmp_path / core.training.jobs.RECORDS_FOLDER).iterdir()) == ["live", "r3", "r4"]


def test_a_record_that_cannot_be_written_never_stops_a_run(tmp_path, monkeypatch):
    """A records folder taken by a file: no record, and the run trains as it would without one."""
    (tmp_path / core.training.jobs.RECORDS_FOLDER).write_text("a user's file")
    assert not core.training.jobs.write_record(tmp_path, core.training.jobs.RunRecord("a", "a", DONE, 1.0))
    (tmp_path / core.training.jobs.RECORDS_FOLDER).unlink()
    (tmp_path / core.training.jobs.RECORDS_FOLDER).mkdir()
    (tmp_path / core.training.jobs.RECORDS_FOLDER / "a.json").mkdir()  # a folder where the record goes: UserFileError
    assert not core.training.jobs.write_record(tmp_path, core.training.jobs.RunRecord("a", "a", DONE, 1.0))
    monkeypatch.setattr(core.training.jobs, "train_run", StoppedAsCancelDoes())
    queue = JobQueue(max_running=1)
    job = TrainingJob(RunSpec(), pd.DataFrame(), str(tmp_path))
    job.id = "a"
    queue.submit(job)
    assert queue.wait(job, timeout=TIMEOUT, until=lambda job: job.status == RUNNING)
    job.cancel()
    assert queue.wait(job, timeout=TIMEOUT) and job.status == CANCELLED
