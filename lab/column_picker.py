"""The Data page's column picker: when an upload's header names no known column for a role (MRPC's
``#1 String``, ``#2 String``, ``Quality``), the user says which of its columns hold the first question,
the second and the label; when its label column holds other values than 0/1 (``PerfectMatch``,
``Relevant``, ``Irrelevant``), the user says what each value means (duplicate, not duplicate, or drop
the row). The file is then loaded with that ``columns`` mapping and label map (``core.data``'s own), so
the same refusals apply as on the command line.

Both choices are kept in the session per file name (``CHOICES``, ``LABEL_CHOICES``): the same file
uploaded again loads with them at once, while a file whose names and labels are recognised is always
read as it is.
"""
from __future__ import annotations

import streamlit as st

from core.data import ROLES, UNREADABLE_LABEL, DataError, LabelValuesError, MissingColumnsError
from core.data.labels import label_value
from core.data.limits import clip
from lab.session import load_upload, set_dataset, upload_key

ROLE_LABELS = {"question1": "First question", "question2": "Second question", "is_duplicate": "Label (1 = duplicate)"}
CHOICES = "column_choices"  # session key: file name -> {role: column name}
LABEL_CHOICES = "label_choices"  # session key: file name -> {label value: 1 or 0}
PENDING = "column_picker"  # session key: what the upload awaiting a choice needs (``offer``)
MEANINGS = {"duplicate": 1, "not duplicate": 0, "drop the rows": None}
MAX_MAPPED_VALUES = 12  # label values offered a meaning; the rows of any other value are dropped


def load_with_choice(name: str, data: bytes):
    """``load_upload`` by the header's names and the usual labels; when they are not recognised, with the
    choices this session made for a file of this name (if its columns are all there). Raises what
    ``load_upload`` raises."""
    columns = None
    try:
        return load_upload(name, data)
    except MissingColumnsError as error:
        columns = st.session_state.get(CHOICES, {}).get(name)
        if not columns or not set(columns.values()) <= set(error.header):
            raise
    except LabelValuesError as error:
        return _with_label_choice(name, data, None, error)
    try:
        return load_upload(name, data, columns)
    except LabelValuesError as error:
        return _with_label_choice(name, data, columns, error)


def _with_label_choice(name: str, data: bytes, columns: dict[str, str] | None, error: LabelValuesError):
    """The load with this session's label map for a file of this name; ``error`` without one."""
    label_map = st.session_state.get(LABEL_CHOICES, {}).get(name)
    if not label_map:
        raise error
    return load_upload(name, data, columns, label_map)


def offer(file_id: str, name: str, error: DataError) -> None:
    """Ask for what ``error`` says is missing (the page shows ``picker``): the columns of a header with
    unknown names (``MissingColumnsError``), a meaning for each value of a label column of other values
    (``LabelValuesError``, its columns preset). Nothing for any other error."""
    if isinstance(error, MissingColumnsError):
        st.session_state[PENDING] = {"file_id": file_id, "name": name, "header": error.header}
    elif isinstance(error, LabelValuesError):
        st.session_state[PENDING] = {"file_id": file_id, "name": name, "header": error.header,
                                     "columns": error.columns, "label_column": error.column, "values": error.values}


def offer_labels(file_id: str, name: str, report) -> None:
    """After a load that dropped rows for an unreadable label, offer a meaning for each of the label
    column's values, the columns kept as they were read."""
    values = [value for value in getattr(report, "label_values", {}) if value]
    if report.dropped.get(UNREADABLE_LABEL) and values:
        st.session_state[PENDING] = {"file_id": file_id, "name": name, "columns": dict(report.columns),
                                     "label_column": report.columns.get("is_duplicate"), "values": values,
                                     "label_map": getattr(report, "label_map", None)}


def withdraw() -> None:
    st.session_state.pop(PENDING, None)


def picker(file_id: str) -> None:
    """Selectboxes over the pending upload's columns and label values, and a button that loads it with
    them; nothing unless the file in the uploader is the one waiting."""
    pending = st.session_state.get(PENDING)
    if not isinstance(pending, dict) or pending["file_id"] != file_id:
        return
    header, values = pending.get("header"), pending.get("values")
    if header:
        options = list(dict.fromkeys(header))  # a repeated name is one choice: the reader takes its first column
        preset = pending.get("columns") or {}
        st.markdown(f"**Choose the columns of {pending['name']}**")
        for position, (role, column) in enumerate(zip(ROLES, st.columns(len(ROLES)))):
            chosen = preset.get(role)
            index = options.index(chosen) if chosen in options else min(position, len(options) - 1)
            column.selectbox(ROLE_LABELS[role], options, index=index, key=_key(role))
    if values:
        _label_mapping(pending)
    action = "columns" if not values else "label mapping" if not header else "columns and label mapping"
    st.button(f"Load with this {action}" if action == "label mapping" else f"Load with these {action}",
              key="load_with_columns", on_click=_load_picked, type="primary")


def _label_mapping(pending: dict) -> None:
    values, label_map = pending["values"], pending.get("label_map")
    st.markdown(f"**What do the values of the label column \"{pending['label_column']}\" mean?**")
    columns = st.columns(4)
    for number, value in enumerate(values[:MAX_MAPPED_VALUES]):
        known = label_value(value, label_map)
        index = {1: 0, 0: 1}.get(known, 2)  # the usual spellings start as they read; any other value dropped
        columns[number % 4].selectbox(f'"{clip(value)}"', list(MEANINGS), index=index, key=_value_key(number, value))
    if len(values) > MAX_MAPPED_VALUES:
        st.caption(f"The rows of the {len(values) - MAX_MAPPED_VALUES:,} other values are dropped.")


def _key(role: str) -> str:
    return f"column_for_{role}"


def _value_key(number: int, value: str) -> str:
    return f"label_for_{number}_{value}"


def picked_label_map(pending: dict) -> dict[str, int] | None:
    """The label map the selectboxes give (value -> 1 or 0, dropped values left out); None without any."""
    values = pending.get("values")
    if not values:
        return None
    state = st.session_state
    meanings = {value: MEANINGS[state.get(_value_key(number, value), "drop the rows")]
                for number, value in enumerate(values[:MAX_MAPPED_VALUES])}
    return {value: label for value, label in meanings.items() if label is not None}


def _load_picked() -> None:
    """Load the waiting upload with the picked columns and label map; on success it is the active dataset
    and the choices are remembered for the session, else the page shows why and the picker stays (with
    the values of a newly chosen label column when those are the trouble)."""
    state = st.session_state
    uploaded = state.get(upload_key())
    pending = state.get(PENDING)
    if uploaded is None or not isinstance(pending, dict) or pending["file_id"] != uploaded.file_id:
        return
    columns = {role: state[_key(role)] for role in ROLES} if pending.get("header") else pending.get("columns")
    label_map = picked_label_map(pending)
    if columns and pending.get("label_column") != columns.get("is_duplicate"):
        label_map = None  # the values shown are another column's: read the new one as it is first
    previous = state.data_name
    try:
        pairs, report = load_upload(uploaded.name, uploaded.getvalue(), columns, label_map)
    except DataError as error:
        if isinstance(error, LabelValuesError):
            offer(uploaded.file_id, uploaded.name, error)
        state.data_upload_error = (uploaded.file_id, f"{error}. The previous dataset ({previous}) is still active.")
        return
    set_dataset(pairs, report, f"{uploaded.name} (upload)", upload=(uploaded.name, uploaded.getvalue()))
    if pending.get("header"):
        state.setdefault(CHOICES, {})[uploaded.name] = columns
    if label_map:
        state.setdefault(LABEL_CHOICES, {})[uploaded.name] = label_map
    state.data_upload_error = None
    withdraw()
