"""Leaving promptly when the server is stopped (SIGTERM, Ctrl-C): every run is cancelled and the process is gone
within ``EXIT_DEADLINE_S``. Streamlit waits without limit for open requests, and a thread inside PyTorch's native
code during interpreter teardown aborts the process, so a handler in front of Streamlit's cancels the runs and leaves
with ``os._exit`` after a deadline (stopped runs are recorded as interrupted, queued ones as not started)."""
from __future__ import annotations

import atexit
import functools
import logging
import os
import signal
import sys
import threading
import time

import streamlit as st

EXIT_DEADLINE_S = 8.0  # from SIGTERM to the process's end, at the latest
STOP_GRACE_S = 5.0  # at exit, for the cancelled runs and the script runs to end, in all
SCRIPT_THREAD_NAME = "ScriptRunner.scriptThread"  # Streamlit's name for the thread that runs a page
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_LOGGER = logging.getLogger(__name__)
_registered = threading.Lock()
_installed = False


def exit_promptly() -> None:
    """Once per server process: the exit handler and the signal handlers. Not under AppTest: a test process exits
    as its test runner decides."""
    global _installed
    with _registered:
        if _installed or st.get_option("global.appTest"):
            return
        _installed = True
    atexit.register(stop_threads_then_exit)
    _on_the_main_thread(install_signal_handlers)


def _on_the_main_thread(call) -> None:
    """Run ``call`` on the thread of Streamlit's event loop, the main thread: only there can a signal handler be set
    (pages run on other threads). The loop is the one Streamlit's runtime runs on: its ``stopped`` future's."""
    from streamlit import runtime

    try:
        runtime.get_instance().stopped.get_loop().call_soon_threadsafe(call)
    except (RuntimeError, AttributeError) as error:  # no running server: nothing to stop promptly
        _LOGGER.warning("the stop signals keep Streamlit's own handlers: %s", error)


def install_signal_handlers() -> None:
    """``on_stop_signal`` for SIGTERM and SIGINT, each chained to the handler it replaces (Streamlit's)."""
    for number in STOP_SIGNALS:
        signal.signal(number, functools.partial(on_stop_signal, signal.getsignal(number)))


def on_stop_signal(previous, number: int, frame) -> None:
    """Cancel every run, start the exit deadline, and stop as the replaced handler ``previous`` would."""
    jobs = sys.modules.get("core.training.jobs")  # not imported: no run was ever started in this process
    if jobs is not None:
        jobs.stop_every_queue(timeout=0)  # waiting runs are cancelled now, running ones stop within a step
    leave_after(EXIT_DEADLINE_S)
    if callable(previous):
        previous(number, frame)
    elif previous == signal.SIG_DFL:  # nobody handled it before: the default action (the process ends)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)


def leave_after(seconds: float) -> threading.Thread:
    """A daemon timer that ends the process ``seconds`` from now, unless it has ended by then."""
    timer = threading.Timer(seconds, lambda: _leave_now())  # looked up when it fires
    timer.name, timer.daemon = "exit-deadline", True
    timer.start()
    return timer


def stop_threads_then_exit(grace: float = STOP_GRACE_S) -> None:
    """Cancel every training run, wait up to ``grace`` seconds in all for the runs and script runs to end, and
    leave at once (``os._exit(0)``) if one still runs; return, so the interpreter finalizes, when none does."""
    deadline = time.monotonic() + grace
    jobs = sys.modules.get("core.training.jobs")
    if jobs is not None:
        jobs.stop_every_queue(timeout=grace)
    for thread in busy_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
    if busy_threads():
        _leave_now()


def busy_threads() -> list[threading.Thread]:
    """The threads that may be running model code: training runs ("train-...") and Streamlit's script runs."""
    return [thread for thread in threading.enumerate()
            if thread.is_alive() and (thread.name.startswith("train-") or thread.name == SCRIPT_THREAD_NAME)]


def _leave_now() -> None:
    """Exit without finalizing; what the streams hold is flushed first, since ``os._exit`` does not."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing left to flush
            pass
    os._exit(0)
