"""The corpus a page works on (the active dataset's questions or an uploaded file's), its encoding with a progress
bar, and the questions ranked for a query. The Deduplicate and Label pages each have their own keys (``prefix``);
a file uploader forgets its file on a visit to another page, so the parsed upload is kept in the session.
"""
from __future__ import annotations

import io
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from lab import cached
from lab.session import DataError, show_error, upload_limit_bytes

ACTIVE, UPLOAD = "The active dataset's questions", "An uploaded file"
RANKED_COLUMNS = {"rank": st.column_config.NumberColumn(width="small"),
                  "question": st.column_config.TextColumn(width="large"),
                  "cosine": st.column_config.NumberColumn(format="%.4f", width="small")}
UPLOAD_HELP = ("A CSV/TSV with a question column (question, text, sentence, title or q), a pairs file, or plain "
               "text with one question per line")


@dataclass(frozen=True)
class Corpus:
    name: str  # the dataset's or the file's name, as the page shows it
    texts: list  # the questions
    key: str  # a fingerprint of the questions, for the caches ("pairs:..." or "upload:...")


@st.cache_data(show_spinner=False, max_entries=8)
def uploaded_questions(name: str, data: bytes):
    """(questions, report, key) of an uploaded file (``core.data.load_questions``); key fingerprints the
    questions for the other caches. Raises ``DataError`` for an unusable file."""
    from core.data import load_questions
    from core.inference.search import fingerprint

    buffer = io.BytesIO(data)
    buffer.name = name
    questions, report = load_questions(buffer, max_bytes=upload_limit_bytes())
    return questions, report, "upload:" + fingerprint(questions)


def pick_corpus(prefix: str) -> Corpus:
    """The radio ("<prefix>_source") and, for an upload, the uploader ("<prefix>_upload") with its captions;
    stops the page with a message when an upload is bad or missing."""
    state = st.session_state
    kept = f"{prefix}_kept_upload"  # session key: (name, questions, report, key) of the file last uploaded here
    source = st.radio("Questions", [ACTIVE, UPLOAD], horizontal=True, key=f"{prefix}_source", persist_state="session")
    if source == ACTIVE:
        key = cached.active_data_key(state.pairs)
        return Corpus(state.data_name, cached.corpus(key, state.pairs), "pairs:" + key)
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
    return Corpus(name, texts, key)


def encode_with_progress(build, text: str = "Encoding the questions"):
    """``build(progress)``'s result, with a progress bar while it encodes; a failure is shown as one error and
    stops the page. Used by the pages that encode their corpus once per model (Search, Map, Deduplicate, Label)."""
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
