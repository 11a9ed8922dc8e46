"""Streamlit caches for the analysis pages (similarity matrix, verdict, search).

Every key holds the model choice and a stamp of its saved folder (config.json's mtime), so a model
saved again is scored again; datasets enter keys through ``lab.session.data_key``. Moving a slider
therefore never encodes anything twice.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import streamlit as st

from lab.session import ZERO_SHOT, data_key, get_model

# The verdict page evaluates on this split of the active dataset (see `verdict_pairs`).
VERDICT_VAL_FRACTION = 0.2
VERDICT_SEED = 0
VERDICT_MIN_SPLIT = 100  # below this many pairs the whole dataset is used: a 20 % split is too noisy
VERDICT_MAX_PAIRS = 2000  # a seeded sample of this size at most, so MiniLM on a CPU stays under a minute


def model_stamp(choice: str) -> float:
    """config.json's mtime of a saved model (0 for zero-shot MiniLM): part of every cache key."""
    if choice == ZERO_SHOT:
        return 0.0
    config = Path(choice) / "config.json"
    return config.stat().st_mtime if config.exists() else 0.0


def active_data_key(pairs: pd.DataFrame) -> str:
    """``data_key(pairs)``, hashed once per dataset object: slider moves must not rehash 400k rows.

    The memo holds the frame itself and compares identity, so a new dataset is always hashed anew.
    """
    memo = st.session_state.get("_analysis_data_key")
    if memo is None or memo[0] is not pairs:
        memo = (pairs, data_key(pairs))
        st.session_state["_analysis_data_key"] = memo
    return memo[1]


def duplicate_count(pairs: pd.DataFrame) -> int:
    return int((pairs["is_duplicate"] == 1).sum())


# ---- similarity matrix -------------------------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=64)
def batch_scores(choice: str, stamp: float, question1: tuple[str, ...], question2: tuple[str, ...]) -> np.ndarray:
    """(B, B) s(v1_i, v2_j) of one batch under one model (``core.inspection.batch_scores``)."""
    from core.inspection import batch_scores as compute

    model, _ = get_model(choice)
    return compute(model, list(question1), list(question2))


# ---- verdict -----------------------------------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=256)
def pair_score(choice: str, stamp: float, question1: str, question2: str) -> float:
    """Cosine similarity of one typed pair."""
    model, _ = get_model(choice)
    return float(model.score_pairs([question1], [question2])[0])


def verdict_pairs(pairs: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The pairs the verdict page measures a threshold on, and a sentence saying which they are."""
    from core.data import split_pairs

    if len(pairs) < VERDICT_MIN_SPLIT:
        chosen, what = pairs.reset_index(drop=True), f"the whole dataset ({len(pairs)} pairs; too small to split)"
    else:
        chosen = split_pairs(pairs, val_fraction=VERDICT_VAL_FRACTION, test_fraction=0.0, seed=VERDICT_SEED).val
        what = (f"a {VERDICT_VAL_FRACTION:.0%} validation split of the active dataset "
                f"(seed {VERDICT_SEED}, {len(chosen):,} pairs)")
    if len(chosen) > VERDICT_MAX_PAIRS:
        chosen = chosen.sample(n=VERDICT_MAX_PAIRS, random_state=VERDICT_SEED).reset_index(drop=True)
        what += f", of which a seeded sample of {VERDICT_MAX_PAIRS:,}"
    return chosen, what


@st.cache_data(show_spinner="Scoring the validation pairs (once per model and dataset)…", max_entries=16)
def validation_scores(choice: str, stamp: float, key: str, _pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(labels, scores) of ``verdict_pairs(_pairs)`` under a model; ``key`` is ``data_key(_pairs)``."""
    from core.evaluation import pair_scores
    from core.pair_table import PairTable

    model, _ = get_model(choice)
    chosen, _ = verdict_pairs(_pairs)
    table = PairTable(chosen, model.tokenizer)
    return np.asarray(table.labels), pair_scores(model, table)


# ---- search ------------------------------------------------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=4)
def _index_slot(choice: str, stamp: float, key: str) -> dict:
    # The slot is cached, the index is built outside the cached function: a progress bar drawn
    # while building cannot live inside a cached function (Streamlit would replay it).
    return {"index": None, "lock": threading.Lock()}


def search_cache_dir(choice: str) -> Path | None:
    """Where a search index is saved: inside the saved model's folder, so it goes when the model
    goes; zero-shot MiniLM's goes to the hidden ``.cache/minilm`` of the models folder."""
    if choice == ZERO_SHOT:
        return Path(st.session_state.runs_root) / ".cache" / "minilm"
    return Path(choice)


def search_index(choice: str, key: str, texts: list[str], progress: Callable[[int, int], None] | None = None):
    """The ``core.search.SearchIndex`` of ``texts`` (the dataset with ``data_key`` ``key``) under a model."""
    from core.search import load_or_build

    slot = _index_slot(choice, model_stamp(choice), key)
    with slot["lock"]:  # two sessions asking at once build it once
        if slot["index"] is None:
            model, _ = get_model(choice)
            slot["index"] = load_or_build(model, texts, search_cache_dir(choice), progress=progress)
        return slot["index"]


@st.cache_data(show_spinner=False, max_entries=8)
def corpus(key: str, _pairs: pd.DataFrame) -> list[str]:
    """``core.search.corpus_questions`` of the dataset whose ``data_key`` is ``key``."""
    from core.search import corpus_questions

    return corpus_questions(_pairs)
