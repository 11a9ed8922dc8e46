"""The app's one page list (``lab.navigation.PAGES``): `streamlit run app.py` serves every page file exactly once,
Home first and by default, and the Home page links to every other page in that order with that title and icon."""
from __future__ import annotations

import ast
from pathlib import Path

from app_support import TEST_WORKSPACE, open_app

from lab.navigation import HOME, PAGES

ROOT = Path(__file__).resolve().parent.parent


def test_the_page_list_names_every_page_file_exactly_once():
    listed = [page.path for page in PAGES]
    files = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "pages").glob("*.py"))
    assert sorted(listed) == files and len(files) == 10
    assert len({page.title for page in PAGES}) == len({page.url_path for page in PAGES}) == len(PAGES)


def test_the_pages_keep_the_urls_of_the_old_pages_folder():
    assert [page.url_path for page in PAGES] == ["", "Data", "Train", "Similarity_matrix", "Verdict", "Search",
                                                 "Compare", "Map", "Deduplicate", "Label"]


def test_every_page_file_first_enters_through_app_py():
    """Streamlit runs a ``pages/`` folder beside the entry point as a legacy multipage app until a run reaches
    st.navigation: on a fresh server, a first visit to /Train runs that page alone, without app.py. Each page's
    first statement sends such a run through app.py (the browser test checks it on a real fresh server)."""
    for page in PAGES:
        body = ast.parse((ROOT / page.path).read_text(encoding="utf-8")).body
        statements = [node for node in body[1:] if not isinstance(node, (ast.Import, ast.ImportFrom))]
        assert ast.unparse(statements[0]) == "enter_through_app(__file__)", page.path


def test_home_is_first_and_the_default_page(runs_root):
    assert PAGES[0] is HOME
    at = open_app()  # no page asked for: st.navigation runs its default page
    assert [title.value for title in at.title] == ["Siamese Lab"]
    for page in PAGES:
        at.switch_page(page.path)  # raises ValueError for a file st.navigation did not register


def test_home_links_every_other_page_in_order_from_the_one_list(runs_root):
    at = open_app()
    sidebar = [link.proto for link in at.sidebar.get("page_link")]
    links = [link.proto for link in at.main.get("page_link")]
    # The sidebar's navigation: every page, in order, each link carrying the workspace's address.
    assert [link.page for link in sidebar] == [page.url_path for page in PAGES]
    assert {link.query_string for link in sidebar} == {f"ws={TEST_WORKSPACE}"}
    assert [link.page for link in links] == [page.url_path for page in PAGES[1:]]
    assert [link.icon for link in links] == [page.icon for page in PAGES[1:]]
    assert [link.label for link in links] == [f"{number}. {page.title} — {page.purpose}"
                                              for number, page in enumerate(PAGES[1:], start=1)]
    assert links[0].label == "1. Data — keep the bundled sample or upload your own CSV / TSV pairs"


def test_every_page_gets_the_page_setup_once(runs_root):
    """app.py sets up the page st.navigation picked; the pages themselves set up nothing (a second
    set_page_config or sidebar caption would show twice)."""
    at = open_app()
    captions = [caption.value for caption in at.sidebar.caption]
    assert captions[0] == "Dataset: **bundled sample (assets/sample_pairs.csv)** (479 pairs)"
    assert len(captions) == 2 and captions[1].startswith("Workspace `test-w…`")
    assert str(runs_root) not in " ".join(captions)  # no server path in the sidebar
    for page in PAGES:
        source = (ROOT / page.path).read_text(encoding="utf-8")
        assert "setup_page" not in source and "set_page_config" not in source, page.path


def test_the_served_app_watches_no_files():
    """Watching the checkout (.venv, runs/) flooded the log with "Inotify queue overflowed" (issue 23)."""
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parent.parent / ".streamlit" / "config.toml").read_text())
    assert config["server"]["fileWatcherType"] == "none"
