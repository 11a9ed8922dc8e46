"""The session's workspace (``core.saving.workspaces``), found from the URL's ``ws`` query parameter, and the choices
kept in it (``REMEMBERED``), each written alone in its own transaction, so two tabs each keep their latest change."""
from __future__ import annotations

import math
import os
import sqlite3
from dataclasses import dataclass
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
SAFE_INT = 2**53 - 1  # the browser's largest exact integer: a number_input with no max_value stops there


@dataclass(frozen=True)
class Takes:
    """What a remembered widget takes: a number of type ``kind`` in [``low``, ``high``], one of ``options``
    (``kind`` str), or a [model choice, threshold] marker (``kind`` list); ``default`` is its starting value."""
    kind: type
    low: float | None = None
    high: float | None = None
    options: tuple = ()
    default: object = None
    kept_with: str | None = None  # a key kept with every change of this one (the model its threshold belongs to)

    def clean(self, value):
        """``value`` as the widget takes it (an int where a float is taken becomes a float), or ``DROPPED``."""
        if self.kind is list:
            ok = (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
                  and _is_number(value[1]) and math.isfinite(value[1]))
            return value if ok else DROPPED
        if self.kind is str:
            return value if isinstance(value, str) and value in self.options else DROPPED
        if not _is_number(value) or (self.kind is int and not isinstance(value, int)) or not math.isfinite(value):
            return DROPPED
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            return DROPPED
        return self.kind(value)


DROPPED = object()  # Takes.clean's answer for a value its widget cannot take: that choice is not restored


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# The widgets whose values are kept, each with what it takes (the page's widget has the same bounds): thresholds,
# and the settings of the pages people come back to.
REMEMBERED = {
    "threshold": Takes(float, -1.0, 1.0, kept_with="verdict_model"),  # Verdict: the threshold, and the model
    "verdict_model": Takes(list),  # and calibrated threshold it started from
    "dedup_threshold": Takes(float, -1.0, 1.0, kept_with="dedup_threshold_for"),  # Deduplicate
    "dedup_threshold_for": Takes(list),
    "dedup_min_size": Takes(int, 2, 1000, default=2),
    "sim_batch_size": Takes(int, 4, 32, default=8),  # Similarity matrix
    "pick": Takes(str, options=("random", "by index"), default="random"),
    "sim_seed": Takes(int, 0, SAFE_INT, default=0),
    "sim_start": Takes(int, 0, SAFE_INT, default=0),  # its maximum depends on the dataset: the page checks it
    "sim_margin": Takes(float, 0.0, 1.0, default=0.25), "softmax_scale": Takes(float, 0.1, 100.0, default=1.0),
    "map_colour": Takes(str, options=("cluster", "label of its pairs")),  # Map
    "map_k": Takes(int, 2, 20, default=8), "map_neighbours": Takes(int, 1, 50, default=10),
    "k": Takes(int, 1, 50, default=10),  # Search: number of results
}

def workspaces_root() -> Path:
    """Where workspaces live: ``SIAMESE_LAB_WORKSPACES``, else ``workspaces/`` beside app.py."""
    return Path(os.environ.get("SIAMESE_LAB_WORKSPACES", str(ROOT / "workspaces")))


NOTICE = "workspace_notice"  # session key: why the workspace the address named is a new one
NO_WORKSPACE = "No workspace with this address; this is a new one. Nothing was kept at this address yet (or it " \
               "was removed): your work here is kept from your first change."
NOT_AN_ADDRESS = "No workspace with this address (`ws` is not a workspace id this lab gives); this is a new one, " \
                 "at the address now in the address bar."


def current_workspace() -> Workspace:
    """This session's workspace: the URL's when it names a valid id, else a new one, which the URL then names (so a
    bookmark opens it again); an address naming no kept workspace is said on the page (``notice``)."""
    state = st.session_state
    workspace = state.get(WORKSPACE)
    if workspace is None:
        asked = st.query_params.get(QUERY_KEY)
        known = is_workspace_id(asked)
        workspace = open_workspace(workspaces_root(), asked if known else new_workspace_id())
        if asked is not None and not workspace.exists():
            state[NOTICE] = NO_WORKSPACE if known else NOT_AN_ADDRESS
        workspace.mark_used()
        state[WORKSPACE] = workspace
        state[SAVED] = checked(workspace.load_state())
        for key in REMEMBERED:
            if key in state[SAVED] and key not in state:
                state[key] = state[SAVED][key]
    if st.query_params.get(QUERY_KEY) != workspace.id:
        st.query_params[QUERY_KEY] = workspace.id  # navigation may drop it; the address bar always shows it
    return workspace


def checked(kept_values: dict) -> dict:
    """``kept_values`` less the remembered values their widget cannot take (out of its range, of another type):
    a page then starts from its default instead of failing for this workspace."""
    cleaned = {key: REMEMBERED[key].clean(value) if key in REMEMBERED else value
               for key, value in kept_values.items()}
    return {key: value for key, value in cleaned.items() if value is not DROPPED}


def notice() -> None:
    """Say that the address named no kept workspace, until this one keeps something."""
    if NOTICE in st.session_state and not st.session_state[WORKSPACE].exists():
        st.info(st.session_state[NOTICE], icon=":material/info:")


def saved(key: str, default=None):
    """A kept choice as this session read it (``DATASET``, ``ACTIVE_MODEL`` or a ``REMEMBERED`` key)."""
    return st.session_state.get(SAVED, {}).get(key, default)


def kept(key: str) -> dict:
    """A remembered widget's keyword arguments: ``st.slider(..., **kept("sim_margin"))`` (``REMEMBERED``)."""
    if REMEMBERED[key].default is not None:  # set here, never also as value=: Streamlit warns when both are
        st.session_state.setdefault(key, REMEMBERED[key].default)
    return {"key": key, "on_change": keep_widget, "args": (key,)}


def start_slider_at(key: str, choice: str, start: float) -> None:
    """A new model, or a new starting threshold ``start``, sets the slider ``key`` to it; the user's value stays
    otherwise, in a new session too (kept with its [model, start] marker, ``REMEMBERED[key].kept_with``)."""
    state, marker_key = st.session_state, REMEMBERED[key].kept_with
    marker = [choice, float(start)]  # a list: the workspace keeps it as JSON
    if state.get(marker_key) != marker or key not in state:
        state[key], state[marker_key] = round(float(start), 3), marker


def keep_widget(key: str) -> None:
    """A remembered widget's ``on_change``: keep its new value, and its ``kept_with`` key's (``REMEMBERED``)."""
    companion = REMEMBERED[key].kept_with
    with_it = {companion: st.session_state[companion]} if companion and companion in st.session_state else {}
    keep({key: st.session_state.get(key), **with_it})


def keep(changed: dict) -> None:
    """Remember choices at once (a remembered widget's value, the active dataset, the active model)."""
    state = st.session_state
    workspace: Workspace | None = state.get(WORKSPACE)
    if workspace is None or not changed:
        return
    try:
        workspace.save_state(changed)  # the changed keys only: another tab's changes stay as it kept them
    except (OSError, sqlite3.Error, ValueError, TypeError):  # a full disk (or a value JSON cannot hold) costs
        return  # coming back to these choices, never the page
    state[SAVED] = {**state.get(SAVED, {}), **changed}


def page_link(lab_page, label: str | None = None) -> None:
    """``st.page_link`` to one of ``lab.navigation.PAGES`` carrying the workspace's address (``ws``): Streamlit drops
    the query parameters on a page change, and after a restart a session knows its workspace only from the link."""
    workspace = st.session_state.get(WORKSPACE)
    st.page_link(lab_page.path, label=label or lab_page.title, icon=lab_page.icon,
                 query_params={QUERY_KEY: workspace.id} if workspace is not None else None)


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
    state[WORKSPACE], state[SAVED] = open_workspace(workspaces_root(), new_workspace_id()), {}  # no notice: ours
    st.query_params[QUERY_KEY] = state[WORKSPACE].id
