"""Training runs in background threads for a shared server: a ``JobQueue`` caps how many train at once, the app
polls each ``TrainingJob``'s ``Progress``, and Cancel withdraws a waiting run or stops a running one within a step.

Each submitted run keeps a record, ``<models folder>/.runs/<job id>.json``, written whole at each status change, so
a run outlives a server stop: an unfinished record no queue of this process holds reads as ``interrupted`` (or
``not started``). A record that cannot be written or read is skipped, never a failed run.
"""
from __future__ import annotations

import collections
import json
import math
import threading
import time
import uuid
import weakref
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from core.models import MODEL_LABELS
from core.saving import OutputClaim, claim_new_run
from core.saving.user_files import UserFileError, write_file_atomically
from core.saving.workspaces import PRIVATE_FILE, PRIVATE_FOLDER
from core.status import (  # noqa: F401 (re-exported to the pages)
    CANCELLED,
    DONE,
    FAILED,
    FINISHED,
    INTERRUPTED,
    NOT_STARTED,
    RUNNING,
    WAITING,
)
from core.training.auto_choice import AutoOutcome, run_auto
from core.training.distillation import run_augmented
from core.training.presets import AUGMENTED_PRESET, AUTO_PRESET
from core.training.pipeline import RunResult, train_run
from core.training.specs import RunSpec

RECORDS_FOLDER = ".runs"  # in the models folder; a dot folder, so list_runs never reads it as a model
KEPT_RECORDS = 100  # the newest finished records a models folder keeps; older ones are removed at the next submit
STALE_STATUS = {RUNNING: INTERRUPTED, WAITING: NOT_STARTED}  # what an unfinished record no queue holds means
SPEED_WINDOW = 20  # loss reads (every step on the CPU) whose wall time gives the speed and the time left
_QUEUES: weakref.WeakSet = weakref.WeakSet()  # every JobQueue of the process, for stop_every_queue


@dataclass
class Progress:
    """What a poller shows, filled in by ``_Recorder``."""

    phase: str = ""  # what the run does now: a pipeline stage, "training", "scoring validation 1,200/3,000", ...
    step: int = 0
    total_steps: int = 0
    epoch: int = 0
    total_epochs: int = 0  # epochs the run plans (fewer than asked when the step cap ends it sooner)
    losses: list[tuple[int, float]] = field(default_factory=list)  # (step, loss) per loss read: every step on the CPU
    epochs: list[dict] = field(default_factory=list)  # {"epoch", "train_loss", validation metrics...}
    # {"step", "epoch", "train_seconds", "seconds", validation metrics...} after every validation
    validations: list[dict] = field(default_factory=list)
    seconds_per_step: float = 0.0  # over the last SPEED_WINDOW steps, the first (warm-up) left out; 0 = not yet
    pairs_per_second: float = 0.0  # over the same steps
    seconds: float = 0.0  # since training started, at the last step
    budget_seconds: float = 0.0  # the run's time budget (0 = none)

    @property
    def fraction(self) -> float:
        return self.step / self.total_steps if self.total_steps else 0.0

    @property
    def seconds_left(self) -> float | None:
        """Training time left at the recent speed, within the time budget; None before it is measured."""
        if not self.seconds_per_step:
            return None
        left = (self.total_steps - self.step) * self.seconds_per_step
        if self.budget_seconds:
            left = min(left, max(0.0, self.budget_seconds - self.seconds))
        return left


class _Recorder:
    """Trainer callback that copies progress into a ``Progress`` (appends are atomic in CPython). The speed is timed
    between loss reads only (on CUDA a read waits for the GPU), restarted after each validation."""

    def __init__(self, progress: Progress, clock: Callable[[], float] = time.monotonic):
        self.progress, self.clock = progress, clock
        self.started = 0.0
        self.recent: collections.deque = collections.deque(maxlen=SPEED_WINDOW + 1)  # (time, step, pairs seen)
        self.warmed_up = False  # the first read step is done: steps after it are timed

    def on_stage(self, stage: str):
        self.progress.phase = stage

    def on_train_start(self, trainer):
        p = self.progress
        p.total_steps, p.total_epochs = trainer.total_steps, trainer.total_epochs
        p.budget_seconds = trainer.config.max_minutes * 60
        p.phase = "compiling the training step" if trainer.config.compile else "the first training step"
        self.started = self.clock()
        self.recent.append((self.started, trainer.step, trainer.pairs_seen))

    def on_batch_end(self, trainer):
        p, now = self.progress, self.clock()
        if trainer.loss_step == trainer.step:  # the device has caught up: a true time for the steps so far
            if not self.warmed_up:  # the first steps warm up (or compile): the speed is timed from here on
                self.warmed_up = True
                self.recent.clear()
            self.recent.append((now, trainer.step, trainer.pairs_seen))
        (first_time, first_step, first_pairs), (last_time, last_step, last_pairs) = self.recent[0], self.recent[-1]
        if last_step > first_step and last_time > first_time:
            p.seconds_per_step = (last_time - first_time) / (last_step - first_step)
            p.pairs_per_second = (last_pairs - first_pairs) / (last_time - first_time)
        p.step, p.epoch, p.seconds, p.phase = trainer.step, trainer.epoch, now - self.started, "training"
        if trainer.loss_step and (not p.losses or p.losses[-1][0] != trainer.loss_step):
            p.losses.append((trainer.loss_step, trainer.loss))

    def on_validation_progress(self, trainer):
        done, total = trainer.validation_progress
        what = "the starting weights on validation" if trainer.step == 0 else "validation"
        self.progress.phase = f"scoring {what} {done:,}/{total:,}"

    def on_stage_progress(self, stage: str, done: int, total: int):
        self.progress.phase = f"finishing: {stage} {done:,}/{total:,}"

    def on_validation_end(self, trainer):
        v = trainer.validations[-1]
        self.progress.validations.append({"step": v.step, "epoch": v.epoch, "train_seconds": v.train_seconds,
                                          "seconds": v.seconds, **v.metrics})
        self.progress.phase = "training" if trainer.step else "the first training step"
        self._restart_window(trainer)

    def on_epoch_end(self, trainer):
        result = trainer.epoch_results[-1]
        self.progress.epochs.append({"epoch": result.epoch, "train_loss": result.train_loss, **result.metrics})
        self.progress.phase = "training"
        self._restart_window(trainer)

    def on_train_end(self, trainer):
        self.progress.phase = "finishing: calibrating the thresholds and saving"

    def _restart_window(self, trainer):
        self.recent.clear()
        self.recent.append((self.clock(), trainer.step, trainer.pairs_seen))


def run_label(spec: RunSpec) -> str:
    """How a run is named in the list of runs: model · loss (+ labelled hard negatives) · data."""
    negatives = " + labelled hard negatives" if spec.hard_negatives else ""
    negatives += " + mined hard negatives" if spec.mine_negatives else ""
    implied = " + implied pairs" if spec.implied_pairs else ""
    return f"{MODEL_LABELS[spec.model]} · {spec.loss.label()}{negatives}{implied} · {spec.data_name}"


@dataclass(frozen=True)
class WaitEstimate:
    place: int  # 1-based place in the waiting line
    seconds: float | None  # None while a run training now has not measured its speed
    at_least: bool  # runs ahead of it that are not training yet will add their own time


class TrainingJob:
    def __init__(self, spec: RunSpec, pairs: pd.DataFrame, runs_root: str, label: str = "", preset: str | None = None,
                 val: pd.DataFrame | None = None, test: pd.DataFrame | None = None, budget_minutes: float | None = None,
                 questions: list[str] | None = None, questions_name: str = ""):
        self.id = uuid.uuid4().hex[:8]
        self.spec, self.pairs, self.runs_root = spec, pairs, runs_root
        self.val, self.test = val, test  # the user's own validation and test pairs, if given
        self.preset = preset  # the preset the run started from, if any (its reference curve; auto chooses)
        self.budget_minutes = budget_minutes  # auto's whole time (auto_choice's default when None)
        self.questions, self.questions_name = questions, questions_name  # augmented's unlabelled ones, if given
        self.label = label or run_label(spec)
        self.status = WAITING
        self.progress = Progress()
        self.result: RunResult | None = None
        self.choice: AutoOutcome | None = None  # auto's candidates and the one it chose, for an auto run
        self.error: str | None = None
        self.created = time.time()
        self.labels_file: str | None = None  # a retrain from the Label page: the labels database it learned from
        self._stop = threading.Event()
        self._interrupted = False  # stopped by the server going down (JobQueue.stop_all), not by the user
        self._recorded = False  # submitted to a queue: its record is kept in the models folder from then on
        self._record_lock = threading.Lock()  # one record write at a time, each of the status at its write
        self._thread: threading.Thread | None = None
        # Set by the queue the job is submitted to: takes a waiting job out of its line (False once it has started).
        self._withdraw: Callable[[TrainingJob], bool] | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def cancel(self) -> None:
        self._stop.set()
        if self._withdraw is not None:
            self._withdraw(self)

    def _cancelled_before_start(self) -> None:
        if self._interrupted:
            self.status, self.error = NOT_STARTED, "the server stopped before it started"
        else:
            self.status, self.error = CANCELLED, "cancelled before it started"
        self.save_record()

    def save_record(self) -> None:
        if not self._recorded:
            return
        with self._record_lock:
            folder = self.result.folder if self.result is not None else None
            message = self.error or (self.result.outcome.message if self.result is not None else "")
            write_record(self.runs_root, RunRecord(
                id=self.id, label=self.label, status=self.status, created=self.created,
                folder=folder.name if folder is not None else "", message=message or "",
                step=self.progress.step, total_steps=self.progress.total_steps))

    def run(self) -> None:
        """Train synchronously (the queue calls this on a worker thread)."""
        if self._stop.is_set():  # cancelled between leaving the waiting line and this thread starting
            self._cancelled_before_start()
            return
        self.status = RUNNING
        self.save_record()
        try:
            self.result, self.choice = run_recipe(
                self.spec, self.pairs, self.preset, self.runs_root, val=self.val, test=self.test,
                callbacks=[_Recorder(self.progress)], stop_event=self._stop, budget_minutes=self.budget_minutes,
                questions=self.questions, questions_name=self.questions_name)
            outcome = self.result.outcome
            self.status = outcome.status  # the trainer speaks the same vocabulary (core.status)
            if outcome.status == CANCELLED and self._interrupted:  # stopped, and saved, as Cancel does
                self.status = INTERRUPTED
            if outcome.status == FAILED:
                self.error = outcome.message
        except Exception as error:  # the page shows the message
            self.status, self.error = FAILED, f"{type(error).__name__}: {error}"
        finally:
            self.save_record()


def run_recipe(spec: RunSpec, pairs: pd.DataFrame, preset: str | None, runs_root: str | Path | None,
               output: OutputClaim | None = None, val: pd.DataFrame | None = None, test: pd.DataFrame | None = None,
               callbacks: Sequence[object] = (), stop_event: threading.Event | None = None,
               budget_minutes: float | None = None, questions: list[str] | None = None, questions_name: str = "",
               save: bool = True) -> tuple[RunResult, AutoOutcome | None]:
    """Train as ``preset`` says, saved in ``output``'s folder or a new one in ``runs_root``: auto chooses among
    candidates (its choice comes back too), augmented trains a teacher first, any other preset is one plain run."""
    if preset not in (AUTO_PRESET, AUGMENTED_PRESET):
        return train_run(spec, pairs, runs_root=runs_root, output=output, save=save, val=val, test=test,
                         callbacks=callbacks, stop_event=stop_event), None
    with output or claim_new_run(runs_root, spec.model, spec.loss.name) as output:  # released whatever happens
        if preset == AUTO_PRESET:
            choice = run_auto(spec, pairs, output, val=val, test=test, callbacks=callbacks, stop_event=stop_event,
                              budget_minutes=budget_minutes)
            return choice.run_result(), choice
        # augmented: a teacher, silver pairs, then the bi-encoder on gold + silver
        return run_augmented(spec, pairs, output, val=val, test=test, callbacks=callbacks, stop_event=stop_event,
                             budget_minutes=budget_minutes, questions=questions, questions_name=questions_name), None


class JobQueue:
    """Runs jobs on daemon threads, at most ``max_running`` at a time, first come first served."""

    def __init__(self, max_running: int = 1):
        self.max_running = max(1, int(max_running))
        self._lock = threading.Lock()
        self._waiting: list[TrainingJob] = []
        self._running: set[str] = set()
        self.jobs: dict[str, TrainingJob] = {}
        _QUEUES.add(self)

    def submit(self, job: TrainingJob) -> TrainingJob:
        with self._lock:
            self.jobs[job.id] = job
            self._waiting.append(job)
            job._withdraw = self._withdraw
            job._recorded = True
        job.save_record()  # "waiting", before its thread can start (and each later write reads the status anew)
        remove_old_records(job.runs_root)
        self._start_what_fits()
        return job

    def stop_all(self) -> list[TrainingJob]:
        """Cancel every unfinished job (the server is going down), to be recorded as interrupted or not started;
        returns the jobs that had started, whose threads a caller may wait for."""
        with self._lock:
            unfinished = [job for job in self.jobs.values() if not job.finished]
            started = [job for job in unfinished if job._thread is not None]  # a thread to wait for
        for job in unfinished:
            job._interrupted = True
            job.cancel()
        return started

    def _withdraw(self, job: TrainingJob) -> bool:
        """Take a waiting job out of the line and mark it cancelled; False when it is not waiting (any more)."""
        with self._lock:
            if job not in self._waiting:
                return False
            self._waiting.remove(job)
            job._cancelled_before_start()
            return True

    def position(self, job: TrainingJob) -> int:
        """0 when running or finished, else 1-based place in the waiting line."""
        with self._lock:
            return self._waiting.index(job) + 1 if job in self._waiting else 0

    def wait_estimate(self, job: TrainingJob) -> WaitEstimate | None:
        """When a waiting job should start, None unless it waits: the job at place p starts when the p-th running
        run finishes; with more runs ahead than training, at least the longest time left."""
        with self._lock:
            if job not in self._waiting:
                return None
            place = self._waiting.index(job) + 1
            running = [self.jobs[job_id] for job_id in self._running if job_id in self.jobs]
        lefts = [other.progress.seconds_left for other in running]
        if not lefts or any(left is None for left in lefts):
            return WaitEstimate(place, None, False)  # a run ahead has not measured its speed yet
        lefts.sort()
        if place <= len(lefts):
            return WaitEstimate(place, lefts[place - 1], False)
        return WaitEstimate(place, lefts[-1], True)

    def _start_what_fits(self) -> None:
        with self._lock:
            starting = []
            while self._waiting and len(self._running) < self.max_running:
                job = self._waiting.pop(0)
                self._running.add(job.id)
                starting.append(job)
        for job in starting:
            thread = threading.Thread(target=self._work, args=(job,), name=f"train-{job.id}", daemon=True)
            job._thread = thread
            thread.start()

    def _work(self, job: TrainingJob) -> None:
        try:
            job.run()
        finally:
            with self._lock:
                self._running.discard(job.id)
            self._start_what_fits()

    def join(self, jobs: list[TrainingJob], timeout: float) -> bool:
        """Wait up to ``timeout`` seconds in all for the threads of ``jobs`` to end; True when they all did."""
        deadline = time.monotonic() + timeout
        for job in jobs:
            if job._thread is not None:
                job._thread.join(max(0.0, deadline - time.monotonic()))
        return not any(job._thread is not None and job._thread.is_alive() for job in jobs)

    def wait(self, job: TrainingJob, timeout: float = math.inf,
             until: Callable[[TrainingJob], bool] = lambda job: job.finished) -> bool:
        """Block until the job finishes (or ``until`` says so) within ``timeout`` seconds; True when it did."""
        deadline = time.monotonic() + timeout
        while not until(job):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True


def earlier_runs(runs_root: str) -> list[RunRecord]:
    """The records of ``runs_root`` that no queue of this process holds (a stopped server's), newest first."""
    here = {job_id for queue in list(_QUEUES) for job_id in list(queue.jobs)}
    return [record for record in read_records(runs_root) if record.id not in here]


def stop_every_queue(timeout: float) -> bool:
    """Cancel every unfinished job of every queue in the process and wait up to ``timeout`` seconds in all for the
    running ones to end (a process about to exit); True when none is still running."""
    deadline = time.monotonic() + timeout
    stopping = [(queue, queue.stop_all()) for queue in list(_QUEUES)]
    return all([queue.join(jobs, max(0.0, deadline - time.monotonic())) for queue, jobs in stopping])


# ---- each run's record in its models folder ---------------------------------------------------------------
@dataclass(frozen=True)
class RunRecord:
    """Enough to say, after a restart, what happened to a run and what it kept."""

    id: str
    label: str
    status: str
    created: float  # epoch seconds, when it was submitted
    folder: str = ""  # the model folder's name in the models folder, once one was saved
    message: str = ""  # why it failed, or how it ended
    step: int = 0
    total_steps: int = 0

    @property
    def unfinished(self) -> bool:
        return self.status in STALE_STATUS

    @property
    def summary(self) -> str:
        """How the run ended, in one sentence for the Train page."""
        at = f" at step {self.step:,} of {self.total_steps:,}" if self.total_steps else ""
        saved = f"the best model so far was saved as {self.folder}" if self.folder else "no model of it was saved"
        if self.status == INTERRUPTED:
            return f"interrupted by a server stop{at}: {saved}."
        if self.status == NOT_STARTED:
            return "not started: the server stopped while it waited in the queue; start it again to train it."
        if self.status == DONE:
            return f"done: saved as {self.folder}." if self.folder else f"done: {self.message or 'nothing was saved'}."
        if self.status == CANCELLED:
            return f"cancelled{at}: {saved}."
        if self.status == FAILED:
            return f"failed: {self.message.rstrip('.')}."
        return f"{self.status}."


def write_record(runs_root: str | Path, record: RunRecord) -> bool:
    """Write ``record`` whole; False when it could not be (the run goes on without it)."""
    folder = Path(runs_root) / RECORDS_FOLDER
    try:
        folder.mkdir(exist_ok=True, mode=PRIVATE_FOLDER)  # never the models folder itself: that is the workspace's
        write_file_atomically(folder / f"{record.id}.json", json.dumps(asdict(record), allow_nan=False).encode(),
                              mode=PRIVATE_FILE)
    except (OSError, ValueError, UserFileError):  # a record is a convenience, never a failed run
        return False
    return True


def read_records(runs_root: str | Path, live_here: set[str] = frozenset()) -> list[RunRecord]:
    """The records of a models folder, newest first; an unfinished one that no queue of this process holds (the ids
    ``live_here``) was left by a stopped or killed server, and reads as ``interrupted`` or ``not started``."""
    records = [_as_it_stands(record, live_here) for path in _record_files(runs_root)
               if (record := _read(path)) is not None]
    return sorted(records, key=lambda record: (record.created, record.id), reverse=True)


def remove_old_records(runs_root: str | Path, keep: int = KEPT_RECORDS) -> None:
    """Remove the finished records beyond the newest ``keep``."""
    finished = [(path, record) for path in _record_files(runs_root)
                if (record := _read(path)) is not None and not record.unfinished]
    finished.sort(key=lambda item: item[1].created, reverse=True)
    for path, _ in finished[keep:]:
        path.unlink(missing_ok=True)


def _record_files(runs_root: str | Path) -> list[Path]:
    return sorted((Path(runs_root) / RECORDS_FOLDER).glob("[!.]*.json"))  # none without a records folder


def _read(path: Path) -> RunRecord | None:
    """The record at ``path``; None for anything that is not one (damaged, unreadable)."""
    try:
        data = json.loads(path.read_bytes())
        known = {field.name for field in fields(RunRecord)}
        return RunRecord(**{key: value for key, value in data.items() if key in known})
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def _as_it_stands(record: RunRecord, live_here: set[str]) -> RunRecord:
    if not record.unfinished or record.id in live_here:
        return record
    status = STALE_STATUS[record.status]
    message = ("the server stopped before its end; no model of it was saved" if status == INTERRUPTED
               else "the server stopped before it started")
    return replace(record, status=status, message=message)
