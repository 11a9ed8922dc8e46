"""The Map page (AppTest): every distinct question as a WebGL point at its PCA coordinates, hover = the
question, colours by cluster or by label, and the highlighted neighbours of a search or a click equal a
numpy cosine top-k."""
from __future__ import annotations

import html

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.data import corpus_questions, load_pairs, seeded_sample
from core.inference.analysis import (
    DUPLICATE_LABEL,
    NOT_DUPLICATE_LABEL,
    map_layout,
    question_labels,
)
from core.models import load_model
from lab import map_view
from lab.figures import hover_text
from lab.navigation import MAP
from lab.session import ACTIVE_MODEL, ACTIVE_MODEL_PICKED, data_key
from tests.conftest import SAMPLE


@pytest.fixture(scope="module")
def sample():
    return load_pairs(SAMPLE)[0]


@pytest.fixture
def open_map(open_page):
    """``open_map(folder) -> AppTest``: the Map page in a new session with the saved model in ``folder``
    picked in the shared model picker before the page first runs (so the default, zero-shot MiniLM, never
    encodes the sample)."""
    def open_(folder) -> AppTest:
        at = open_page(MAP.path, **{ACTIVE_MODEL: str(folder), ACTIVE_MODEL_PICKED: True})
        assert not at.exception, at.exception
        assert at.selectbox(key=ACTIVE_MODEL).value == str(folder)
        return at

    return open_


def _vectors(model, texts):
    vectors = np.asarray(model.encode(texts, tower=1), dtype=np.float64)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _top_k(vectors, query, k, exclude=None):
    scores = vectors @ (query / np.linalg.norm(query))
    if exclude is not None:
        scores[exclude] = -np.inf
    return np.argsort(-scores, kind="stable")[:k].tolist()


def _points(figure):
    """(customdata, x, y, hovertext) of the map's base traces, in point-index order."""
    traces = [t for t in figure["data"] if "nearest neighbours" not in t["name"] and t["name"] != "clicked question"]
    index = np.concatenate([t["customdata"] for t in traces]).astype(int)
    x, y = np.concatenate([t["x"] for t in traces]), np.concatenate([t["y"] for t in traces])
    hover = [h for t in traces for h in t["hovertext"]]
    order = np.argsort(index)
    return index[order], x[order], y[order], [hover[i] for i in order], traces


def test_the_map_shows_every_question_where_pca_puts_it(runs_with_models, open_map, plotly_figures, sample):
    folder = runs_with_models[1]["lstm"]
    at = open_map(folder)
    texts = corpus_questions(sample)
    [figure] = plotly_figures(at)
    assert all(trace["type"] == "scattergl" for trace in figure["data"])
    index, x, y, hover, traces = _points(figure)
    assert index.tolist() == list(range(len(texts)))  # every distinct question once: N points
    assert hover == [hover_text(text) for text in texts]
    # hover_text only escapes and wraps: without the line breaks and spaces, the question itself
    assert ["".join(html.unescape(h.replace("<br>", "")).split()) for h in hover] == ["".join(t.split()) for t in texts]
    assert f"{len(texts):,} questions of the active dataset" in figure["layout"]["title"]["text"]
    assert any(f"All {len(texts):,} distinct questions" in caption.value for caption in at.caption)

    model, _ = load_model(folder)
    vectors = _vectors(model, texts)
    expected = map_layout(vectors, k=1).points
    for column, actual in enumerate((x, y)):
        assert np.allclose(actual, expected[:, column], atol=1e-4) or np.allclose(actual, -expected[:, column],
                                                                                    atol=1e-4)
    # coloured by cluster: one trace per cluster, 8 by default
    assert [t["name"] for t in traces] == [f"cluster {c}" for c in range(1, 9)]

    # a search rings the k questions closest to the typed one: a numpy cosine top-k
    query = "How can I learn to code in Python?"
    at.slider(key="map_neighbours").set_value(7).run()
    at.text_input(key="map_query").input(query).run()
    assert not at.exception
    [figure] = plotly_figures(at)
    [ring] = [t for t in figure["data"] if t["name"] == "7 nearest neighbours"]
    expected_top = _top_k(vectors, np.asarray(model.encode([query], tower=0))[0].astype(np.float64), 7)
    assert ring["type"] == "scattergl" and list(ring["customdata"]) == expected_top
    assert ring["x"] == pytest.approx(x[expected_top].tolist())
    table = at.dataframe[0].value
    assert table["question"].tolist() == [texts[i] for i in expected_top]
    assert table["cosine"].is_monotonic_decreasing


def test_colour_by_label_and_a_clicked_point(runs_with_models, open_map, plotly_figures, sample):
    folder = runs_with_models[1]["lstm"]
    at = open_map(folder)
    texts = corpus_questions(sample)
    at.selectbox(key="map_colour").select("label of its pairs").run()
    [figure] = plotly_figures(at)
    _, _, _, _, traces = _points(figure)
    assert [t["name"] for t in traces] == [DUPLICATE_LABEL, NOT_DUPLICATE_LABEL]
    labels = np.array(question_labels(sample, texts))
    assert sorted(traces[0]["customdata"]) == np.flatnonzero(labels == DUPLICATE_LABEL).tolist()

    # a click keeps the point (lab.map_view.remember_click stores it); its neighbours exclude itself
    at.session_state[map_view.FOCUS_KEY] = (f"{data_key(sample)}:{len(texts)}", 5)
    at.run()
    assert not at.exception
    [figure] = plotly_figures(at)
    [star] = [t for t in figure["data"] if t["name"] == "clicked question"]
    assert list(star["customdata"]) == [5]
    [ring] = [t for t in figure["data"] if t["name"] == "10 nearest neighbours"]
    model, _ = load_model(folder)
    vectors = _vectors(model, texts)
    assert list(ring["customdata"]) == _top_k(vectors, vectors[5], 10, exclude=5)
    # typing a search forgets the click
    at.text_input(key="map_query").input("What is the capital of France?").run()
    assert map_view.FOCUS_KEY not in at.session_state
    assert not [t for t in plotly_figures(at)[0]["data"] if t["name"] == "clicked question"]


def test_a_large_dataset_is_sampled_with_a_seed(runs_with_models, open_map, plotly_figures, sample, monkeypatch):
    import core.inference.analysis

    monkeypatch.setattr(core.inference.analysis, "MAP_MAX_POINTS", 100)
    at = open_map(runs_with_models[1]["lstm"])
    texts = corpus_questions(sample)
    [figure] = plotly_figures(at)
    index, _, _, hover, _ = _points(figure)
    rows = seeded_sample(len(texts), 100, core.inference.analysis.MAP_SEED)
    assert len(index) == 100 and hover == [hover_text(texts[i]) for i in rows]
    assert "(a seeded sample of the" in figure["layout"]["title"]["text"]
    assert any("seeded sample of 100 (seed 0)" in caption.value for caption in at.caption)


def test_clicked_index_reads_the_customdata_of_a_selection():
    event = {"selection": {"points": [{"curve_number": 2, "point_index": 0, "customdata": 41}], "point_indices": [0]}}
    assert map_view.clicked_index(event) == 41
    assert map_view.clicked_index({"selection": {"points": [{"customdata": [7]}]}}) == 7
    assert map_view.clicked_index({"selection": {"points": []}}) is None
    assert map_view.clicked_index(None) is None


def test_the_map_says_in_plain_words_what_it_shows(runs_with_models, open_map, plotly_figures):
    import re

    at = open_map(runs_with_models[1]["lstm"])
    [figure] = plotly_figures(at)
    title = figure["layout"]["title"]["text"]
    texts = [title, *(caption.value for caption in at.caption)]
    assert not any(re.search(r"keep \d+% and \d+%", text) for text in texts)  # no bare variance shares
    assert "the closer two points, the more alike the model finds them" in title
    [note] = [caption.value for caption in at.caption if caption.value.startswith("The map flattens")]
    assert re.fullmatch(r"The map flattens the model's [\d,]+ dimensions into 2 and keeps \d+% of how the questions "
                        r"differ, so distances on it are a (rough guide only|fair guide); the nearest neighbours are "
                        r"measured in the full space\.", note)
