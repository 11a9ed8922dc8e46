"""Shared helpers for the real-browser tests: a `streamlit run app.py` server on a free port and Debian's chromium.

Used by the ``test_browser_*.py`` modules: conftest's session fixture ``browser_server`` is one server for all of
them (its imports and model loads paid once), each module in a workspace of its own (``use_workspace``), and
``chromium`` one browser per module, in which ``new_user`` opens a context (a user) per call.

- ``require_browser()`` skips the test when ``/usr/bin/chromium`` (or the playwright package) is missing, except
  under ``CI=true`` where a missing browser is a failure.
- ``StreamlitServer`` starts the server so that the PID it keeps is the server process itself (``sh -c 'exec ...'``),
  with ``SIAMESE_LAB_WORKSPACES`` pointing at a temporary folder, and stops it by that PID.
- ``launch_chromium(playwright)`` launches headless chromium (a fresh user-data dir per launch).
- Page helpers for Streamlit 1.67's DOM: ``wait_for_script`` / ``wait_for_rerun`` (the app root's
  ``data-test-script-state``), ``open_url_page`` (a new session on a page), ``open_sidebar_page`` (navigation that keeps the session), ``widget`` (a widget
  by its exact label), ``set_numbers``, ``set_text_area``, ``select_option``, ``wait_for_charts`` and
  ``full_page_screenshot`` (Streamlit scrolls inside ``stMain``, so the window is grown for the shot).
No fixed sleeps (bar a short settle before a screenshot): auto-waiting locators and the script state decide when a page is ready.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Callable
from urllib.parse import urlsplit

from app_support import TEST_WORKSPACE
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
UPLOAD_LIMIT_MB = 1  # the shared server's --server.maxUploadSize: every test's upload is smaller
SERVER_START_TIMEOUT = 90.0  # seconds until /_stcore/health answers; the machine may be busy
PAGE_TIMEOUT_MS = 120_000  # auto-waiting locators: the first render imports torch and transformers
NAV_RETRY_MS = 20_000  # a sidebar click whose page has not shown by then, the address unchanged, is made again


def browser_available() -> tuple[bool, str]:
    """(True, "") when chromium and the playwright package are both there, else (False, why not)."""
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        return False, f"{CHROMIUM} is missing (install it with `make browser` or `apt-get install chromium`)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as error:
        return False, f"the playwright package is missing ({error})"
    return True, ""


def require_browser() -> None:
    """Skip without a browser; under CI (CI=true) a missing browser fails the test instead."""
    available, why = browser_available()
    if available:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"chromium not installed under CI: {why}")
    pytest.skip(f"chromium not installed: {why}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SERVER_WORKSPACE = object()  # page_url's and open_url_page's default: the server's current ``workspace``


class StreamlitServer:
    """``streamlit run app.py`` on 127.0.0.1 and a free port, its workspaces in ``work_dir``/workspaces (``runs_root``:
    the models of ``workspace``, ``TEST_WORKSPACE`` until ``use_workspace``; the one ``page_url`` opens unless told
    otherwise); its log
    and pid file go to ``work_dir`` (give it a folder from pytest's ``tmp_path`` / ``tmp_path_factory``).

    ``extra_args`` are appended to the command line (e.g. ``["--server.maxUploadSize", "1"]``);
    ``max_training`` sets ``SIAMESE_LAB_MAX_TRAINING`` (how many runs train at once).
    """

    def __init__(self, work_dir: Path, max_training: int | None = None, extra_args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None):
        self.workspaces = Path(work_dir) / "workspaces"  # SIAMESE_LAB_WORKSPACES
        self.workspace = TEST_WORKSPACE  # page_url's default workspace
        self.env = dict(env or {})
        self.max_training = max_training
        self.extra_args = tuple(extra_args)
        self.work_dir = Path(work_dir)  # a pytest tmp_path: nothing is written outside pytest's temp folders
        self.port = free_port()
        self.pid: int | None = None
        self.log_path = self.work_dir / f"streamlit_{self.port}.log"
        self._shell: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def runs_root(self) -> Path:
        """The models folder of ``workspace``."""
        return self.workspaces / self.workspace / "models"

    def use_workspace(self, workspace: str) -> "StreamlitServer":
        """Make ``workspace`` (an id, ``core.saving.workspaces.ID_PATTERN``) the default of ``page_url``, made
        if new: a test module's own, on a server other modules used before."""
        self.workspace = workspace
        self.runs_root.mkdir(parents=True, exist_ok=True)
        return self

    def page_url(self, page: str = "", workspace: str | None | object = SERVER_WORKSPACE) -> str:
        """URL of a page by its ``url_path`` (``lab.navigation``) in ``workspace`` (its ``ws=``; None: none, so the
        app starts a new workspace; by default the server's ``workspace``): ``page_url("Similarity_matrix")``."""
        workspace = self.workspace if workspace is SERVER_WORKSPACE else workspace
        return f"{self.url}/{page}" + (f"?ws={workspace}" if workspace else "")

    def start(self) -> "StreamlitServer":
        self.runs_root.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, SIAMESE_LAB_WORKSPACES=str(self.workspaces), PYTHONUNBUFFERED="1", **self.env)
        if self.max_training is not None:
            env["SIAMESE_LAB_MAX_TRAINING"] = str(self.max_training)
        pid_file = self.work_dir / f"streamlit_{self.port}.pid"
        pid_file.unlink(missing_ok=True)  # a restart on the same port must not read the stopped server's pid
        command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                   "--server.address", "127.0.0.1", "--server.port", str(self.port),
                   "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none", *self.extra_args]
        # `exec` replaces the shell, so the PID written is the server's own, the one we stop later.
        script = 'echo $$ > "$0"; exec "$@"'
        log = open(self.log_path, "wb")
        self._shell = subprocess.Popen(["sh", "-c", script, str(pid_file), *command], cwd=ROOT, env=env,
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 10
        while not pid_file.exists() or not pid_file.read_text().strip():
            if time.monotonic() > deadline:
                raise RuntimeError("the server's pid file was not written")
            time.sleep(0.05)
        self.pid = int(pid_file.read_text().strip())
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:
            if self._shell is not None and self._shell.poll() is not None:
                raise RuntimeError(f"streamlit exited early (code {self._shell.returncode}):\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"streamlit did not answer /_stcore/health within {SERVER_START_TIMEOUT:.0f} s:\n{self.log()}")

    def running(self) -> bool:
        """True while the server process is alive (it may still be busy)."""
        return self._shell is not None and self._shell.poll() is None

    def log(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the server by its own PID: SIGTERM, then SIGKILL if it lingers."""
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        if self._shell is not None:
            try:
                self._shell.wait(timeout=10)  # the Popen object is the server itself after `exec`
            except subprocess.TimeoutExpired:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self._shell.wait(timeout=5)
        self.pid = None

    def __enter__(self) -> "StreamlitServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def launch_chromium(playwright):
    """Headless Debian chromium with a fresh profile; returns the playwright ``Browser``.

    Playwright refuses ``--user-data-dir`` in ``launch()`` (that is what ``launch_persistent_context`` is for);
    instead every ``launch()`` creates a new empty profile directory of its own, passes it to chromium as
    ``--user-data-dir`` and deletes it on ``close()``, so each test starts from a fresh profile either way.
    """
    from playwright.sync_api import expect

    expect.set_options(timeout=PAGE_TIMEOUT_MS)  # expect() has its own 5 s default; the first render takes longer
    return playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=list(CHROMIUM_ARGS))


# ---- page helpers ----------------------------------------------------------------------------------
# Streamlit marks its root element with the script state: "running" while a script (or fragment) runs,
# "notRunning" when done. Waiting on it, or on real elements with auto-waiting locators, replaces sleeps.
SCRIPT_STATE = 'document.querySelector(\'[data-testid="stApp"]\')?.getAttribute("data-test-script-state")'


def wait_for_script(page, timeout_ms: int = PAGE_TIMEOUT_MS) -> None:
    """Wait until no script run is in progress."""
    page.wait_for_function(f"() => {SCRIPT_STATE} === 'notRunning'", timeout=timeout_ms)


def wait_for_rerun(page, timeout_ms: int = PAGE_TIMEOUT_MS, start_ms: int = 1500) -> None:
    """After an interaction: let the rerun it triggers start (if it has not already), then wait for its end."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(f"() => {SCRIPT_STATE} !== 'notRunning'", timeout=start_ms, polling=50)
    except PlaywrightTimeout:
        pass  # the rerun was quick and is already over
    wait_for_script(page, timeout_ms)


def press_shortcut(page, key: str, done: Callable[[], bool], tries: int = 3, settle_ms: int = 60_000) -> None:
    """Press ``key``, a keyboard shortcut of the page, until ``done()``. On a loaded machine a press was seen to be
    lost (the page never acted on it), so the key is pressed again, but only once the rerun it would start is over
    and ``settle_ms`` more have passed with nothing done: a slow answer is waited for, not given twice."""
    for _ in range(tries):
        page.evaluate("() => document.activeElement && document.activeElement.blur()")  # no input takes the key
        page.keyboard.press(key)
        wait_for_rerun(page)
        deadline = time.monotonic() + settle_ms / 1000
        while time.monotonic() < deadline:
            if done():
                return
            page.wait_for_timeout(250)
    raise AssertionError(f"pressing {key!r} {tries} times did nothing")


def open_url_page(page, server: "StreamlitServer", path: str, heading: str,
                  workspace: str | None | object = SERVER_WORKSPACE) -> None:
    """A full URL load of a page by its ``url_path`` in ``workspace`` (None: a new one): a new session on that
    page, waited for until its heading shows and its script is done."""
    from playwright.sync_api import expect

    page.goto(server.page_url(path, workspace))
    expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    wait_for_script(page)


# The sidebar's page links (lab.session.setup_page draws them; Streamlit's own navigation is hidden).
NAV_LINKS = '[data-testid="stSidebar"] a[data-testid="stPageLink-NavLink"]'


def open_sidebar_page(page, link: str, heading: str, timeout_ms: int = PAGE_TIMEOUT_MS) -> None:
    """Open a page through the sidebar navigation (keeps the session, unlike a URL load) and wait for it.

    On a loaded machine a click that lands while the page redraws (a run's progress refreshing) can be lost: the
    link is clicked again, every NAV_RETRY_MS while the address is not yet the page's, until the page shows,
    within ``timeout_ms`` in all."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    deadline = time.monotonic() + timeout_ms / 1000
    target = page.get_by_role("heading", name=heading, exact=True)
    nav = page.locator(NAV_LINKS).filter(has=page.get_by_text(link, exact=True))
    path = urlsplit(nav.get_attribute("href")).path
    while True:
        if urlsplit(page.url).path != path:  # not on its way there yet: (again) click the link
            nav.click()
        left_ms = (deadline - time.monotonic()) * 1000
        try:
            expect(target).to_be_visible(timeout=max(1, min(NAV_RETRY_MS, left_ms)))
            break
        except (AssertionError, PlaywrightTimeout):
            if left_ms <= NAV_RETRY_MS:
                raise
    wait_for_script(page, timeout_ms)


def widget(page, testid: str, label: str):
    """The Streamlit widget of a kind (``stNumberInput``, ``stSelectbox``...) whose label is exactly ``label``; never
    a stale copy (while a rerun draws, the previous run's element stays on the page, marked ``data-stale``)."""
    fresh = page.locator('[data-testid="stElementContainer"]:not([data-stale="true"])')
    return fresh.locator(f'[data-testid="{testid}"]').filter(
        has=page.locator('[data-testid="stWidgetLabel"]').get_by_text(label, exact=True))


def set_numbers(page, values: dict) -> None:
    """Fill several number inputs, each committed with Enter, then wait for the reruns and check every value.

    The commits need not wait for each other: Streamlit's frontend keeps each widget's value and a newer
    rerun request replaces an unfinished one, so the last run sees all the values.
    """
    from playwright.sync_api import expect

    fields = {label: widget(page, "stNumberInput", label).locator("input") for label in values}
    for label, value in values.items():
        fields[label].fill(str(value))
        fields[label].press("Enter")
    wait_for_rerun(page)
    for label, value in values.items():
        text = str(value)
        shown = re.escape(text) + ("0*" if "." in text else "")  # a float input may show 0.4 as 0.40
        expect(fields[label]).to_have_value(re.compile(f"^{shown}$"))


def set_text_area(page, label: str, text: str) -> None:
    """Replace a text area's text and commit it with Ctrl+Enter."""
    field = widget(page, "stTextArea", label).locator("textarea")
    field.fill(text)
    field.press("Control+Enter")
    wait_for_rerun(page)
    field.blur()  # the value is committed; no focus ring left in screenshots


def select_option(page, label: str, option_text: str) -> None:
    """Open a selectbox (a react-aria combobox in Streamlit 1.67) and pick the first option containing
    ``option_text``."""
    from playwright.sync_api import expect

    wait_for_script(page)  # while a rerun draws, the old widget and its new copy are both on the page
    box = widget(page, "stSelectbox", label)
    box.get_by_role("button", name="Open").click()
    page.get_by_role("option").filter(has_text=option_text).first.click()
    expect(box.get_by_role("combobox")).to_have_value(re.compile(re.escape(option_text)))
    wait_for_rerun(page)


def wait_for_charts(page, count: int = 1, timeout_ms: int = PAGE_TIMEOUT_MS) -> None:
    """Wait until at least ``count`` plotly charts have drawn their SVG (and the script is done)."""
    wait_for_script(page, timeout_ms)
    page.wait_for_function(
        "n => document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .main-svg').length >= n",
        arg=count, timeout=timeout_ms)


def full_page_screenshot(page, path: Path, width: int | None = None) -> None:
    """Screenshot of the whole page. Streamlit scrolls inside ``stMain``, not the document, so Playwright's
    ``full_page`` alone would cut at the window; the window is made as tall as the content for the shot."""
    viewport = page.viewport_size
    height = page.evaluate(
        "() => Math.max(document.querySelector('[data-testid=\"stMain\"]')?.scrollHeight || 0,"
        " document.documentElement.scrollHeight)")
    page.set_viewport_size({"width": width or viewport["width"], "height": max(int(height) + 40, viewport["height"])})
    try:
        page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
        page.wait_for_timeout(400)  # plotly relayouts on window resize; let it settle before the shot
        page.screenshot(path=str(path), full_page=True)
    finally:
        page.set_viewport_size(viewport)
