"""How long the app takes to show its pages in a real headless Chromium, from a cold server.

Starts ``streamlit run`` (the README's ``make run``) on a free port with an empty models folder, then, in
one browser session: the home page from the first request to its heading (the cold start a new user
waits through), the Train page, and a Verdict with zero-shot MiniLM from pressing Check to the verdict
(first Check, which loads the model, then the median of 5 more). Repeats the whole thing ``--rounds``
times with a fresh server each time and prints each figure and the median. Needs Debian's chromium
(``make browser``); no data from ../shared.

    .venv/bin/python bench/page_load.py [--rounds 3]
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the browser helpers the e2e tests use

from browser_support import StreamlitServer, launch_chromium, open_sidebar_page, widget  # noqa: E402

QUESTIONS = [("How do I learn Python?", "What is the best way to learn Python?"),
             ("How old is the universe?", "What is the age of the universe?"),
             ("How do I bake bread?", "Why is bread so expensive?"),
             ("Where can I watch films online?", "How do I stream movies?"),
             ("What is machine learning?", "How does a neural network learn?"),
             ("How can I lose weight fast?", "What is the quickest way to lose weight?")]


def one_round() -> dict:
    from playwright.sync_api import expect, sync_playwright

    with tempfile.TemporaryDirectory() as work:
        started = time.monotonic()
        server = StreamlitServer(Path(work) / "runs", work_dir=Path(work)).start()
        server_up = time.monotonic() - started
        try:
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                page.set_default_timeout(300_000)
                started = time.monotonic()
                page.goto(server.url)
                expect(page.get_by_role("heading", name="Siamese Lab")).to_be_visible()
                home = time.monotonic() - started
                started = time.monotonic()
                open_sidebar_page(page, "Train", heading="Train", timeout_ms=300_000)
                train = time.monotonic() - started
                open_sidebar_page(page, "Verdict", heading="Duplicate or not?", timeout_ms=300_000)
                checks = []
                for first, second in QUESTIONS:
                    widget(page, "stTextArea", "Question 1").locator("textarea").fill(first)
                    widget(page, "stTextArea", "Question 2").locator("textarea").fill(second)
                    started = time.monotonic()
                    page.get_by_role("button", name="Check").click()
                    expect(page.locator('[data-testid="stText"]').filter(has_text=second)).to_be_visible()
                    expect(page.get_by_role("heading", name=re.compile("DUPLICATE"))).to_be_visible()
                    checks.append(time.monotonic() - started)
                browser.close()
        finally:
            server.stop()
    return {"server up (s)": server_up, "home page (s)": home, "train page (s)": train,
            "first verdict, model loading (s)": checks[0], "next verdicts, median (s)": statistics.median(checks[1:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="fresh servers to measure")
    args = parser.parse_args()
    rounds = []
    for number in range(1, args.rounds + 1):
        rounds.append(one_round())
        print(f"round {number}: " + " · ".join(f"{k} {v:.2f}" for k, v in rounds[-1].items()), flush=True)
    print("median:  " + " · ".join(f"{k} {statistics.median(r[k] for r in rounds):.2f}" for k in rounds[0]))


if __name__ == "__main__":
    main()
