"""The Data page's column picker: when an upload's header names no known column for a role (MRPC's
``#1 String``, ``#2 String``, ``Quality``), the user says which of its columns hold the first question,
the second and the label, and the file is loaded with that ``columns`` mapping (``core.data``'s own).

The choice is kept in the session per file name (``CHOICES``): the same file uploaded again loads with it
at once, while a file whose names are recognised is always read by its names.
"""
from __future__ import annotations

import streamlit as st

from core.data import ROLES, DataError, MissingColumnsError
from lab.session import load_upload, set_dataset, upload_key

ROLE_LABELS = {"question1": "First question", "question2": "Second question", "is_duplicate": "Label (1 = duplicate)"}
CHOICES = "column_choices"  # session key: file name -> {role: column name}
PENDING = "column_picker"  # session key: (file id, file name, header) of the upload awaiting a choice


def load_with_choice(name: str, data: bytes):
    """``load_upload`` by the header's names; when they are not recognised, with the choice this session
    made for a file of this name (if its columns are all there). Raises what ``load_upload`` raises."""
    try:
        return load_upload(name, data)
    except MissingColumnsError as error:
        choice = st.session_state.get(CHOICES, {}).get(name)
        if not choice or not set(choice.values()) <= set(error.header):
            raise
        return load_upload(name, data, choice)


def offer(file_id: str, name: str, error: MissingColumnsError) -> None:
    """Ask for the columns of this upload (the page shows ``picker``)."""
    st.session_state[PENDING] = (file_id, name, error.header)


def withdraw() -> None:
    st.session_state.pop(PENDING, None)


def picker(file_id: str) -> None:
    """Three selectboxes over the pending upload's columns and a button that loads it with them; nothing
    unless the file in the uploader is the one waiting."""
    pending = st.session_state.get(PENDING)
    if not pending or pending[0] != file_id:
        return
    _, name, header = pending
    options = list(dict.fromkeys(header))  # a repeated name is one choice: the reader takes its first column
    st.markdown(f"**Choose the columns of {name}**")
    columns = st.columns(len(ROLES))
    for position, (role, column) in enumerate(zip(ROLES, columns)):
        column.selectbox(ROLE_LABELS[role], options, index=min(position, len(options) - 1), key=_key(role))
    st.button("Load with these columns", key="load_with_columns", on_click=_load_picked, type="primary")


def _key(role: str) -> str:
    return f"column_for_{role}"


def _load_picked() -> None:
    """Load the waiting upload with the picked columns; on success it is the active dataset and the choice
    is remembered for the session, else the page shows why and the picker stays."""
    state = st.session_state
    uploaded = state.get(upload_key())
    pending = state.get(PENDING)
    if uploaded is None or not pending or pending[0] != uploaded.file_id:
        return
    choice = {role: state[_key(role)] for role in ROLES}
    previous = state.data_name
    try:
        pairs, report = load_upload(uploaded.name, uploaded.getvalue(), choice)
    except DataError as error:
        state.data_upload_error = (uploaded.file_id, f"{error}. The previous dataset ({previous}) is still active.")
        return
    set_dataset(pairs, report, f"{uploaded.name} (upload)")
    state.setdefault(CHOICES, {})[uploaded.name] = choice
    state.data_upload_error = None
    withdraw()
