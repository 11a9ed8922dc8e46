"""Streamlit caches of the analysis pages, and their corpus (the active dataset's questions or an upload's). Every key
holds the model choice and its folder's stamp (``model_stamp``), so a model saved again is scored again."""
from __future__ import annotations

import hashlib
import io
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import streamlit as st

from lab.session import (ZERO_SHOT, DataError, data_key, get_model, held_out_pairs, model_stamp, show_error,
                         upload_limit_bytes)

# The Verdict page measures a model on at most this many pairs it never trained on, a seeded sample
# (``core.inference.honest_pairs``' ``max_pairs``), so a slow model's first measure stays short.
VERDICT_CAPS = {"minilm": 2_000, "cross-encoder": 2_000}  # model_type -> most pairs scored
VERDICT_CAP = 20_000  # the others'
VERDICT_SEED = 0


def active_data_key(pairs: pd.DataFrame) -> str:
    """``data_key(pairs)``, hashed once per dataset object: slider moves must not rehash a large dataset."""
    memo = st.session_state.get("_analysis_data_key")
    if memo is None or memo[0] is not pairs:
        memo = (pairs, data_key(pairs))
        st.session_state["_analysis_data_key"] = memo
    return memo[1]


# ---- similarity matrix -------------------------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=64)
def batch_scores(choice: str, stamp: float, question1: tuple[str, ...], question2: tuple[str, ...]) -> np.ndarray:
    """(B, B) s(v1_i, v2_j) of one batch under one model (``core.inference.analysis.batch_scores``)."""
    from core.inference.analysis import batch_scores as compute

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
    scores: np.ndarray  # (N,) cosine similarity of each pair; empty when no pair is unseen by the model
    description: str  # which pairs these are and how many (or why there are none), with the cap
    source: str  # core.inference.honest_pairs' TEST, VALIDATION, HELD_OUT or DATASET
    training_pairs: int | None  # how many pairs it trained on, when that is known

    @property
    def labels(self) -> np.ndarray:
        return self.pairs["is_duplicate"].to_numpy()


@st.cache_data(show_spinner="Scoring the held-out pairs (once per model and dataset)…", max_entries=16)
def _held_out_scores(choice: str, stamp: float, key: str, files: tuple, _pairs: pd.DataFrame, _val, _test
                     ) -> HeldOutScores:
    from core.inference import analysis
    from core.inference.metrics import pair_scores
    from core.inference.honest_pairs import honest_pairs
    from core.text.pair_table import PairTable

    model, config = get_model(choice)
    cap = VERDICT_CAPS.get(config.get("model_type"), VERDICT_CAP)
    runs = [] if choice == ZERO_SHOT else [config]
    held = honest_pairs(runs, _pairs, val=_val, test=_test, max_pairs=cap, seed=VERDICT_SEED,
                        val_name=files[0][1], test_name=files[1][1])
    chosen = held.pairs[["question1", "question2", "is_duplicate"]].reset_index(drop=True)
    train = next(iter(held.training.values()), None)
    if train is not None:
        chosen[analysis.SEEN_COLUMN] = analysis.seen_in_training(train, chosen)
    scores = pair_scores(model, PairTable(chosen, model.tokenizer)) if len(chosen) else np.zeros(0)
    return HeldOutScores(chosen, scores, held.description, held.source, None if train is None else len(train))


def held_out_frames(test: bool = True) -> tuple:
    """(val pairs, test pairs, ((data_key, file name) of each)) of the workspace's held-out files, None
    where there is none (``test=False``: no test file); the keys go into cache keys, the frames into the calls."""
    (val, val_name), (test_pairs, test_name) = held_out_pairs("val"), (held_out_pairs("test") if test else (None, None))
    keys = tuple((None if frame is None else data_key(frame), name)
                 for frame, name in ((val, val_name), (test_pairs, test_name)))
    return val, test_pairs, keys


def held_out_scores(choice: str, pairs: pd.DataFrame, test: bool = True) -> HeldOutScores:
    """A model's scores on the pairs it never trained on (``core.inference.honest_pairs``): the test file,
    else the validation file, else its held-out pairs of the active dataset; capped for slow models. Without
    the ``test`` file: what a model without a threshold is calibrated on, so a test file stays unseen."""
    val, test_pairs, files = held_out_frames(test)
    return _held_out_scores(choice, model_stamp(choice), active_data_key(pairs), files, pairs, val, test_pairs)


THRESHOLD_DECIMALS = 3  # the Verdict slider's step is 0.001: the threshold shown is the threshold applied


def judged_threshold(choice: str, config: dict, pairs: pd.DataFrame | None):
    """The one threshold (a ``Calibrated``) a model judges pairs at, on the Verdict and Label pages alike: its own,
    else the best accuracy on its ``held_out_scores`` without the test file; rounded to the slider's step."""
    from dataclasses import replace

    from core.inference.calibration import pair_threshold
    from core.inference.honest_pairs import VALIDATION
    from core.inference.run_quality import finite_number

    found = pair_threshold(config)
    own = not config.get("zero_shot") and finite_number((config.get("thresholds") or {}).get("accuracy")) is not None
    if not own and pairs is not None and len(pairs):
        measured = held_out_scores(choice, pairs, test=False)
        found = pair_threshold(config, measured.labels, measured.scores)
        if found.pairs and measured.source == VALIDATION:
            found = replace(found, source=f"best accuracy on the {found.pairs:,} pairs of the validation file")
    return replace(found, threshold=round(min(max(float(found.threshold), -1.0), 1.0), THRESHOLD_DECIMALS))


# ---- built once per model and corpus -------------------------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=8)
def _slot(kind: str, choice: str, stamp: float, key: str) -> dict:
    # The slot is cached and its value built outside it: a progress bar drawn inside a cached function would be
    # replayed by Streamlit. Two sessions asking at once build it once (the lock).
    return {"value": None, "lock": threading.Lock()}


def built_once(kind: str, choice: str, key: str, build: Callable):
    """``build(model)`` once per server for a model choice and corpus ``key``, until the model is saved again."""
    slot = _slot(kind, choice, model_stamp(choice), key)
    with slot["lock"]:
        if slot["value"] is None:
            slot["value"] = build(get_model(choice)[0])
        return slot["value"]


def search_cache_dir(choice: str) -> Path | None:
    """Where a search index is saved: in the model's folder; zero-shot MiniLM's and a published model's
    in the hidden ``.cache`` of the workspace's models folder."""
    workspace_models = Path(st.session_state.runs_root)
    if choice == ZERO_SHOT:
        return workspace_models / ".cache" / "minilm"
    if not Path(choice).resolve().is_relative_to(workspace_models.resolve()):
        return workspace_models / ".cache" / f"published-{hashlib.sha256(choice.encode()).hexdigest()[:16]}"
    return Path(choice)


def search_index(choice: str, key: str, texts: list[str], progress: Callable[[int, int], None] | None = None):
    """The ``core.inference.search.SearchIndex`` of ``texts`` (the dataset with ``data_key`` ``key``) under a model."""
    from core.inference.search import load_or_build

    return built_once("search", choice, key,
                      lambda model: load_or_build(model, texts, search_cache_dir(choice), progress=progress))


@st.cache_data(show_spinner=False, max_entries=8)
def corpus(key: str, _pairs: pd.DataFrame) -> list[str]:
    """``core.data.corpus_questions`` of the dataset whose ``data_key`` is ``key``."""
    from core.data import corpus_questions

    return corpus_questions(_pairs)


def active_questions() -> tuple[str, list[str]]:
    """(data key, distinct questions) of the active dataset (never none: ``core.data`` refuses a file without pairs)."""
    key = active_data_key(st.session_state.pairs)
    return key, corpus(key, st.session_state.pairs)


# ---- the corpus of the Search, Map, Deduplicate and Label pages --------------------------------------------
ACTIVE, UPLOAD = "The active dataset's questions", "An uploaded file"
RANKED_COLUMNS = {"rank": st.column_config.NumberColumn(width="small"),
                  "question": st.column_config.TextColumn(width="large"),
                  "cosine": st.column_config.NumberColumn(format="%.4f", width="small")}
UPLOAD_HELP = ("A CSV/TSV with a question column (question, text, sentence, title or q), a pairs file, or plain "
               "text with one question per line")


@st.cache_data(show_spinner=False, max_entries=8)
def uploaded_questions(name: str, data: bytes):
    """(questions, report, key) of an uploaded file (``core.data.load_questions``); key fingerprints the questions."""
    from core.data import load_questions
    from core.inference.search import fingerprint

    buffer = io.BytesIO(data)
    buffer.name = name
    questions, report = load_questions(buffer, max_bytes=upload_limit_bytes())
    return questions, report, "upload:" + fingerprint(questions)


def pick_corpus(prefix: str) -> tuple[str, list[str], str]:
    """(name as the page shows it, questions, their key for the caches: "pairs:..." or "upload:...") from the radio
    ("<prefix>_source") and, for an upload, the uploader ("<prefix>_upload") with its captions; stops the page
    with a message when an upload is bad or missing."""
    state = st.session_state
    kept = f"{prefix}_kept_upload"  # session key: (name, questions, report, key) of the file last uploaded here
    source = st.radio("Questions", [ACTIVE, UPLOAD], horizontal=True, key=f"{prefix}_source", persist_state="session")
    if source == ACTIVE:
        key, texts = active_questions()
        return state.data_name, texts, "pairs:" + key
    upload = st.file_uploader(UPLOAD_HELP, key=f"{prefix}_upload", on_change=lambda: state.pop(kept, None))
    try:
        if upload is not None:
            state[kept] = (upload.name, *uploaded_questions(upload.name, upload.getvalue()))
    except DataError as error:
        show_error(str(error))
        st.stop()
    if state.get(kept) is None:
        st.info("Upload a file of questions, or use the active dataset's.")
        st.stop()
    name, texts, report, key = state[kept]
    if upload is None:
        st.caption(f"Questions of **{name}**, uploaded earlier; upload another file to replace it.")
    if report.dropped:
        st.caption(f"{report.source}: {report.summary()}")
    return name, texts, key


def encode_with_progress(build, text: str = "Encoding the questions"):
    """``build(progress)``'s result, with a progress bar while it encodes; a failure is one error and stops the page."""
    status = st.empty()

    def progress(done: int, total: int) -> None:
        status.progress(done / max(total, 1), text=f"{text}: {done:,} / {total:,}")

    try:
        return build(progress)
    except Exception as error:  # noqa: BLE001 - a corpus that cannot be encoded is shown, not raised
        show_error(f"Could not encode the questions: {error}")
        st.stop()
    finally:
        status.empty()


def show_ranked(questions, scores, key: str) -> None:
    """Questions closest to a query, best first, with their cosine (the Search and Map pages' results)."""
    table = pd.DataFrame({"rank": range(1, len(questions) + 1), "question": list(questions), "cosine": list(scores)})
    st.dataframe(table, hide_index=True, key=key, column_config=RANKED_COLUMNS)
