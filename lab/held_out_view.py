"""The Data page's validation and test files: two more uploads, read with the active dataset's columns and
label map, kept in the workspace (``lab.session.set_held_out``) until the active dataset changes.

They sit behind a toggle, so the page shows one uploader until the user asks for more.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.data import DataError, MissingColumnsError
from lab.session import (
    HELD_OUT_KINDS,
    clear_held_out,
    held_out_pairs,
    load_upload,
    renewed_key,
    set_held_out,
    show_error,
)

TITLES = {"val": "Validation", "test": "Test"}
TOGGLE = "held_out_files_on"  # session key of the toggle that shows the two uploaders
_NOTES = "held_out_notes"  # session key: kind -> (uploader key, file id, error or None, warnings) of its last upload


def read_like_the_dataset(name: str, data: bytes) -> tuple[pd.DataFrame, object]:
    """An upload's pairs read with the active dataset's columns and label map; a file that lacks those
    column names is read by its own (the usual names and aliases), with the same label map."""
    report = st.session_state.data_report
    label_map = report.label_map
    try:
        return load_upload(name, data, dict(report.columns), label_map)
    except MissingColumnsError:
        return load_upload(name, data, None, label_map)


def _apply(kind: str) -> None:
    """The held-out uploader's on_change: store its pairs, or say why not and keep the ones stored before."""
    key = renewed_key(f"held_out_{kind}")
    uploaded = st.session_state.get(key)
    notes = st.session_state.setdefault(_NOTES, {})
    if uploaded is None:  # removed from the uploader: no such file any more
        set_held_out(kind, None, None)
        notes.pop(kind, None)
        return
    try:
        pairs, report = read_like_the_dataset(uploaded.name, uploaded.getvalue())
    except DataError as error:
        _, kept = held_out_pairs(kind)
        still = f" The previous {TITLES[kind].lower()} file ({kept}) is kept." if kept else ""
        problem = str(error) if uploaded.name in str(error) else f"{uploaded.name}: {error}"
        notes[kind] = (key, uploaded.file_id, f"{problem}.{still}", [])
        return
    set_held_out(kind, pairs, uploaded.name, uploaded.getvalue(), report)  # kept in the workspace
    notes[kind] = (key, uploaded.file_id, None, [f"{report.source}: {line}" for line in report.warnings])


def _turned() -> None:
    if not st.session_state.get(TOGGLE):  # turned off: the files are let go
        clear_held_out()
        st.session_state.pop(_NOTES, None)


def held_out_files() -> None:
    """The toggle, and under it one uploader per kind with what it holds: its pairs and their duplicate rate."""
    if TOGGLE not in st.session_state and any(held_out_pairs(kind)[0] is not None for kind in HELD_OUT_KINDS):
        st.session_state[TOGGLE] = True  # a new session of a workspace that kept them shows them
    st.toggle("Add validation and test files (optional)", key=TOGGLE, on_change=_turned,
              help="Files of pairs kept apart from the active dataset: training validates on the validation "
                   "file and reports the test file instead of splitting them off, and Compare and Verdict "
                   "measure on them (the test file first). Read with the same columns and label mapping as the "
                   "active dataset.")
    if not st.session_state.get(TOGGLE):
        return
    notes = st.session_state.get(_NOTES, {})
    for kind, column in zip(HELD_OUT_KINDS, st.columns(len(HELD_OUT_KINDS))):
        with column:
            key = renewed_key(f"held_out_{kind}")
            uploaded = st.file_uploader(f"{TITLES[kind]} pairs", type=["csv", "tsv", "txt", "gz"], key=key,
                                        on_change=_apply, args=(kind,))
            note = notes.get(kind)
            if note and uploaded is not None and note[:2] == (key, uploaded.file_id):
                if note[2]:
                    show_error(note[2])
                for warning in note[3]:
                    st.warning(warning)
            pairs, name = held_out_pairs(kind)
            if pairs is not None:
                st.caption(f"{TITLES[kind]}: **{len(pairs):,} pairs** from {name} "
                           f"({pairs['is_duplicate'].mean():.1%} duplicates)")
