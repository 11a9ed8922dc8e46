"""The session's workspace (``core.saving.workspaces``): found from the URL's ``ws`` query parameter (a new one,
put into the URL, on a first visit), and the choices a person makes kept in it, so that a reload, a second tab
or a server restart finds them again.

What is kept: the active dataset (its upload's bytes), the active model, thresholds and page settings
(``REMEMBERED``). A choice is written when it is made (a widget's ``on_change``: ``kept``), alone, in its own
transaction (``Workspace.save_state``): two tabs of one workspace each keep their latest change.
"""
from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import streamlit as st

from core.saving.workspaces import Workspace, is_workspace_id, new_workspace_id, open_workspace

ROOT = Path(__file__).resolve().parent.parent
QUERY_KEY = "ws"
ENTERED_THROUGH_APP = "entered_through_app"  # session key: app.py has run in this session (lab.session)
WORKSPACE = "workspace"  # session key: the Workspace of this session
SAVED = "workspace_saved"  # session key: the kept choices as this session last read or wrote them
DATASET = "dataset"  # kept key: the active dataset ({"sample": true} or the stored upload and how it was read)
ACTIVE_MODEL = "active_model"  # kept key and session key: the model every analysis page uses
# Widget keys whose values are kept: thresholds, and the settings of the pages people come back to.
REMEMBERED = (
    "threshold", "verdict_model",  # Verdict: the threshold, and the model it was calibrated for
    "dedup_threshold", "dedup_min_size",  # Deduplicate
    "sim_batch_size", "pick", "sim_seed", "sim_start", "sim_margin", "softmax_scale",  # Similarity matrix
    "map_colour", "map_k", "map_neighbours",  # Map
    "k",  # Search: number of results
)


def workspaces_root() -> Path:
    """Where workspaces live: ``SIAMESE_LAB_WORKSPACES``, else ``workspaces/`` beside app.py."""
    return Path(os.environ.get("SIAMESE_LAB_WORKSPACES", str(ROOT / "workspaces")))


def published_folder() -> Path | None:
    """A folder of models the server's operator publishes read-only to every workspace
    (``SIAMESE_LAB_PUBLISHED``), or None."""
    folder = os.environ.get("SIAMESE_LAB_PUBLISHED")
    return Path(folder) if folder else None


def current_workspace() -> Workspace:
    """This session's workspace: the URL's when it names a valid id, else a new one; the URL then names it
    (so a bookmark or a shared link opens it again)."""
    state = st.session_state
    workspace = state.get(WORKSPACE)
    if workspace is None:
        asked = st.query_params.get(QUERY_KEY)
        workspace = open_workspace(workspaces_root(), asked if is_workspace_id(asked) else new_workspace_id())
        state[WORKSPACE] = workspace
        state[SAVED] = workspace.load_state()
        for key in REMEMBERED:
            if key in state[SAVED] and key not in state:
                state[key] = state[SAVED][key]
    if st.query_params.get(QUERY_KEY) != workspace.id:
        st.query_params[QUERY_KEY] = workspace.id  # navigation may drop it; the address bar always shows it
    return workspace


def saved(key: str, default=None):
    """A kept choice as this session read it (``DATASET``, ``ACTIVE_MODEL`` or a ``REMEMBERED`` key)."""
    return st.session_state.get(SAVED, {}).get(key, default)


def keep(values: dict) -> None:
    """Remember choices made outside the remembered widgets (the active dataset, the active model, the threshold a
    new model starts at), at once."""
    _write(values)


def kept(key: str) -> dict:
    """A remembered widget's keyword arguments: ``st.slider(..., **kept("sim_margin"))`` (``REMEMBERED``)."""
    if key not in REMEMBERED:
        raise KeyError(f"{key!r} is not a remembered widget")
    return {"key": key, "on_change": keep_widget, "args": (key,)}


def keep_widget(key: str) -> None:
    """A remembered widget's ``on_change``: keep its new value (``REMEMBERED``)."""
    value = st.session_state.get(key)
    if key in REMEMBERED and _is_json(value):
        _write({key: value})


def _write(changed: dict) -> None:
    state = st.session_state
    workspace: Workspace | None = state.get(WORKSPACE)
    if workspace is None or not changed:
        return
    try:
        workspace.save_state(changed)  # the changed keys only: another tab's changes stay as it kept them
    except (OSError, sqlite3.Error, ValueError):  # a full disk costs coming back to these choices, never the page
        return
    state[SAVED] = {**state.get(SAVED, {}), **changed}


def _is_json(value) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def sidebar_note() -> None:
    """The sidebar's workspace lines: who can see it, and a way to start another."""
    workspace: Workspace = st.session_state[WORKSPACE]
    st.caption(f"Workspace `{workspace.id[:6]}…`: your data, models, labels and settings are kept here. Bookmark "
               "this page's address to come back; anyone with the address can open it.")
    st.button("Start a new workspace", key="new_workspace", on_click=start_new_workspace, icon=":material/add:",
              help="A new, empty workspace with its own address; this one stays at its own address.")


def start_new_workspace() -> None:
    """Leave this workspace for a new, empty one: the session forgets everything it held (it stays kept in the
    old workspace) except that it entered through app.py."""
    state = st.session_state
    for key in list(state.keys()):
        if key != ENTERED_THROUGH_APP:
            del state[key]
    st.query_params[QUERY_KEY] = new_workspace_id()
