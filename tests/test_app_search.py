"""The search page: a question of the dataset finds itself first; k sets the number of rows."""
from __future__ import annotations

from pathlib import Path

import app_support
import pytest
from streamlit.testing.v1 import AppTest

from core.data import corpus_questions, load_pairs
from lab.navigation import SEARCH

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "assets" / "sample_pairs.csv"


@pytest.fixture(scope="module")
def sample():
    return load_pairs(SAMPLE)[0]


def new_app() -> AppTest:
    """The page in a new session; request ``runs_root`` or ``runs_with_models`` (conftest) first."""
    at = app_support.open_page(SEARCH.path, timeout=120)
    assert not at.exception, at.exception
    return at


@pytest.mark.slow
def test_a_dataset_question_finds_itself_and_k_sets_the_rows(runs_root, sample):
    at = new_app()
    assert not at.error
    assert len(at.dataframe[0].value) == 10  # the default k
    question = sample["question2"].iloc[7].strip()
    at.text_input(key="query").input(question).run()
    results = at.dataframe[0].value
    assert results["question"].iloc[0] == question
    assert results["cosine"].iloc[0] == pytest.approx(1.0, abs=1e-4)
    assert results["cosine"].is_monotonic_decreasing
    assert list(results["rank"]) == list(range(1, 11))
    assert set(results["question"]) <= set(corpus_questions(sample))
    at.slider(key="k").set_value(3).run()
    assert len(at.dataframe[0].value) == 3 and at.dataframe[0].value["question"].iloc[0] == question
    at.slider(key="k").set_value(50).run()
    assert len(at.dataframe[0].value) == 50


@pytest.mark.slow
def test_empty_query_and_hostile_query(runs_root):
    at = new_app()
    at.text_input(key="query").input("").run()
    assert not at.exception and not at.error and not at.dataframe
    assert any("Type a question" in i.value for i in at.info)
    at.text_input(key="query").input("<script>alert(1)</script> 😀 ما هو عمرك؟").run()
    assert not at.exception and not at.error
    assert len(at.dataframe[0].value) == 10


def test_a_saved_model_keeps_its_index_in_its_folder(runs_with_models, sample):
    folder = runs_with_models[1]["lstm"]
    at = new_app()
    at.selectbox(key="active_model").set_value(str(folder)).run()
    question = sample["question1"].iloc[3].strip()
    at.text_input(key="query").input(question).run()
    assert not at.exception and not at.error
    results = at.dataframe[0].value
    # A Siamese model puts the question itself at cosine 1 (texts that tokenise the same way, all
    # unknown words alike, would tie with it).
    assert results["cosine"].iloc[0] == pytest.approx(1.0, abs=1e-4)
    assert question in set(results.loc[results["cosine"] > 1 - 1e-4, "question"])
    assert len(list(folder.glob("search-*/index.faiss"))) == 1



def test_a_kept_number_of_results_comes_back(runs_root):
    at = new_app()
    assert at.slider(key="k").value == 10  # the default, set once by the kept widget
    at.slider(key="k").set_value(7).run()
    again = new_app()  # a reload: a new session of the workspace
    assert again.slider(key="k").value == 7
