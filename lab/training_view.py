"""Parts of the Train page: the device picker, the "Start from" picker, this session's runs (polled while one is
unfinished) and the saved models."""
from __future__ import annotations

import functools
import json
import math
import time
from typing import Callable

import pandas as pd
import streamlit as st

from core.data import DataError
from core.device import cuda_available
from core.export.model_card import augmented_line
from core.models import MODEL_LABELS, ZERO_SHOT
from core.saving import ModelLoadError, list_runs, read_config
from core.status import CANCELLED, DONE, FAILED, RUNNING, WAITING
from core.training.jobs import JobQueue, TrainingJob, earlier_runs
from core.training.presets import AUGMENTED_PRESET, AUTO_PRESET, PRESETS, AutoRecipe, auto_options
from core.training.specs import SIZE_OPTIONS, spec_from_options
from lab import figures, workspace_state
from lab.cached import uploaded_questions
from lab.loss_menu import loss_choice
from lab.navigation import COMPARE
from lab.runs_table import NUMBER_FORMATS, runs_table
from lab.session import ROOT, SAMPLE_NAME, held_out_pairs, model_choices, session_jobs, show_error, warn_not_models

METRIC_NAMES = {"roc_auc": "ROC AUC", "average_precision": "AP", "accuracy": "accuracy", "f1": "F1"}
KEEP_UNVALIDATED_LABEL = "Keep a run cancelled before its first validation"  # the Train page's checkbox
CUSTOM = "custom"  # the Train page's preset menu once a setting is changed by hand
SCRATCH = ""  # "Start from" (session key "init_model"): a new model, or MiniLM's pretrained weights
SCRATCH_LABEL = "Scratch / the pretrained model"
UNLABELLED = "unlabelled_questions"  # session key: (questions, report, file name, file id) of augmented's upload


def device_picker(persist_state: str) -> None:
    """The Device radio (key "device"): GPU only where PyTorch sees one, and a line saying what is there."""
    gpu = cuda_available()
    devices = ["auto", "cpu", "cuda"] if gpu else ["auto", "cpu"]
    if st.session_state.device not in devices:
        st.session_state.device = "auto"
    st.radio("Device", devices, key="device", horizontal=True, persist_state=persist_state,
             format_func={"auto": "Auto", "cpu": "CPU", "cuda": "GPU (CUDA)"}.get)
    st.caption(gpu_caption() if gpu else CPU_ONLY_CAPTION)


CPU_ONLY_CAPTION = ("CPU only (no CUDA device) — no CUDA GPU visible to PyTorch on this machine, so training runs "
                    "on the CPU.")


def gpu_caption() -> str:
    """"GPU: NVIDIA H100 80GB HBM3 · 78.1 GiB free of 79.1 GiB", for the first CUDA device (where "auto" trains)."""
    import torch  # loaded already: this is only called where CUDA was found

    free, total = torch.cuda.mem_get_info(0)
    count = torch.cuda.device_count()
    more = f" (and {count - 1} more)" if count > 1 else ""
    return f"GPU: {torch.cuda.get_device_name(0)}{more} · {free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB"


def preset_label(name: str, base: str | None = None) -> str:
    """The preset menu's line, "(GPU)" after a GPU preset's name; CUSTOM's names the ``base`` it changed."""
    if name == CUSTOM:
        return f"Custom settings (changed from {base})" if base else "Custom settings"
    preset = PRESETS[name]
    return f"{name}{' (GPU)' if preset.for_gpu else ''}: {preset.description}"


def start_family(folder: str) -> str | None:
    """The model family of a saved model folder; None for SCRATCH or a folder that is no longer a model."""
    if not folder:
        return None
    try:
        return read_config(folder)["model_type"]
    except ModelLoadError:
        return None


def start_from_picker(persist_state: str, on_change) -> None:
    """The "Start from" selectbox (key "init_model"): SCRATCH or a saved model to go on training."""
    saved = {folder: label for label, folder in model_choices().items() if folder != ZERO_SHOT}
    choices = {SCRATCH: SCRATCH_LABEL, **saved}
    if st.session_state.get("init_model", SCRATCH) not in choices:
        st.session_state.init_model = SCRATCH  # deleted since, or another models folder
    st.selectbox("Start from", list(choices), format_func=choices.get, key="init_model", on_change=on_change,
                 persist_state=persist_state,
                 help="Go on training a saved model: its weights, sizes and vocabulary are kept (the Model size and "
                      "Max length settings do not apply), and the Model follows its family.")


def size_key(model: str, field: str) -> str:
    return f"{model}.{field}"  # one widget per model and field: the LSTM's layers are not the transformer's


def model_size_inputs(model: str, persist_state: str, on_change) -> None:
    """The "Model size" widgets of ``model`` (keys ``size_key``) and a line on what its sizes mean."""
    st.markdown("**Model size**")
    sizes = SIZE_OPTIONS[model]
    for column, option in zip(st.columns(max(1, len(sizes))), sizes):
        common = dict(key=size_key(model, option.field), on_change=on_change, persist_state=persist_state,
                      help=option.help or None)
        if option.low is None:
            column.checkbox(option.label, **common)
        else:
            column.number_input(option.label, min_value=option.low, max_value=option.high, step=option.step, **common)
    if model == "dual-transformer":
        st.caption("Small defaults so a CPU trains in minutes; the seed's dual encoder uses d_model 512, 3 layers, 8 heads.")
    elif model == "minilm":
        st.caption("MiniLM keeps its pretrained architecture (6 layers, 384 dimensions); only the weights are fine-tuned.")
    elif model == "cross-encoder":
        st.caption("MiniLM's architecture reading both questions together, one logit out; its loss is binary "
                   "cross-entropy on every labelled pair, both labels (no vectors, so no loss on them).")


def unlabelled_questions_upload() -> None:
    """The augmented recipe's optional file of questions to draw silver pairs from (session key ``UNLABELLED``); one
    that cannot be read stops the page, so a run never starts on other questions than the user chose."""
    upload = st.file_uploader("Unlabelled questions (optional; one per line, or a CSV with a question column): "
                              "the teacher labels pairs of these; without a file, pairs of the training questions",
                              type=["csv", "tsv", "txt", "gz", "parquet"], key="unlabelled_upload")
    kept = st.session_state.get(UNLABELLED)
    if upload is None:
        st.session_state[UNLABELLED] = None
        return
    if kept is None or kept[3] != upload.file_id:  # read once per file, not on every rerun of the polled page
        st.session_state[UNLABELLED] = None
        try:
            kept = (*uploaded_questions(upload.name, upload.getvalue())[:2], upload.name, upload.file_id)
        except DataError as error:
            show_error(str(error))
            st.stop()
        st.session_state[UNLABELLED] = kept
    questions, report, name, _ = kept
    st.caption(f"{len(questions):,} questions of **{name}**" + (f"; {report.summary()}" if report.dropped else ""))


def validation_sentence() -> str:
    """What the run validates on: the Data page's validation file when one is active, else a share held out."""
    pairs, name = held_out_pairs("val")
    if pairs is not None:
        return (f"Your validation file **{name}** ({len(pairs):,} pairs) picks the best weights and calibrates the "
                "thresholds.")
    return "A share of the pairs is held out for validation: it picks the best weights and calibrates the thresholds."


@st.cache_data(show_spinner="Reading the training pairs for the auto recipe ...", max_entries=4)
def auto_recipe(pairs: pd.DataFrame, device: str, has_val_file: bool) -> AutoRecipe:
    """``core.training.presets.auto_options`` of a dataset, once per dataset (it tokenises a sample)."""
    return auto_options(pairs, device, has_val_file=has_val_file)


def recipe_context() -> tuple[str, bool]:
    """(device, whether a validation file is given): what the auto recipe reads besides the pairs."""
    return "cuda" if cuda_available() else "cpu", held_out_pairs("val")[0] is not None


def data_options(preset: str | None, pairs: pd.DataFrame) -> dict:
    """The options a preset reads off the data (the auto recipe's, augmented's too); {} for every other preset."""
    return auto_recipe(pairs, *recipe_context()).options if preset in (AUTO_PRESET, AUGMENTED_PRESET) else {}


def spec_for(preset: str | None, pairs: pd.DataFrame, options: dict):
    """The run of the page's ``options`` over ``preset`` (the auto recipe's included) and the Data page's files."""
    files = {"val_data_name": held_out_pairs("val")[1], "test_data_name": held_out_pairs("test")[1]}
    return spec_from_options(preset, **{**data_options(preset, pairs), **options, **files})


def training_job(spec, pairs: pd.DataFrame, runs_root: str, preset: str | None) -> TrainingJob:
    """A job for the queue, with the validation and test files of the Data page when the user added them."""
    kept = st.session_state.get(UNLABELLED) if preset == AUGMENTED_PRESET else None
    questions, _, questions_name, _ = kept or (None, None, "", None)
    return TrainingJob(spec, pairs, runs_root, preset=preset, val=held_out_pairs("val")[0],
                       test=held_out_pairs("test")[0], questions=questions, questions_name=questions_name)


def preset_widget_values(preset: str | None, pairs: pd.DataFrame) -> dict:
    """The Train page's widget values that ``preset`` sets (the auto recipe's for ``pairs``); settings
    without a widget travel with the preset's name."""
    spec = spec_from_options(preset, **data_options(preset, pairs))
    values = dict(model=spec.model, loss=loss_choice(spec.loss), epochs=spec.train.epochs,
                  batch_size=spec.train.batch_size, lr=spec.train.lr, margin=float(spec.loss.margin),
                  scale=float(spec.loss.scale), patience=spec.train.patience, max_length=spec.max_length,
                  val_fraction=spec.val_fraction, hard_negatives=spec.hard_negatives, mine_negatives=spec.mine_negatives,
                  implied_pairs=spec.implied_pairs, max_steps=spec.train.max_steps,
                  max_minutes=float(spec.train.max_minutes))
    values.update({size_key(spec.model, option.field): spec.model_options[option.field]
                   for option in SIZE_OPTIONS[spec.model]})
    return values


def fmt(value, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) and math.isfinite(value) else "n/a"


def progress_text(job: TrainingJob) -> str:
    """"Epoch 1/2 · step 25/100 · 27 pairs/s · about 3 min left", or what the run is doing instead ("Loading the
    pretrained encoder…"); a speed and a time left only once the run has measured them."""
    p = job.progress
    if not p.phase:
        return "Starting…"
    if not p.step and not p.epochs:  # before the first step: the stage alone, no "step 0/0"
        return f"{p.phase[0].upper()}{p.phase[1:]}…"
    where = f"Epoch {p.epoch}/{p.total_epochs} · step {p.step:,}/{p.total_steps:,}"
    if p.phase != "training":
        return f"{where} · {p.phase}"
    if not p.pairs_per_second:
        return f"{where} · measuring the speed"
    speed, left = f"{where} · {p.pairs_per_second:,.0f} pairs/s", p.seconds_left
    if left is None:
        return speed
    return speed + (" · under a minute left" if left < 60 else f" · about {math.ceil(left / 60):,} min left")


def waiting_text(queue: JobQueue, job: TrainingJob) -> str:
    """"Waiting — 1 run(s) ahead (at most 1 train at once) · 1st in line · expected to start in about 3 min"."""
    ahead = queue.position(job) - 1 + sum(other.status == RUNNING for other in queue.jobs.values())
    text = f"Waiting — {ahead} run(s) ahead (at most {queue.max_running} train at once)"
    estimate = queue.wait_estimate(job)  # core.training.jobs: from the time left of the runs training now
    if estimate is None:  # it started between the two reads
        return text + "."
    text += f" · place {estimate.place:,} in line"
    if estimate.seconds is None:
        return text + " · a start time once the run ahead has measured its speed."
    minutes = max(1, math.ceil(estimate.seconds / 60))
    if estimate.at_least:
        return text + f" · expected to start in {minutes:,} min or more (the runs ahead add their own time)."
    return text + (" · expected to start within a minute." if estimate.seconds < 60
                   else f" · expected to start in about {minutes:,} min.")


def show_progress(queue: JobQueue, job: TrainingJob, cancel_key: str) -> None:
    if job.status == WAITING:
        st.info(waiting_text(queue, job))
    else:
        st.progress(min(job.progress.fraction, 1.0), text=progress_text(job))
    requested = st.session_state.setdefault("cancel_requested", set())  # the Label page has no Train page state
    if job.id in requested:
        st.caption("Cancelling: the run stops within one step (or one validation batch).")
    else:
        st.button("Cancel", key=cancel_key, on_click=cancel_job, args=(queue, job, requested))


CANCEL_WAIT_S = 1.0  # Cancel waits this long at most for the run to stop, so that the page it redraws can say so


def cancel_job(queue: JobQueue, job: TrainingJob, requested: set) -> None:
    """Cancel's callback: a waiting run leaves the queue at once, a running one stops within a step; either is
    waited for (``CANCEL_WAIT_S`` at most) so the rerun this click starts shows it cancelled, not "Cancelling"."""
    job.cancel()
    requested.add(job.id)
    queue.wait(job, timeout=CANCEL_WAIT_S)


def show_outcome(job: TrainingJob) -> None:
    result = job.result
    folder = result.folder if result else None
    kept = result if folder else None  # a run that saved a model: its figures, its verdict, its recipe's line
    saved = f"saved as **{folder.name}** in this workspace" if folder else "nothing was saved"
    metrics = "".join(f" {name} ({part.get('n', 0):,} pairs): {figures_with_intervals(part)}."
                      for name, part in (("Validation", kept and kept.validation), ("Test", kept and kept.test)) if part)
    # Worse than chance or a baseline: said plainly, with advice for this data (sample-demo only on the sample).
    quality = kept.judged(bundled_sample=job.spec.data_name == SAMPLE_NAME) if kept else None
    judged = f" {quality.message}" if quality and quality.flagged else ""
    metrics += f" {quality.comparison}" if quality and quality.comparison and not judged else ""
    if job.status == DONE and judged:
        st.warning(f"Finished ({result.outcome.message}), but not a useful model: {saved}.{metrics}{judged}",
                   icon=":material/warning:")
    elif job.status == DONE:
        st.success(f"Finished ({result.outcome.message}): {saved}.{metrics}")
    if kept and augmented_line(kept.metadata or {}):  # what the augmented recipe did
        st.caption(augmented_line(kept.metadata))
    if job.choice is not None:  # auto: every candidate it measured, on the same validation pairs
        st.dataframe(pd.DataFrame(job.choice.rows()), hide_index=True,
                     column_config={"validation ROC AUC": st.column_config.NumberColumn(format="%.3f")})
    elif job.status == CANCELLED:
        st.warning(cancelled_sentence(job, saved) + metrics + judged)
    elif job.status == FAILED:
        kept = f" The best model so far was saved as {folder.name}." if folder else ""
        show_error(f"Training failed: {str(job.error).rstrip('.')}.{kept}")


def figures_with_intervals(metrics: dict) -> str:
    """"ROC AUC 0.871 (95 % 0.82–0.91) · accuracy ..." from a metrics dict with its bootstrap ``intervals``."""
    intervals = metrics.get("intervals") or {}
    parts = []
    for key, name in METRIC_NAMES.items():
        interval = intervals.get(key)
        shown = f" (95 % {fmt(interval[0])}–{fmt(interval[1])})" if interval else ""
        parts.append(f"{name} {fmt(metrics.get(key))}{shown}")
    return " · ".join(parts)


def cancelled_sentence(job: TrainingJob, saved: str) -> str:
    """One sentence: where the run stopped and what was kept."""
    if job.result is None:
        return "Cancelled before it started: nothing was trained or saved."
    p, best_epoch = job.progress, job.result.outcome.best_epoch
    where = f"Cancelled at step {p.step:,} of {p.total_steps:,}"
    if job.result.folder is None and best_epoch == 0:
        return (f"{where}, before the first validation: nothing was saved (tick “{KEEP_UNVALIDATED_LABEL}” "
                "under More settings to keep such a run).")
    kept = f"the model from epoch {best_epoch}" if best_epoch else "the model at that step"
    if best_epoch and job.spec.train.validate_every:  # validated inside epochs: the step says which weights
        kept = f"the model validated at step {job.result.outcome.best_step:,}"
    return f"{where}: {kept}, {saved}."


# Per preset, its measured (train seconds, validation ROC AUC) points (docs/BENCHMARKS.md): drawn under a run of that
# preset, so a user sees whether the run is on track.
REFERENCE_CURVES = ROOT / "assets" / "reference_curves.json"


@functools.cache
def _curves(path) -> dict:
    """The presets' measured curves, read once per path (the runs panel redraws every second)."""
    return json.loads(path.read_text(encoding="utf-8"))


def show_job(queue: JobQueue, job: TrainingJob, cancel_key: str) -> None:
    if not job.finished:
        show_progress(queue, job, cancel_key)
    else:
        show_outcome(job)
    p = job.progress
    losses, epochs, validations = list(p.losses), list(p.epochs), list(p.validations)  # copies: the thread appends
    if not losses:
        return
    loss_column, epochs_column = st.columns(2)
    loss_column.plotly_chart(figures.loss_curve(losses), width="stretch", key=f"loss_{job.id}")
    # the measured curve of the preset the run started from; none for custom settings or none measured
    reference = _curves(REFERENCE_CURVES).get(job.preset or "", {}).get("points", ())
    if validations or reference:  # is the run on track? its ROC AUC so far against the preset's, by training time
        loss_column.plotly_chart(figures.validation_curve_chart(validations, reference), width="stretch",
                                 key=f"curve_{job.id}")
    with epochs_column:
        if epochs:
            columns = ["epoch", "train_loss", *[key for key in METRIC_NAMES if key in epochs[0]]]
            table = pd.DataFrame(epochs)[columns].rename(columns={"train_loss": "train loss", **METRIC_NAMES})
            st.dataframe(table, hide_index=True, width="stretch", key=f"epochs_{job.id}")
            st.plotly_chart(figures.epoch_metrics_chart(epochs), width="stretch", key=f"epoch_chart_{job.id}")
        else:
            st.caption("Validation AUC and accuracy appear here after each epoch.")


def polled(jobs: Callable[[], list[TrainingJob]], draw: Callable[[list[TrainingJob]], None]) -> None:
    """``draw(jobs())``, redrawn every second while a job is unfinished; once the last one has ended (and ``draw``
    said so), the whole page again, so what it changed (the saved models, a learning curve) shows too."""
    polling = any(not job.finished for job in jobs())

    @st.fragment(run_every=1.0 if polling else None)
    def panel() -> None:
        current = jobs()
        draw(current)
        if polling and all(job.finished for job in current):
            st.rerun()

    panel()


def runs_panel(queue: JobQueue) -> None:
    """This session's runs (``polled``), then those a server restart ended."""
    polled(lambda: session_jobs(queue), lambda jobs: show_runs(queue, jobs))
    show_earlier_runs(str(st.session_state.workspace.models))


def show_earlier_runs(runs_root: str, shown: int = 10) -> None:
    """The workspace's runs no queue of this server holds, from their records: what a restart ended."""
    records = earlier_runs(runs_root)[:shown]
    if records:
        st.markdown("**Earlier runs of this workspace** (before the server restarted)")
    for record in records:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.created))
        st.markdown(f"- **{record.label}** ({when}) — {record.summary}")


def show_runs(queue: JobQueue, jobs: list[TrainingJob]) -> None:
    st.subheader("Training runs")
    if not jobs:
        st.caption("No run started in this session yet.")
        return
    newest_unfinished = next((job.id for job in jobs if not job.finished), None)
    for index, job in enumerate(jobs):
        cancel_key = "cancel" if job.id == newest_unfinished else f"cancel_{job.id}"
        if index == 0 or not job.finished:
            st.markdown(f"**{job.label}** — {job.status}")
            show_job(queue, job, cancel_key)
        else:
            with st.expander(f"{job.label} — {job.status}"):
                show_job(queue, job, cancel_key)


def saved_models(runs_root: str) -> None:
    """What the models folder holds, and the folders in it that are not usable models."""
    st.subheader("Saved models")
    runs, problems = list_runs(runs_root)
    if runs:
        st.dataframe(runs_table(runs, MODEL_LABELS), hide_index=True, width="stretch", column_config={
            column: st.column_config.NumberColumn(format=shown) for column, shown in NUMBER_FORMATS.items()})
        workspace_state.page_link(COMPARE, label="Compare them")
    else:
        st.caption("No saved model in this workspace yet.")
    warn_not_models(problems)
