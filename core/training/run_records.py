"""One small record per training run in its models folder, so a run outlives the server process that ran it.

The job queue writes ``<models folder>/.runs/<job id>.json`` when a run is submitted and whenever its status
changes, each time whole (``write_file_atomically``): a reader sees the old record or the new one. A server that
stops cancels its runs as Cancel does (the best weights so far are saved) and records them as ``interrupted``, the
queued ones as ``not started``; a killed server leaves records that still say ``waiting`` or ``running``, and those
are read as ``not started`` and ``interrupted`` once their writer is gone (``core.saving.temp_files.writer_gone``,
the one rule for a killed writer's leftovers). A record is a convenience: one that cannot be written or read is
skipped, never a failed run. ``list_runs`` skips the dot folder, so the records never show as broken models.
"""
from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from core.saving import read_json_file
from core.saving.temp_files import host_tag, writer_gone
from core.saving.user_files import UserFileError, write_file_atomically
from core.saving.workspaces import PRIVATE_FILE, PRIVATE_FOLDER
from core.status import CANCELLED, DONE, FAILED, INTERRUPTED, NOT_STARTED, RUNNING, WAITING

RECORDS_FOLDER = ".runs"  # in the models folder; a dot folder, so list_runs never reads it as a model
RECORD_MAX_BYTES = 64 * 1024
KEPT_RECORDS = 100  # the newest finished records a models folder keeps; older ones are removed at the next submit
PROCESS = uuid.uuid4().hex  # this process: a pid a restarted server got again is still another process
STALE_STATUS = {RUNNING: INTERRUPTED, WAITING: NOT_STARTED}  # what a gone writer's unfinished record means


@dataclass(frozen=True)
class RunRecord:
    """What a run's record holds: enough to say, after a restart, what happened to it and what it kept."""

    id: str
    label: str
    status: str
    created: float  # epoch seconds, when it was submitted
    updated: float = 0.0  # epoch seconds, at this status
    folder: str = ""  # the model folder's name in the models folder, once one was saved
    message: str = ""  # why it failed, or how it ended
    step: int = 0
    total_steps: int = 0
    host: str = ""  # core.saving.temp_files.host_tag of the writer
    pid: int = 0
    process: str = ""  # the writer's PROCESS

    @property
    def unfinished(self) -> bool:
        return self.status in STALE_STATUS

    @property
    def summary(self) -> str:
        """How the run ended, in one sentence for the Train page: "interrupted by a server stop at step 40 of 300:
        the best model so far was saved as lstm-triplet-20260101-120000."."""
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
        return f"{self.status} on another server process."


def write_record(runs_root: str | Path, record: RunRecord) -> bool:
    """Write ``record`` whole, as this process's; False when it could not be (a models folder that does not exist,
    or a read-only one): the run goes on without it."""
    folder = Path(runs_root) / RECORDS_FOLDER
    mine = RunRecord(**{**asdict(record), "updated": time.time(), "host": host_tag(), "pid": os.getpid(),
                        "process": PROCESS})
    try:
        folder.mkdir(exist_ok=True, mode=PRIVATE_FOLDER)  # never the models folder itself: that is the workspace's
        write_file_atomically(folder / f"{record.id}.json", json.dumps(asdict(mine), allow_nan=False).encode(),
                              mode=PRIVATE_FILE)
    except (OSError, ValueError, UserFileError):  # a record is a convenience, never a failed run
        return False
    return True


def read_records(runs_root: str | Path, live_here: set[str] = frozenset()) -> list[RunRecord]:
    """The records of a models folder, newest first, each as it stands now: an unfinished one whose writer is gone
    reads as ``interrupted`` or ``not started``. ``live_here``: the ids this process's queues still hold (a record
    this process wrote for a job no queue holds any more was left by a queue that is gone)."""
    records = []
    for path in _record_files(runs_root):
        record = _read(path)
        if record is not None:
            records.append(_as_it_stands(record, live_here))
    return sorted(records, key=lambda record: record.created, reverse=True)


def remove_old_records(runs_root: str | Path, keep: int = KEPT_RECORDS) -> None:
    """Remove the finished records beyond the newest ``keep``, so the folder stays small however many runs it saw."""
    finished = [(path, record) for path in _record_files(runs_root)
                if (record := _read(path)) is not None and not record.unfinished]
    finished.sort(key=lambda item: item[1].created, reverse=True)
    for path, _ in finished[keep:]:
        path.unlink(missing_ok=True)


def _record_files(runs_root: str | Path) -> list[Path]:
    try:
        entries = list(os.scandir(Path(runs_root) / RECORDS_FOLDER))
    except OSError:  # no records folder yet
        return []
    return [Path(entry.path) for entry in entries
            if entry.name.endswith(".json") and not entry.name.startswith(".") and entry.is_file(follow_symlinks=False)]


def _read(path: Path) -> RunRecord | None:
    """The record at ``path``; None for anything that is not one (damaged, foreign, too large)."""
    try:
        data = read_json_file(path, RECORD_MAX_BYTES, folder=path.parent)
        known = {field.name for field in fields(RunRecord)}
        record = RunRecord(**{key: value for key, value in data.items() if key in known})
    except (OSError, ValueError, TypeError, AttributeError, RecursionError):  # ValueError: ModelLoadError too
        return None
    if not all(isinstance(getattr(record, name), str) for name in ("id", "label", "status", "folder", "message")):
        return None
    return record if isinstance(record.created, (int, float)) and isinstance(record.pid, int) else None


def _as_it_stands(record: RunRecord, live_here: set[str]) -> RunRecord:
    if not record.unfinished or not _writer_gone(record, live_here):
        return record
    status = STALE_STATUS[record.status]
    message = ("the server stopped before its end; no model of it was saved" if status == INTERRUPTED
               else "the server stopped before it started")
    return RunRecord(**{**asdict(record), "status": status, "message": message})


def _writer_gone(record: RunRecord, live_here: set[str]) -> bool:
    if record.process == PROCESS:
        return record.id not in live_here
    if record.host == host_tag() and record.pid == os.getpid():
        return True  # this pid, another process: the writer is gone and its pid was given to this server
    return writer_gone(record.host, record.pid, record.updated)
