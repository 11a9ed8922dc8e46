"""The Data page's parts: the active dataset (the sample or an upload), the column picker, and the validation and test
files (read with the dataset's columns and label map). An upload with unknown column names or label values, or no
header row, is not an error: the page asks what holds what and reads it as ``--columns``, labels and ``--names`` do."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.data import ROLES, UNREADABLE_LABEL, DataError, LabelValuesError, MissingColumnsError, NoHeaderRowError
from core.data.labels import guess_label, label_value, quoted
from core.data.limits import clip
from core.data.reading import suggested_names
from lab.session import (
    HELD_OUT_KINDS, SAMPLE_NAME, clear_held_out, held_out_pairs, load_sample, load_upload, renew_key, renewed_key,
    set_dataset, set_held_out, show_error,
)

ROLE_LABELS = {"question1": "First question", "question2": "Second question", "is_duplicate": "Label (1 = duplicate)"}
CHOICES = "column_choices"  # session key: file name -> {role: column name}
LABEL_CHOICES = "label_choices"  # session key: file name -> {label value: 1 or 0}
PENDING = "column_picker"  # session key: what the upload awaiting a choice needs (``offer``)
MEANINGS = {"duplicate": 1, "not duplicate": 0, "drop the rows": None}
UNANSWERED = "Choose what it means"  # the placeholder of a value whose meaning the guess could not tell
NOTICE = "notice"  # in PENDING: what a Load click left to do (a value unanswered), said until the next click
MAX_MAPPED_VALUES = 12  # label values offered a meaning; the rows of any other value are dropped
TITLES = {"val": "Validation", "test": "Test"}
TOGGLE = "held_out_files_on"  # session key of the toggle that shows the two uploaders
FIRST_ROW_IS_DATA = "first_row_is_data"  # session key of the picker's checkbox: the file has no header row
_NOTES = "held_out_notes"  # session key: kind -> (uploader key, file id, error or None, warnings) of its last upload


def use_sample() -> None:
    set_dataset(*load_sample(), SAMPLE_NAME)
    st.session_state.data_upload_error = None
    st.session_state.pop(PENDING, None)  # no upload awaits a choice any more
    renew_key("upload")  # the file shown there is no longer active


def apply_upload() -> None:
    """The uploader's on_change: make the file the active dataset, else keep the previous one and say why."""
    uploaded = st.session_state.get(renewed_key("upload"))
    if uploaded is None:  # the file was removed from the uploader: the active dataset stays as it is
        st.session_state.data_upload_error = None
        return
    st.session_state.pop(PENDING, None)  # no upload awaits a choice any more
    try:
        pairs, report = load_with_choice(uploaded.name, uploaded.getvalue())
    except DataError as error:
        if offer(uploaded.file_id, uploaded.name, error):  # columns or labels to choose: a prompt
            st.session_state.data_upload_error = None
        else:
            refuse(uploaded, problem_in_page_words(error))
    except Exception as error:  # anything unforeseen still reaches the user as one readable line
        refuse(uploaded, f"could not be read ({type(error).__name__}: {error})")
    else:
        set_dataset(pairs, report, f"{uploaded.name} (upload)", upload=(uploaded.name, uploaded.getvalue()))
        st.session_state.data_upload_error = None
        offer_labels(uploaded.file_id, uploaded.name, report)  # rows dropped for their label


def load_with_choice(name: str, data: bytes):
    """``load_upload`` by the usual names and labels, else with this session's choices for a file of this name."""
    columns = None
    for attempt in range(2):  # the header's names, else the columns chosen for this file
        try:
            return load_upload(name, data, columns)
        except MissingColumnsError as error:
            columns = st.session_state.get(CHOICES, {}).get(name)
            if attempt or not columns or not set(columns.values()) <= set(error.header):
                raise
        except LabelValuesError:
            label_map = st.session_state.get(LABEL_CHOICES, {}).get(name)
            if not label_map:
                raise
            return load_upload(name, data, columns, label_map)


def offer(file_id: str, name: str, error: DataError) -> bool:
    """Ask (``picker``) for the columns of a header with unknown names, or a meaning for each value of a label
    column of other values. True when it asks; False for any other error, a header of fewer columns than roles,
    and a label column of more values than a mapping takes (text, not labels: its columns are offered again)."""
    pending = {"file_id": file_id, "name": name, "header": getattr(error, "header", None),
               "no_header": isinstance(error, NoHeaderRowError)}
    if isinstance(error, MissingColumnsError) and len(set(error.header)) >= len(ROLES):
        st.session_state[PENDING] = pending
        return True
    if not isinstance(error, LabelValuesError):
        return False
    values = one_per_spelling(error.values)
    labels = len(values) <= MAX_MAPPED_VALUES
    st.session_state[PENDING] = {**pending, "columns": error.columns,
                                 **({"label_column": error.column, "values": values} if labels else {})}
    return labels


def offer_labels(file_id: str, name: str, report) -> None:
    """After a load that dropped rows for an unreadable label, offer a meaning for each of its label column's values."""
    values = one_per_spelling([value for value in report.label_values if value])
    if report.dropped.get(UNREADABLE_LABEL) and values:
        st.session_state[PENDING] = {"file_id": file_id, "name": name, "columns": dict(report.columns),
                                     "label_column": report.columns.get("is_duplicate"), "values": values,
                                     "label_map": report.label_map, "loaded": True}


def problem_in_page_words(error: DataError) -> str:
    """A refusal as the Data page says it: a label column of text names no command-line flag."""
    if not isinstance(error, LabelValuesError):
        return str(error)
    values = one_per_spelling(error.values)
    return (f'the label column "{clip(error.column)}" holds more than {MAX_MAPPED_VALUES} different values, such as '
            f"{quoted(values[:3])}: text, not labels; choose the column that holds the label")


def in_page_words(report, warning: str) -> str:
    """A load warning as the Data page says it: the unreadable labels without the command line's flag."""
    if warning != report.label_warning:
        return warning
    values = [value for value in report.label_values if value]
    rows = report.dropped.get(UNREADABLE_LABEL, 0)
    return (f"{rows:,} {'row was' if rows == 1 else 'rows were'} dropped: their label is neither 1 nor 0 "
            f"(the column holds {quoted(values[:5])}); to keep them, say what each value means in this page's "
            "label mapping.")


def one_per_spelling(values: list[str]) -> list[str]:
    """The first of each set of values equal but for case and spaces (a label map reads them alike)."""
    first: dict[str, str] = {}
    for value in values:
        first.setdefault(str(value).strip().lower(), value)
    return list(first.values())


def refuse(uploaded, problem: str) -> None:
    """Say on the Data page why ``uploaded`` was not loaded (naming the file once): the active dataset stays."""
    problem = problem if uploaded.name in problem else f"{uploaded.name}: {problem}"  # core.data's may name it
    st.session_state.data_upload_error = (
        uploaded.file_id, f"{problem}. The previous dataset ({st.session_state.data_name}) is still active.")


def picker(file_id: str) -> None:
    """Selectboxes over the waiting upload's columns and label values, and a button that loads it with them."""
    pending = st.session_state.get(PENDING)
    if not isinstance(pending, dict) or pending["file_id"] != file_id:
        return
    header, values = pending.get("header"), pending.get("values")
    st.info(prompt(pending, st.session_state.data_name), icon=":material/table_view:")
    if pending.get(NOTICE):
        st.warning(pending[NOTICE])
    if header:
        st.markdown(f"**Choose the columns of {pending['name']}**")
        names = suggested_names(header) if st.checkbox(
            "The first row is data (the file has no header row)", value=pending.get("no_header", False),
            key=FIRST_ROW_IS_DATA) else None
        # a repeated name is one choice: the reader takes its first column
        options = names or list(dict.fromkeys(header))
        preset = {role: role for role in ROLES} if names else pending.get("columns") or {}
        for position, (role, column) in enumerate(zip(ROLES, st.columns(len(ROLES)))):
            chosen = preset.get(role)
            index = options.index(chosen) if chosen in options else min(position, len(options) - 1)
            column.selectbox(ROLE_LABELS[role], options, index=index, key=_column_key(role, names),
                             format_func=(lambda name: f"{name}: {clip(header[names.index(name)])}") if names else str)
    if values:
        _label_mapping(pending)
    action = "columns" if not values else "label mapping" if not header else "columns and label mapping"
    st.button(f"Load with this {action}" if action == "label mapping" else f"Load with these {action}",
              key="load_with_columns", on_click=_load_picked, type="primary")


def _column_key(role: str, names: list[str] | None) -> str:
    """The selectbox of ``role``'s column: one pair of keys per reading of the first row, as their options differ."""
    return f"column_for_{role}" + ("_of_data" if names else "")


def prompt(pending: dict, active: str) -> str:
    """The picker's neutral prompt: what the page needs to read the file, and that nothing changed meanwhile."""
    name, values, column = pending["name"], pending.get("values"), clip(str(pending.get("label_column")))
    if pending.get("loaded"):
        return (f"{name} is loaded without the rows whose label is neither 1 nor 0: to keep them, say what each "
                f'value of its label column "{column}" means and load it again.')
    if values:
        need = (f'its label column "{column}" holds {quoted(values[:3])}{" …" if len(values) > 3 else ""} rather '
                "than 1 and 0: say what each value means (guessed where the word says it)")
    elif pending.get("no_header"):
        need = (f"it has no header row: its first row is data ({quoted(pending['header'][:4])}); choose which "
                "columns hold the first question, the second and the label")
    else:
        need = ("its columns are not named as this page expects (question1, question2, is_duplicate): choose "
                "which columns hold the first question, the second and the label")
    return f"To read {name}, {need}, then load it. Until then the active dataset stays {active}."


def _label_mapping(pending: dict) -> None:
    values, label_map = pending["values"], pending.get("label_map")
    st.markdown(f"**What do the values of the label column \"{pending['label_column']}\" mean?**")
    columns = st.columns(4)
    for number, value in enumerate(values[:MAX_MAPPED_VALUES]):
        known = label_value(value, label_map) if label_map is not None else -1
        guess = known if known >= 0 else guess_label(value)
        index = {1: 0, 0: 1}.get(guess)  # None: unanswered until the user says
        columns[number % 4].selectbox(f'"{clip(value)}"', list(MEANINGS), index=index, placeholder=UNANSWERED,
                                      key=_value_key(number, value))
    if len(values) > MAX_MAPPED_VALUES:
        st.caption(f"The rows of the {len(values) - MAX_MAPPED_VALUES:,} other values are dropped.")


def _value_key(number: int, value: str) -> str:
    return f"label_for_{number}_{value}"


def picked_label_map(pending: dict) -> dict[str, int] | None:
    """The label map the selectboxes give (value -> 1 or 0, dropped values left out); None without any."""
    values = pending.get("values")
    if not values:
        return None
    state = st.session_state
    meanings = {value: MEANINGS[state.get(_value_key(number, value)) or "drop the rows"]
                for number, value in enumerate(values[:MAX_MAPPED_VALUES])}
    return {value: label for value, label in meanings.items() if label is not None}


def mapping_left_to_do(pending: dict) -> str | None:
    """What the label mapping still needs before a load, in the page's words; None when it is complete."""
    values = pending.get("values") or []
    shown = values[:MAX_MAPPED_VALUES]
    state = st.session_state
    unanswered = [value for number, value in enumerate(shown) if state.get(_value_key(number, value)) is None]
    if unanswered:
        verb, their = ("means", "its") if len(unanswered) == 1 else ("mean", "their")
        return f"Say what {quoted(unanswered)} {verb} first (or drop {their} rows)."
    if shown and not picked_label_map(pending):
        return "Every value is set to drop its rows: give at least one value the meaning duplicate or not duplicate."
    return None


def _load_picked() -> None:
    """Load the waiting upload with the picked columns and label map; else the page says why, picker kept."""
    state = st.session_state
    uploaded = state.get(renewed_key("upload"))
    pending = state.get(PENDING)
    if uploaded is None or not isinstance(pending, dict) or pending["file_id"] != uploaded.file_id:
        return
    # a file without a header row is read by core.data's names for the columns of its first row
    names = suggested_names(pending["header"]) if pending.get("header") and state.get(FIRST_ROW_IS_DATA) else None
    columns = ({role: state[_column_key(role, names)] for role in ROLES} if pending.get("header")
               else pending.get("columns"))
    label_map = picked_label_map(pending)
    if columns and pending.get("label_column") != columns.get("is_duplicate"):
        label_map = None  # the values shown are another column's: read the new one as it is first
    else:
        pending[NOTICE] = mapping_left_to_do(pending)
        if pending[NOTICE]:
            return
    try:
        pairs, report = load_upload(uploaded.name, uploaded.getvalue(), columns, label_map, names)
    except DataError as error:
        if isinstance(error, LabelValuesError) and offer(uploaded.file_id, uploaded.name, error):
            state.data_upload_error = None  # the columns are fine; their labels are the next question
            return
        refuse(uploaded, problem_in_page_words(error))
        return
    set_dataset(pairs, report, f"{uploaded.name} (upload)", upload=(uploaded.name, uploaded.getvalue()))
    if pending.get("header") and not names:  # a header's names, found again in the same file's next upload
        state.setdefault(CHOICES, {})[uploaded.name] = columns
    if label_map:
        state.setdefault(LABEL_CHOICES, {})[uploaded.name] = label_map
    state.data_upload_error = None
    st.session_state.pop(PENDING, None)  # no upload awaits a choice any more


# ---- the validation and test files --------------------------------------------------------------------------------
def read_like_the_dataset(name: str, data: bytes) -> tuple[pd.DataFrame, object]:
    """An upload's pairs read with the active dataset's columns (else by its own names) and label map; for a
    dataset without a header row, by the file's own header first, else by the dataset's names."""
    report = st.session_state.data_report
    first, then = (((None, None), (dict(report.columns), report.names)) if report.names
                   else ((dict(report.columns), None), (None, None)))
    try:
        return load_upload(name, data, first[0], report.label_map, first[1])
    except MissingColumnsError:
        return load_upload(name, data, then[0], report.label_map, then[1])


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
