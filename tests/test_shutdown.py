"""A server that stops while runs train: every run is cancelled, and the process exits at once and cleanly.

Without ``lab.shutdown``, a training thread still inside PyTorch when Python finalizes the interpreter aborts the
process ("terminate called without an active exception", exit status 134), and where the system collects core
dumps that takes minutes. The last tests show it on a real process and on a real server (the browser tests' own,
stopped and started again: the session's last use of it)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pandas as pd
import pytest

import core.training.jobs
import lab.shutdown
from core.status import INTERRUPTED, NOT_STARTED
from core.training.jobs import JobQueue, TrainingJob, stop_every_queue
from core.training.specs import RunSpec
from tests.test_jobs import HeldUntilCancelled

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120  # generous: only a guard against a hang, never a speed assertion


def test_stop_every_queue_cancels_the_runs_of_every_queue(monkeypatch):
    held = HeldUntilCancelled()
    monkeypatch.setattr(core.training.jobs, "train_run", held)
    first, second = JobQueue(max_running=1), JobQueue(max_running=1)
    running = [first.submit(TrainingJob(RunSpec(), pd.DataFrame(), "unused")),
               second.submit(TrainingJob(RunSpec(), pd.DataFrame(), "unused"))]
    waiting = first.submit(TrainingJob(RunSpec(), pd.DataFrame(), "unused"))
    assert held.started.acquire(timeout=TIMEOUT) and held.started.acquire(timeout=TIMEOUT)
    assert stop_every_queue(timeout=TIMEOUT)  # True: every run ended within the time given
    assert all(job.finished for job in running) and waiting.status == NOT_STARTED and held.calls == 2


def busy_thread(name: str) -> tuple[threading.Thread, threading.Event]:
    """A thread named like a training or script run that runs until its event is set."""
    release = threading.Event()
    thread = threading.Thread(target=release.wait, args=(TIMEOUT,), name=name, daemon=True)
    thread.start()
    return thread, release


@pytest.mark.parametrize("name", ["train-0123abcd", lab.shutdown.SCRIPT_THREAD_NAME])
def test_the_exit_handler_leaves_at_once_only_when_a_run_outlives_the_grace(monkeypatch, name):
    left = []
    monkeypatch.setattr(lab.shutdown, "_leave_now", lambda: left.append(True))
    thread, release = busy_thread(name)
    lab.shutdown.stop_threads_then_exit(grace=0.2)
    assert left == [True]  # it would finalize the interpreter under a running thread: leave instead
    release.set()
    thread.join(TIMEOUT)
    left.clear()
    lab.shutdown.stop_threads_then_exit(grace=0.2)
    assert left == []  # nothing runs any more: the interpreter finalizes as usual


def test_the_handlers_are_set_once_per_process(monkeypatch):
    registered, on_main_thread = [], []
    monkeypatch.setattr(lab.shutdown.atexit, "register", registered.append)
    monkeypatch.setattr(lab.shutdown, "_on_the_main_thread", on_main_thread.append)
    monkeypatch.setattr(lab.shutdown, "_installed", False)
    lab.shutdown.exit_promptly()
    lab.shutdown.exit_promptly()
    assert registered == [lab.shutdown.stop_threads_then_exit]
    assert on_main_thread == [lab.shutdown.install_signal_handlers]


def test_the_signal_handlers_go_in_front_of_the_ones_they_replace(monkeypatch):
    handlers = {signal.SIGTERM: "streamlit's SIGTERM handler", signal.SIGINT: "streamlit's SIGINT handler"}
    monkeypatch.setattr(lab.shutdown.signal, "getsignal", handlers.get)
    monkeypatch.setattr(lab.shutdown.signal, "signal", handlers.__setitem__)
    lab.shutdown.install_signal_handlers()
    for number, name in (("SIGTERM", "streamlit's SIGTERM handler"), ("SIGINT", "streamlit's SIGINT handler")):
        handler = handlers[getattr(signal, number)]
        assert handler.func is lab.shutdown.on_stop_signal and handler.args == (name,)


def test_a_stop_signal_cancels_the_runs_starts_the_deadline_then_stops_as_before(monkeypatch):
    held = HeldUntilCancelled()
    monkeypatch.setattr(core.training.jobs, "train_run", held)
    deadlines, chained = [], []
    monkeypatch.setattr(lab.shutdown, "leave_after", deadlines.append)
    queue = JobQueue(max_running=1)
    running, waiting = (queue.submit(TrainingJob(RunSpec(), pd.DataFrame(), "unused")) for _ in range(2))
    assert held.started.acquire(timeout=TIMEOUT)
    lab.shutdown.on_stop_signal(lambda number, frame: chained.append(number), signal.SIGTERM, None)
    assert waiting.status == NOT_STARTED  # at once
    assert deadlines == [lab.shutdown.EXIT_DEADLINE_S] and chained == [signal.SIGTERM]  # then Streamlit's stop
    assert queue.wait(running, timeout=TIMEOUT) and held.calls == 1


def test_the_deadline_ends_the_process(monkeypatch):
    left = threading.Event()
    monkeypatch.setattr(lab.shutdown, "_leave_now", left.set)
    lab.shutdown.leave_after(0.05)
    assert left.wait(TIMEOUT)


TRAINING_PROCESS = textwrap.dedent("""
    import sys
    from core.data import load_pairs
    from core.training.jobs import JobQueue, TrainingJob
    from core.training.specs import spec_from_options
    from lab.shutdown import exit_promptly
    exit_promptly()
    pairs, _ = load_pairs("assets/sample_pairs.csv")
    spec = spec_from_options(model="lstm", epochs=1000, batch_size=16, device="cpu", max_length=16, patience=0,
                             model_options={"hidden_size": 64, "embedding_dim": 64})
    queue = JobQueue(1)
    job = queue.submit(TrainingJob(spec, pairs, sys.argv[1]))
    assert queue.wait(job, timeout=300, until=lambda j: j.progress.step > 0)
    print("training", flush=True)  # the main thread ends here: the process exits
""")


def exit_of_a_training_process(runs: Path) -> tuple[int, str]:
    """(exit status, stderr) of a process whose main thread ends while a Siamese LSTM trains on a job thread; a
    process that never ended would meet the call's timeout (its speed is not asserted: timings live in bench/)."""
    done = subprocess.run([sys.executable, "-c", TRAINING_PROCESS, str(runs)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert "training" in done.stdout.splitlines(), done.stdout + done.stderr
    return done.returncode, done.stderr


def test_a_process_that_exits_while_a_run_trains_exits_cleanly(tmp_path):
    status, stderr = exit_of_a_training_process(tmp_path)
    assert status == 0 and "terminate called" not in stderr, stderr[-2000:]
    # The next server reads what became of the run: stopped by the exit, recorded as interrupted.
    [record] = core.training.jobs.read_records(tmp_path)
    assert record.status == INTERRUPTED and record.summary.startswith("interrupted by a server stop")


# ---- a real server ---------------------------------------------------------------------------------------------
# A run that cannot finish before the stop on any machine: the page's most epochs, the smallest batches (about a
# hundred steps an epoch on the sample) and a wider LSTM. A run that finished first once made this test fail.
LONG_LSTM_RUN = {"Epochs": 200, "Batch size": 2, "Embedding size": 128, "Hidden size": 256,
                 "Early-stopping patience (epochs, 0 = off)": 0}


@pytest.mark.browser
def test_a_server_stopped_while_a_run_trains_exits_within_seconds(browser_server, new_user):
    """SIGTERM to `streamlit run app.py` (the browser tests' server, in a workspace of this test's own) while the
    Train page's run trains (a Siamese LSTM on the bundled sample). The server started again on the same workspaces:
    the page's first sidebar click keeps its workspace, and the Train page shows the run as interrupted."""
    from browser_support import open_sidebar_page, open_url_page, select_option, set_numbers
    from playwright.sync_api import expect

    server = browser_server.use_workspace("browser-shutdown-tests")
    page = new_user()
    open_url_page(page, server, "Train", "Train")
    select_option(page, "Model", "Siamese LSTM")  # a change by hand: the preset menu turns to custom settings
    page.get_by_text("More settings").click()
    set_numbers(page, LONG_LSTM_RUN)
    page.get_by_role("button", name="Start", exact=True).click()
    expect(page.get_by_text(re.compile(r"Epoch \d+/\d+ · step [1-9]"))).to_be_visible()
    # The run trains on the server's queue whatever page the user is on; the restart below meets the user on a
    # page that does not refresh itself.
    open_sidebar_page(page, "Similarity matrix", heading="Similarity matrix")
    os.kill(server.pid, signal.SIGTERM)
    # The server process itself (`exec`) ends by lab.shutdown's deadline; one that hung would meet pytest-timeout.
    status = server._shell.wait()
    assert status == 0, (status, server.log())
    server.start()  # the same workspaces; the browser tab stays open and reconnects
    # The first sidebar click after the restart carries the workspace: not a new, empty one.
    open_sidebar_page(page, "Data", heading="Data")
    assert parse_qs(urlparse(page.url).query)["ws"] == [server.workspace]
    # The restarted server's Train page says what became of the run.
    open_sidebar_page(page, "Train", heading="Train")
    expect(page.get_by_text("Earlier runs of this workspace")).to_be_visible()
    expect(page.get_by_text(re.compile(r"interrupted by a server stop at step \d+ of [\d,]+: (no model of it "
                                       r"was saved|the best model so far was saved as \S+)"))).to_be_visible()
