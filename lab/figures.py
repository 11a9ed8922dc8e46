"""Plotly figures of the Data, Train, Similarity matrix, Verdict and Label pages: numbers from ``core`` in,
``go.Figure`` out, no streamlit. User text reaches a figure only through ``hover_text``, which escapes it: Plotly
reads HTML-like tags in labels, and a question must show as typed."""
from __future__ import annotations

import html
import math
import textwrap
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.model_names import ZERO_SHOT, ZERO_SHOT_LABEL

SCORE_COLORS = "RdBu"  # diverging: red = dissimilar (-1), white = 0, blue = similar (+1)
DIAGONAL_COLOR = "#111111"  # outline of the duplicate pairs
CLOSEST_COLOR = "#ff9f1c"  # outline + diamond of each row's closest negative
CLOSEST_MARK = "◆"
DUPLICATE_COLOR, OTHER_COLOR = "#1f77b4", "#d62728"
VALUES_UP_TO = 12  # batches this small print their values in the cells
# st.plotly_chart(..., config=PLOTLY_CONFIG): the toolbar shows only while the pointer is over a chart.
PLOTLY_CONFIG = {"displayModeBar": "hover"}
TOOLBAR_ROOM = 30  # px kept free above a verdict figure's title: the toolbar's row (top right, on hover)
SUBTITLE_WIDTH = 70  # characters per line of a verdict figure's subtitle


def hover_text(text: str, width: int = 60) -> str:
    """A question for a hover label: HTML-escaped, wrapped onto lines of ``width`` characters."""
    lines = textwrap.wrap(str(text), width=width, break_long_words=True, replace_whitespace=True) or [""]
    return "<br>".join(html.escape(line, quote=False) for line in lines)


def batch_labels(size: int) -> tuple[list[str], list[str]]:
    """Row labels q1_1..q1_B (anchors) and column labels q2_1..q2_B (candidates)."""
    return [f"q1_{i + 1}" for i in range(size)], [f"q2_{j + 1}" for j in range(size)]


def similarity_heatmap(view, title: str = "") -> go.Figure:
    """The (B, B) matrix of a ``core.inference.analysis.BatchView``, colour fixed to [-1, 1], hover both questions;
    the diagonal (duplicate pairs) outlined, each row's closest negative marked, its mean negative in a column."""
    scores = np.asarray(view.scores, dtype=np.float64)  # (B, B)
    size = scores.shape[0]
    rows, columns = batch_labels(size)
    first = view.question1 or rows
    second = view.question2 or columns
    customdata = [[[hover_text(first[i]), hover_text(second[j])] for j in range(size)] for i in range(size)]
    show_values = size <= VALUES_UP_TO

    figure = make_subplots(rows=1, cols=2, column_widths=[0.88, 0.12], shared_yaxes=True, horizontal_spacing=0.03)
    colours = dict(zmin=-1.0, zmax=1.0, zmid=0.0, colorscale=SCORE_COLORS,
                   texttemplate="%{z:.2f}" if show_values else None)
    figure.add_trace(go.Heatmap(
        z=scores, x=columns, y=rows, customdata=customdata, colorbar=dict(title="cosine", x=1.02), **colours,
        hovertemplate=("<b>%{y} × %{x}</b>  s = %{z:.3f}<br><br>question1 (row): %{customdata[0]}"
                       "<br><br>question2 (column): %{customdata[1]}<extra></extra>"),
        name="s(v1_i, v2_j)",
    ), row=1, col=1)
    mean_negative = np.asarray(view.mean_negative, dtype=np.float64).reshape(size, 1)  # (B, 1)
    figure.add_trace(go.Heatmap(
        z=mean_negative, x=["mean neg."], y=rows, showscale=False, **colours,
        hovertemplate="%{y}: mean negative = %{z:.3f}<extra></extra>",
        name="mean negative",
    ), row=1, col=2)

    for i in range(size):
        figure.add_shape(type="rect", x0=i - 0.5, x1=i + 0.5, y0=i - 0.5, y1=i + 0.5,
                         line=dict(color=DIAGONAL_COLOR, width=3), xref="x", yref="y")
        column = int(view.closest_column[i])
        if column >= 0:
            figure.add_shape(type="rect", x0=column - 0.45, x1=column + 0.45, y0=i - 0.45, y1=i + 0.45,
                             line=dict(color=CLOSEST_COLOR, width=3, dash="dot"), xref="x", yref="y")
            figure.add_annotation(x=column + 0.32, y=i - 0.3, text=CLOSEST_MARK, showarrow=False,
                                  font=dict(color=CLOSEST_COLOR, size=15), xref="x", yref="y")
    figure.update_yaxes(autorange="reversed", row=1, col=1)
    figure.update_xaxes(side="top")
    height = 160 + 34 * size if show_values else 140 + 22 * size
    figure.update_layout(title=title or None, height=min(max(height, 320), 900),
                         margin=dict(l=10, r=10, t=70 if title else 40, b=10))
    return figure


def experiment_figure(table) -> go.Figure:
    """Triplet and softmax losses per round of the seeds' experiment (``core.inference.analysis.seed_experiment``)."""
    figure = go.Figure()
    for column, color in (("triplet loss", "#2ca02c"), ("softmax loss", "#9467bd")):
        figure.add_trace(go.Scatter(x=list(table["round"]), y=list(table[column]), mode="lines+markers",
                                    name=column, line=dict(color=color)))
    figure.update_layout(xaxis_title="round (diagonal +0.5, off-diagonal −0.02 each)", yaxis_title="loss",
                         height=320, margin=dict(l=10, r=10, t=30, b=10), xaxis=dict(dtick=1))
    return figure


# ---- verdict -----------------------------------------------------------------------------------
def _title(figure: go.Figure, text: str, subtitle: str | None, height: int) -> go.Figure:
    """A left-aligned title and a subtitle (which pairs a figure was measured on, escaped and wrapped)
    in a top margin that keeps a row free above them for the plotly toolbar, so it never covers them."""
    title = dict(text=text, x=0, xanchor="left", xref="paper", y=1, yanchor="top", yref="container",
                 pad=dict(t=TOOLBAR_ROOM))
    lines = 0
    if subtitle:
        wrapped = hover_text(subtitle, width=SUBTITLE_WIDTH)
        lines = wrapped.count("<br>") + 1
        title["subtitle"] = dict(text=wrapped, font=dict(size=12))
    figure.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=TOOLBAR_ROOM + 36 + 16 * lines, b=10))
    return figure


def _threshold_point(x: float, y: float) -> go.Scatter:
    return go.Scatter(x=[x], y=[y], mode="markers", name="this threshold",
                      marker=dict(size=13, color=CLOSEST_COLOR, line=dict(color="black", width=1)))


def roc_figure(roc: dict, metrics: dict, auc: float | None = None, subtitle: str | None = None) -> go.Figure:
    """ROC curve (``core.inference.metrics.curves``) with the (fpr, tpr) of the threshold's ``threshold_metrics``;
    ``subtitle``: which pairs."""
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=roc["fpr"], y=roc["tpr"], mode="lines", name="ROC",
                                customdata=roc["thresholds"],
                                hovertemplate=("FPR %{x:.3f}, TPR %{y:.3f}<br>threshold %{customdata:.3f}"
                                               "<extra></extra>")))
    figure.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="chance",
                                line=dict(dash="dash", color="#999999"), hoverinfo="skip"))
    figure.add_trace(_threshold_point(metrics["fp"] / max(metrics["fp"] + metrics["tn"], 1), metrics["recall"]))
    title = "ROC" + (f" (AUC {auc:.3f})" if auc is not None and np.isfinite(auc) else "")
    figure.update_layout(xaxis_title="false positive rate", yaxis_title="true positive rate (recall)",
                         legend=dict(orientation="h", y=-0.25))
    return _title(figure, title, subtitle, 380)


def pr_figure(pr: dict, metrics: dict, average_precision: float | None = None, subtitle: str | None = None
              ) -> go.Figure:
    """Precision-recall curve with the threshold's (recall, precision); ``subtitle``: which pairs."""
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=pr["recall"], y=pr["precision"], mode="lines", name="precision-recall"))
    figure.add_trace(_threshold_point(metrics["recall"], metrics["precision"]))
    title = "Precision-recall" + (f" (AP {average_precision:.3f})"
                                  if average_precision is not None and np.isfinite(average_precision) else "")
    figure.update_layout(xaxis_title="recall", yaxis_title="precision", yaxis=dict(range=[0, 1.05]),
                         legend=dict(orientation="h", y=-0.25))
    return _title(figure, title, subtitle, 380)


def confusion_figure(metrics: dict, subtitle: str | None = None) -> go.Figure:
    """2x2 counts: rows = truth, columns = verdict; ``subtitle`` says which pairs they count."""
    counts = [[metrics["tn"], metrics["fp"]], [metrics["fn"], metrics["tp"]]]
    figure = go.Figure(go.Heatmap(
        z=counts, x=["said: not duplicate", "said: duplicate"], y=["is: not duplicate", "is: duplicate"],
        colorscale="Blues", showscale=False, texttemplate="%{z}", textfont=dict(size=18),
        hovertemplate="%{y}, %{x}: %{z}<extra></extra>"))
    figure.update_yaxes(autorange="reversed")
    return _title(figure, "Confusion matrix", subtitle, 340)


def score_histogram(labels, scores, threshold: float, title: str = "Validation scores",
                    subtitle: str | None = None) -> go.Figure:
    """Scores of duplicates and of non-duplicates, overlaid, with the threshold as a vertical line."""
    labels = np.asarray(labels).astype(int)
    scores = np.asarray(scores, dtype=np.float64)
    low = float(min(scores.min(), threshold)) if scores.size else threshold - 1
    high = float(max(scores.max(), threshold)) if scores.size else threshold + 1
    size = max((high - low) / 40, 1e-3)
    bins = dict(start=low - size, end=high + size, size=size)
    figure = go.Figure()
    for label, name, color in ((0, "not duplicate", OTHER_COLOR), (1, "duplicate", DUPLICATE_COLOR)):
        figure.add_trace(go.Histogram(x=scores[labels == label], name=name, xbins=bins, marker_color=color,
                                      opacity=0.6))
    figure.add_vline(x=threshold, line=dict(color="black", width=2, dash="dash"),
                     annotation_text=f"threshold {threshold:.2f}", annotation_position="top right",
                     annotation=dict(yanchor="top"))  # inside the plot, clear of the title
    figure.update_layout(barmode="overlay", xaxis_title="cosine similarity", yaxis_title="pairs",
                         legend=dict(orientation="h", y=-0.3))
    return _title(figure, title, subtitle, 340)


def length_box_figure(summary, threshold: float, subtitle: str | None = None) -> go.Figure:
    """Box plots of the scores per length bucket, by label, from ``core.inference.analysis.scores_by_length``'s
    quartiles (nothing recomputed here), with the threshold as a horizontal line."""
    figure = go.Figure()
    buckets = list(dict.fromkeys(summary["bucket"]))
    for label, name, color in ((0, "not duplicate", OTHER_COLOR), (1, "duplicate", DUPLICATE_COLOR)):
        part = summary[summary["label"] == label]
        if part.empty:
            continue
        figure.add_trace(go.Box(
            x=list(part["bucket"]), q1=list(part["q1"]), median=list(part["median"]), q3=list(part["q3"]),
            lowerfence=list(part["min"]), upperfence=list(part["max"]), mean=list(part["mean"]),
            name=name, marker_color=color))
    figure.add_hline(y=threshold, line=dict(color="black", width=2, dash="dash"),
                     annotation_text=f"threshold {threshold:.2f}", annotation_position="top left")
    figure.update_layout(boxmode="group", xaxis_title="words in the longer question", yaxis_title="cosine similarity",
                         xaxis=dict(categoryorder="array", categoryarray=buckets),
                         legend=dict(orientation="h", y=-0.25))
    return _title(figure, "Scores by question length", subtitle, 380)


def batch_table(view):
    """``view.table()`` for display: the anchor's label first and the closest negative's column as
    its label (q2_j), or "—" when the row has none; the numeric columns are untouched."""
    table = view.table()
    rows, columns = batch_labels(len(table))
    table.insert(0, "row", rows)
    if view.question1 is None:  # an edited example: the row label says it all
        table = table.drop(columns="question1")
    table["closest column"] = [columns[c] if c >= 0 else "—" for c in table["closest column"].astype(int)]
    return table


# ---- the Data, Train and Label pages ------------------------------------------------------------
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
    steps = (factor * 10**power for power in range(20) for factor in (1, 2, 5))
    return next(step for step in steps if span / step <= max_ticks)


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
    """Validation ROC AUC of one run's ``step``, ``train_seconds``, ``roc_auc`` points (those without one are not
    drawn) against training minutes, over a preset's reference curve of (train seconds, ROC AUC), dashed grey."""
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
