"""The Label page's answers: writing one, the last ones listed with a way to change each, what another tab changed,
and the labels downloaded or added as a pairs CSV.

Every answer goes to the label database at once (``core.saving.label_store.LabelStore``); the page reads it back
on every run, so two tabs show the same labels. When an answer replaces another tab's different answer, or
another tab changes or takes back one of this session's answers, the page says so once: nothing changes
without a word.
"""
from __future__ import annotations

import hashlib
import uuid

import streamlit as st

from core.data.limits import DataError, clip
from core.data.questions import pair_key
from core.saving.label_store import Label, LabelStore, read_labels_csv
from lab import workspace_state
from lab.session import show_error, upload_limit_bytes

LABELLER = "label_session_id"  # session key: this session's ``labelled_by``, so Undo takes back only its answers
ANSWERED = "label_answered"  # session key: pair key -> (question1, question2, label) this session last gave
NOTICES = "label_notices"  # session key: (kind, sentence) to show once on the next run
RECENT_SHOWN = 5  # the last answers listed
WATCHED = 20  # this session's latest answers checked each run for a change made elsewhere
WORDS = {1: "Duplicate", 0: "Not duplicate"}


def workspace_labeller() -> str:
    """The workspace's part of ``labelled_by``, the same after a reload or a restart: a digest of its id, never
    the id (the id opens the workspace; a downloaded file must not)."""
    digest = hashlib.sha256(workspace_state.current_workspace().id.encode("utf-8")).hexdigest()[:8]
    return f"workspace-{digest}"


def labeller() -> str:
    """This session's ``labelled_by``: the workspace's part, then the session's."""
    return st.session_state.setdefault(LABELLER, f"{workspace_labeller()}/session-{uuid.uuid4().hex[:8]}")


def is_mine(label: Label) -> bool:
    """Whether the label was given in this workspace: in this session, another tab, or before a reload."""
    return label.labelled_by.split("/")[0] == workspace_labeller()


def _notice(kind: str, text: str) -> None:
    st.session_state.setdefault(NOTICES, []).append((kind, text))


def _remember(question1: str, question2: str, is_duplicate: int | None) -> None:
    answered = st.session_state.setdefault(ANSWERED, {})
    key = pair_key(question1, question2)
    answered.pop(key, None)  # re-inserted last: the dict's order is the order of this session's answers
    if is_duplicate is not None:
        answered[key] = (question1, question2, is_duplicate)
    while len(answered) > WATCHED:
        answered.pop(next(iter(answered)))


def _pair_text(question1: str, question2: str) -> str:
    return f"“{clip(question1, 60)}” / “{clip(question2, 60)}”"


def answer(labels: LabelStore, question1: str, question2: str, is_duplicate: int) -> None:
    """A button's callback: the answer is written at once; a different answer it replaced is told."""
    try:
        previous = labels.add(question1, question2, is_duplicate, labelled_by=labeller())
    except DataError as error:
        _notice("error", f"Your answer was not saved: {error}")
        return
    _remember(question1, question2, is_duplicate)
    if previous is not None and previous.is_duplicate != is_duplicate and previous.labelled_by != labeller():
        _notice("info", f"{_pair_text(question1, question2)} had been answered {WORDS[previous.is_duplicate]} in "
                        f"another tab or session; your answer, {WORDS[is_duplicate]}, replaced it.")


def taken_back(label: Label | None) -> None:
    """Forget an answer this session took back (Undo), so it is not reported as changed elsewhere."""
    if label is not None:
        _remember(label.question1, label.question2, None)


def show_notices(labels: LabelStore) -> None:
    """What happened since the last run: this session's answers another tab changed or took back, the
    callbacks' messages, and an earlier labels file that could not be imported."""
    for key, (question1, question2, mine) in list(st.session_state.get(ANSWERED, {}).items()):
        current = labels.label_of(question1, question2)
        if current is None:
            _notice("info", f"Your answer to {_pair_text(question1, question2)} was taken back in another tab.")
        elif current.is_duplicate != mine:
            _notice("info", f"Another tab or session changed your answer to {_pair_text(question1, question2)}: "
                            f"it is now {WORDS[current.is_duplicate]}.")
        else:
            continue
        _remember(question1, question2, None)
    for kind, text in st.session_state.pop(NOTICES, []):
        if kind == "error":
            show_error(text)
        else:
            st.info(text, icon=":material/info:")
    if labels.import_problem:
        st.warning(labels.import_problem, icon=":material/warning:")


def show_recent(labels: LabelStore) -> None:
    """The last answers (anyone's), the latest first, each with its label and a button that changes it."""
    recent = labels.recent(RECENT_SHOWN)
    if not recent:
        return
    st.markdown("**Last answers**")
    for i, label in enumerate(recent):
        text, verdict, change = st.columns([6, 2, 2], vertical_alignment="center")
        text.text(f"{clip(label.question1, 80)}\n{clip(label.question2, 80)}")
        who = "you" if is_mine(label) else "another session"
        verdict.markdown(f"**{WORDS[label.is_duplicate]}**  \nby {who}")
        other = 1 - label.is_duplicate
        change.button(f"Make it {WORDS[other]}", key=f"label_change_{i}", width="stretch",
                      on_click=answer, args=(labels, label.question1, label.question2, other))


def transfer(labels: LabelStore, file_name: str) -> None:
    """Download the labels as a pairs CSV, and add a pairs CSV's labels (merged: a pair labelled differently in
    the file takes the file's label, as a later answer would)."""
    with st.expander("Download or add labels"):
        st.download_button("Download the labels (CSV)", data=labels.export_csv, file_name=file_name,
                           mime="text/csv", key="label_download", on_click="ignore", icon=":material/download:")
        st.caption("question1, question2, is_duplicate: the pairs file the Data and Train pages read; then who gave "
                   "each label (labelled_by: this workspace's answers start with "
                   f"{workspace_labeller()}) and when (labelled_at, UTC). Edit it and add it back here; each pair "
                   "keeps one label, the file's when it differs.")
        st.file_uploader("Add labels from a pairs CSV", type=["csv", "tsv", "txt", "gz"], key="label_upload",
                         on_change=_merge_upload, args=(labels,))


def _merge_upload(labels: LabelStore) -> None:
    """The uploader's on_change: merge a new file's labels (before the page runs, so it shows them)."""
    uploaded = st.session_state.get("label_upload")
    if uploaded is None:
        return
    try:
        counts = labels.merge(read_labels_csv(uploaded.getvalue(), max_bytes=upload_limit_bytes()),
                              labelled_by=labeller())
    except DataError as error:
        _notice("error", f"No label of that file was added: {error}")
    else:
        _notice("info", f"From that file: {counts.added:,} labels added, {counts.changed:,} changed, "
                        f"{counts.unchanged:,} already so.")
