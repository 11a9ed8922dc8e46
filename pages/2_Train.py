"""Train: pick a model, a loss and hyperparameters; the run trains on a background thread and is polled here."""
import math
from pathlib import Path

import pandas as pd
import streamlit as st

from lab.session import setup_page

setup_page("Train")

from core.device import cuda_available, describe_devices  # noqa: E402
from core.export import METRIC_COLUMNS, runs_table  # noqa: E402
from core.jobs import CANCELLED, DONE, FAILED, RUNNING, WAITING, TrainingJob  # noqa: E402
from core.models import MODEL_TYPES  # noqa: E402
from core.objectives import DEFAULT_MARGINS, LossConfig  # noqa: E402
from core.pipeline import DEFAULT_TRAINING, MODEL_LABELS, MODEL_NAMES, RunSpec, default_train_config  # noqa: E402
from core.presets import PRESETS  # noqa: E402
from core.saving import list_runs  # noqa: E402
from core.trainer import TrainConfig  # noqa: E402
from lab import charts  # noqa: E402
from lab.session import default_runs_root, job_queue, show_error  # noqa: E402

state = st.session_state
PERSIST = "session"  # every setting survives a visit to another page

# widget value -> (label, LossConfig fields)
LOSSES = {
    "triplet": ("Triplet loss with hard negatives (mean + closest negative)", dict(name="triplet")),
    "contrastive_squared_hinge": ("Contrastive (squared hinge, seed 004)",
                                  dict(name="contrastive", form="squared_hinge")),
    "contrastive_margin_squared": ("Contrastive (margin squared, seed 003)",
                                   dict(name="contrastive", form="margin_squared")),
    "softmax": ("In-batch softmax (cross-entropy over the batch)", dict(name="softmax")),
}
# Model sizes that train in seconds to minutes on a CPU. The dual encoder's seed sizes are 512 / 3 layers / 8 heads.
SIZE_DEFAULTS = {
    "embedding_dim": 128, "hidden_size": 128, "lstm_layers": 1, "bidirectional": False,  # Siamese LSTM
    "d_model": 128, "tf_layers": 2, "num_heads": 4, "ff_dim": 512, "projection_dim": 128,  # dual transformer
}
RUN_DEFAULTS = RunSpec()
TRAIN_DEFAULTS = TrainConfig()
METRIC_NAMES = {"roc_auc": "ROC AUC", "average_precision": "AP", "accuracy": "accuracy", "f1": "F1"}


def loss_name(choice: str) -> str:
    return LOSSES[choice][1]["name"]


def apply_model_defaults() -> None:
    """A new model choice brings its own epochs / batch size / learning rate."""
    defaults = DEFAULT_TRAINING[state.model]
    state.epochs, state.batch_size = int(defaults["epochs"]), int(defaults["batch_size"])
    state.lr = float(defaults["lr"])


def apply_loss_defaults() -> None:
    state.margin = float(DEFAULT_MARGINS[loss_name(state.loss)])


CUSTOM = "custom"


def loss_choice(loss: LossConfig) -> str:
    return "contrastive_" + loss.form if loss.name == "contrastive" else loss.name


def apply_preset() -> None:
    """Fill every widget from the chosen recipe; editing a widget afterwards still overrides it."""
    if state.preset == CUSTOM:
        state.preset_extras = {}
        return
    spec = PRESETS[state.preset].spec()
    state.model, state.loss = spec.model, loss_choice(spec.loss)
    state.epochs, state.batch_size, state.lr = spec.train.epochs, spec.train.batch_size, spec.train.lr
    state.margin, state.scale, state.patience = float(spec.loss.margin), float(spec.loss.scale), spec.train.patience
    state.max_length, state.val_fraction, state.hard_negatives = spec.max_length, spec.val_fraction, spec.hard_negatives
    options = spec.model_options
    for widget, field in (("embedding_dim", "embedding_dim"), ("hidden_size", "hidden_size"),
                          ("lstm_layers", "num_layers"), ("bidirectional", "bidirectional")):
        if field in options and spec.model == "lstm":
            state[widget] = options[field]
    # Settings without a widget travel with the preset.
    state.preset_extras = {"min_freq": spec.min_freq, "max_vocab": spec.max_vocab,
                           "dropout": options.get("dropout"), "max_val_pairs": spec.train.max_val_pairs,
                           "max_steps": spec.train.max_steps}


def tidy_runs_root() -> None:
    typed = state.runs_root.strip()
    state.runs_root = str(Path(typed).expanduser()) if typed else default_runs_root()


def init_widgets() -> None:
    """Defaults through session state (widgets get no value=), so callbacks can change them later."""
    state.setdefault("preset", CUSTOM)
    state.setdefault("preset_extras", {})
    state.setdefault("hard_negatives", False)
    state.setdefault("model", "lstm")
    state.setdefault("loss", "triplet")
    if "epochs" not in state:
        apply_model_defaults()
    state.setdefault("margin", float(DEFAULT_MARGINS["triplet"]))
    state.setdefault("scale", float(LossConfig(name="softmax").scale))
    state.setdefault("device", "auto")
    state.setdefault("max_length", RUN_DEFAULTS.max_length)
    state.setdefault("seed", TRAIN_DEFAULTS.seed)
    state.setdefault("patience", TRAIN_DEFAULTS.patience)
    state.setdefault("val_fraction", RUN_DEFAULTS.val_fraction)
    for key, value in SIZE_DEFAULTS.items():
        state.setdefault(key, value)
    state.setdefault("cancel_requested", set())


def model_options(model: str) -> dict:
    if model == "lstm":
        options = dict(embedding_dim=state.embedding_dim, hidden_size=state.hidden_size, num_layers=state.lstm_layers,
                       bidirectional=state.bidirectional)
        if state.preset_extras.get("dropout") is not None:
            options["dropout"] = state.preset_extras["dropout"]
        return options
    if model == "dual-transformer":
        return dict(d_model=state.d_model, num_layers=state.tf_layers, num_heads=state.num_heads, ff_dim=state.ff_dim,
                    projection_dim=state.projection_dim)
    return {}


def build_spec() -> RunSpec:
    """The run the widgets describe; ValueError / TypeError say what is wrong with it."""
    model = state.model
    name = loss_name(state.loss)
    loss = LossConfig(**LOSSES[state.loss][1], margin=state.margin if name != "softmax" else None, scale=state.scale)
    extras = state.preset_extras
    train = default_train_config(model, epochs=state.epochs, batch_size=state.batch_size, lr=state.lr,
                                 device=state.device, seed=state.seed, patience=state.patience,
                                 **{k: extras[k] for k in ("max_val_pairs", "max_steps") if k in extras})
    options = model_options(model)
    MODEL_TYPES[model].config_class(**options)  # checks the sizes now (e.g. heads must divide d_model), not in the thread
    vocabulary = {k: extras[k] for k in ("min_freq", "max_vocab") if k in extras}
    return RunSpec(model=model, loss=loss, train=train, model_options=options, max_length=state.max_length,
                   val_fraction=state.val_fraction, data_name=state.data_name,
                   hard_negatives=bool(state.hard_negatives) and name != "contrastive", **vocabulary)


def fmt(value, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) and math.isfinite(value) else "n/a"


init_widgets()
st.title("Train")
st.write(f"Training data: **{state.data_name}** ({len(state.pairs):,} pairs; change it on the Data page). "
         "A share of the pairs is held out for validation: it picks the best epoch and calibrates the thresholds.")
st.page_link("pages/1_Data.py", label="Change the dataset", icon=":material/table_view:")

# ---- the run's settings ---------------------------------------------------------------------------
st.selectbox("Preset", [CUSTOM, *PRESETS], key="preset", on_change=apply_preset, persist_state=PERSIST,
             format_func=lambda name: "Custom settings" if name == CUSTOM else f"{name}: {PRESETS[name].description}",
             help="A named recipe from docs/BENCHMARKS.md fills in every setting below; you can still change any.")
model_column, loss_column = st.columns(2)
with model_column:
    st.selectbox("Model", MODEL_NAMES, format_func=MODEL_LABELS.get, key="model", on_change=apply_model_defaults,
                 persist_state=PERSIST, help="Choosing a model resets epochs, batch size and learning rate to its defaults.")
with loss_column:
    st.selectbox("Loss", list(LOSSES), format_func=lambda choice: LOSSES[choice][0], key="loss",
                 on_change=apply_loss_defaults, persist_state=PERSIST)

epochs_column, batch_column, lr_column, margin_column = st.columns(4)
epochs_column.number_input("Epochs", min_value=1, max_value=200, step=1, key="epochs", persist_state=PERSIST)
batch_column.number_input("Batch size", min_value=2, max_value=4096, step=8, key="batch_size", persist_state=PERSIST,
                          help="In-batch losses compare each pair with the batch's other pairs: batch size - 1 negatives.")
lr_column.number_input("Learning rate", min_value=1e-7, max_value=1.0, step=1e-5, format="%.1e", key="lr",
                       persist_state=PERSIST)
if loss_name(state.loss) == "softmax":
    margin_column.number_input("Scale", min_value=1.0, max_value=100.0, step=1.0, key="scale", persist_state=PERSIST,
                               help="Multiplies the cosine similarities before the softmax.")
else:
    margin_column.number_input(
        "Margin", min_value=0.0, max_value=2.0, step=0.05, key="margin", persist_state=PERSIST,
        help="Triplet: on the cosine scale (-1..1). Contrastive: on the distance between unit vectors (0..2).")

if loss_name(state.loss) != "contrastive":
    st.checkbox("Hard negatives: also use questions the data labels as non-duplicates of a batch question",
                key="hard_negatives", persist_state=PERSIST,
                help="Quora's non-duplicates share most of their words with the question: the hardest negatives there are.")

st.markdown("**Model size**")
if state.model == "lstm":
    size_columns = st.columns(4)
    size_columns[0].number_input("Embedding size", min_value=2, max_value=1024, step=16, key="embedding_dim",
                                 persist_state=PERSIST)
    size_columns[1].number_input("Hidden size", min_value=2, max_value=1024, step=16, key="hidden_size",
                                 persist_state=PERSIST)
    size_columns[2].number_input("LSTM layers", min_value=1, max_value=4, step=1, key="lstm_layers", persist_state=PERSIST)
    size_columns[3].checkbox("Bidirectional", key="bidirectional", persist_state=PERSIST)
elif state.model == "dual-transformer":
    size_columns = st.columns(5)
    size_columns[0].number_input("d_model", min_value=8, max_value=1024, step=32, key="d_model", persist_state=PERSIST)
    size_columns[1].number_input("Layers", min_value=1, max_value=12, step=1, key="tf_layers", persist_state=PERSIST)
    size_columns[2].number_input("Heads", min_value=1, max_value=16, step=1, key="num_heads", persist_state=PERSIST,
                                 help="Must divide d_model.")
    size_columns[3].number_input("Feed-forward width", min_value=8, max_value=8192, step=64, key="ff_dim",
                                 persist_state=PERSIST)
    size_columns[4].number_input("Projection size", min_value=2, max_value=1024, step=16, key="projection_dim",
                                 persist_state=PERSIST)
    st.caption("Small defaults so a CPU trains in minutes; the seed's dual encoder uses d_model 512, 3 layers, 8 heads.")
else:
    st.caption("MiniLM keeps its pretrained architecture (6 layers, 384 dimensions); only the weights are fine-tuned. "
               "On a CPU expect about 20–27 pairs/s.")

length_column, device_column = st.columns(2)
length_column.number_input("Max length (tokens per question)", min_value=4, max_value=512, step=8, key="max_length",
                           persist_state=PERSIST)
with device_column:
    gpu = cuda_available()
    devices = ["auto", "cpu", "cuda"] if gpu else ["auto", "cpu"]
    if state.device not in devices:
        state.device = "auto"
    st.radio("Device", devices, key="device", horizontal=True, persist_state=PERSIST,
             format_func={"auto": "Auto", "cpu": "CPU", "cuda": "GPU (CUDA)"}.get)
    st.caption(describe_devices() if gpu else
               "GPU (CUDA): unavailable — no CUDA GPU visible to PyTorch on this machine, so training runs on the CPU.")

with st.expander("More settings"):
    more = st.columns(3)
    more[0].number_input("Seed", min_value=0, max_value=2**31 - 1, step=1, key="seed", persist_state=PERSIST)
    more[1].number_input("Early-stopping patience (epochs, 0 = off)", min_value=0, max_value=50, step=1, key="patience",
                         persist_state=PERSIST)
    more[2].number_input("Validation share", min_value=0.02, max_value=0.5, step=0.02, key="val_fraction",
                         persist_state=PERSIST)

st.text_input("Models folder", key="runs_root", on_change=tidy_runs_root, persist_state=PERSIST,
              help="Finished models are saved here, one folder each; every page lists the models in this folder.")

if st.button("Start", key="start", type="primary"):
    try:
        spec = build_spec()
    except (ValueError, TypeError) as error:
        show_error(f"Cannot start: {error}")
    else:
        job = TrainingJob(spec, state.pairs, state.runs_root,
                          label=f"{MODEL_LABELS[spec.model]} · {spec.loss.label()} · {spec.data_name}")
        job_queue().submit(job)
        state.jobs.append(job.id)

# ---- this session's runs, polled while one is unfinished ------------------------------------------
queue = job_queue()


def session_jobs() -> list[TrainingJob]:
    return [queue.jobs[job_id] for job_id in reversed(state.jobs) if job_id in queue.jobs]  # newest first


def show_progress(job: TrainingJob, cancel_key: str) -> None:
    if job.status == WAITING:
        ahead = queue.position(job) - 1 + sum(other.status == RUNNING for other in queue.jobs.values())
        st.info(f"Waiting — {ahead} run(s) ahead (at most {queue.max_running} train at once).")
    else:
        p = job.progress
        text = f"Epoch {p.epoch}/{job.spec.train.epochs} · step {p.step}/{p.total_steps} · {p.pairs_per_second:,.0f} pairs/s"
        st.progress(min(p.fraction, 1.0), text=text)
    if job.id in state.cancel_requested:
        st.caption("Cancelling: the run stops after the current step and keeps the best model so far.")
    else:
        st.button("Cancel", key=cancel_key, on_click=lambda: (job.cancel(), state.cancel_requested.add(job.id)))


def show_outcome(job: TrainingJob) -> None:
    result = job.result
    folder = result.folder if result else None
    saved = f"saved as **{folder.name}** in `{folder.parent}`" if folder else "nothing was saved"
    validation = result.validation if result and folder else {}
    metrics = (" Validation: " + " · ".join(f"{name} {fmt(validation.get(key))}" for key, name in METRIC_NAMES.items())
               + ".") if validation else ""
    if job.status == DONE:
        note = "" if result.outcome.status == "completed" else f" ({result.outcome.message})"
        st.success(f"Finished{note}: {saved}.{metrics}")
    elif job.status == CANCELLED:
        st.warning(f"Cancelled: {job.error or result.outcome.message}; {saved}.{metrics}")
    elif job.status == FAILED:
        kept = f" The best model so far was saved as {folder.name}." if folder else ""
        show_error(f"Training failed: {str(job.error).rstrip('.')}.{kept}")


def show_job(job: TrainingJob, cancel_key: str) -> None:
    if not job.finished:
        show_progress(job, cancel_key)
    else:
        show_outcome(job)
    p = job.progress
    losses, epochs = list(p.losses), list(p.epochs)  # copies: the training thread keeps appending
    if not losses:
        return
    loss_column, epochs_column = st.columns(2)
    loss_column.plotly_chart(charts.loss_curve(losses), width="stretch", key=f"loss_{job.id}")
    with epochs_column:
        if epochs:
            columns = ["epoch", "train_loss", *[key for key in METRIC_NAMES if key in epochs[0]]]
            table = pd.DataFrame(epochs)[columns].rename(columns={"train_loss": "train loss", **METRIC_NAMES})
            st.dataframe(table, hide_index=True, width="stretch", key=f"epochs_{job.id}")
            st.plotly_chart(charts.epoch_metrics_chart(epochs), width="stretch", key=f"epoch_chart_{job.id}")
        else:
            st.caption("Validation AUC and accuracy appear here after each epoch.")


polling = any(not job.finished for job in session_jobs())


@st.fragment(run_every=1.0 if polling else None)
def runs_panel() -> None:
    jobs = session_jobs()
    if polling and all(job.finished for job in jobs):
        st.rerun()  # the last run just ended: stop polling and refresh the saved models below
    st.subheader("Training runs")
    if not jobs:
        st.caption("No run started in this session yet.")
        return
    newest_unfinished = next((job.id for job in jobs if not job.finished), None)
    for index, job in enumerate(jobs):
        cancel_key = "cancel" if job.id == newest_unfinished else f"cancel_{job.id}"
        if index == 0 or not job.finished:
            st.markdown(f"**{job.label}** — {job.status}")
            show_job(job, cancel_key)
        else:
            with st.expander(f"{job.label} — {job.status}"):
                show_job(job, cancel_key)


runs_panel()

# ---- what the models folder holds -----------------------------------------------------------------
st.subheader("Saved models")
runs, problems = list_runs(state.runs_root)
if runs:
    table = runs_table(runs, MODEL_LABELS)
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={column: st.column_config.NumberColumn(format="%.3f") for column in METRIC_COLUMNS.values()})
    st.page_link("pages/6_Compare.py", label="Compare them", icon=":material/bar_chart:")
else:
    st.caption(f"No saved model in `{state.runs_root}` yet.")
for problem in problems:
    st.warning(f"Not loaded: {problem}")
