"""The Label page's parts: the corpus encoded once, a round of ``ROUND_SIZE`` pairs asked one at a time, the answers
(each written to the ``LabelStore`` at once and read back on every run, so two tabs agree; an answer another tab
changed is said once), and the retrain, a ``TrainingJob`` whose held-out score joins the learning curve."""
from __future__ import annotations

import hashlib
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import streamlit as st

from core.data.limits import DataError, clip
from core.data.questions import pair_key, pair_keys
from core.model_names import ZERO_SHOT_LABEL
from core.saving.label_store import LabelStore, read_labels_csv
from core.status import DONE
from core.training import active_rounds
from core.training.active_rounds import MIN_TRUSTED_HELD_OUT, ROUND_SIZE, legacy_labels_path
from lab import workspace_state
from lab.cached import built_once, judged_threshold, model_stamp
from lab.session import ZERO_SHOT, get_model, job_queue, session_jobs, show_error, submit_job, upload_limit_bytes

SKIPPED = "label_skipped"  # session key: pair keys skipped in this session (never written)
ROUND = "label_round"  # session key: {"for": (model, stamp, corpus key), "pairs": [...]}
SCORED = "label_scored"  # session key: ids of the retrains already put on the learning curve (or not to be)
LABELLER = "label_session_id"  # session key: this session's ``labelled_by``, so Undo takes back only its answers
ANSWERED = "label_answered"  # session key: pair key -> (question1, question2, label) this session last gave
NOTICES = "label_notices"  # session key: (kind, sentence) to show once on the next run
RECENT_SHOWN = 5  # the last answers listed
WATCHED = 20  # this session's latest answers checked each run for a change made elsewhere
WORDS = {1: "Duplicate", 0: "Not duplicate"}


@st.cache_resource(show_spinner=False, max_entries=16)
def store(path: Path) -> LabelStore:
    """The ``LabelStore`` of a label database, one per server; every run reads what every tab wrote."""
    labels = LabelStore(path, legacy_csv=legacy_labels_path(path))
    labels.import_legacy()  # a write, once per server: reads never write
    return labels


def embedded_corpus(choice: str, key: str, texts: Sequence[str], progress: Callable[[int, int], None] | None = None):
    """The ``EmbeddedCorpus`` of ``texts`` (whose key is ``key``) under a model, encoded once."""
    from core.inference.candidates import embed_corpus

    return built_once("label", choice, key, lambda model: embed_corpus(model, list(texts), progress=progress))


def done_keys(labels: LabelStore, keys) -> set:
    """The pair keys of ``keys`` not to ask again: labelled (by anyone) or skipped in this session."""
    skipped = st.session_state.setdefault(SKIPPED, set())
    keys = [tuple(key) for key in keys]
    return labels.labelled_among(keys) | (skipped & set(keys))


def _done_count(labels: LabelStore, skipped: set) -> tuple[int, int]:
    """(labels, pairs labelled or skipped): counted, never listed."""
    given = len(labels)
    return given, given + len(skipped - labels.labelled_among(skipped))


def pending_pair(choice: str, key: str, config: dict, corpus, labels: LabelStore) -> dict | None:
    """The pair to ask now, from the round or a new one (the model or corpus changed); None when none is left."""
    state, skipped = st.session_state, st.session_state.setdefault(SKIPPED, set())
    # The Verdict page's threshold of this model and dataset (one threshold, shown as it is applied).
    threshold = judged_threshold(choice, config, state.get("pairs")).threshold
    where = (choice, model_stamp(choice), key, threshold)
    current = state.get(ROUND)
    for _ in range(2):  # the round kept, else a new one
        if current is not None and current["for"] == where:
            done = done_keys(labels, [pair["key"] for pair in current["pairs"]])
            waiting = [pair for pair in current["pairs"] if tuple(pair["key"]) not in done]
            if waiting:
                return waiting[0]
            if not current["pairs"] and current["done"] == _done_count(labels, skipped)[1]:
                return None  # the last round found nothing, and nothing was labelled, skipped or undone since
        given, done_count = _done_count(labels, skipped)
        chosen = active_rounds.next_round(corpus, threshold, skipped, ROUND_SIZE, seed=given + done_count,
                                          labels=labels)
        chosen["key"] = pair_keys(chosen["question1"], chosen["question2"])
        current = state[ROUND] = {"for": where, "pairs": chosen.to_dict("records"), "threshold": threshold,
                                  "done": done_count}
    return None


def round_progress(labels: LabelStore) -> tuple[int, int]:
    """(pairs of the current round answered or skipped, pairs in it); (0, 0) before the first round."""
    current = st.session_state.get(ROUND)
    if not current:
        return 0, 0
    done = done_keys(labels, [pair["key"] for pair in current["pairs"]])
    return sum(tuple(pair["key"]) in done for pair in current["pairs"]), len(current["pairs"])


def skip(pair: dict) -> None:
    st.session_state.setdefault(SKIPPED, set()).add(tuple(pair["key"]))


def undo(labels: LabelStore) -> None:
    """Take back this session's last answer; an open round asks that pair again."""
    label = labels.undo_last(labelled_by=labeller())
    if label is not None:
        _remember(label.question1, label.question2, None)


def can_undo(labels: LabelStore) -> bool:
    """Whether this session has an answer that is a pair's label, to take back."""
    return bool(labels.recent(1, labelled_by=labeller()))


def curve_points(labels_file: Path) -> list[dict]:
    return active_rounds.read_curve(labels_file) if active_rounds.curve_path(labels_file).exists() else []


def retrain_blocker(shares: active_rounds.ShareCounts) -> str | None:
    """Why Retrain now cannot run on labels of these counts (how many more of which class); None when it can."""
    if shares.training + shares.held_out == 0:
        return "Retrain needs labels: answer a few pairs, duplicates and non-duplicates."
    return active_rounds.retrain_problem(shares)


def _interval(point: dict, name: str) -> str:
    value, interval = point.get(name), point.get(f"{name}_interval")
    if value is None:
        return "n/a (one class held out)"
    return f"{value:.2f}" + (f" (95 % interval {interval[0]:.2f}–{interval[1]:.2f})" if interval else "")


def show_held_out_figures(points: list[dict]) -> None:
    """The newest model's held-out ROC AUC and accuracy with their intervals; a warning when too few to trust."""
    point = points[-1]
    held, model = int(point.get("held_out", 0)), str(point.get("model", ""))
    name = ZERO_SHOT_LABEL if model == ZERO_SHOT else Path(model).name  # a folder's name, never its server path
    st.markdown(f"**{name}** on {held:,} held-out labels: ROC AUC "
                f"{_interval(point, 'roc_auc')}, accuracy {_interval(point, 'accuracy')}.")
    if held < MIN_TRUSTED_HELD_OUT:
        st.warning(f"Only {held:,} labels are held out: figures on so few swing widely from one label to the next. "
                   f"Trust them from about {MIN_TRUSTED_HELD_OUT} held-out labels (a fifth of your labels are held "
                   "out).", icon=":material/warning:")


# ---- retraining ------------------------------------------------------------------------------------------------
def start_retrain(choice: str, labels_file: Path, labels: LabelStore) -> bool:
    """Submit a run of the loop's recipe from the current model on the labels' ``round_splits`` (the first time,
    zero-shot MiniLM is scored as the curve's first point); False, the reason shown, when it cannot start."""
    from core.training.jobs import TrainingJob
    from core.training.specs import SpecError

    state, frame = st.session_state, labels.pairs()
    problem = active_rounds.retrain_problem(frame)
    if problem:
        show_error(problem)
        return False
    try:
        spec = active_rounds.retrain_spec("" if choice == ZERO_SHOT else choice,
                                          {"data_name": f"labels {labels_file.name}"})
    except SpecError as error:
        show_error(f"Cannot retrain: {error}")
        return False
    if not curve_points(labels_file):
        with st.spinner("Scoring zero-shot MiniLM on the held-out labels (the curve's first point)…"):
            model, config = get_model(ZERO_SHOT)
            point = {**active_rounds.score_point(model, config, frame), "labels": 0, "trained_on": 0}  # none learned
            active_rounds.add_point(labels_file, point, ZERO_SHOT)
    job = TrainingJob(spec, active_rounds.round_splits(frame), state.runs_root)
    job.labels_file = str(labels_file)
    submit_job(job)
    return True


def record_finished_retrains() -> None:
    """Put each of this session's finished retrains on its labels file's learning curve, once."""
    scored = st.session_state.setdefault(SCORED, set())
    for job in retrains():
        if not job.finished or job.id in scored:
            continue
        scored.add(job.id)
        folder = job.result.folder if job.result is not None else None
        labels_file = Path(job.labels_file)
        if job.status != DONE or folder is None or any(point.get("model") == str(folder)
                                                       for point in curve_points(labels_file)):
            continue  # not a model, or on the curve already (another tab, or before a reload)
        try:
            model, config = get_model(str(folder))
            labels = pd.concat([job.pairs.train, job.pairs.val], ignore_index=True)  # those it was given
            active_rounds.add_point(labels_file, active_rounds.score_point(model, config, labels), str(folder))
        except Exception as error:  # noqa: BLE001 - the run is kept; only its point is missing
            show_error(f"Could not score the retrained model {Path(folder).name}: {error}")


def retrains() -> list:
    """The workspace's retrains from the Label page, oldest first."""
    if "core.training.jobs" not in sys.modules:  # no run started on this server: PyTorch stays unimported
        return []
    return [job for job in reversed(session_jobs(job_queue())) if job.labels_file is not None]


def retrain_status() -> None:
    """The newest retrain: its progress and Cancel while it is unfinished (``training_view.polled``), then its
    outcome; the page then runs again, for its curve point."""
    if not retrains():
        return
    from lab import training_view  # with the training modules, loaded once a retrain exists

    def draw(jobs: list) -> None:
        if jobs[-1].finished:
            training_view.show_outcome(jobs[-1])
        else:  # its place in the queue or its progress, and Cancel (a waiting retrain leaves the queue at once)
            training_view.show_progress(job_queue(), jobs[-1], cancel_key="label_cancel_retrain")

    training_view.polled(retrains, draw)


# ---- answers -------------------------------------------------------------------------------------------------
def workspace_labeller() -> str:
    """The workspace's part of ``labelled_by``: a digest of its id, never the id (which opens it)."""
    digest = hashlib.sha256(workspace_state.current_workspace().id.encode("utf-8")).hexdigest()[:8]
    return f"workspace-{digest}"


def labeller() -> str:
    """This session's ``labelled_by``: the workspace's part, then the session's."""
    return st.session_state.setdefault(LABELLER, f"{workspace_labeller()}/session-{uuid.uuid4().hex[:8]}")


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


def show_notices(labels: LabelStore) -> None:
    """What happened since the last run: answers another tab changed, messages, a failed import."""
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
        who = "you" if label.labelled_by.split("/")[0] == workspace_labeller() else "another session"  # any tab
        verdict.markdown(f"**{WORDS[label.is_duplicate]}**  \nby {who}")
        other = 1 - label.is_duplicate
        change.button(f"Make it {WORDS[other]}", key=f"label_change_{i}", width="stretch",
                      on_click=answer, args=(labels, label.question1, label.question2, other))


def transfer(labels: LabelStore, file_name: str) -> None:
    """Download the labels as a pairs CSV; add a pairs CSV's labels (the file's label wins, as a later answer)."""
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