"""Plotly figures of the Data, Train and Label pages: numbers from ``core`` in, ``go.Figure`` out, no streamlit."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd
import plotly.graph_objects as go

from core.model_names import ZERO_SHOT, ZERO_SHOT_LABEL

QUESTION_COLUMNS = ("question1", "question2")
# Longer questions are counted at this length, so one run-on question cannot stretch the axis.
MAX_SHOWN_WORDS = 60
EPOCH_METRICS = {"roc_auc": "ROC AUC", "average_precision": "average precision", "accuracy": "accuracy", "f1": "F1"}
REFERENCE_LABEL = "preset reference (this machine)"  # a preset's measured curve, under the run's own
REFERENCE_COLOR = "#999999"
MARKED_STEPS = 50  # a loss curve with at most this many steps marks each one


def _layout(figure: go.Figure, title: str, x: str, y: str, **extra) -> go.Figure:
    figure.update_layout(title=title, xaxis_title=x, yaxis_title=y, legend_title_text="",
                         margin=dict(l=10, r=10, t=50, b=10), **extra)
    return figure


def length_histogram(pairs: pd.DataFrame) -> go.Figure:
    """Questions per length in words, one bar series per column, as counts so a large dataset stays a small figure;
    lengths above ``MAX_SHOWN_WORDS`` are counted at ``MAX_SHOWN_WORDS`` (the axis title then says so)."""
    figure = go.Figure()
    clipped = False
    for column in QUESTION_COLUMNS:
        words = pairs[column].astype(str).str.split().str.len()
        clipped = clipped or bool((words > MAX_SHOWN_WORDS).any())
        counts = words.clip(upper=MAX_SHOWN_WORDS).value_counts().sort_index()
        figure.add_bar(x=counts.index.to_numpy(), y=counts.to_numpy(), name=column, opacity=0.8)
    x_title = "words per question" + (f" ({MAX_SHOWN_WORDS} = {MAX_SHOWN_WORDS} or more)" if clipped else "")
    return _layout(figure, "Question length in words", x_title, "questions", barmode="group")


def loss_curve(losses: Sequence[tuple[int, float]]) -> go.Figure:
    """The training loss after each step, with a running mean (window ~ 1/20 of the steps) for the trend; a short
    series marks every step (a line needs two points), and the step axis starts at 0."""
    frame = pd.DataFrame(list(losses), columns=["step", "loss"])
    figure = go.Figure()
    short = len(frame) <= MARKED_STEPS
    figure.add_scatter(x=frame["step"], y=frame["loss"], mode="lines+markers" if short else "lines",
                       name="loss per step", line=dict(width=1), opacity=1.0 if short else 0.5)
    if len(frame) >= 10:
        window = max(2, len(frame) // 20)
        figure.add_scatter(x=frame["step"], y=frame["loss"].rolling(window, min_periods=1).mean(), mode="lines",
                           name=f"running mean ({window} steps)", line=dict(width=2))
    last_step = int(frame["step"].max()) if len(frame) else 1
    figure.update_xaxes(tick0=0, dtick=integer_tick_step(last_step), tickformat=",d",  # steps are whole numbers
                        rangemode="tozero")
    return _layout(figure, "Training loss", "step", "loss")


def integer_tick_step(span: int, max_ticks: int = 8) -> int:
    """The smallest 1-2-5 step of at least 1 that puts at most ``max_ticks`` ticks on 0..span."""
    magnitude = 1
    while True:
        for factor in (1, 2, 5):
            if span / (factor * magnitude) <= max_ticks:
                return factor * magnitude
        magnitude *= 10


def epoch_metrics_chart(epochs: Iterable[dict]) -> go.Figure:
    """Validation metrics after each epoch (the dicts of ``TrainingJob.progress.epochs``)."""
    rows = list(epochs)
    figure = go.Figure()
    for key, label in EPOCH_METRICS.items():
        values = [row.get(key) for row in rows]
        if any(v is not None for v in values):
            figure.add_scatter(x=[row["epoch"] for row in rows], y=values, mode="lines+markers", name=label)
    figure.update_xaxes(dtick=1)
    return _layout(figure, "Validation metrics per epoch", "epoch", "score", yaxis_range=[0, 1.02])


def validation_curve_chart(points: Iterable[dict], reference: Sequence[tuple[float, float]] = ()) -> go.Figure:
    """Validation ROC AUC against training minutes (validations left out) of one run's ``{"step", "train_seconds",
    "roc_auc"}`` points, over a preset's reference curve of (train seconds, ROC AUC) as a dashed grey line when there
    is one; points without a ROC AUC (no validation split) are not drawn."""
    shown = [p for p in points if isinstance(p.get("roc_auc"), (int, float)) and math.isfinite(p["roc_auc"])]
    figure = go.Figure()
    if reference:
        figure.add_scatter(x=[seconds / 60 for seconds, _ in reference], y=[auc for _, auc in reference],
                           mode="lines", name=REFERENCE_LABEL, line=dict(color=REFERENCE_COLOR, dash="dash"),
                           hovertemplate="%{x:.1f} min: ROC AUC %{y:.4f}<extra>reference</extra>")
    figure.add_scatter(x=[p["train_seconds"] / 60 for p in shown], y=[p["roc_auc"] for p in shown],
                       customdata=[p["step"] for p in shown], mode="lines+markers", name="this run",
                       hovertemplate="step %{customdata:,d} · %{x:.1f} min: ROC AUC %{y:.4f}<extra></extra>")
    figure.update_xaxes(rangemode="tozero")
    return _layout(figure, "Validation ROC AUC over training time", "training minutes (validation time left out)",
                   "validation ROC AUC")


def _trained_on(point: dict) -> int:
    return point.get("trained_on", point.get("labels", 0))


def learning_curve_chart(points: Iterable[dict]) -> go.Figure:
    """The active-labelling loop's learning curve: held-out ROC AUC and accuracy of each scored model against the
    labels it trained on (``core.training.active_rounds.read_curve``'s points, in any order)."""
    shown = sorted(points, key=lambda p: (_trained_on(p), p.get("at", "")))
    names = [ZERO_SHOT_LABEL if p.get("model") == ZERO_SHOT else Path(str(p.get("model", ""))).name for p in shown]
    figure = go.Figure()
    for key, label in (("roc_auc", "held-out ROC AUC"), ("accuracy", "held-out accuracy")):
        figure.add_scatter(x=[_trained_on(p) for p in shown], y=[p.get(key) for p in shown], mode="lines+markers",
                           name=label, customdata=[[name, p.get("held_out")] for name, p in zip(names, shown)],
                           hovertemplate="trained on %{x:,d} labels · %{customdata[0]}: %{y:.3f} on "
                                         f"%{{customdata[1]:,d}} held-out pairs<extra>{label}</extra>")
    figure.update_xaxes(rangemode="tozero", tickformat=",d")
    return _layout(figure, "Learning curve", "labels trained on", "score on the held-out labels",
                   yaxis_range=[0, 1.02])
