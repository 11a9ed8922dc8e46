"""How fast the app answers what a user asks of it, in a real headless Chromium against `streamlit run app.py`.

- Cold pages: on a fresh server, the seconds from the first visit of Verdict (and of Label, on another fresh server)
  until its inputs can be used (Verdict: the model picker and both question boxes; Label: the model picker and the
  questions picker), and until the page is complete (Verdict: the threshold slider, after the model has loaded;
  Label: the Duplicate button, after the corpus is encoded).
- Cancel: with at most one run training at a time (SIAMESE_LAB_MAX_TRAINING=1), one tab starts the Train page's run
  on the bundled sample (the sample-demo preset: MiniLM) and a second tab, in another workspace, queues its own; the
  seconds from Cancel until the page says "cancelled", for the queued run, then for the training one (once it has
  trained a step).
- Stop: the seconds from SIGTERM until the server process has exited, while a run trains (and with none, for the
  fresh servers of the cold pages), with its exit status.

Prints one JSON object. Needs Debian's chromium (``make browser``); no data from ../shared.

    .venv/bin/python bench/responsiveness.py
"""
from __future__ import annotations

import json
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the browser helpers the e2e tests use

from browser_support import StreamlitServer, launch_chromium, open_url_page, widget  # noqa: E402

WAIT_MS = 900_000  # for the slow parts (a MiniLM step on a loaded 2-core machine); never what is measured
OTHER_WORKSPACE = "bench-responsiveness-second-user"  # the second tab's own workspace: its own Start button
STEP_DONE = re.compile(r"Epoch \d+/\d+ · step [1-9][\d,]*/")


def seconds_since(started: float) -> float:
    return round(time.monotonic() - started, 2)


def new_page(browser):
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.set_default_timeout(WAIT_MS)
    return page


def stop_and_time(server: StreamlitServer) -> dict:
    """SIGTERM to the server; the seconds until its process has exited, and its exit status."""
    started = time.monotonic()
    os.kill(server.pid, signal.SIGTERM)
    while server.running() and time.monotonic() - started < 120:
        time.sleep(0.05)
    seconds = seconds_since(started)
    status = server._shell.poll()  # the Popen of the server itself (``exec``): its exit status
    server.stop()  # SIGKILL if it is still there
    return {"exit_s": seconds, "exit_status": status}


# ---- cold pages ----------------------------------------------------------------------------------------------------
def cold_verdict(browser, work: Path) -> dict:
    from playwright.sync_api import expect

    server = StreamlitServer(work / "verdict").start()
    try:
        page = new_page(browser)
        started = time.monotonic()
        page.goto(server.page_url("Verdict"))
        expect(widget(page, "stSelectbox", "Model")).to_be_visible()
        expect(widget(page, "stTextArea", "Question 1").locator("textarea")).to_be_editable()
        expect(widget(page, "stTextArea", "Question 2").locator("textarea")).to_be_editable()
        inputs = seconds_since(started)
        expect(widget(page, "stSlider", "Threshold: duplicate when the similarity is above it")).to_be_visible()
        complete = seconds_since(started)
        page.context.close()
        return {"inputs_s": inputs, "complete_s": complete, "idle_stop": stop_and_time(server)}
    finally:
        server.stop()


def cold_label(browser, work: Path) -> dict:
    from playwright.sync_api import expect

    server = StreamlitServer(work / "label").start()
    try:
        page = new_page(browser)
        started = time.monotonic()
        page.goto(server.page_url("Label"))
        expect(widget(page, "stSelectbox", "Model")).to_be_visible()
        expect(widget(page, "stRadio", "Questions")).to_be_visible()
        inputs = seconds_since(started)
        # The button's accessible name ends with its keyboard shortcut.
        expect(page.get_by_role("button", name=re.compile(r"^Duplicate"))).to_be_enabled()
        complete = seconds_since(started)
        page.context.close()
        return {"inputs_s": inputs, "complete_s": complete, "idle_stop": stop_and_time(server)}
    finally:
        server.stop()


# ---- cancelling and stopping ---------------------------------------------------------------------------------------
def run_header(page, status: str):
    """The Train page's header of its newest run, "<label> — <status>"."""
    return page.locator('[data-testid="stMarkdownContainer"] p').filter(has_text=re.compile(f" — {status}$")).first


def start_run(page, server: StreamlitServer, workspace: str | None = None) -> None:
    from playwright.sync_api import expect

    page.goto(server.page_url("Train", **({"workspace": workspace} if workspace else {})))
    expect(page.get_by_role("heading", name="Train", exact=True)).to_be_visible()
    page.get_by_role("button", name="Start", exact=True).click()


def time_cancel(page) -> float:
    """Press the run's Cancel button; the seconds until its header says "cancelled"."""
    from playwright.sync_api import expect

    button = page.get_by_role("button", name="Cancel", exact=True)
    started = time.monotonic()
    button.click()
    expect(run_header(page, "cancelled")).to_be_visible()
    return seconds_since(started)


def cancels_and_stop(browser, work: Path) -> dict:
    from playwright.sync_api import expect

    server = StreamlitServer(work / "train", max_training=1).start()
    try:
        training, queued = new_page(browser), new_page(browser)
        start_run(training, server)
        expect(run_header(training, "running")).to_be_visible()
        start_run(queued, server, workspace=OTHER_WORKSPACE)
        expect(queued.get_by_text(re.compile(r"^Waiting — 1 run\(s\) ahead"))).to_be_visible()
        cancel_queued = time_cancel(queued)

        expect(training.get_by_text(STEP_DONE)).to_be_visible()  # MiniLM has trained a step: cancel it mid-run
        cancel_running = time_cancel(training)

        training.get_by_role("button", name="Start", exact=True).click()  # train again, then stop the server
        expect(training.get_by_text(STEP_DONE)).to_be_visible()
        stop = stop_and_time(server)
        return {"cancel_queued_s": cancel_queued, "cancel_running_s": cancel_running, "stop_while_training": stop}
    finally:
        server.stop()


def main() -> None:
    from playwright.sync_api import expect, sync_playwright

    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        work = Path(folder)
        for name in ("verdict", "label", "train"):
            (work / name).mkdir()
        browser = launch_chromium(playwright)
        expect.set_options(timeout=WAIT_MS)  # the slow waits are bounded by WAIT_MS, not the tests' 2 minutes
        try:
            results = {"cpus": os.cpu_count(), "load_average_1min_at_start": round(os.getloadavg()[0], 2),
                       "cold_verdict": cold_verdict(browser, work), "cold_label": cold_label(browser, work),
                       **cancels_and_stop(browser, work)}
        finally:
            browser.close()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
