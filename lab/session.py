"""The one page setup, run by app.py for every page: session state with guards, the active dataset, shared caches."""
from __future__ import annotations

import io
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


def upload_limit_bytes() -> int:
    """The upload limit (``server.maxUploadSize``) in bytes; also the cap on an upload's inflated text."""
    return int(st.get_option("server.maxUploadSize")) * 1024 * 1024


# ---- caches ------------------------------------------------------------------------------------
@st.cache_data(show_spinner=False)
def load_sample() -> tuple[pd.DataFrame, LoadReport]:
    return load_pairs(SAMPLE_PATH)


@st.cache_data(show_spinner=False, max_entries=8)
def load_upload(name: str, data: bytes, columns: dict[str, str] | None = None,
                label_map: dict[str, int] | None = None, names: list[str] | None = None) -> tuple[pd.DataFrame, LoadReport]:
    """An uploaded file's pairs, read with the Data page's ``columns``, ``label_map`` and ``names`` (a file without a
    header row) when it asked."""
    buffer = io.BytesIO(data)
    buffer.name = name
    return load_pairs(buffer, columns=columns, max_bytes=upload_limit_bytes(), label_map=label_map, names=names)


def model_stamp(choice: str) -> float:
    """config.json's mtime (0 for zero-shot MiniLM), in every cache key: a model saved again is read again."""
    try:
        return 0.0 if choice == ZERO_SHOT else (Path(choice) / "config.json").stat().st_mtime
    except OSError:
        return 0.0


@st.cache_resource(show_spinner=False, max_entries=6)
def _load_model(choice: str, stamp: float):
    from core.models import load_model

    return load_model(choice)


def get_model(choice: str):
    """(model, config) for a model choice: ``ZERO_SHOT`` or a saved folder path. Read-only, cached."""
    return _load_model(choice, model_stamp(choice))


def model_or_stop(choice: str):
    """``get_model(choice)``, or one error line and the page stops when the model cannot load."""
    try:
        with st.spinner("Loading the model…"):
            return get_model(choice)
    except Exception as error:  # noqa: BLE001 - a model that cannot load is shown, not raised
        show_error(f"Could not load the model: {error}")
        st.stop()


@st.cache_resource(show_spinner=False)
def job_queue():
    from core.training.jobs import JobQueue

    return JobQueue(max_running=int(os.environ.get("SIAMESE_LAB_MAX_TRAINING", "1")))


# ---- session -----------------------------------------------------------------------------------
data_key = pairs_fingerprint  # a dataset's fingerprint, for cache keys


def init_state() -> None:
    """Guarded defaults: a rerun keeps the user's choices; a new session starts from its workspace's."""
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


def _read_kept(kept: dict, kind: str = "train") -> tuple[pd.DataFrame, LoadReport]:
    """A kept upload (the active dataset's, or a held-out ``kind``'s) read as it was read then."""
    data = st.session_state.workspace.read_upload(str(kept["upload"]), upload_limit_bytes(), kind)
    return load_upload(str(kept["file"]), data, kept.get("columns"), kept.get("label_map"), kept.get("names"))


def _keep_upload(key: str, upload: tuple[str, bytes], report: LoadReport, kind: str = "train") -> None:
    """Store an upload in the workspace and keep how it was read under ``key`` (a full disk: not kept)."""
    try:
        stored = st.session_state.workspace.store_upload(*upload, kind)
    except (OSError, UserFileError):
        return
    workspace_state.keep({key: {"upload": stored, "file": upload[0], "columns": dict(report.columns),
                                "label_map": report.label_map, "names": report.names}})


def _kept_dataset() -> tuple[pd.DataFrame, LoadReport, str] | None:
    """The workspace's kept upload as the active dataset; None for the sample or when unreadable (said)."""
    kept = workspace_state.saved(DATASET)
    if not isinstance(kept, dict) or "upload" not in kept:
        return None
    try:
        return *_read_kept(kept), f"{kept['file']} (upload)"
    except (WorkspaceError, DataError, KeyError, TypeError) as error:
        st.session_state.data_upload_error = (None, f"The workspace's dataset could not be read again ({error}); "
                                                    "the bundled sample is active.")
        return None


def set_dataset(pairs: pd.DataFrame, report: LoadReport, name: str, upload: tuple[str, bytes] | None = None) -> None:
    """Make ``pairs`` the active dataset, kept in the workspace; the previous one's held-out files go."""
    st.session_state.pairs, st.session_state.data_report, st.session_state.data_name = pairs, report, name
    clear_held_out()
    if upload is None:
        workspace_state.keep({DATASET: {"sample": True}})
    else:
        _keep_upload(DATASET, upload, report)


_HELD_OUT = "held_out_files"  # session key: kind -> (pairs, file name) of the Data page's extra uploads
# Each kind is kept under its own key ("val_file", "test_file"), so two tabs adding one each keep both.


def set_held_out(kind: str, pairs: pd.DataFrame | None, name: str | None, data: bytes | None = None,
                 report: LoadReport | None = None) -> None:
    """Set (or with None let go) the validation or test pairs of file ``name``, kept when ``data`` is given."""
    files = st.session_state.setdefault(_HELD_OUT, {})
    if pairs is None:
        files.pop(kind, None)
        workspace_state.keep({f"{kind}_file": None})
        st.session_state.workspace.remove_uploads(kind)
        return
    files[kind] = (pairs, name)
    if data is not None and report is not None:
        _keep_upload(f"{kind}_file", (str(name), data), report, kind)


def _restore_held_out() -> None:
    """The validation and test files the workspace kept; one that cannot be read any more is let go."""
    for kind in HELD_OUT_KINDS:
        kept = workspace_state.saved(f"{kind}_file")
        if not isinstance(kept, dict):
            continue
        try:
            pairs, _ = _read_kept(kept, kind)
        except (WorkspaceError, DataError, KeyError, TypeError):
            continue
        st.session_state.setdefault(_HELD_OUT, {})[kind] = (pairs, str(kept["file"]))


def held_out_pairs(kind: str) -> tuple[pd.DataFrame | None, str | None]:
    """(pairs, file name) of this session's validation ("val") or test ("test") file, or (None, None)."""
    return st.session_state.get(_HELD_OUT, {}).get(kind, (None, None))


def clear_held_out() -> None:
    """Let both held-out files go, in the workspace too, and empty their uploaders."""
    st.session_state[_HELD_OUT] = {}
    if any(workspace_state.saved(f"{kind}_file") for kind in HELD_OUT_KINDS):
        workspace_state.keep({f"{kind}_file": None for kind in HELD_OUT_KINDS})
    for kind in HELD_OUT_KINDS:
        st.session_state.workspace.remove_uploads(kind)
        renew_key(f"held_out_{kind}")


def renewed_key(name: str) -> str:
    """An uploader's key, new after each ``renew_key(name)``: Streamlit keeps a file until the key changes."""
    renewed = st.session_state.get(f"{name}_renewed", 0)
    return f"{name}_{renewed}" if renewed else name


def renew_key(name: str) -> None:
    """Empty the uploader keyed by ``renewed_key(name)``."""
    st.session_state[f"{name}_renewed"] = st.session_state.get(f"{name}_renewed", 0) + 1


_DEEP_LINK = "deep_link_page"  # session key: the page a first visit asked for before app.py ran


def enter_through_app(page_file: str) -> None:
    """Every page's first statement: on a fresh server a first visit to /Train runs the page file alone
    (Streamlit's legacy multipage mode), so it goes through app.py, which then opens the page asked for."""
    if not st.session_state.get(ENTERED_THROUGH_APP):
        st.session_state[_DEEP_LINK] = str(Path(page_file).resolve())
        st.switch_page(str(Path(__file__).resolve().parent.parent / "app.py"), query_params=dict(st.query_params))


def open_deep_link() -> None:
    """app.py's, once the navigation is declared: the session entered through app.py; open the page it asked for."""
    st.session_state[ENTERED_THROUGH_APP] = True
    page = st.session_state.pop(_DEEP_LINK, None)
    if page is not None:
        st.switch_page(page, query_params=dict(st.query_params))  # the workspace's ws= travels with it


def setup_page(title: str, icon: str = "🧪") -> None:
    """What every page needs, run by app.py: the page config, the session-state defaults and the sidebar."""
    st.set_page_config(page_title=f"{title} · Siamese Lab", page_icon=icon, layout="wide")
    init_state()
    workspace_state.notice()
    with st.sidebar:
        for lab_page in PAGES:  # the navigation (app.py hides Streamlit's own, whose links forget the workspace)
            workspace_state.page_link(lab_page)
        st.caption(f"Dataset: **{st.session_state.data_name}** ({len(st.session_state.pairs):,} pairs)")
        workspace_state.sidebar_note()


def model_choices() -> dict[str, str]:
    """label -> choice: zero-shot MiniLM, the workspace's models newest first, then the published ones."""
    from core.inference.run_quality import judge_run
    from core.saving import list_runs
    from core.status import CANCELLED, FAILED
    from lab.runs_table import run_status

    runs, _ = list_runs(st.session_state.runs_root)
    published = os.environ.get("SIAMESE_LAB_PUBLISHED")  # the operator's models, read-only, in every workspace
    published_runs = list_runs(published)[0] if published and Path(published).is_dir() else []
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


def submit_job(job: TrainingJob) -> TrainingJob:
    """Queue a job as the workspace's (its folder made first, so the run's record outlives a server stop)."""
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
    """The folders this workspace's finished runs saved, and the model it last followed as its default."""
    kept = workspace_state.saved(ACTIVE_MODEL)
    folders = {Path(kept["choice"]).resolve()} if isinstance(kept, dict) and not kept.get("picked") \
        and kept.get("choice") not in (None, ZERO_SHOT) else set()
    if "core.training.jobs" not in sys.modules:  # no run started here: the training modules stay unimported
        return folders
    results = [job.result for job in session_jobs(job_queue()) if job.finished and job.result is not None]
    return folders | {Path(result.folder).resolve() for result in results if result.folder is not None}


def default_model() -> str:
    """The newest finished, unflagged run this workspace trained, else zero-shot MiniLM."""
    mine = trained_here()
    if not mine:
        return ZERO_SHOT
    from core.inference.run_quality import judge_run
    from core.saving import list_runs
    from core.status import DONE
    from lab.runs_table import run_status

    runs, _ = list_runs(st.session_state.runs_root)  # newest first
    finished = [run for run in runs if Path(run["path"]).resolve() in mine
                and run_status(run) in (DONE, "?")  # "?": a folder that does not record its status
                and not judge_run(run.get("metrics")).flagged]
    return finished[0]["path"] if finished else ZERO_SHOT


def model_picker(vectors: bool = True) -> str:
    """The one model selectbox of every analysis page, following ``default_model`` until the user picks;
    a page that needs ``vectors`` stops at a cross-encoder, saying so."""
    state = st.session_state
    labels = {choice: label for label, choice in model_choices().items()}
    if not state.get(ACTIVE_MODEL_PICKED) or state.get(ACTIVE_MODEL) not in labels:
        state[ACTIVE_MODEL] = default_model()
        _keep_active_model(picked=False)
    st.selectbox("Model", list(labels), format_func=labels.get, key=ACTIVE_MODEL, persist_state="session",
                 on_change=_keep_active_model, args=(True,),
                 help="One model for every page: zero-shot MiniLM, or your newest finished run, until you "
                      "pick another.")
    from core.models.registry import scores_pairs_only

    if vectors and scores_pairs_only(state[ACTIVE_MODEL]):
        st.info("This model is a cross-encoder: it reads both questions together and has no vectors for this page. "
                "The Verdict and Compare pages take it; pick another model here.")
        st.stop()
    return state[ACTIVE_MODEL]


def _keep_active_model(picked: bool) -> None:
    st.session_state[ACTIVE_MODEL_PICKED] = picked
    kept = {"choice": st.session_state[ACTIVE_MODEL], "picked": picked}
    if workspace_state.saved(ACTIVE_MODEL) is None and kept == {"choice": ZERO_SHOT, "picked": False}:
        return  # the default of a workspace that kept nothing: no folder is made for it
    if workspace_state.saved(ACTIVE_MODEL) != kept:
        workspace_state.keep({ACTIVE_MODEL: kept})


def show_error(message: str) -> None:
    st.error(message, icon=":material/error:")


NAMES_SHOWN = 3  # the not-models line names at most this many folders, then "and K more"


def not_models_sentence(problems: list[str]) -> str:
    """One line for the models folder's folders that are not models, naming at most ``NAMES_SHOWN``."""
    if len(problems) == 1:
        name, _, reason = problems[0].partition(": ")
        why = f" ({reason.rstrip('.')})" if reason else ""
        return f"1 folder in the models folder is not a model: `{name}`{why}."
    names = ", ".join(f"`{problem.partition(': ')[0]}`" for problem in problems[:NAMES_SHOWN])
    more = f" and {len(problems) - NAMES_SHOWN:,} more" if len(problems) > NAMES_SHOWN else ""
    return f"{len(problems):,} folders in the models folder are not models: {names}{more}."


def warn_not_models(problems: list[str]) -> None:
    """``not_models_sentence`` as one warning; with several folders, each one's reason in an expander under it."""
    if problems:
        st.warning(not_models_sentence(problems))
    if len(problems) > 1:
        with st.expander("Why they are not models"):
            st.markdown("\n".join(f"- `{name}`: {reason.rstrip('.')}"
                                   for name, _, reason in (problem.partition(": ") for problem in problems)))

