"""Shared fixtures for the app tests (Streamlit AppTest) and for any test that needs a trained model fast.

Fixtures
--------
``runs_root``         (function) the empty models folder of workspace ``TEST_WORKSPACE`` under ``tmp_path``
                      (``SIAMESE_LAB_WORKSPACES``); an ``app_support`` session opens that workspace, so it starts
                      with ``st.session_state.runs_root`` equal to it.
``lab_cache``         (session, autouse) the lab's cache folder (``SIAMESE_LAB_CACHE``) in a session tmp folder.
``sample_pairs``      (session)  ``(pairs, report)`` of the bundled sample, as ``core.data.load_pairs`` reads it.
``train_tiny_model``  (session)  ``train_tiny_model(model, runs_root, loss="triplet", **spec_fields) -> Path``:
                      trains a tiny model (1 epoch on the sample, about a second) and returns its folder.
``tiny_lstm``         (session)  one tiny Siamese LSTM as ``train_tiny_model("lstm", ...)`` trains it by default,
                      trained once per test session for the modules that only read it; treat it as read-only.
``tiny_models``       (session)  ``{"lstm": Path, "dual-transformer": Path}``: one tiny Siamese LSTM (triplet loss)
                      and one tiny dual transformer (in-batch softmax), trained once per test session in a
                      session tmp folder. Treat them as read-only; use ``runs_with_models`` to get copies.
``runs_with_models``  (function) ``runs_root`` holding copies of ``tiny_models``; returns
                      ``(runs_root, {"lstm": Path, "dual-transformer": Path})`` with the copies' paths.
``browser_server``    (session)  one ``browser_support.StreamlitServer`` for every browser test module (at most one
                      run trains at once; uploads up to ``UPLOAD_LIMIT_MB``); a module takes it with
                      ``browser_server.use_workspace(ITS_ID)`` to work in a workspace of its own. Skips without
                      chromium (fails under CI).
``chromium``          (module)   one headless chromium (``browser_support.launch_chromium``) for a module's tests.
``new_user``          (function) ``new_user() -> page`` in a new browser context (a user of its own); screenshots
                      of its pages in ``tmp_path`` when the test failed.
``open_page``         (function) ``open_page(TRAIN.path) -> AppTest`` (``lab.navigation``'s pages): a fresh
                      session of ``app.py`` (st.navigation and the one page setup) switched to the page, already
                      run once (``default_timeout=60``); ``tests/app_support.open_page`` as a fixture. Pages hold
                      no setup of their own, so never open a page file alone with ``AppTest.from_file``.
                      Combine with ``runs_root`` or ``runs_with_models`` (request those first) to choose the
                      models folder.
``rerun_until``       (function) ``rerun_until(at, condition, timeout=120, pause=0.5) -> AppTest``: calls
                      ``at.run()`` until ``condition(at)`` is true, for pages that poll background work;
                      fails the test on timeout or on an exception shown by the page.
``plotly_figures``    (function) ``plotly_figures(at) -> list[dict]``: the page's plotly figures as JSON with
                      plotly 7's base64 arrays (``{"dtype", "bdata", "shape"}``) decoded into lists.

Test data follows the house rules: only the bundled sample or bytes written in the test, never ../shared/data.
"""
from __future__ import annotations

import os

# Before torch loads: OpenMP's spin-waiting makes torch many times slower when the two cores are
# shared with other busy processes (a loaded CI box, a browser test's server); passive waiting
# costs little when the machine is quiet.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
if os.environ.get("PYTEST_XDIST_WORKER"):  # `-n 2`: two workers share the cores; one torch thread each in-process
    import torch

    torch.set_num_threads(1)

import base64
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # AppTest runs page scripts whose imports (core, lab) live at the project root
    sys.path.insert(0, str(ROOT))

SAMPLE = ROOT / "assets" / "sample_pairs.csv"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from app_support import TEST_WORKSPACE  # noqa: E402 - the tests folder is on the path only from here

# Sizes that train in about a second on the 479-pair sample; all different, so a mix-up shows.
TINY_OPTIONS = {
    "lstm": dict(embedding_dim=12, hidden_size=10, num_layers=1),
    "dual-transformer": dict(d_model=16, num_layers=1, num_heads=2, ff_dim=24, projection_dim=8),
}
TINY_LOSSES = {"lstm": "triplet", "dual-transformer": "softmax"}


@pytest.fixture(autouse=True)
def _keep_the_main_module():
    """AppTest runs app.py as ``__main__`` in this process and leaves it there; a later test that spawns
    processes (torch.multiprocessing, as test_distributed does) would then re-run app.py in every child.
    Each test ends with pytest's own ``__main__`` back."""
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main


@pytest.fixture
def runs_root(tmp_path, monkeypatch) -> Path:
    """The models folder of the workspace every ``app_support`` session opens (``TEST_WORKSPACE``), empty."""
    monkeypatch.setenv("SIAMESE_LAB_WORKSPACES", str(tmp_path / "workspaces"))
    root = tmp_path / "workspaces" / TEST_WORKSPACE / "models"
    root.mkdir(parents=True)
    return root


@pytest.fixture(scope="session", autouse=True)
def lab_workspaces(tmp_path_factory) -> Path:
    """The app's workspaces (``SIAMESE_LAB_WORKSPACES``) in a session tmp folder unless a test asks for its own
    (``runs_root``), so no test writes into the repository's workspaces/ folder."""
    root = tmp_path_factory.mktemp("workspaces")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SIAMESE_LAB_WORKSPACES", str(root))
        yield root


@pytest.fixture(scope="session", autouse=True)
def lab_cache(tmp_path_factory) -> Path:
    """The lab's own cache (``SIAMESE_LAB_CACHE``: the ONNX backend's exports and their search indexes)
    in a session tmp folder, so no test writes to the user's ~/.cache."""
    root = tmp_path_factory.mktemp("lab-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SIAMESE_LAB_CACHE", str(root))
        yield root


@pytest.fixture(scope="session")
def browser_server(tmp_path_factory):
    """A real server's start, its first page's imports and its model loads, paid once for the browser tests."""
    from browser_support import UPLOAD_LIMIT_MB, StreamlitServer, require_browser

    require_browser()
    with StreamlitServer(work_dir=tmp_path_factory.mktemp("browser_server"), max_training=1,
                         extra_args=("--server.maxUploadSize", str(UPLOAD_LIMIT_MB))) as server:
        yield server


@pytest.fixture(scope="module")
def chromium():
    """One headless chromium per test module: each test opens contexts of its own (``new_user``), and a context
    starts empty, so sharing the process shares no state. Not kept for the session: between its calls Playwright's
    sync API leaves its asyncio loop marked running in this thread (``asyncio.run`` then fails), which the
    non-browser modules that follow must not meet."""
    from playwright.sync_api import sync_playwright

    from browser_support import launch_chromium, require_browser

    require_browser()
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


def pytest_collection_modifyitems(items):
    """The browser tests first: under ``make test``'s two workers (``--dist loadfile``: a file's tests on one worker,
    so its module fixtures are made once) the files that mostly wait on a server start first and the rest fill in
    beside them. The suite's figures in docs/BENCHMARKS.md were measured with this order; it was not timed apart."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is None)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report on the test item (``item.rep_call``...), so a fixture's teardown knows if the test failed."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def new_user(chromium, request, tmp_path):
    """``new_user() -> page`` in a new browser context of ``chromium``: a Streamlit session, i.e. a user, of its own
    (a second tab of the same user: ``page.context.new_page()``). The contexts close after the test; when the test
    failed, each page's screenshot lands in ``tmp_path`` first."""
    from browser_support import PAGE_TIMEOUT_MS

    contexts = []

    def open_user():
        context = chromium.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(PAGE_TIMEOUT_MS)
        contexts.append(context)
        return context.new_page()

    yield open_user
    report = getattr(request.node, "rep_call", None)
    for index, context in enumerate(contexts):
        if report is None or report.failed:
            for number, page in enumerate(context.pages):
                try:
                    page.screenshot(path=str(tmp_path / f"user_{index}_{number}.png"), full_page=True)
                    print(f"\nscreenshot: {tmp_path / f'user_{index}_{number}.png'}")
                except Exception:  # a page that crashed has no screenshot to give
                    pass
        context.close()


@pytest.fixture(scope="session")
def sample_pairs():
    from core.data import load_pairs

    return load_pairs(SAMPLE)


@pytest.fixture(scope="session")
def train_tiny_model(sample_pairs):
    from core.training.pipeline import train_run
    from core.training.specs import spec_from_options

    pairs, _ = sample_pairs

    def train(model: str, root: str | Path, loss: str = "triplet", **options) -> Path:
        spec = spec_from_options(model=model, loss=loss, epochs=1, batch_size=32, device="cpu",
                                 model_options=TINY_OPTIONS.get(model, {}), max_length=16,
                                 data_name="bundled sample", **options)
        result = train_run(spec, pairs, runs_root=root)
        assert result.folder is not None, result.outcome.message
        return result.folder

    return train


@pytest.fixture(scope="session")
def tiny_lstm(tmp_path_factory, train_tiny_model) -> Path:
    return train_tiny_model("lstm", tmp_path_factory.mktemp("tiny_lstm"))


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory, train_tiny_model) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny_models")
    # Split by pair as these models always were: the pages' tests below were written against their thresholds
    # (the sample's auto rule, by question, leaves the tiny LSTM calling nothing a duplicate).
    return {model: train_tiny_model(model, root, loss=loss, split_by="pair") for model, loss in TINY_LOSSES.items()}


@pytest.fixture
def runs_with_models(runs_root, tiny_models) -> tuple[Path, dict[str, Path]]:
    copies = {}
    for model, folder in tiny_models.items():
        copies[model] = Path(shutil.copytree(folder, runs_root / folder.name))
    return runs_root, copies


@pytest.fixture
def open_page():
    from app_support import open_page as open_app_page

    return open_app_page


@pytest.fixture
def rerun_until():
    def rerun(at, condition, timeout: float = 120.0, pause: float = 0.5):
        deadline = time.monotonic() + timeout
        while True:
            at.run()
            assert not at.exception, at.exception
            if condition(at):
                return at
            if time.monotonic() > deadline:
                pytest.fail(f"condition not met within {timeout:.0f} s")
            time.sleep(pause)

    return rerun


def _decode(value):
    if isinstance(value, dict):
        if set(value) >= {"dtype", "bdata"}:
            array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
            shape = value.get("shape")
            if isinstance(shape, str):  # plotly writes "2, 3"
                shape = [int(size) for size in shape.split(",")]
            return array.reshape(shape).tolist() if shape else array.tolist()
        return {key: _decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decode(item) for item in value]
    return value


@pytest.fixture
def download_stores(monkeypatch):
    """Every media file store an AppTest makes, so a download's bytes can be read back."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    stores = []

    class Recording(MemoryMediaFileStorage):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            stores.append(self)

    monkeypatch.setattr("streamlit.testing.v1.app_test.MemoryMediaFileStorage", Recording)
    return stores


@pytest.fixture
def plotly_figures():
    def figures(at) -> list[dict]:
        return [_decode(json.loads(chart.proto.spec)) for chart in at.get("plotly_chart")]

    return figures


# ---- the CLI in this process, and files before and after ------------------------------------------
def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """``python -m core *argv`` in this process: (exit code, stdout, stderr)."""
    from core.cli.main import main

    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_error_line(result, *fragments) -> str:
    """``run_cli``'s result is exit 2, no stdout and one ``error:`` line holding every fragment; that line."""
    code, out, err = result
    assert code == 2 and out == "", err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder``, with its bytes (None for a folder)."""
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes() for p in sorted(folder.rglob("*"))}


# Property tests draw the same examples on every run (CI must not pass or fail by luck); a developer
# explores new ones with HYPOTHESIS_PROFILE=explore.
try:
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("ci", derandomize=True, database=None)
    _hypothesis_settings.register_profile("explore", derandomize=False)
    _hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # hypothesis is a test dependency; without it those modules are not collected anyway
    pass


# ---- a synthetic task: what the training tests learn -------------------------------------------------
FILLER = [f"filler{i}" for i in range(7)]


def synthetic_pairs(n: int, seed: int, topics: int = 40):
    """Half duplicates (the same two topic words), half not (two other topic words); shared filler
    everywhere, word order shuffled. ``topics`` = 60 makes a vocabulary of 69 words, above the tiny-vocabulary
    notice."""
    import numpy as np
    import pandas as pd

    names = [f"topic{i}" for i in range(topics)]
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        a, b, c, d = (names[k] for k in rng.choice(len(names), 4, replace=False))
        duplicate = i % 2 == 0
        q1 = [a, b, *rng.choice(FILLER, 5, replace=False)]
        q2 = [*([b, a] if duplicate else [c, d]), *rng.choice(FILLER, 5, replace=False)]
        rng.shuffle(q1)
        rng.shuffle(q2)
        rows.append((" ".join(q1), " ".join(q2), int(duplicate)))
    return pd.DataFrame(rows, columns=["question1", "question2", "is_duplicate"])


def inverted_pairs(n: int = 120, seed: int = 0):
    """Labels against the text: each "duplicate" shares no word, each "non-duplicate" has the very same words
    reordered. Any model of word overlap (an LSTM barely trained, TF-IDF) ranks them backwards: ROC AUC 0."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    words = [f"word{i}" for i in range(60)]
    rows = []
    for i in range(n):
        first = list(rng.choice(words, 5, replace=False))
        duplicate = i % 2
        second = ([w for w in rng.choice(words, 12, replace=False) if w not in first][:5] if duplicate
                  else list(rng.permutation(first)))
        rows.append((" ".join(first), " ".join(second), int(duplicate)))
    return pd.DataFrame(rows, columns=["question1", "question2", "is_duplicate"])


def parquet_bytes(frame) -> bytes:
    """``frame`` written as a Parquet file, in memory."""
    import io

    buffer = io.BytesIO()
    frame.to_parquet(buffer)
    return buffer.getvalue()
