"""The Compare page's caches, scoring loop and figure. Scores are cached per (model, folder stamp, pairs) in chunks
of ``SCORE_CHUNK``, so the page draws a progress bar between chunks (one drawn inside a cached function would be
replayed) and a rerun encodes nothing again; the pairs come from ``core.inference.honest_pairs``."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core.data import resampling_groups
from core.inference.calibration import calibrated_on, pair_threshold
from core.inference.metrics import scorer_scores
from core.inference.honest_pairs import METRICS, REFERENCE, TFIDF_LABEL, CommonPairs, comparison_row, honest_pairs
from core.inference.tfidf_scorer import TfidfScorer
from core.models import MODEL_LABELS, ZERO_SHOT_LABEL
from lab.cached import held_out_frames, model_stamp
from lab.session import ZERO_SHOT, get_model

SCORE_CHUNK = 256  # pairs per cached chunk: the progress bar moves every few seconds even for MiniLM on a CPU
ZERO_SHOT_SOURCE = "MiniLM's fixed default (these pairs cannot calibrate it: too few, or one class)"
ZERO_SHOT_CALIBRATED_SOURCE = "these same pairs (no validation split of its own; best accuracy here: optimistic)"
SAVED_SOURCE = "its own validation split (config.json)"
TFIDF_SOURCE = "these same pairs (best accuracy here: optimistic)"
UNCALIBRATED_SOURCE = "these same pairs (no saved threshold: optimistic)"


@st.cache_data(show_spinner=False, max_entries=16)
def _common(key: str, runs: Sequence[dict], files: tuple, _pairs: pd.DataFrame, _val, _test) -> CommonPairs:
    return honest_pairs(list(runs), _pairs, val=_val, test=_test, val_name=files[0][1], test_name=files[1][1])


def common(key: str, runs: Sequence[dict], pairs: pd.DataFrame) -> CommonPairs:
    """``core.inference.honest_pairs.honest_pairs`` of the compared runs, the workspace's held-out files and the
    active dataset (``data_key`` ``key``)."""
    val, test, files = held_out_frames()
    return _common(key, runs, files, pairs, val, test)


@st.cache_data(show_spinner=False, max_entries=512)
def _chunk_scores(choice: str, stamp: float, pairs_key: str, start: int, _chunk: pd.DataFrame) -> np.ndarray:
    model, _ = get_model(choice)
    return scorer_scores(model, _chunk)


@st.cache_data(show_spinner="Scoring the TF-IDF baseline…", max_entries=16)
def _tfidf(pairs_key: str, _common: CommonPairs) -> np.ndarray:
    return TfidfScorer().score_pairs(_common.pairs["question1"], _common.pairs["question2"])


def scores_of(choice: str, chosen: CommonPairs, progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """(N,) scores of ``chosen.pairs`` under a model (a cosine, a cross-encoder's probability), cached chunk by chunk;
    ``progress(pairs done, total)`` after every chunk."""
    pairs, total, stamp, pairs_key = chosen.pairs, len(chosen.pairs), model_stamp(choice), chosen.key
    parts = []
    for start in range(0, total, SCORE_CHUNK):
        chunk = pairs.iloc[start : start + SCORE_CHUNK].reset_index(drop=True)
        parts.append(_chunk_scores(choice, stamp, pairs_key, start, chunk))
        if progress is not None:
            progress(min(start + SCORE_CHUNK, total), total)
    return np.concatenate(parts) if parts else np.zeros(0)


def run_kind(run: dict) -> str:
    """A saved run's family for the table's kind column; a calibrated copy (``python -m core calibrate``) says so."""
    record = run.get("calibrated_from")
    if not isinstance(record, dict):
        return MODEL_LABELS.get(run.get("model_type"), "?")
    family = "MiniLM zero-shot" if record.get("source") == ZERO_SHOT else MODEL_LABELS.get(run.get("model_type"), "?")
    return f"{family}, calibrated copy"


def score_rows(runs: Sequence[dict], chosen: CommonPairs, bar) -> tuple[list[dict], list[str]]:
    """The comparison rows (zero-shot MiniLM, every run, TF-IDF) on ``chosen.pairs``, and one message per model
    that could not be scored; ``bar``, an ``st.progress`` element, moves as models are scored."""
    labels = chosen.pairs["is_duplicate"].to_numpy()
    entries = [(ZERO_SHOT_LABEL, ZERO_SHOT, REFERENCE)]
    entries += [(run["name"], run["path"], run_kind(run)) for run in runs]
    rows, failures, zero_shot_scores = [], [], None  # every other row is judged against zero-shot's scores
    groups = resampling_groups(chosen.pairs)
    for number, (name, choice, kind) in enumerate(entries):
        def moved(done: int, total: int, number=number, name=name) -> None:
            bar.progress((number + done / max(total, 1)) / (len(entries) + 1),
                         text=f"Scoring {name}: {done:,} / {total:,} pairs (model {number + 1} of {len(entries)})")
        try:
            _, config = get_model(choice)
            scores = scores_of(choice, chosen, moved)
        except Exception as error:  # a broken or half-written model folder
            failures.append(f"Could not score {name}: {error}")
            continue
        if choice == ZERO_SHOT:  # no validation split of its own: calibrated on these pairs when they can
            calibrated = pair_threshold(config, labels, scores)
            threshold = calibrated.threshold
            source = ZERO_SHOT_CALIBRATED_SOURCE if calibrated.pairs else ZERO_SHOT_SOURCE
            zero_shot_scores = scores
        else:
            threshold = (config.get("thresholds") or {}).get("accuracy")
            source = (calibrated_on(config) or SAVED_SOURCE) if threshold is not None else UNCALIBRATED_SOURCE
        rows.append(comparison_row(name, kind, labels, scores, threshold, source,
                                   None if choice == ZERO_SHOT else zero_shot_scores, groups))
    tfidf = _tfidf(chosen.key, chosen)
    rows.append(comparison_row(TFIDF_LABEL, REFERENCE, labels, tfidf, None, TFIDF_SOURCE, zero_shot_scores, groups))
    return rows, failures


def thresholds_note(table: pd.DataFrame) -> str:
    """Where the table's accuracy / F1 thresholds come from, said honestly for zero-shot MiniLM's row."""
    [zero_shot] = table.loc[table["model"] == ZERO_SHOT_LABEL, "threshold from"].tolist() or [None]
    text = ("ROC AUC and average precision need no threshold; accuracy and F1 are at each model's calibrated "
            "threshold (a saved model's from its own validation split, a calibrated copy's from its labelled file"
            + (", zero-shot MiniLM's fixed default, as these pairs cannot calibrate it"
               if zero_shot == ZERO_SHOT_SOURCE else "") + "). ")
    if zero_shot == ZERO_SHOT_CALIBRATED_SOURCE:
        return text + ("Zero-shot MiniLM and the TF-IDF baseline have no threshold of their own: both are calibrated "
                       "on these same pairs, which flatters their accuracy and F1.")
    return text + ("The TF-IDF baseline has no threshold of its own: it is calibrated on these same pairs, which "
                   "flatters its accuracy and F1.")


def metric_bars(table: pd.DataFrame, pairs_label: str) -> go.Figure:
    """Grouped bars: each row's four metrics (``core.inference.honest_pairs.METRICS``), titled with the pairs
    measured on."""
    figure = go.Figure()
    for column in METRICS.values():
        figure.add_bar(x=table["model"], y=table[column], name=column)
    figure.update_layout(title=f"Every model on the same {pairs_label}", xaxis_title="model", yaxis_title="score",
                         barmode="group", yaxis_range=[0, 1.02], legend_title_text="",
                         margin=dict(l=10, r=10, t=50, b=10))
    return figure
