"""The similarity-matrix page, driven through its real widgets with zero-shot MiniLM."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import app_support
import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from core.data import load_pairs
from core.inference.analysis import batch_scores, pick_batch
from core.losses.triplet import triplet_terms
from lab.navigation import SIMILARITY

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "assets" / "sample_pairs.csv"


def plotly_array(value) -> np.ndarray:
    """A figure-JSON array: a plain list, or plotly 7's {"dtype", "bdata", "shape"} base64 form."""
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = [int(n) for n in str(value.get("shape", len(flat))).split(",")]
        return flat.reshape(shape)
    return np.asarray(value, dtype=np.float64)


def figure(at: AppTest, position: int = 0) -> dict:
    return json.loads(at.get("plotly_chart")[position].proto.spec)


@pytest.fixture(scope="module")
def minilm():
    from lab.session import get_model

    return get_model("minilm")[0]  # the app's own cached instance: loaded once per test process


@pytest.fixture(scope="module")
def sample():
    return load_pairs(SAMPLE)[0]


@pytest.fixture
def app(runs_root):  # runs_root (conftest): an empty models folder, so zero-shot MiniLM is the only choice
    at = app_support.open_page(SIMILARITY.path, timeout=90)
    assert not at.exception, at.exception
    return at


def test_default_heatmap_is_the_batch_similarity_matrix(app, minilm, sample):
    assert app.selectbox(key="active_model").index == 0  # zero-shot MiniLM first
    assert not app.error
    batch = pick_batch(sample, 8, seed=0)
    expected = batch_scores(minilm, batch["question1"], batch["question2"])  # (8, 8)
    heatmap = figure(app)["data"][0]
    np.testing.assert_allclose(plotly_array(heatmap["z"]), expected, atol=1e-6)
    assert heatmap["zmin"] == -1 and heatmap["zmax"] == 1
    assert heatmap["y"] == [f"q1_{i}" for i in range(1, 9)]
    # Hover: question1 of the row and question2 of the column.
    assert heatmap["customdata"][2][5][0].replace("<br>", " ") == batch["question1"][2]
    assert heatmap["customdata"][2][5][1].replace("<br>", " ") == batch["question2"][5]
    # The diagonal outlined, one more outline per row with a closest negative, and the mean negatives.
    shapes = figure(app)["layout"]["shapes"]
    diagonal = [s for s in shapes if s["line"].get("dash") is None]
    assert sorted((round(s["x0"] + 0.5), round(s["y0"] + 0.5)) for s in diagonal) == [(i, i) for i in range(8)]
    mean_column = plotly_array(figure(app)["data"][1]["z"]).ravel()
    off = expected[~np.eye(8, dtype=bool)].reshape(8, 7)
    np.testing.assert_allclose(mean_column, off.mean(axis=1), atol=1e-9)
    table = app.dataframe[0].value
    assert len(table) == 8 and list(table["question1"]) == list(batch["question1"])


def test_margin_slider_updates_the_losses(app):
    z = plotly_array(figure(app)["data"][0]["z"])
    app.slider(key="sim_margin").set_value(0.7).run()
    assert not app.exception
    table = app.dataframe[0].value
    l1, l2 = triplet_terms(torch.tensor(z), 0.7)
    np.testing.assert_allclose(table["L1"], l1.numpy(), atol=1e-9)
    np.testing.assert_allclose(table["L2"], l2.numpy(), atol=1e-9)
    loss = next(m for m in app.metric if m.label.startswith("Triplet loss"))
    assert float(loss.value) == pytest.approx(float((l1 + l2).mean()), abs=1e-4)
    # Same batch, same embeddings: the heatmap did not change.
    np.testing.assert_array_equal(plotly_array(figure(app)["data"][0]["z"]), z)


def test_batch_by_index_and_size(app, minilm, sample):
    app.radio(key="pick").set_value("by index").run()
    app.number_input(key="sim_start").set_value(5).run()
    app.slider(key="sim_batch_size").set_value(5).run()
    assert not app.exception and not app.error
    batch = pick_batch(sample, 5, seed=None, start=5)
    expected = batch_scores(minilm, batch["question1"], batch["question2"])
    np.testing.assert_allclose(plotly_array(figure(app)["data"][0]["z"]), expected, atol=1e-6)


def test_another_random_batch_button_moves_the_seed(app):
    before = plotly_array(figure(app)["data"][0]["z"])
    app.button(key="reshuffle").click().run()
    assert app.number_input(key="sim_seed").value == 1
    assert not np.array_equal(plotly_array(figure(app)["data"][0]["z"]), before)


def test_explain_mode_shows_the_seed_example_and_falling_losses(app):
    app.toggle(key="explain").set_value(True).run()
    assert not app.exception and not app.error
    tables = [d.value for d in app.dataframe]
    example = next(t for t in tables if list(t.columns) == ["q2_1", "q2_2", "q2_3", "q2_4"])
    np.testing.assert_allclose(example.to_numpy(dtype=float)[0], [0.9, -0.8, 0.3, -0.5])
    per_row = next(t for t in tables if "L_full" in t.columns and len(t) == 4)
    assert per_row["mean negative"][0] == pytest.approx(-1 / 3)
    assert per_row["closest negative"][0] == pytest.approx(0.3) and per_row["closest column"][0] == "q2_3"
    experiment = next(t for t in tables if "softmax loss" in t.columns)
    assert list(experiment["round"]) == [0, 1, 2, 3, 4]
    assert np.all(np.diff(experiment["softmax loss"].to_numpy()) < 0)
    app.slider(key="rounds").set_value(2).run()
    experiment = next(d.value for d in app.dataframe if "softmax loss" in d.value.columns)
    assert len(experiment) == 3
    line_chart = figure(app, -1)
    assert [trace["name"] for trace in line_chart["data"]] == ["triplet loss", "softmax loss"]


def test_the_random_seed_is_kept_for_the_next_session(app):
    # Streamlit's "default value and Session State" warning is not raised under AppTest (no runtime); the rule that
    # prevents it is checked statically in tests/test_app_user_state.py.
    app.button(key="reshuffle").click().run()
    app.button(key="reshuffle").click().run()
    again = app_support.open_page(SIMILARITY.path, timeout=90)  # a reload: a new session of the workspace
    assert not again.exception, again.exception
    assert again.number_input(key="sim_seed").value == 2
    again.slider(key="sim_margin").set_value(0.5).run()
    assert not again.exception


def test_a_kept_start_past_this_datasets_duplicates_starts_over(runs_root):
    from core.saving.workspaces import open_workspace

    open_workspace(runs_root.parent.parent, app_support.TEST_WORKSPACE).save_state({"pick": "by index",
                                                                                  "sim_start": 10_000})
    at = app_support.open_page(SIMILARITY.path, timeout=90)
    assert not at.exception and not at.error, (at.exception, at.error)
    assert at.number_input(key="sim_start").value == 0
