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


def trained_on_upload(runs_root: Path, sample_pairs, n: int = 200, copies: int = 12):
    """A tiny LSTM trained as the Train page trains on an upload with its own validation file: the upload is
    ``n`` sample pairs and ``copies`` of them again with their questions swapped (the same pairs by content);
    20 % of it is held out as the test split. Returns (upload, validation file, the run's folder, the keys of
    the pairs it trained on: ``core.data.pair_keys``, by content in either order)."""
    import pandas as pd

    from core.data import pair_keys, split_pairs
    from core.training.pipeline import train_run
    from core.training.specs import spec_from_options
    from tests.conftest import TINY_OPTIONS

    pairs = sample_pairs[0].iloc[:n].reset_index(drop=True)
    swapped = pairs.iloc[:copies].rename(columns={"question1": "question2", "question2": "question1"})
    upload = pd.concat([pairs, swapped[["question1", "question2", "is_duplicate"]]], ignore_index=True)
    val = sample_pairs[0].iloc[300:360].reset_index(drop=True)
    spec = spec_from_options(model="lstm", loss="contrastive", epochs=1, batch_size=32, device="cpu", max_length=16,
                             model_options=TINY_OPTIONS["lstm"], data_name="upload.csv", val_data_name="val.csv",
                             split_by="pair", test_fraction=0.2)
    result = train_run(spec, upload, runs_root=runs_root, val=val)
    train = split_pairs(upload, val_fraction=0.0, test_fraction=0.2, seed=0).train
    return upload, val, result.folder, set(pair_keys(train["question1"], train["question2"]))
