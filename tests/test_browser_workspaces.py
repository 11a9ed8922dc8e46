"""Workspaces in a real headless Chromium: user A uploads private_a.csv, trains, labels 4 pairs, reloads and
finds all of it; two tabs of A answer one pair differently and both end up showing the later answer; user B, on
a workspace of their own, finds no trace of A on any page (file name, questions, run, counts, server paths). An
address naming no workspace says so.

Needs Debian's chromium at /usr/bin/chromium (``make browser``): without it the test skips, except under
``CI=true`` where it fails.
"""
from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest
from browser_support import (
    NAV_LINKS,
    open_sidebar_page,
    open_url_page,
    press_shortcut,
    select_option,
    set_numbers,
    wait_for_rerun,
    wait_for_script,
)

from core.saving.label_store import LabelStore
from lab.navigation import PAGES

pytestmark = pytest.mark.browser

TRAIN_TIMEOUT_MS = 300_000
LABELS = 4  # both answers, twice: what a reload must keep
COUNT = re.compile(r"^(\d+) labelled, \d+ held out")
SECRET = "zanzibar"  # a word only A's questions hold


@pytest.fixture(scope="module")
def server(browser_server):
    return browser_server.use_workspace("browser-workspaces-tests")


def write_private(path) -> None:
    rows = ["question1,question2,is_duplicate"]
    for i in range(40):
        rows.append(f"How do I cook {SECRET} dish {i}?,What is the way to cook {SECRET} dish {i}?,1")
        rows.append(f"How do I cook {SECRET} dish {i}?,Where can I buy {SECRET} spice {i + 1}?,0")
    path.write_text("\n".join(rows) + "\n")


def workspace_of(page) -> str:
    page.wait_for_url(re.compile(r"[?&]ws="))
    return parse_qs(urlparse(page.url).query)["ws"][0]


def labelled(page) -> int:
    from playwright.sync_api import expect

    shown = page.get_by_text(COUNT)
    expect(shown).to_be_visible()
    return int(COUNT.match(shown.inner_text()).group(1))


def shown_pair(page) -> tuple[str, str]:
    texts = page.locator('[data-testid="stText"]')
    return texts.nth(0).inner_text().strip(), texts.nth(1).inner_text().strip()


def answer(page, key: str) -> None:
    from playwright.sync_api import expect

    before = labelled(page)
    press_shortcut(page, key, lambda: page.get_by_text(re.compile(rf"^{before + 1} labelled, ")).count() > 0)
    expect(page.get_by_text(re.compile(rf"^{before + 1} labelled, "))).to_be_visible()


def test_a_workspace_keeps_its_work_and_another_sees_none_of_it(server, new_user, tmp_path):
    from playwright.sync_api import expect

    private = tmp_path / "private_a.csv"
    write_private(private)
    page = new_user()
    try:
        # ---- A: upload, train, label ------------------------------------------------------------------
        open_url_page(page, server, "Data", "Data", workspace=None)
        workspace = workspace_of(page)
        page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(private)
        expect(page.get_by_role("heading", name="Active dataset: private_a.csv (upload)")).to_be_visible()
        wait_for_script(page)
        open_sidebar_page(page, "Train", heading="Train")
        select_option(page, "Model", "Siamese LSTM")  # an upload opens on auto (MiniLM); a tiny LSTM is enough
        set_numbers(page, {"Epochs": 1, "Batch size": 16, "Embedding size": 16, "Hidden size": 16,
                           "Max length (tokens per question)": 16})
        page.get_by_role("button", name="Start", exact=True).click()
        finished = page.locator('[data-testid="stAlertContentSuccess"], [data-testid="stAlertContentWarning"]'
                                ).filter(has_text="Finished")
        expect(finished).to_be_visible(timeout=TRAIN_TIMEOUT_MS)
        run_name = re.search(r"saved as (\S+) in", finished.inner_text()).group(1)
        assert (server.workspaces / workspace / "models" / run_name / "config.json").is_file()
        wait_for_script(page)

        open_sidebar_page(page, "Label", heading="Label pairs")
        for i in range(LABELS):
            answer(page, "d" if i % 2 == 0 else "n")

        # ---- A reloads: the dataset, the run and the labels are there ---------------------------------
        page.reload()
        expect(page.get_by_role("heading", name="Label pairs", exact=True)).to_be_visible()
        assert labelled(page) == LABELS
        assert workspace_of(page) == workspace
        open_sidebar_page(page, "Data", heading="Data")
        expect(page.get_by_role("heading", name="Active dataset: private_a.csv (upload)")).to_be_visible()
        open_sidebar_page(page, "Train", heading="Train")
        expect(page.get_by_text(run_name).first).to_be_visible()

        # ---- two tabs of A answer the same pair differently: the later answer, in both ----------------
        open_sidebar_page(page, "Label", heading="Label pairs")
        other_tab = page.context.new_page()  # a second tab of user A
        open_url_page(other_tab, server, "Label", "Label pairs", workspace=workspace)
        assert shown_pair(other_tab) == shown_pair(page)  # the same round: same labels, same seed
        question1, question2 = shown_pair(page)
        answer(page, "d")
        other_tab.bring_to_front()
        other_tab.keyboard.press("n")  # a stale tab: it still shows the pair the first tab answered
        wait_for_rerun(other_tab)
        page.bring_to_front()
        page.reload()
        expect(page.get_by_role("heading", name="Label pairs", exact=True)).to_be_visible()
        wait_for_script(page)
        for tab in (page, other_tab):
            first_answer = tab.locator('[data-testid="stHorizontalBlock"]').filter(
                has=tab.get_by_text(question1[:40])).filter(has_text="Make it").first
            expect(first_answer).to_contain_text("Not duplicate")
        labels_files = list((server.workspaces / workspace / "models" / "labels").glob("*.sqlite3"))
        [labels_file] = labels_files
        frame = LabelStore(labels_file).pairs()
        rows = frame[(frame["question1"] == question1) & (frame["question2"] == question2)]
        assert rows["is_duplicate"].tolist() == [0]  # one label, the later one
        assert len(frame) == LABELS + 1

        # ---- B: a workspace of their own, no trace of A -------------------------------------------
        page_b = new_user()
        page_b.goto(server.page_url("", workspace=None))
        other = workspace_of(page_b)
        assert other != workspace
        for lab_page in PAGES:
            page_b.goto(server.page_url(lab_page.url_path, workspace=other))
            expect(page_b.locator(NAV_LINKS).first).to_be_visible()
            wait_for_script(page_b, timeout_ms=TRAIN_TIMEOUT_MS)
            text = page_b.locator("body").inner_text()
            for trace in ("private_a", SECRET, run_name, workspace, str(server.workspaces), "/tmp/"):
                assert trace not in text, (lab_page.title, trace)
            if lab_page.url_path == "Label":
                assert labelled(page_b) == 0
    except BaseException:
        print(f"\nserver log:\n{server.log()}")
        raise


def test_an_address_naming_no_workspace_says_so_and_leaves_no_folder(server, new_user):
    from playwright.sync_api import expect

    before = sorted(path.name for path in server.workspaces.iterdir())
    assert server.workspace in before
    page = new_user()
    open_url_page(page, server, "Similarity_matrix", "Similarity matrix")  # the test workspace: it exists
    assert page.get_by_text("No workspace with this address").count() == 0
    for asked in ("../../etc", "k" * 22):  # not an id; an id nothing was kept at
        page.goto(server.page_url("Data", workspace=asked))
        expect(page.get_by_text("No workspace with this address")).to_be_visible()
        assert workspace_of(page) != "../../etc"
    assert sorted(path.name for path in server.workspaces.iterdir()) == before
