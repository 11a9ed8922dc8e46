"""Background training jobs and the queue that caps how many run at once."""

import threading
from pathlib import Path

import pandas as pd
import pytest

import core.jobs
from core.jobs import CANCELLED, DONE, FAILED, RUNNING, WAITING, JobQueue, TrainingJob
from core.models import load_model
from core.specs import RunSpec, spec_from_options

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
        real = core.jobs.train_run

        def gated(*args, **kwargs):
            self.entered.release()
            assert self.open.wait(TIMEOUT)
            return real(*args, **kwargs)

        monkeypatch.setattr(core.jobs, "train_run", gated)
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


class PauseAtFirstStep:
    """Trainer callback that blocks after step 1 until released."""

    def __init__(self):
        self.reached = threading.Event()
        self.release = threading.Event()

    def on_batch_end(self, trainer):
        if trainer.step == 1:
            self.reached.set()
            assert self.release.wait(TIMEOUT)


def test_cancel_a_running_job(pairs, tmp_path, monkeypatch):
    pause = PauseAtFirstStep()
    real = core.jobs.train_run

    def with_pause(*args, callbacks=(), **kwargs):
        return real(*args, callbacks=[*callbacks, pause], **kwargs)

    monkeypatch.setattr(core.jobs, "train_run", with_pause)
    queue = JobQueue(max_running=1)
    job = queue.submit(TrainingJob(tiny_spec(epochs=3), pairs, str(tmp_path)))
    assert pause.reached.wait(TIMEOUT)
    assert job.status == RUNNING and job.progress.step == 1
    job.cancel()
    pause.release.set()
    assert queue.wait(job, timeout=TIMEOUT)
    assert job.status == CANCELLED
    assert job.result.outcome.status == "cancelled"
    assert job.progress.step == 1 < job.progress.total_steps


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


def test_a_failing_job_reports_its_error(tmp_path):
    # no duplicate pair at all: a triplet batch cannot be formed
    bad = pd.DataFrame({"question1": [f"question {i}" for i in range(20)],
                        "question2": [f"other {i}" for i in range(20)], "is_duplicate": [0] * 20})
    queue = JobQueue(max_running=1)
    job = queue.submit(TrainingJob(tiny_spec(), bad, str(tmp_path)))
    assert queue.wait(job, timeout=TIMEOUT)
    assert job.status == FAILED
    assert job.error.startswith("TrainingError: no training batch")
    assert job.finished and job.result is None
