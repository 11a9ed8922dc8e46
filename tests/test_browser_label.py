"""The Label page in a real headless Chromium (issue 24): label pairs of the bundled sample with the keyboard
(D: duplicate, N: not duplicate), reload the page and find the 10 labels still there (the count and the label
database), retrain from zero-shot MiniLM on the background queue, and see the learning curve's two points: zero-shot
MiniLM and the retrained model.

The answers are chosen so that both the training share and the held-out share of the labels get both classes
(``core.training.active_rounds.held_out_mask`` says which share a pair falls in): a retrain needs them.

Needs Debian's chromium at /usr/bin/chromium (``make browser``): without it the test skips, except under
``CI=true`` where it fails.
"""
from __future__ import annotations

import re
import time

import pandas as pd
import pytest
from browser_support import (
    PAGE_TIMEOUT_MS,
    StreamlitServer,
    open_url_page,
    press_shortcut,
    wait_for_rerun,
)

from core.data import load_pairs
from core.saving.label_store import LabelStore
from core.training.active_rounds import (
    held_out_mask,
    labels_path,
    read_curve,
    retrain_problem,
)
from lab.session import SAMPLE_NAME, SAMPLE_PATH, data_key

pytestmark = pytest.mark.browser

HEADING = "Label pairs"
RUN_TIMEOUT_S = 900.0  # a retrain of MiniLM on a few labels, then the corpus encoded by the new model
MAX_LABELS = 60  # labels given before the test gives up on getting both classes into both shares


@pytest.fixture(scope="module")
def server(browser_server):
    return browser_server.use_workspace("browser-label-tests")


@pytest.fixture
def page(new_user):
    return new_user()


def open_label_page(page, server: StreamlitServer) -> None:
    from playwright.sync_api import expect

    open_url_page(page, server, "Label", HEADING)
    expect(page.get_by_text(re.compile(r"^\d+ labelled, \d+ held out$"))).to_be_visible()


def labelled_count(page) -> int:
    text = page.get_by_text(re.compile(r"^\d+ labelled, \d+ held out$")).inner_text()
    return int(text.split(" ", 1)[0].replace(",", ""))


def shown_pair(page) -> tuple[str, str]:
    texts = page.locator('[data-testid="stText"]')
    return texts.nth(0).inner_text().strip(), texts.nth(1).inner_text().strip()


def answer_for(pair: tuple[str, str], given: pd.DataFrame) -> int:
    """Alternate the classes within the pair's share (held out or not), so both shares get both."""
    frame = pd.DataFrame([pair], columns=["question1", "question2"])
    held = bool(held_out_mask(frame)[0])
    share = given[held_out_mask(given) == held] if len(given) else given
    return int(len(share) % 2 == 0)  # the first of a share a duplicate, the next not, ...


def label_with_keyboard(page, labels_file, count: int) -> None:
    """Answer pairs with D / N until ``count`` are labelled."""
    from playwright.sync_api import expect

    while labelled_count(page) < count:
        given = LabelStore(labels_file).pairs()  # empty before the first answer
        before = labelled_count(page)
        press_shortcut(page, "d" if answer_for(shown_pair(page), given) else "n",
                       lambda: len(LabelStore(labels_file).pairs()) > len(given))
        expect(page.get_by_text(re.compile(rf"^{before + 1} labelled, "))).to_be_visible()


def test_label_reload_retrain_and_the_learning_curve(server, page):
    from playwright.sync_api import expect

    pairs, _ = load_pairs(SAMPLE_PATH)
    labels_file = labels_path(server.runs_root, SAMPLE_NAME, "pairs:" + data_key(pairs))
    open_label_page(page, server)
    assert labelled_count(page) == 0

    label_with_keyboard(page, labels_file, 10)
    assert len(LabelStore(labels_file).pairs()) == 10
    page.reload()  # a new session: the labels are in the file, not in the session
    open_label_page(page, server)
    assert labelled_count(page) == 10
    saved = LabelStore(labels_file).pairs()
    assert len(saved) == 10 and set(saved["is_duplicate"]) == {0, 1}

    while retrain_problem(LabelStore(labels_file).pairs()) is not None:  # both classes in both shares
        assert labelled_count(page) < MAX_LABELS, "the held-out share never got both classes"
        label_with_keyboard(page, labels_file, labelled_count(page) + 1)
    given = labelled_count(page)

    page.get_by_role("button", name="Retrain now").click()
    wait_for_rerun(page)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while len(read_curve(labels_file)) < 2:
        if not server.running():
            pytest.fail(f"the server exited:\n{server.log()}")
        if page.get_by_text("Training failed").count() or page.get_by_text("Cannot retrain").count():
            pytest.fail(page.locator('[data-testid="stAlertContentError"]').first.inner_text())
        if time.monotonic() > deadline:
            pytest.fail(f"no retrained model on the curve within {RUN_TIMEOUT_S:.0f} s:\n{server.log()}")
        page.wait_for_timeout(1000)
    curve = read_curve(labels_file)
    assert [point["labels"] for point in curve] == [0, given]
    assert curve[0]["model"] == "minilm" and curve[0]["held_out"] == curve[1]["held_out"]
    # Two traces (ROC AUC, accuracy) of two points each.
    expect(page.locator('[data-testid="stPlotlyChart"] .scatterlayer .trace').first).to_be_visible()
    page.wait_for_function(
        "() => document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .scatterlayer .trace .points path')"
        ".length === 4", timeout=PAGE_TIMEOUT_MS)
