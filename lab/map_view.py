"""The Map page's caches, click handling and figure; the maths is ``core.inference.analysis``'s."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core.inference.analysis import MapLayout, map_layout, question_labels
from lab import cached
from lab.figures import hover_text
from lab.session import get_model

CHART_KEY, FOCUS_KEY, DATA_KEY = "map_chart", "map_focus", "map_data_key"
POINT_SIZE, NEIGHBOUR_SIZE, FOCUS_SIZE = 4, 11, 16
NEIGHBOUR_COLOR, FOCUS_COLOR = "#111111", "#ff9f1c"


def encodings(choice: str, key: str, texts: Sequence[str],
              progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """(N, d) unit vectors of ``texts`` through tower 1, as the Search page indexes them; ``key`` names
    the texts (the dataset's key and how many of its questions the map shows)."""
    from core.inference.search import encode_unit_rows

    return cached.built_once("map", choice, key,
                             lambda model: encode_unit_rows(model, list(texts), 1, 256, progress))


@st.cache_data(show_spinner="Projecting and clustering…", max_entries=16)
def layout(choice: str, stamp: float, key: str, k: int, _vectors: np.ndarray) -> MapLayout:
    return map_layout(_vectors, k)


@st.cache_data(show_spinner=False, max_entries=8)
def labels(key: str, _pairs: pd.DataFrame, _texts: Sequence[str]) -> list[str]:
    return question_labels(_pairs, _texts)


@st.cache_data(show_spinner=False, max_entries=8)
def hovers(key: str, _texts: Sequence[str]) -> list[str]:
    """Each question as a hover label (``lab.figures.hover_text``: escaped, wrapped), made once per map."""
    return [hover_text(text) for text in _texts]


@st.cache_data(show_spinner=False, max_entries=256)
def query_vector(choice: str, stamp: float, text: str) -> np.ndarray:
    """(d,) vector of a typed question through tower 0, as the Search page encodes a query."""
    model, _ = get_model(choice)
    return np.asarray(model.encode([text], tower=0))[0]


# ---- the clicked point -------------------------------------------------------------------------
def clicked_index(event) -> int | None:
    """The map index (``customdata``: a number or a one-item list) of a selection's first point, or None."""
    points = ((event or {}).get("selection") or {}).get("points") or [{}]
    data = points[0].get("customdata")
    return None if data is None else int(np.ravel(data)[0])


def remember_click() -> None:
    """``on_select`` callback: keep the clicked point (with the dataset it belongs to) across reruns."""
    index = clicked_index(st.session_state.get(CHART_KEY))
    if index is not None:
        st.session_state[FOCUS_KEY] = (st.session_state.get(DATA_KEY), index)


def forget_click() -> None:
    st.session_state.pop(FOCUS_KEY, None)


def focus(key: str, count: int) -> int | None:
    """The clicked point of this dataset's map, if any."""
    kept = st.session_state.get(FOCUS_KEY)  # (the map's key, the point's index), set by ``remember_click``
    return kept[1] if kept and kept[0] == key and kept[1] < count else None


# ---- the figure ---------------------------------------------------------------------------------
def map_figure(points: np.ndarray, hover: Sequence[str], groups: Sequence[str], order: Sequence[str],
               title: str, highlight: tuple[np.ndarray, np.ndarray] | None = None,
               focus_index: int | None = None, highlight_name: str = "nearest neighbours") -> go.Figure:
    """One WebGL scatter trace per group (in ``order``), hover = the question (``hovers``), ``customdata``
    = the point's index; then the highlighted neighbours (index, cosine) and the clicked point on top."""
    points = np.asarray(points, dtype=np.float64)
    groups = np.asarray(groups, dtype=object)
    figure = go.Figure()

    def add(rows, name: str, texts, **marker) -> None:
        figure.add_trace(go.Scattergl(x=points[rows, 0], y=points[rows, 1], mode="markers", name=name,
                                      customdata=rows, hovertext=texts, hoverinfo="text", marker=marker))

    for group in order:
        rows = np.flatnonzero(groups == group)
        if len(rows):
            add(rows, str(group), [hover[i] for i in rows], size=POINT_SIZE, opacity=0.6)
    if highlight is not None and len(highlight[0]):
        rows, scores = np.asarray(highlight[0]), np.asarray(highlight[1])
        add(rows, highlight_name, [f"{hover[i]}<br>cosine {s:.3f}" for i, s in zip(rows, scores)],
            size=NEIGHBOUR_SIZE, color="rgba(0,0,0,0)", line=dict(color=NEIGHBOUR_COLOR, width=2))
    if focus_index is not None:
        add([focus_index], "clicked question", [hover[focus_index]], size=FOCUS_SIZE, symbol="star", color=FOCUS_COLOR,
            line=dict(color="#111111", width=1))
    figure.update_layout(title=title, xaxis_title="principal component 1", yaxis_title="principal component 2",
                         legend_title_text="", margin=dict(l=10, r=10, t=60, b=10), height=650,
                         clickmode="event+select", dragmode="pan")
    return figure


def flattening_note(kept: float, dimensions: int) -> str:
    """What the flat map loses, in plain words: ``kept`` is the share of the vectors' spread that the two map
    axes (PCA's first two directions) keep, out of the model's ``dimensions``."""
    how_far = "a rough guide only" if kept < 0.5 else "a fair guide"
    return (f"The map flattens the model's {dimensions:,} dimensions into 2 and keeps {kept:.0%} of how the questions "
            f"differ, so distances on it are {how_far}; the nearest neighbours are measured in the full space.")
