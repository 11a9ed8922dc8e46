"""The Data page in a real headless Chromium: a file whose labels are words is refused until the user says
what each word means, then loads; a validation and a test file read with the same mapping show their counts.
An upload with its own columns and text labels trains with the Train page's defaults: the auto recipe, shown.

Needs Debian's chromium at /usr/bin/chromium (``make browser``): without it the test skips, except under
``CI=true`` where it fails.
"""
from __future__ import annotations

import re

import pandas as pd
import pytest
from browser_support import (
    open_sidebar_page,
    open_url_page,
    select_option,
    wait_for_rerun,
    wait_for_script,
    widget,
)

pytestmark = pytest.mark.browser

MAIN = ("question1,question2,labels\n"
        "How old are you?,What is your age?,PerfectMatch\n"
        "How do I learn Python?,What is the best way to learn Python?,Relevant\n"
        "Is coffee bad for you?,How do I bake bread?,Irrelevant\n"
        "Where is Paris?,How tall is Everest?,Irrelevant\n"
        "Why is the sky blue?,What makes the sky blue?,PerfectMatch\n")
VAL = ("question1,question2,labels\n"
       "How far is the Moon?,What is the distance to the Moon?,Relevant\n"
       "Who wrote Hamlet?,Who painted the Mona Lisa?,Irrelevant\n")
TEST = ("question1,question2,labels\n"
        "What is DNA?,What does DNA stand for?,PerfectMatch\n"
        "Is tea healthy?,How do cars work?,Irrelevant\n"
        "How do I sleep better?,How can I improve my sleep?,Relevant\n")


@pytest.fixture(scope="module")
def server(browser_server):
    return browser_server.use_workspace("browser-data-files-tests")


def test_text_labels_are_mapped_and_held_out_files_counted(server, new_user, tmp_path):
    from playwright.sync_api import expect

    files = {}
    for name, text in (("graded.csv", MAIN), ("val.csv", VAL), ("test.csv", TEST)):
        files[name] = tmp_path / name
        files[name].write_text(text)

    page = new_user()
    open_url_page(page, server, "Data", "Data")
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(files["graded.csv"])
    expect(page.locator('[data-testid="stAlertContentInfo"]')).to_contain_text(  # asked, not an error
        "rather than 1 and 0: say what each value means")
    expect(page.locator('[data-testid="stAlertContentError"]')).to_have_count(0)
    for value, meaning in (("PerfectMatch", "duplicate"), ("Relevant", "duplicate"),
                           ("Irrelevant", "not duplicate")):
        select_option(page, f'"{value}"', meaning)
    page.get_by_role("button", name="Load with these columns and label mapping").click()
    expect(page.locator('[data-testid="stSidebar"]')).to_contain_text("graded.csv (upload) (5 pairs)")
    wait_for_script(page)  # the rerun's elements replace the previous run's
    pairs_value = page.locator('[data-testid="stMetric"]').filter(
        has=page.locator('[data-testid="stMetricLabel"]').get_by_text("Pairs", exact=True)) \
        .locator('[data-testid="stMetricValue"]')
    expect(pairs_value).to_have_text("5")
    expect(page.locator('[data-testid="stAlertContentError"]')).to_have_count(0)

    page.get_by_text("Add validation and test files (optional)").click()
    wait_for_rerun(page)
    for title, name, count in (("Validation", "val.csv", "2 pairs"), ("Test", "test.csv", "3 pairs")):
        widget(page, "stFileUploader", f"{title} pairs").locator('input[type="file"]').set_input_files(
            files[name])
        caption = page.locator('[data-testid="stCaptionContainer"]').filter(has_text=f"{title}:")
        expect(caption).to_contain_text(f"{title}: {count} from {name}")
    expect(page.locator('[data-testid="stAlertContentError"]')).to_have_count(0)

    page.reload()  # a new session of the same workspace: the dataset and both files were kept in it
    expect(page.locator('[data-testid="stSidebar"]')).to_contain_text("graded.csv (upload) (5 pairs)")
    wait_for_script(page)
    for title, name, count in (("Validation", "val.csv", "2 pairs"), ("Test", "test.csv", "3 pairs")):
        caption = page.locator('[data-testid="stCaptionContainer"]').filter(has_text=f"{title}:")
        expect(caption).to_contain_text(f"{title}: {count} from {name}")


OWN_PAIRS = 32  # of the bundled sample, renamed and relabelled: 26 to train on, 10 steps of auto (10 epochs of 1)


def own_file(path):
    """The bundled sample's first pairs as a user's own file: columns q_a, q_b, same; labels match / different."""
    from lab.session import SAMPLE_PATH

    pairs = pd.read_csv(SAMPLE_PATH).head(OWN_PAIRS)
    own = pd.DataFrame({"q_a": pairs["question1"], "q_b": pairs["question2"],
                        "same": pairs["is_duplicate"].map({1: "match", 0: "different"})})
    own.to_csv(path, index=False)
    return path


@pytest.mark.slow
def test_an_upload_with_its_own_columns_and_text_labels_trains_with_the_defaults(server, new_user, tmp_path):
    from playwright.sync_api import expect

    upload = own_file(tmp_path / "forum.csv")
    page = new_user()
    open_url_page(page, server, "Data", "Data", workspace=None)  # a workspace of its own
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(upload)
    loaded = f"forum.csv (upload) ({OWN_PAIRS} pairs)"
    sidebar = page.locator('[data-testid="stSidebar"]')
    # the columns come picked, then each label's meaning guessed (match -> duplicate, different -> not)
    page.get_by_role("button", name="Load with these columns", exact=True).click()
    wait_for_script(page)
    mapping = page.get_by_role("button", name="Load with these columns and label mapping")
    for value, meaning in (("match", "duplicate"), ("different", "not duplicate")):
        expect(widget(page, "stSelectbox", f'"{value}"').get_by_role("combobox")).to_have_value(meaning)
    mapping.click()
    expect(sidebar).to_contain_text(loaded)

    open_sidebar_page(page, "Train", "Train")
    expect(widget(page, "stSelectbox", "Preset").get_by_role("combobox")).to_have_value(re.compile("^auto"))
    recipe = page.locator('[data-testid="stAlertContentInfo"]').filter(has_text="Read off")
    expect(recipe).to_contain_text(f"Read off {OWN_PAIRS} pairs")
    expect(recipe).to_contain_text("Expected time on this")
    page.get_by_role("button", name="Start", exact=True).click()
    outcome = page.locator('[data-testid="stAlertContentSuccess"], [data-testid="stAlertContentWarning"]') \
        .filter(has_text="Finished")
    while not outcome.count():  # a run that never ends is pytest-timeout's to catch
        assert server.running(), server.log()
        assert not page.get_by_text("Training failed").count(), page.get_by_text("Training failed").inner_text()
        page.wait_for_timeout(500)
    assert "saved as" in outcome.first.inner_text()
    expect(page.get_by_text(re.compile(r"MiniLM \(fine-tune\) · contrastive"))).not_to_have_count(0)
