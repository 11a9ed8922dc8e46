"""Opening the app in AppTest the way `streamlit run app.py` does: app.py runs first (st.navigation and the one
page setup, ``lab.session.setup_page``), on the Home page, then the test switches to the page it wants.

Pages hold no setup of their own, so a page file opened alone with ``AppTest.from_file`` has no session state;
open it with ``open_page(lab.navigation.VERDICT.path)`` instead (or conftest's ``open_page`` fixture).
"""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
TEST_WORKSPACE = "test-workspace-0000000001"  # the ws= every session here opens (conftest's runs_root is its models)
APP_TIMEOUT = 60  # seconds per AppTest run; the first run in a process imports torch and transformers


def open_app(timeout: float = APP_TIMEOUT, workspace: str | None = TEST_WORKSPACE, **session_state) -> AppTest:
    """A new session of app.py in ``workspace`` (its ``ws=``; None: a new one), run once: the Home page.
    ``session_state`` is set before that first run (the page setup keeps what is already there, e.g. ``pairs``)."""
    at = AppTest.from_file(str(APP), default_timeout=timeout)
    if workspace is not None:
        at.query_params["ws"] = workspace
    for key, value in session_state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def open_page(page: str, timeout: float = APP_TIMEOUT, workspace: str | None = TEST_WORKSPACE,
              **session_state) -> AppTest:
    """A new session of app.py switched to ``page`` (a path like ``lab.navigation.DATA.path``), already run
    once on it."""
    return open_app(timeout, workspace, **session_state).switch_page(page).run()
