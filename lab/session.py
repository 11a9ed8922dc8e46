"""The one page setup, run by app.py for every page: session state with guards, the active dataset, shared caches."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from core.data import DataError, LoadReport, load_pairs, pairs_fingerprint
from core.model_names import ZERO_SHOT, ZERO_SHOT_LABEL
from core.saving.user_files import UserFileError
from core.saving.workspaces import HELD_OUT_KINDS, WorkspaceError
from lab import workspace_state
from lab.navigation import PAGES
from lab.workspace_state import ACTIVE_MODEL, DATASET, ENTERED_THROUGH_APP

if TYPE_CHECKING:  # annotations only: the inference pages never import a training module
    from core.training.jobs import JobQueue, TrainingJob

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_PATH = ROOT / "assets" / "sample_pairs.csv"
SAMPLE_NAME = "bundled sample (assets/sample_pairs.csv)"


def max_concurrent_training() -> int:
    return int(os.environ.get("SIAMESE_LAB_MAX_TRAINING", "1"))


def upload_limit_bytes() -> int:
    """The upload limit (``server.maxUploadSize``, MB) in bytes: what an upload may hold as text, too, once
    decompressed (``core.data.limits``), so a small .gz cannot expand past what a plain upload may be."""
    return int(st.get_option("server.maxUploadSize")) * 1024 * 1024


# ---- caches ------------------------------------------------------------------------------------
@st.cache_data(show_spinner=False)
def load_sample() -> tuple[pd.DataFrame, LoadReport]:
    return load_pairs(SAMPLE_PATH)


@st.cache_data(show_spinner=False, max_entries=8)
def load_upload(name: str, data: bytes, columns: dict[str, str] | None = None,
                label_map: dict[str, int] | None = None) -> tuple[pd.DataFrame, LoadReport]:
    """An uploaded file's pairs; ``columns`` (role -> column name) when its header names are not the usual
    ones and ``label_map`` (value -> 1 or 0) when its labels are not 0/1 (``lab.column_picker``)."""
    import io

    buffer = io.BytesIO(data)
    buffer.name = name
    return load_pairs(buffer, columns=columns, max_bytes=upload_limit_bytes(), label_map=label_map)


@st.cache_resource(show_spinner=False, max_entries=6)
def _load_model(choice: str, stamp: float):
    from core.models import load_model

    return load_model(choice)


def get_model(choice: str):
    """(model, config) for a model choice: ``ZERO_SHOT`` or a saved folder path. Read-only, cached;
    a folder saved again (new config.json time) is loaded again."""
    config = Path(choice) / "config.json"
    stamp = config.stat().st_mtime if choice != ZERO_SHOT and config.exists() else 0.0
    return _load_model(choice, stamp)


@st.cache_resource(show_spinner=False)
def job_queue():
    from core.training.jobs import JobQueue

    return JobQueue(max_running=max_concurrent_training())


# ---- session -----------------------------------------------------------------------------------
def data_key(pairs: pd.DataFrame) -> str:
    """A dataset's fingerprint (``core.data.pairs_fingerprint``), for cache keys."""
    return pairs_fingerprint(pairs)


def init_state() -> None:
    """Guarded defaults: a rerun never resets what the user already chose. A new session starts from what its
    workspace kept (``lab.workspace_state``): its dataset and model. The models folder is the workspace's on
    every run: no page sets it."""
    state = st.session_state
    workspace = workspace_state.current_workspace()
    if "pairs" not in state:
        dataset = _kept_dataset()
        state.pairs, state.data_report, state.data_name = dataset or (*load_sample(), SAMPLE_NAME)
        if dataset is not None:  # the validation and test files belong to the dataset they were added to
            _restore_held_out()
        kept_model = workspace_state.saved(ACTIVE_MODEL)
        if isinstance(kept_model, dict) and isinstance(kept_model.get("choice"), str):
            state[ACTIVE_MODEL], state[ACTIVE_MODEL_PICKED] = kept_model["choice"], bool(kept_model.get("picked"))
    state.runs_root = str(workspace.models)  # the workspace's folder, never the session's: a forged value is undone
    state.setdefault("jobs", [])  # ids of this session's training jobs, newest last


def _kept_dataset() -> tuple[pd.DataFrame, LoadReport, str] | None:
    """The upload the workspace kept as its active dataset, read as it was read then; None for the sample, or
    when it cannot be read any more (said once, on the Data page)."""
    kept = workspace_state.saved(DATASET)
    if not isinstance(kept, dict) or "upload" not in kept:
        return None
    try:
        data = st.session_state.workspace.read_upload(str(kept["upload"]), upload_limit_bytes())
        pairs, report = load_upload(str(kept["file"]), data, kept.get("columns"), kept.get("label_map"))
    except (WorkspaceError, DataError, KeyError, TypeError) as error:
        st.session_state.data_upload_error = (None, f"The workspace's dataset could not be read again ({error}); "
                                                    "the bundled sample is active.")
        return None
    return pairs, report, f"{kept['file']} (upload)"


def set_dataset(pairs: pd.DataFrame, report: LoadReport, name: str, upload: tuple[str, bytes] | None = None) -> None:
    """Make ``pairs`` the active dataset, kept in the workspace: the bundled sample, or the ``upload`` (file name,
    bytes) they were read from. Validation and test files added for the previous one are let go."""
    st.session_state.pairs, st.session_state.data_report, st.session_state.data_name = pairs, report, name
    clear_held_out()
    kept = {"sample": True}
    if upload is not None:
        try:
            stored = st.session_state.workspace.store_upload(*upload)
        except (OSError, UserFileError):  # a full disk: active in this session, not kept for the next
            return
        kept = {"upload": stored, "file": upload[0], "columns": dict(report.columns), "label_map": report.label_map}
    workspace_state.keep({DATASET: kept})


_HELD_OUT = "held_out_files"  # session key: kind -> (pairs, file name) of the Data page's extra uploads
_HELD_OUT_CLEARED = "held_out_cleared"  # session key: how many times they were let go (their uploaders' keys)


def kept_held_out_key(kind: str) -> str:
    """The kept key of a held-out file: each kind its own, so two tabs adding one each keep both."""
    return f"{kind}_file"


def set_held_out(kind: str, pairs: pd.DataFrame | None, name: str | None, data: bytes | None = None,
                 report: LoadReport | None = None) -> None:
    """The user's validation ("val") or test ("test") pairs for the active dataset, from file ``name``; None lets
    that kind go. With the file's ``data`` and the ``report`` of how it was read, it is kept in the workspace
    like the training file, for a reload, a restart or another tab."""
    if kind not in HELD_OUT_KINDS:
        raise ValueError(f"kind must be one of {HELD_OUT_KINDS}, got {kind!r}")
    files = st.session_state.setdefault(_HELD_OUT, {})
    workspace = st.session_state.workspace
    if pairs is None:
        files.pop(kind, None)
        workspace_state.keep({kept_held_out_key(kind): None})
        workspace.remove_uploads(kind)
        return
    files[kind] = (pairs, name)
    if data is not None and report is not None:
        try:
            stored = workspace.store_upload(str(name), data, kind)
        except (OSError, UserFileError):  # a full disk: active in this session, not kept for the next
            return
        workspace_state.keep({kept_held_out_key(kind): {"upload": stored, "file": name, "columns": dict(report.columns),
                                                        "label_map": report.label_map}})


def _restore_held_out() -> None:
    """The validation and test files the workspace kept, read as they were read then; one that cannot be read
    any more is let go."""
    for kind in HELD_OUT_KINDS:
        kept = workspace_state.saved(kept_held_out_key(kind))
        if not isinstance(kept, dict):
            continue
        try:
            data = st.session_state.workspace.read_upload(str(kept["upload"]), upload_limit_bytes(), kind)
            pairs, _ = load_upload(str(kept["file"]), data, kept.get("columns"), kept.get("label_map"))
        except (WorkspaceError, DataError, KeyError, TypeError):
            continue
        st.session_state.setdefault(_HELD_OUT, {})[kind] = (pairs, str(kept["file"]))


def held_out_pairs(kind: str) -> tuple[pd.DataFrame | None, str | None]:
    """(pairs, file name) of this session's validation ("val") or test ("test") file, or (None, None)."""
    if kind not in HELD_OUT_KINDS:
        raise ValueError(f"kind must be one of {HELD_OUT_KINDS}, got {kind!r}")
    return st.session_state.get(_HELD_OUT, {}).get(kind, (None, None))


def clear_held_out() -> None:
    """Let both held-out files go, in the workspace too, and empty their uploaders (new widget keys:
    ``held_out_key``)."""
    st.session_state[_HELD_OUT_CLEARED] = st.session_state.get(_HELD_OUT_CLEARED, 0) + 1
    st.session_state[_HELD_OUT] = {}
    if any(workspace_state.saved(kept_held_out_key(kind)) for kind in HELD_OUT_KINDS):
        workspace_state.keep({kept_held_out_key(kind): None for kind in HELD_OUT_KINDS})
    for kind in HELD_OUT_KINDS:
        st.session_state.workspace.remove_uploads(kind)


def held_out_key(kind: str) -> str:
    """The Data page's uploader key for a held-out file; a new one after each ``clear_held_out``."""
    return f"held_out_{kind}_{st.session_state.get(_HELD_OUT_CLEARED, 0)}"


_UPLOADS_CLEARED = "uploads_cleared"  # session key: how many times the Data page's uploader was emptied


def upload_key() -> str:
    """The Data page's file_uploader key: "upload", then a new one after each ``clear_upload`` (Streamlit
    keeps a file in an uploader until the widget's key changes)."""
    cleared = st.session_state.get(_UPLOADS_CLEARED, 0)
    return f"upload_{cleared}" if cleared else "upload"


def clear_upload() -> None:
    """Empty the Data page's uploader (the bundled sample was chosen: the file shown there is no longer active)."""
    st.session_state[_UPLOADS_CLEARED] = st.session_state.get(_UPLOADS_CLEARED, 0) + 1


_DEEP_LINK = "deep_link_page"  # session key: the page a first visit asked for before app.py ran


def enter_through_app(page_file: str) -> None:
    """Every page's first statement. Streamlit treats a ``pages/`` folder beside the entry point as a legacy
    multipage app until some run reaches ``st.navigation``, so on a fresh server a first visit to /Train runs
    pages/2_Train.py alone, with no page setup. Such a run goes through app.py instead (which declares the
    navigation for the whole server), and app.py then opens the page that was asked for."""
    if not st.session_state.get(ENTERED_THROUGH_APP):
        st.session_state[_DEEP_LINK] = str(Path(page_file).resolve())
        st.switch_page(str(Path(__file__).resolve().parent.parent / "app.py"), query_params=dict(st.query_params))


def open_deep_link() -> None:
    """Called by app.py once the navigation is declared: marks the session as entered through app.py and
    opens the page a first visit asked for before (see ``enter_through_app``)."""
    st.session_state[ENTERED_THROUGH_APP] = True
    page = st.session_state.pop(_DEEP_LINK, None)
    if page is not None:
        st.switch_page(page, query_params=dict(st.query_params))  # the workspace's ws= travels with it


def setup_page(title: str, icon: str = "🧪") -> None:
    """What every page needs, done once per run by app.py for the page st.navigation picked: the page
    config (tab title "<title> · Siamese Lab", wide layout), the session-state defaults and the sidebar's
    dataset and models-folder captions."""
    st.set_page_config(page_title=f"{title} · Siamese Lab", page_icon=icon, layout="wide")
    init_state()
    workspace_state.notice()
    with st.sidebar:
        for lab_page in PAGES:  # the navigation (app.py hides Streamlit's own, whose links forget the workspace)
            workspace_state.page_link(lab_page)
        st.caption(f"Dataset: **{st.session_state.data_name}** ({len(st.session_state.pairs):,} pairs)")
        workspace_state.sidebar_note()


def model_choices() -> dict[str, str]:
    """label -> choice, zero-shot MiniLM first, then the workspace's saved models newest first, then the models
    the server's operator published (``SIAMESE_LAB_PUBLISHED``)."""
    from core.inference.run_quality import judge_run
    from core.saving import list_runs
    from core.status import CANCELLED, FAILED
    from core.training.runs_table import run_status

    runs, _ = list_runs(st.session_state.runs_root)
    published = workspace_state.published_folder()
    published_runs = list_runs(published)[0] if published is not None and published.is_dir() else []
    choices = {ZERO_SHOT_LABEL: ZERO_SHOT}
    for run in [*runs, *({**run, "published": True} for run in published_runs)]:
        metrics = run.get("metrics", {}).get("validation", {})
        auc = metrics.get("roc_auc") if isinstance(metrics, dict) else None
        status = run_status(run)  # a run that did not finish says so: "name (cancelled, val AUC 0.712)"
        notes = ["published"] if run.get("published") else []  # the operator's, read-only, in every workspace
        notes += [status] if status in (CANCELLED, FAILED) else []
        notes += [f"val AUC {auc:.3f}"] if isinstance(auc, float) else []
        calibration = run.get("calibration")  # a calibrated copy (python -m core calibrate): thresholds from a file
        notes += [f"calibrated on {calibration.get('data')}"] if isinstance(calibration, dict) else []
        quality = judge_run(run.get("metrics"))  # never the default, but still a choice, named for what it is
        notes += [quality.short] if quality.flagged else []
        label = run["name"] + (f" ({', '.join(notes)})" if notes else "")
        choices[label] = run["path"]
    return choices


ACTIVE_MODEL_PICKED = "active_model_picked"  # True once the user chose a model: it then stays until they choose again
DONE_STATUSES = ("done", "completed", "early_stopped")  # the last two: folders saved before core.status


def submit_job(job: TrainingJob) -> TrainingJob:
    """Queue a training job as the workspace's: its other tabs, and this one after a reload, follow it. A run is
    something the workspace keeps: its folder is made first, so the run's record outlives a server stop."""
    st.session_state.workspace.create()
    job_queue().submit(job)
    st.session_state.jobs.append(job.id)
    return job


def session_jobs(queue: JobQueue) -> list[TrainingJob]:
    """The workspace's jobs on this server (those saving into its models folder), newest first."""
    mine = str(st.session_state.workspace.models)
    return sorted((job for job in list(queue.jobs.values()) if str(job.runs_root) == mine),
                  key=lambda job: job.created, reverse=True)


def trained_here() -> set[Path]:
    """The folders the workspace's finished training runs saved (resolved), and the model it last followed
    as its default (kept across restarts, when the jobs are gone)."""
    kept = workspace_state.saved(ACTIVE_MODEL)
    folders = {Path(kept["choice"]).resolve()} if isinstance(kept, dict) and not kept.get("picked") \
        and kept.get("choice") not in (None, ZERO_SHOT) else set()
    if "core.training.jobs" not in sys.modules:  # no run started here: the training modules stay unimported
        return folders
    results = [job.result for job in session_jobs(job_queue()) if job.finished and job.result is not None]
    return folders | {Path(result.folder).resolve() for result in results if result.folder is not None}


def default_model() -> str:
    """The newest finished run that this session trained and that is better than chance and TF-IDF
    (``core.inference.run_quality``), or zero-shot MiniLM when there is none: another user's run is a
    choice, never this session's default."""
    mine = trained_here()
    if not mine:
        return ZERO_SHOT
    from core.inference.run_quality import judge_run
    from core.saving import list_runs

    runs, _ = list_runs(st.session_state.runs_root)  # newest first
    finished = [run for run in runs if Path(run["path"]).resolve() in mine
                and (run.get("training") or {}).get("status", "done") in DONE_STATUSES
                and not judge_run(run.get("metrics")).flagged]
    return finished[0]["path"] if finished else ZERO_SHOT


def model_picker(key: str | None = None, vectors: bool = True) -> str:
    """The model selectbox of every analysis page; returns the choice (``ZERO_SHOT`` or a folder path).

    One choice for all pages (``st.session_state[ACTIVE_MODEL]``): picking a model on one page picks
    it on every page. Until the user picks one, it follows ``default_model``: zero-shot MiniLM, or the
    newest finished run this session trained. ``key`` is ignored (pages from before the shared picker
    passed their own). A page that needs vectors (``vectors``) stops at a cross-encoder, saying so in one line.
    """
    state = st.session_state
    labels = {choice: label for label, choice in model_choices().items()}
    if not state.get(ACTIVE_MODEL_PICKED) or state.get(ACTIVE_MODEL) not in labels:
        state[ACTIVE_MODEL] = default_model()
        state[ACTIVE_MODEL_PICKED] = False
        _keep_active_model()
    st.selectbox("Model", list(labels), format_func=labels.get, key=ACTIVE_MODEL, persist_state="session",
                 on_change=_picked,
                 help="One model for every page: zero-shot MiniLM, or your newest finished run, until you "
                      "pick another.")
    from core.models.registry import scores_pairs_only

    if vectors and scores_pairs_only(state[ACTIVE_MODEL]):
        st.info("This model is a cross-encoder: it reads both questions together and has no vectors for this page. "
                "The Verdict and Compare pages take it; pick another model here.")
        st.stop()
    return state[ACTIVE_MODEL]


def _picked() -> None:
    st.session_state[ACTIVE_MODEL_PICKED] = True
    _keep_active_model()


def _keep_active_model() -> None:
    kept = {"choice": st.session_state[ACTIVE_MODEL], "picked": bool(st.session_state[ACTIVE_MODEL_PICKED])}
    if workspace_state.saved(ACTIVE_MODEL) is None and kept == {"choice": ZERO_SHOT, "picked": False}:
        return  # the default of a workspace that kept nothing: no folder is made for it
    if workspace_state.saved(ACTIVE_MODEL) != kept:
        workspace_state.keep({ACTIVE_MODEL: kept})


def show_error(message: str) -> None:
    st.error(message, icon=":material/error:")


NAMES_SHOWN = 3  # the not-models line names at most this many folders, then "and K more"


def _name_and_reason(problem: str) -> tuple[str, str]:
    name, _, reason = problem.partition(": ")  # core.saving.list_runs says "<folder>: <why>"
    return name, reason.rstrip(".")


def not_models_sentence(problems: list[str]) -> str:
    """One line for the folders of the models folder that are not models (``core.saving.list_runs``'
    problems): "2 folders in the models folder are not models: `a`, `b`." A single folder says why;
    past ``NAMES_SHOWN`` names the line ends "and K more"."""
    names = [f"`{_name_and_reason(problem)[0]}`" for problem in problems]
    if len(problems) == 1:
        reason = _name_and_reason(problems[0])[1]
        return f"1 folder in the models folder is not a model: {names[0]}" + (f" ({reason})." if reason else ".")
    more = f" and {len(names) - NAMES_SHOWN:,} more" if len(names) > NAMES_SHOWN else ""
    return f"{len(names):,} folders in the models folder are not models: {', '.join(names[:NAMES_SHOWN])}{more}."


def warn_not_models(problems: list[str]) -> None:
    """``not_models_sentence`` as one warning (nothing when every folder is a model); with several folders,
    each one's reason in an expander under it."""
    if not problems:
        return
    st.warning(not_models_sentence(problems))
    if len(problems) > 1:
        with st.expander("Why they are not models"):
            st.markdown("\n".join(f"- `{name}`: {reason}" for name, reason in map(_name_and_reason, problems)))


__all__ = ["DataError", "setup_page", "set_dataset", "get_model", "job_queue", "model_choices", "load_sample",
           "load_upload", "data_key", "show_error", "model_picker", "ZERO_SHOT", "SAMPLE_NAME", "upload_limit_bytes",
           "warn_not_models", "set_held_out", "held_out_pairs", "clear_held_out", "held_out_key", "HELD_OUT_KINDS"]
