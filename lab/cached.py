"""Streamlit caches for the analysis pages (similarity matrix, verdict, search).

Every key holds the model choice and a stamp of its saved folder (config.json's mtime), so a model
saved again is scored again; datasets enter keys through ``lab.session.data_key``. Moving a slider
therefore never encodes anything twice.
"""
from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import streamlit as st

from lab.session import ZERO_SHOT, data_key, get_model

# The verdict page measures a model on its held-out pairs (``core.inference.evaluation.held_out_pairs``), at most
# this many of them, a seeded sample (``core.inference.analysis.cap_pairs``): MiniLM on a CPU then stays under a
# minute the first time, and the charts light in a browser.
VERDICT_CAPS = {"minilm": 2_000}  # model_type -> most pairs scored
VERDICT_CAP = 20_000  # the others'
VERDICT_SEED = 0


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
    """(B, B) s(v1_i, v2_j) of one batch under one model (``core.inference.inspection.batch_scores``)."""
    from core.inference.inspection import batch_scores as compute

    model, _ = get_model(choice)
    return compute(model, list(question1), list(question2))


# ---- verdict -----------------------------------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=256)
def pair_score(choice: str, stamp: float, question1: str, question2: str) -> float:
    """Cosine similarity of one typed pair."""
    model, _ = get_model(choice)
    return float(model.score_pairs([question1], [question2])[0])


@dataclass
class HeldOutScores:
    """A model's scores on the pairs the verdict page measures it on."""

    pairs: pd.DataFrame  # question1, question2, is_duplicate, and "seen in training" when it is known
    scores: np.ndarray  # (N,) cosine similarity of each pair
    description: str  # which pairs these are and how many (HeldOut.description, plus the cap)
    is_validation: bool  # exactly (a sample of) the pairs the model's training held out
    training_pairs: int | None  # how many pairs it trained on, when that is known

    @property
    def labels(self) -> np.ndarray:
        return self.pairs["is_duplicate"].to_numpy()


@st.cache_data(show_spinner="Scoring the held-out pairs (once per model and dataset)…", max_entries=16)
def held_out_scores(choice: str, stamp: float, key: str, _pairs: pd.DataFrame) -> HeldOutScores:
    """``core.inference.evaluation.held_out_pairs`` of the active dataset (``key`` is ``data_key(_pairs)``) under
    a model, capped for slow models, scored, and each pair's questions looked up in its training split."""
    from core.inference import analysis
    from core.inference.evaluation import held_out_pairs, pair_scores
    from core.text.pair_table import PairTable

    model, config = get_model(choice)
    cap = VERDICT_CAPS.get(config.get("model_type"), VERDICT_CAP)
    held = analysis.cap_pairs(held_out_pairs(config, _pairs), cap, seed=VERDICT_SEED)
    chosen = held.pairs[["question1", "question2", "is_duplicate"]].reset_index(drop=True)
    train = analysis.training_pairs(config, _pairs) if held.is_validation else None
    if train is not None:
        chosen[analysis.SEEN_COLUMN] = analysis.seen_in_training(train, chosen)
    scores = pair_scores(model, PairTable(chosen, model.tokenizer))
    return HeldOutScores(chosen, scores, held.description, held.is_validation,
                         None if train is None else len(train))


# ---- search ------------------------------------------------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=4)
def _index_slot(choice: str, stamp: float, key: str) -> dict:
    # The slot is cached, the index is built outside the cached function: a progress bar drawn
    # while building cannot live inside a cached function (Streamlit would replay it).
    return {"index": None, "lock": threading.Lock()}


def search_cache_dir(choice: str) -> Path | None:
    """Where a search index is saved: inside the saved model's folder, so it goes when the model
    goes; zero-shot MiniLM's, and a published model's (read-only, outside the workspace), go to the hidden
    ``.cache`` of the workspace's models folder."""
    workspace_models = Path(st.session_state.runs_root)
    if choice == ZERO_SHOT:
        return workspace_models / ".cache" / "minilm"
    if not Path(choice).resolve().is_relative_to(workspace_models.resolve()):
        return workspace_models / ".cache" / f"published-{hashlib.sha256(choice.encode()).hexdigest()[:16]}"
    return Path(choice)


def search_index(choice: str, key: str, texts: list[str], progress: Callable[[int, int], None] | None = None):
    """The ``core.inference.search.SearchIndex`` of ``texts`` (the dataset with ``data_key`` ``key``) under a model."""
    from core.inference.search import load_or_build

    slot = _index_slot(choice, model_stamp(choice), key)
    with slot["lock"]:  # two sessions asking at once build it once
        if slot["index"] is None:
            model, _ = get_model(choice)
            slot["index"] = load_or_build(model, texts, search_cache_dir(choice), progress=progress)
        return slot["index"]


@st.cache_data(show_spinner=False, max_entries=8)
def corpus(key: str, _pairs: pd.DataFrame) -> list[str]:
    """``core.inference.search.corpus_questions`` of the dataset whose ``data_key`` is ``key``."""
    from core.data import corpus_questions

    return corpus_questions(_pairs)
