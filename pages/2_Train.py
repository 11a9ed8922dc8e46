"""Train: pick a model, a loss and hyperparameters; the run trains on a background thread and is polled here.
The page only maps widgets to ``core.training.specs`` options, whose defaults, presets and checks apply."""
import streamlit as st

from core.device import cuda_available
from core.model_names import CROSS_ENCODER, MODEL_LABELS, MODEL_NAMES
from core.training.objectives import DEFAULT_MARGINS, LossConfig
from core.training.presets import PRESETS, default_preset
from core.training.specs import SIZE_OPTIONS, TRAINING_DEFAULTS, RunSpec, SpecError, size_defaults
from lab import training_view, workspace_state
from lab.loss_menu import LOSS_CHOICES
from lab.navigation import DATA
from lab.session import SAMPLE_NAME, enter_through_app, job_queue, session_jobs, show_error, submit_job

enter_through_app(__file__)

state = st.session_state
PERSIST = "session"  # every setting survives a visit to another page
CUSTOM = training_view.CUSTOM
DEFAULTS = RunSpec()
SCALE_LOSSES = ("softmax", "cosent")  # their one setting here is the scale; the others' is the margin
# What an option is called on this page, for errors from core.training.specs.
OPTION_LABELS = {"batch_size": "Batch size", "lr": "Learning rate", "max_length": "Max length",
                 "val_fraction": "Validation share", "model_options": "Model size", "epochs": "Epochs",
                 "max_steps": "Max steps", "max_minutes": "Time budget", "init_model": "Start from"}


def chosen_loss() -> str:
    return "bce" if state.model == CROSS_ENCODER else LOSS_CHOICES[state.loss].options["loss"]  # the menu's, or its own


def apply_model_defaults() -> None:
    """A new model choice brings its own epochs / batch size / learning rate / patience."""
    for option, value in TRAINING_DEFAULTS[state.model].items():
        state[option] = value
    if training_view.start_family(state.init_model) not in (None, state.model):
        state.init_model = training_view.SCRATCH  # a saved model goes on training in its own family only


def apply_start_family() -> None:
    """Starting from a saved model trains its family: the Model menu follows it."""
    family = training_view.start_family(state.init_model)
    if family and family != state.model:
        state.model = family
        apply_model_defaults()


def apply_loss_defaults() -> None:
    state.margin = float(DEFAULT_MARGINS[chosen_loss()])


def apply_preset() -> None:
    """Fill every widget from the chosen recipe; editing a widget afterwards still overrides it."""
    if state.preset != CUSTOM:
        state.preset_base = state.preset  # the recipe whose hidden settings a run takes, changed by hand or not
        state.update(training_view.preset_widget_values(state.preset, state.pairs))


def to_custom(then=None) -> None:
    """A setting changed by hand: the menu says "Custom settings", every value (and the recipe's hidden ones) kept."""
    state.preset = CUSTOM
    return then() if then else None


def init_widgets() -> None:
    """Defaults through session state (widgets get no value=), so callbacks can change them later. The page starts
    from core.training.presets.default_preset (the GPU recipe, sample-demo on the bundled sample, else the auto
    recipe read off the data), again whenever the data changes under the recipe it picked and nobody edited."""
    data = (state.data_name, len(state.pairs), *training_view.recipe_context())
    if "preset" not in state or (state.get("preset_data", data) != data and state.preset != CUSTOM):
        if state.get("preset", state.get("preset_default")) == state.get("preset_default"):  # not the user's pick
            state.preset = state.preset_default = default_preset(len(state.pairs), cuda_available(),
                                                                 state.data_name == SAMPLE_NAME)
        apply_preset()  # a preset the user picked stays, read again off the new data
    state.preset_data = data
    # the plain run's values (no preset), where a test or an old session set the preset alone
    for key, value in dict(training_view.preset_widget_values(None, state.pairs), device=DEFAULTS.train.device,
                           seed=DEFAULTS.train.seed, keep_unvalidated=DEFAULTS.keep_unvalidated,
                           init_model=training_view.SCRATCH).items():
        state.setdefault(key, value)
    for model in MODEL_NAMES:
        for field, value in size_defaults(model).items():
            state.setdefault(training_view.size_key(model, field), value)
    state.setdefault("cancel_requested", set())


def options_from_widgets() -> dict:
    """The run the widgets describe, in core.training.specs' option vocabulary."""
    loss = chosen_loss()
    return dict(**LOSS_CHOICES[state.loss].options if state.model != CROSS_ENCODER else {}, margin=state.margin if loss not in SCALE_LOSSES else None,
                scale=state.scale if loss in SCALE_LOSSES else None, model=state.model, epochs=state.epochs,
                batch_size=state.batch_size, lr=state.lr, device=state.device, seed=state.seed,
                patience=state.patience, max_length=state.max_length, val_fraction=state.val_fraction,
                hard_negatives=bool(state.hard_negatives), mine_negatives=bool(state.mine_negatives), implied_pairs=bool(state.implied_pairs), data_name=state.data_name, max_steps=state.max_steps,
                max_minutes=state.max_minutes, keep_unvalidated=bool(state.keep_unvalidated), init_model=state.init_model,
                model_options={o.field: state[training_view.size_key(state.model, o.field)] for o in SIZE_OPTIONS[state.model]})


def start_run() -> None:
    preset = state.get("preset_base") if state.preset == CUSTOM else state.preset  # the job keeps it: its reference curve
    try:
        spec = training_view.spec_for(preset, state.pairs, options_from_widgets())
    except SpecError as error:
        show_error(f"Cannot start: {OPTION_LABELS.get(error.option, error.option)} {error.problem}")
        return
    submit_job(training_view.training_job(spec, state.pairs, state.runs_root, preset))
    st.rerun()  # draws the Start button disabled while the run is queued or training


init_widgets()
st.title("Train")
st.write(f"Training data: **{state.data_name}** ({len(state.pairs):,} pairs; change it on the Data page). "
         + training_view.validation_sentence())
workspace_state.page_link(DATA, label="Change the dataset")

# ---- the run's settings ---------------------------------------------------------------------------
st.selectbox("Preset", [*PRESETS, *[CUSTOM][:state.preset == CUSTOM]], key="preset", on_change=apply_preset,
             persist_state=PERSIST, format_func=lambda name, base=state.get("preset_base"): training_view.preset_label(name, base),
             help="A named recipe from docs/BENCHMARKS.md fills in every setting below; you can still change any.")
if state.preset in (training_view.AUTO_PRESET, training_view.AUGMENTED_PRESET):  # both read the data
    recipe = training_view.auto_recipe(state.pairs, *training_view.recipe_context())  # what it read off the data
    st.info("  \n".join(recipe.summary), icon=":material/tune:")
if state.preset == training_view.AUGMENTED_PRESET:
    training_view.unlabelled_questions_upload()
model_column, loss_column = st.columns(2)
model_column.selectbox("Model", MODEL_NAMES, format_func=MODEL_LABELS.get, key="model", on_change=to_custom, args=(apply_model_defaults,),
                       persist_state=PERSIST, help="Choosing a model resets epochs, batch size and learning rate.")
if state.model != CROSS_ENCODER:  # the losses on vectors; the cross-encoder's own is said with its size
    loss_column.selectbox("Loss", list(LOSS_CHOICES), format_func=lambda choice: LOSS_CHOICES[choice].label, key="loss",
                          on_change=to_custom, args=(apply_loss_defaults,), persist_state=PERSIST, help=LOSS_CHOICES[state.loss].help)

epochs_column, batch_column, lr_column, margin_column = st.columns(4)
epochs_column.number_input("Epochs", min_value=1, max_value=200, step=1, key="epochs", on_change=to_custom, persist_state=PERSIST)
batch_column.number_input("Batch size", min_value=2, max_value=4096, step=8, key="batch_size", on_change=to_custom, persist_state=PERSIST,
                          help="In-batch losses compare each pair with the batch's other pairs: batch size - 1 negatives.")
lr_column.number_input("Learning rate", min_value=1e-7, max_value=1.0, step=1e-5, format="%.1e", key="lr", on_change=to_custom,
                       persist_state=PERSIST)
if chosen_loss() in SCALE_LOSSES:
    margin_column.number_input("Scale", min_value=1.0, max_value=100.0, step=1.0, key="scale", on_change=to_custom, persist_state=PERSIST,
                               help="Softmax: multiplies the cosine similarities before the softmax. "
                                    "CoSENT: λ, multiplies the differences of the cosines.")
elif DEFAULT_MARGINS[chosen_loss()]:  # the losses with a margin
    margin_column.number_input(
        "Margin", min_value=0.0, max_value=2.0, step=0.05, key="margin", on_change=to_custom, persist_state=PERSIST,
        help="Triplet: on the cosine scale (-1..1). Contrastive and multitask: on the distance between unit "
             "vectors (0..2).")
if LossConfig(chosen_loss()).batch_kind == "duplicates":  # hard negatives join batches of duplicates only
    st.checkbox("Hard negatives: also use questions the data labels as non-duplicates of a batch question",
                key="hard_negatives", on_change=to_custom, persist_state=PERSIST,
                help="Quora's non-duplicates share most of their words with the question: the hardest negatives there are.")
    st.checkbox("Mined hard negatives: also each pair's nearest non-duplicate questions under the starting model",
                key="mine_negatives", on_change=to_custom, persist_state=PERSIST,
                help="Mined once, before training, among the training questions; a labelled duplicate (or a duplicate "
                     "of one) is never taken, nor a question scored almost as close as the pair's own duplicate.")
st.checkbox("Implied pairs: also train on the pairs the training labels imply", key="implied_pairs", on_change=to_custom,
            persist_state=PERSIST,
            help="Two duplicates of one question are duplicates; a duplicate of a non-duplicate's question is a "
                 "non-duplicate. Read from the training split only, after the validation pairs are held out.")

training_view.model_size_inputs(state.model, PERSIST, on_change=to_custom)

steps_column, minutes_column, length_column = st.columns(3)
steps_column.number_input("Max steps (0 = no cap)", min_value=0, max_value=1_000_000_000, step=100, key="max_steps", on_change=to_custom,
                          persist_state=PERSIST, help="The run ends with a validation when it reaches this many steps.")
minutes_column.number_input("Time budget (minutes, 0 = none)", min_value=0.0, max_value=525_600.0, step=5.0,
                            key="max_minutes", on_change=to_custom, persist_state=PERSIST,
                            help="The run ends with a validation once it has trained this long.")
length_column.number_input("Max length (tokens per question)", min_value=4, max_value=512, step=8, key="max_length", on_change=to_custom,
                           persist_state=PERSIST)
training_view.device_picker(PERSIST)

with st.expander("More settings"):
    more = st.columns(3)
    more[0].number_input("Seed", min_value=0, max_value=2**31 - 1, step=1, key="seed", persist_state=PERSIST)
    more[1].number_input("Early-stopping patience (epochs, 0 = off)", min_value=0, max_value=50, step=1, key="patience", on_change=to_custom,
                         persist_state=PERSIST)
    if not training_view.recipe_context()[1]:  # a validation file replaces the share held out
        more[2].number_input("Validation share", min_value=0.02, max_value=0.5, step=0.02, key="val_fraction",
                             on_change=to_custom, persist_state=PERSIST)
    st.checkbox(training_view.KEEP_UNVALIDATED_LABEL, key="keep_unvalidated", persist_state=PERSIST,
                help="Otherwise a run cancelled before any epoch finished is not saved, so it never clutters the model lists.")
    training_view.start_from_picker(PERSIST, on_change=apply_start_family)

st.caption("Finished models are saved in this workspace, one folder each; every page lists them.")

running = any(not job.finished for job in session_jobs(job_queue()))  # the Start button then waits
if st.button("Start", key="start", type="primary", disabled=running,
             help="Your run is queued or training: wait for it or cancel it." if running else None):
    start_run()

training_view.runs_panel(job_queue())
training_view.saved_models(state.runs_root)
