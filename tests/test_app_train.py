"""The Train page (AppTest): per-model defaults, a real background run that saves a folder, cancelling."""
import json
import threading
from pathlib import Path

import pytest

import core.training.jobs
from core.device import cuda_available
from core.status import CANCELLED, DONE, FAILED
from core.data import resolve_split_by
from core.training.objectives import DEFAULT_MARGINS
from core.training.presets import PRESETS
from core.training.jobs import RECORDS_FOLDER
from core.training.specs import TRAINING_DEFAULTS, spec_from_options
from lab.navigation import TRAIN
from lab.session import job_queue
from lab import training_view
from lab.training_view import KEEP_UNVALIDATED_LABEL

CURVE_TITLE = "Validation ROC AUC over training time"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def train_page(runs_root, open_page):
    at = open_page(TRAIN.path, preset="custom")  # the plain defaults (on the sample the page starts from sample-demo)
    assert not at.exception, at.exception
    yield at
    # Never leave a run behind for the next test: the queue trains one run at a time.
    queue = job_queue()
    for job_id in at.session_state.jobs:
        job = queue.jobs.get(job_id)
        if job is not None and not job.finished:
            job.cancel()
            queue.wait(job, timeout=60)


def session_job(at):
    return job_queue().jobs[at.session_state.jobs[-1]]


def values(at) -> dict:
    return {widget.key: widget.value for widget in at.number_input}


def progress_text(at) -> str:
    [bar] = at.get("progress")
    return bar.proto.text


def test_on_the_bundled_sample_the_first_start_trains_sample_demo(runs_root, open_page):
    at = open_page(TRAIN.path)
    assert at.selectbox(key="preset").value == "sample-demo"
    demo = PRESETS["sample-demo"].options
    assert at.selectbox(key="model").value == demo["model"] == "minilm"  # not the LSTM that scores below chance
    assert (values(at)["epochs"], values(at)["batch_size"]) == (demo["epochs"], demo["batch_size"])


def test_defaults_follow_the_model_and_the_loss(train_page, runs_root):
    at = train_page
    assert at.selectbox(key="model").value == "lstm"
    assert at.selectbox(key="loss").value == "triplet"
    lstm = TRAINING_DEFAULTS["lstm"]
    assert (values(at)["epochs"], values(at)["batch_size"], values(at)["lr"]) == (lstm["epochs"], lstm["batch_size"], lstm["lr"])
    assert values(at)["margin"] == DEFAULT_MARGINS["triplet"]
    assert {"lstm.embedding_dim", "lstm.hidden_size", "lstm.num_layers"} <= set(values(at))

    at.selectbox(key="model").set_value("dual-transformer").run()
    dual = TRAINING_DEFAULTS["dual-transformer"]
    assert (values(at)["epochs"], values(at)["batch_size"], values(at)["lr"]) == (dual["epochs"], dual["batch_size"], dual["lr"])
    assert (values(at)["dual-transformer.d_model"], values(at)["dual-transformer.num_layers"],
            values(at)["dual-transformer.num_heads"]) == (128, 2, 4)
    assert "lstm.hidden_size" not in values(at)

    at.selectbox(key="loss").set_value("contrastive_squared_hinge").run()
    assert values(at)["margin"] == DEFAULT_MARGINS["contrastive"]
    at.selectbox(key="loss").set_value("softmax").run()
    assert "margin" not in values(at) and values(at)["scale"] == 20.0

    device = at.radio(key="device")
    assert device.value == "auto"
    if not cuda_available():
        assert device.options == ["Auto", "CPU"]
        assert any("No CUDA GPU visible to PyTorch".lower() in caption.value.lower() for caption in at.caption)


def test_start_trains_in_the_background_and_saves_the_model(train_page, runs_root, rerun_until, plotly_figures):
    at = train_page
    at.number_input(key="epochs").set_value(1)
    at.number_input(key="lstm.embedding_dim").set_value(12)
    at.number_input(key="lstm.hidden_size").set_value(10)
    at.number_input(key="max_length").set_value(16)
    at.selectbox(key="loss").set_value("contrastive_margin_squared").run()
    at.number_input(key="margin").set_value(0.8)
    at.button(key="start").click().run()
    assert not at.exception and not at.error
    assert len(at.session_state.jobs) == 1

    rerun_until(at, lambda at: session_job(at).finished)
    job = session_job(at)
    assert job.status == DONE, job.error
    [folder] = [path for path in runs_root.iterdir() if path.name != RECORDS_FOLDER]
    assert job.result.folder == folder
    config = json.loads((folder / "config.json").read_text())
    assert config["loss"]["name"] == "contrastive" and config["loss"]["form"] == "margin_squared"
    assert config["loss"]["margin"] == 0.8
    assert config["model_config"]["hidden_size"] == 10 and config["train_config"]["epochs"] == 1

    at.run()  # the page after the run: static, success message, saved models listed
    success = finished_box(at, job)
    assert success.value.startswith(f"{finished_start(job)}saved as **{folder.name}**")
    assert job.result.outcome.message == "all 1 epoch(s) trained"
    assert "ROC AUC" in success.value
    assert folder.name in at.dataframe[-1].value["name"].tolist()
    assert at.dataframe[-1].value.set_index("name").loc[folder.name, "status"] == "done"
    assert not at.button(key="start").disabled  # the run is over: another may start
    titles = [figure["layout"]["title"]["text"] for figure in plotly_figures(at)]
    assert titles == ["Training loss", CURVE_TITLE, "Validation metrics per epoch"]
    [run_trace] = plotly_figures(at)[1]["data"]  # custom settings: no preset reference under it
    [validation] = job.result.outcome.validations  # one epoch, validated once at its end
    assert run_trace["name"] == "this run" and run_trace["mode"] == "lines+markers"
    assert run_trace["x"] == pytest.approx([validation.train_seconds / 60])
    assert run_trace["y"] == pytest.approx([validation.metrics["roc_auc"]])
    assert run_trace["customdata"] == [validation.step] == [steps_of(job)]
    [recorded] = job.progress.validations  # what the live poller drew from while the run trained
    assert (recorded["step"], recorded["train_seconds"], recorded["roc_auc"]) == (
        validation.step, validation.train_seconds, validation.metrics["roc_auc"])
    losses = plotly_figures(at)[0]["data"][0]["y"]
    assert losses == pytest.approx([loss for _, loss in job.progress.losses])
    steps = len(job.progress.losses)
    assert steps <= 8  # 479 pairs in batches of 128: a few steps, so every step gets an integer tick
    xaxis = plotly_figures(at)[0]["layout"]["xaxis"]
    assert (xaxis["tick0"], xaxis["dtick"], xaxis["tickformat"]) == (0, 1, ",d")
    epochs = at.dataframe[0].value
    assert epochs["epoch"].tolist() == [1]
    assert epochs["ROC AUC"].iloc[0] == pytest.approx(job.progress.epochs[0]["roc_auc"])


def finished_box(at, job):
    """The "Finished ..." box of a done run: green, or a warning when the run is worse than chance or TF-IDF
    (``core.inference.run_quality``; tiny runs on the bundled sample often are)."""
    boxes = at.warning if job.result.judged().flagged else at.success
    [box] = [box for box in boxes if box.value.startswith("Finished")]
    return box


def finished_start(job) -> str:
    return f"Finished ({job.result.outcome.message})" + (", but not a useful model: " if job.result.judged().flagged
                                                         else ": ")


def steps_of(job) -> int:
    return job.progress.losses[-1][0]


class PauseAtFirstStep:
    """Trainer callback that holds the run after step 1 until released: the cancel lands before any validation."""

    def __init__(self):
        self.release = threading.Event()

    def on_batch_end(self, trainer):
        if trainer.step == 1:
            assert self.release.wait(60)


@pytest.mark.slow
@pytest.mark.parametrize("keep_unvalidated", [False, True])
def test_cancel_stops_the_run_and_keeps_it_only_when_asked(train_page, runs_root, rerun_until, keep_unvalidated,
                                                           monkeypatch):
    pause, real = PauseAtFirstStep(), core.training.jobs.train_run
    monkeypatch.setattr(core.training.jobs, "train_run",
                        lambda *args, callbacks=(), **kwargs: real(*args, callbacks=[*callbacks, pause], **kwargs))
    at = train_page
    at.selectbox(key="model").set_value("dual-transformer").run()
    at.number_input(key="epochs").set_value(50)
    at.number_input(key="patience").set_value(0)
    at.number_input(key="dual-transformer.d_model").set_value(32)
    at.number_input(key="dual-transformer.num_layers").set_value(1)
    at.number_input(key="dual-transformer.ff_dim").set_value(64)
    at.number_input(key="max_length").set_value(16)
    assert at.checkbox(key="keep_unvalidated").label == KEEP_UNVALIDATED_LABEL
    at.checkbox(key="keep_unvalidated").set_value(keep_unvalidated)
    at.button(key="start").click().run()
    assert at.button(key="start").disabled  # one run at a time per user, queued or training
    rerun_until(at, lambda at: session_job(at).progress.step > 0, timeout=60, pause=0.2)
    assert at.button(key="start").disabled
    job = session_job(at)
    assert "hard negatives" not in job.label  # the box was not ticked
    assert job.label.startswith("Dual transformer encoder · triplet (mean + closest negative, alpha=0.25)")

    at.button(key="cancel").click().run()
    assert not at.exception
    pause.release.set()
    rerun_until(at, lambda at: session_job(at).finished, timeout=60)
    assert job.status == CANCELLED
    assert job.progress.step == 1 and job.result.outcome.best_epoch == 0  # stopped within one step
    at.run()
    assert not at.button(key="start").disabled
    [warning] = at.warning
    where = f"Cancelled at step {job.progress.step:,} of {job.progress.total_steps:,}"
    if keep_unvalidated:
        folder = job.result.folder
        assert folder is not None and folder.parent == runs_root
        assert warning.value.startswith(f"{where}: the model at that step, saved as **{folder.name}**")
        assert warning.value.split(" saved as ")[0].lower().count("cancel") == 1  # said once, not "Cancelled: cancelled"
        config = json.loads((folder / "config.json").read_text())
        assert config["training"]["status"] == "cancelled" and config["run"]["keep_unvalidated"] is True
        assert at.dataframe[-1].value.set_index("name").loc[folder.name, "status"] == "cancelled"
    else:
        assert job.result.folder is None and [path.name for path in runs_root.iterdir()] == [RECORDS_FOLDER]
        assert warning.value == (f"{where}, before the first validation: nothing was saved (tick "
                                 f"“{KEEP_UNVALIDATED_LABEL}” under More settings to keep such a run).")


def test_sizes_that_do_not_fit_are_refused_before_starting(train_page):
    at = train_page
    at.selectbox(key="model").set_value("dual-transformer").run()
    at.number_input(key="dual-transformer.d_model").set_value(130)
    at.button(key="start").click().run()
    assert not at.exception
    [error] = at.error
    assert "divisible by num_heads" in error.value
    assert at.session_state.jobs == []


def test_models_folder_lists_models_and_leftovers(runs_with_models, open_page):
    root, folders = runs_with_models
    (root / ".tmp-broken-save").mkdir()
    at = open_page(TRAIN.path)
    assert not at.exception
    assert sorted(at.dataframe[-1].value["name"]) == sorted(folder.name for folder in folders.values())
    [warning] = at.warning  # one folder: its reason on the line
    assert warning.value.startswith("1 folder in the models folder is not a model: `.tmp-broken-save` (left over from")


@pytest.mark.slow
def test_preset_fills_the_settings_and_trains_with_them(train_page, runs_root, rerun_until):
    at = train_page
    at.selectbox(key="preset").set_value("sample-demo").run()
    spec = spec_from_options("sample-demo")
    assert at.selectbox(key="model").value == spec.model == "minilm" and at.selectbox(key="loss").value == "triplet"
    assert (values(at)["epochs"], values(at)["batch_size"]) == (spec.train.epochs, spec.train.batch_size) == (1, 16)
    assert values(at)["lr"] == spec.train.lr and values(at)["max_length"] == spec.max_length == 32
    assert at.checkbox(key="hard_negatives").value is True

    at.number_input(key="max_steps").set_value(2)  # an explicit change still overrides the preset (and keeps it short)
    at.button(key="start").click().run()
    rerun_until(at, lambda at: session_job(at).finished)
    job = session_job(at)
    assert job.status == DONE, job.error
    assert job.label.startswith("MiniLM (fine-tune) · triplet (mean + closest negative, alpha=0.25) + labelled hard "
                                "negatives"), job.label
    config = json.loads((job.result.folder / "config.json").read_text())
    assert config["model_type"] == "minilm" and config["run"]["hard_negatives"] is True
    assert config["train_config"]["max_steps"] == 2 and config["train_config"]["lr"] == spec.train.lr
    assert config["model_config"]["max_length"] == 32


@pytest.mark.slow
def test_a_preset_step_cap_travels_with_the_run(train_page, rerun_until):
    at = train_page
    assert (values(at)["max_steps"], values(at)["max_minutes"]) == (0, 0.0)  # no cap unless asked
    at.selectbox(key="preset").set_value("minilm-quora").run()
    assert at.selectbox(key="model").value == "minilm"
    assert values(at)["max_steps"] == spec_from_options("minilm-quora").train.max_steps == 3600  # shown, editable
    # Keep the preset's hidden settings but train a small LSTM, so the test takes seconds.
    at.selectbox(key="model").set_value("lstm").run()
    at.number_input(key="epochs").set_value(1)
    at.number_input(key="max_minutes").set_value(45.0)
    at.button(key="start").click().run()
    rerun_until(at, lambda at: session_job(at).finished)
    job = session_job(at)
    assert job.status == DONE, job.error
    config = json.loads((job.result.folder / "config.json").read_text())
    assert config["train_config"]["max_steps"] == 3600 and config["train_config"]["max_minutes"] == 45.0
    assert config["train_config"]["max_val_pairs"] == 2000


@pytest.mark.slow
def test_max_steps_and_the_time_budget_reach_the_run(train_page, rerun_until):
    at = train_page
    at.number_input(key="max_steps").set_value(2)
    at.number_input(key="max_minutes").set_value(0.5)
    at.number_input(key="epochs").set_value(3)
    at.button(key="start").click().run()
    rerun_until(at, lambda at: session_job(at).finished)
    job = session_job(at)
    assert job.status == DONE, job.error
    assert job.progress.step == 2 and job.result.outcome.message == "stopped at the step cap of 2 steps"
    config = json.loads((job.result.folder / "config.json").read_text())
    assert (config["train_config"]["max_steps"], config["train_config"]["max_minutes"]) == (2, 0.5)
    assert config["training"]["epochs_run"] == 1  # the cap ended the run with a validation
    at.run()
    assert finished_box(at, job).value.startswith(f"{finished_start(job)}saved as")


class HeldRun:
    """Stands in for core.training.jobs.train_run: holds the job until it is cancelled, so the test can set its progress."""

    def __init__(self):
        self.calls = 0

    def __call__(self, spec, pairs, runs_root, callbacks, stop_event, **_):
        self.calls += 1
        assert stop_event.wait(120)
        raise RuntimeError("held by the test")


def test_progress_says_starting_then_speed_time_left_and_validation(train_page, monkeypatch):
    monkeypatch.setattr(core.training.jobs, "train_run", HeldRun())
    at = train_page
    at.button(key="start").click().run()
    job = session_job(at)
    assert progress_text(at) == "Starting…"  # no "Epoch 0/3 · step 0/0 · 0 pairs/s" before the first step
    assert at.button(key="start").disabled

    p = job.progress  # what the pipeline and the trainer's callbacks would record, with known numbers
    p.phase = "loading the pretrained encoder"
    at.run()
    assert progress_text(at) == "Loading the pretrained encoder…"  # the stage, no "Epoch 0/0 · step 0/0"
    p.phase, p.epoch, p.total_epochs, p.step, p.total_steps = "training", 1, 2, 1, 100
    at.run()
    assert progress_text(at) == "Epoch 1/2 · step 1/100 · measuring the speed"  # no "0 pairs/s", no time left
    p.step, p.seconds_per_step, p.pairs_per_second = 25, 2.0, 26.7  # measured over the last steps
    at.run()
    assert progress_text(at) == "Epoch 1/2 · step 25/100 · 27 pairs/s · about 3 min left"  # 75 steps × 2 s
    p.budget_seconds, p.seconds = 600.0, 590.0  # a time budget ends it sooner
    at.run()
    assert progress_text(at) == "Epoch 1/2 · step 25/100 · 27 pairs/s · under a minute left"
    p.phase = "scoring validation 1,200/3,000"
    at.run()
    assert progress_text(at) == "Epoch 1/2 · step 25/100 · scoring validation 1,200/3,000"
    assert not any("pairs/s" in caption.value for caption in at.caption)  # no promised speed, only the measured one

    at.button(key="cancel").click().run()
    assert job_queue().wait(job, timeout=60) and job.status == FAILED
    at.run()
    assert not at.button(key="start").disabled


def test_the_validation_curve_is_drawn_live_over_the_presets_reference(train_page, monkeypatch, plotly_figures,
                                                                       tmp_path):
    import lab.training_view
    from lab.figures import REFERENCE_LABEL

    reference = ((0.0, 0.5), (90.0, 0.8), (300.0, 0.9))  # (train seconds, ROC AUC), as a measured preset holds
    curves = tmp_path / "reference_curves.json"
    curves.write_text(json.dumps({"sample-demo": {"points": reference}}))
    monkeypatch.setattr(lab.training_view, "REFERENCE_CURVES", curves)
    monkeypatch.setattr(core.training.jobs, "train_run", HeldRun())
    at = train_page
    at.selectbox(key="preset").set_value("sample-demo").run()
    at.button(key="start").click().run()
    job = session_job(at)
    assert job.preset == "sample-demo"

    def curve_figure() -> dict:
        [figure] = [f for f in plotly_figures(at) if f["layout"]["title"]["text"] == CURVE_TITLE]
        return figure

    p = job.progress  # what the trainer's callbacks would record, with known numbers
    p.phase, p.epoch, p.total_epochs, p.step, p.total_steps = "training", 1, 1, 3, 20
    p.losses.extend([(1, 0.9), (2, 0.8), (3, 0.7)])
    at.run()
    reference_trace, run_trace = curve_figure()["data"]  # before the first validation: the target alone
    assert reference_trace["name"] == REFERENCE_LABEL == "preset reference (this machine)"
    assert reference_trace["line"]["dash"] == "dash" and reference_trace["line"]["color"] == "#999999"
    assert reference_trace["x"] == pytest.approx([0.0, 1.5, 5.0])  # minutes
    assert reference_trace["y"] == pytest.approx([0.5, 0.8, 0.9])
    assert run_trace["x"] == [] and run_trace["y"] == []

    p.validations.extend([{"step": 5, "epoch": 1, "train_seconds": 60.0, "seconds": 70.0, "roc_auc": 0.71},
                          {"step": 10, "epoch": 1, "train_seconds": 150.0, "seconds": 170.0, "roc_auc": 0.83}])
    at.run()  # the live fragment draws what the run recorded since
    reference_trace, run_trace = curve_figure()["data"]
    assert run_trace["name"] == "this run" and run_trace["mode"] == "lines+markers"
    assert run_trace["x"] == pytest.approx([1.0, 2.5]) and run_trace["y"] == pytest.approx([0.71, 0.83])
    assert run_trace["customdata"] == [5, 10]
    assert reference_trace["x"] == pytest.approx([0.0, 1.5, 5.0])

    at.button(key="cancel").click().run()
    assert job_queue().wait(job, timeout=60)


def test_a_preset_without_a_measured_curve_draws_no_reference(train_page, monkeypatch, plotly_figures):
    monkeypatch.setattr(core.training.jobs, "train_run", HeldRun())
    at = train_page
    at.selectbox(key="preset").set_value("sample-demo").run()
    at.button(key="start").click().run()
    job = session_job(at)
    p = job.progress
    p.phase, p.epoch, p.total_epochs, p.step, p.total_steps = "training", 1, 1, 2, 20
    p.losses.extend([(1, 0.9), (2, 0.8)])
    at.run()
    titles = [figure["layout"]["title"]["text"] for figure in plotly_figures(at)]
    assert titles == ["Training loss"]  # nothing to compare yet: no validation, no reference
    p.validations.append({"step": 2, "epoch": 1, "train_seconds": 30.0, "seconds": 31.0, "roc_auc": 0.6})
    at.run()
    [curve] = [f for f in plotly_figures(at) if f["layout"]["title"]["text"] == CURVE_TITLE]
    [run_trace] = curve["data"]
    assert run_trace["x"] == pytest.approx([0.5]) and run_trace["y"] == pytest.approx([0.6])
    at.button(key="cancel").click().run()
    assert job_queue().wait(job, timeout=60)


@pytest.mark.slow
def test_implied_pairs_tick_trains_on_them(train_page, rerun_until):
    from core.data import split_pairs
    from core.data.splitting import implied_pairs

    at = train_page
    assert at.checkbox(key="implied_pairs").value is False  # off unless asked
    at.checkbox(key="implied_pairs").check()
    at.number_input(key="epochs").set_value(1)  # a tiny LSTM: the tick, not the model, is under test
    at.number_input(key="lstm.embedding_dim").set_value(12)
    at.number_input(key="lstm.hidden_size").set_value(10)
    at.number_input(key="max_length").set_value(16)
    at.button(key="start").click().run()
    rerun_until(at, lambda at: session_job(at).finished)
    job = session_job(at)
    assert job.status == DONE, job.error
    assert job.spec.model == "lstm" and "+ implied pairs" in job.label
    config = json.loads((job.result.folder / "config.json").read_text())
    assert config["run"]["implied_pairs"] is True
    data = config["data"]
    # The implied pairs of the run's own training split: the split is seeded, so redo it here.
    spec = job.spec
    splits = split_pairs(job.pairs, val_fraction=spec.val_fraction, test_fraction=spec.test_fraction, seed=spec.train.seed,
                         by_question=resolve_split_by(job.pairs, spec.split_by) == "question")
    assert len(splits.val) == data["val_pairs"]
    assert data["implied_pairs"] == len(implied_pairs(splits.train)) > 0
    assert data["train_pairs"] == len(splits.train) + data["implied_pairs"]


def holding_run():
    """(an event set once the job started, the specs it was given, a stand-in for core.training.jobs.train_run that
    holds the job until it is cancelled)."""
    started, specs = threading.Event(), []

    def held(spec, pairs, runs_root, callbacks, stop_event, **_):
        specs.append(spec)
        started.set()
        assert stop_event.wait(120)
        raise RuntimeError("held by the test")

    return started, specs, held


def test_the_cross_encoder_trains_with_its_own_loss_and_no_loss_menu(train_page, monkeypatch):
    started, specs, held = holding_run()
    monkeypatch.setattr(core.training.jobs, "train_run", held)
    at = train_page
    at.selectbox(key="model").set_value("cross-encoder").run()
    assert "loss" not in [box.key for box in at.selectbox] and "margin" not in values(at)
    assert any("binary cross-entropy on every labelled pair" in caption.value for caption in at.caption)
    assert values(at)["lr"] == TRAINING_DEFAULTS["cross-encoder"]["lr"]
    at.button(key="start").click().run()
    assert not at.exception and not at.error and started.wait(60)
    assert (specs[0].model, specs[0].loss.name) == ("cross-encoder", "bce")


def test_the_loss_menu_shows_short_names_with_the_formula_in_its_help(train_page):
    from lab.loss_menu import LOSS_CHOICES

    at = train_page
    menu = at.selectbox(key="loss")
    assert menu.options == [choice.label for choice in LOSS_CHOICES.values()]
    assert "Triplet (mean + closest negative)" in menu.options and "CoSENT" in menu.options
    assert all(len(label) <= 40 and ":" not in label for label in menu.options)  # no formula cut off in the menu
    for key, choice in LOSS_CHOICES.items():
        at.selectbox(key="loss").set_value(key).run()
        assert at.selectbox(key="loss").help == choice.help  # the chosen loss's formula
    at.selectbox(key="loss").set_value("cosent").run()
    assert "log(1 + Σ" in at.selectbox(key="loss").help


def test_home_names_every_loss_of_the_menu(runs_root, open_page):
    from app_support import open_app

    from lab.loss_menu import LOSS_CHOICES

    at = open_app()
    assert not at.exception
    [heading] = [header.value for header in at.subheader if "losses" in header.value]
    assert heading == f"{len(LOSS_CHOICES)} losses"
    [listing] = [block.value for block in at.markdown if "**CoSENT**" in block.value]
    assert listing.count("\n- ") + 1 == len(LOSS_CHOICES) == 6
    assert all(f"**{choice.label}**" in listing for choice in LOSS_CHOICES.values())


def test_the_loss_chart_shows_its_first_step(train_page, monkeypatch, plotly_figures):
    monkeypatch.setattr(core.training.jobs, "train_run", HeldRun())
    at = train_page
    at.button(key="start").click().run()
    job = session_job(at)
    p = job.progress
    p.phase, p.epoch, p.total_epochs, p.step, p.total_steps = "training", 1, 1, 1, 20
    p.losses.append((1, 0.9))
    at.run()
    [chart] = [f for f in plotly_figures(at) if f["layout"]["title"]["text"] == "Training loss"]
    [trace] = chart["data"]
    assert "markers" in trace["mode"] and trace["x"] == [1] and trace["y"] == pytest.approx([0.9])
    assert chart["layout"]["xaxis"]["rangemode"] == "tozero"  # step 1 beside 0, not alone in -0.5..1
    at.button(key="cancel").click().run()
    assert job_queue().wait(job, timeout=60)


def test_a_queued_run_says_its_place_and_when_it_should_start(train_page, monkeypatch, sample_pairs, runs_root):
    from core.training.jobs import TrainingJob

    monkeypatch.setattr(core.training.jobs, "train_run", HeldRun())
    queue = job_queue()
    assert queue.max_running == 1
    elsewhere = runs_root.parent.parent / "another-workspace-0001" / "models"
    other = queue.submit(TrainingJob(spec_from_options(), sample_pairs[0], str(elsewhere)))  # another user's run
    try:
        assert queue.wait(other, timeout=30, until=lambda job: job.status == "running")
        at = train_page
        at.button(key="start").click().run()
        assert session_job(at).status == "waiting"
        [waiting] = [info.value for info in at.info if info.value.startswith("Waiting")]
        assert "place 1 in line" in waiting and "once the run ahead has measured its speed" in waiting
        p = other.progress  # the run ahead: 75 steps left at 2 s each
        p.phase, p.step, p.total_steps, p.seconds_per_step = "training", 25, 100, 2.0
        at.run()
        [waiting] = [info.value for info in at.info if info.value.startswith("Waiting")]
        assert waiting == ("Waiting — 1 run(s) ahead (at most 1 train at once) · place 1 in line · "
                           "expected to start in about 3 min.")
    finally:
        other.cancel()
        assert queue.wait(other, timeout=60)


def test_with_a_gpu_and_data_enough_the_page_starts_from_the_gpu_recipe(monkeypatch, runs_root, open_page):
    import pandas as pd

    import core.device
    from core.training.presets import GPU_PRESET, GPU_PRESET_MIN_PAIRS

    # The page asks core.device whether CUDA is here; the Device radio keeps its own answer (no GPU to describe).
    monkeypatch.setattr(core.device, "cuda_available", lambda: True)
    n = GPU_PRESET_MIN_PAIRS
    pairs = pd.DataFrame({"question1": [f"How do I grow plant {i}?" for i in range(n)],
                          "question2": [f"How can plant {i} grow?" for i in range(n)], "is_duplicate": [1, 0] * (n // 2)})
    at = open_page(TRAIN.path, pairs=pairs, data_name="big.csv")
    assert not at.exception, at.exception
    assert at.selectbox(key="preset").value == GPU_PRESET
    assert at.selectbox(key="model").value == "minilm"
    assert (values(at)["batch_size"], values(at)["epochs"]) == (256, 4)  # the recipe's settings, filled in

    small = open_page(TRAIN.path)  # the bundled sample: too small for the GPU recipe
    assert small.selectbox(key="preset").value != GPU_PRESET


LEFT_BY_A_STOPPED_SERVER = """
import sys
from core.training.jobs import RunRecord, write_record
write_record(sys.argv[1], RunRecord(id="a1", label="Siamese LSTM · triplet · stopped", status="interrupted",
                                    created=3.0, folder="lstm-triplet-20260101-120000", step=40, total_steps=300))
write_record(sys.argv[1], RunRecord(id="b2", label="Siamese LSTM · triplet · killed", status="running", created=2.0))
write_record(sys.argv[1], RunRecord(id="c3", label="Siamese LSTM · triplet · queued", status="waiting", created=1.0))
"""


def test_after_a_restart_the_page_shows_the_runs_the_stopped_server_left(runs_root, open_page):
    import subprocess
    import sys

    # The stopped server's process: it recorded one run interrupted (saved as Cancel saves), and was killed with
    # one run still training and one queued, whose records still say so.
    subprocess.run([sys.executable, "-c", LEFT_BY_A_STOPPED_SERVER, str(runs_root)], check=True, timeout=60,
                   cwd=str(ROOT))
    at = open_page(TRAIN.path)  # a new session on the same workspace, in the restarted server
    assert not at.exception, at.exception
    lines = [markdown.value for markdown in at.markdown if markdown.value.startswith("- **Siamese LSTM")]
    assert [line.split(") — ", 1)[1] for line in lines] == [
        "interrupted by a server stop at step 40 of 300: the best model so far was saved as "
        "lstm-triplet-20260101-120000.",
        "interrupted by a server stop: no model of it was saved.",
        "not started: the server stopped while it waited in the queue; start it again to train it."]
    assert [line.split(" (", 1)[0] for line in lines] == [
        "- **Siamese LSTM · triplet · stopped**", "- **Siamese LSTM · triplet · killed**",
        "- **Siamese LSTM · triplet · queued**"]
    assert any("Earlier runs of this workspace" in markdown.value for markdown in at.markdown)


def test_a_run_started_in_a_workspace_that_kept_nothing_yet_leaves_its_record(tmp_path, monkeypatch, open_page):
    """No folder is made for a visit that keeps nothing; a run is kept, so Start makes the workspace's folder
    before the run is queued, and the run's record is there for a restart to read."""
    from core.training.jobs import read_records

    monkeypatch.setenv("SIAMESE_LAB_WORKSPACES", str(tmp_path / "workspaces"))
    monkeypatch.setattr(core.training.jobs.JobQueue, "_start_what_fits", lambda self: None)  # it stays queued
    at = open_page(TRAIN.path, workspace="a-workspace-of-its-own-1")
    models = tmp_path / "workspaces" / "a-workspace-of-its-own-1" / "models"
    assert not models.exists()
    at.button(key="start").click().run()
    assert not at.exception
    assert [record.status for record in read_records(models, live_here=set(job_queue().jobs))] == ["waiting"]
    job_queue().stop_all()


def test_an_auto_run_lists_every_candidate_and_says_which_it_saved(runs_root, open_page, rerun_until, monkeypatch):
    import core.training.auto_choice as auto_choice

    monkeypatch.setattr(auto_choice, "BUDGET_MINUTES", 1.6)  # the cheap candidates only: no time for a fine-tune
    at = open_page(TRAIN.path, preset="auto")
    assert at.selectbox(key="preset").value == "auto"
    at.button(key="start").click().run()
    assert not at.exception and not at.error
    rerun_until(at, lambda at: session_job(at).finished)
    job = session_job(at)
    assert job.status == DONE, job.error
    at.run()
    [table] = [frame.value for frame in at.dataframe if "candidate" in frame.value.columns]
    chosen = " (chosen, saved)"
    assert table["candidate"].str.replace(chosen, "", regex=False).tolist() == [
        auto_choice.ZERO_SHOT_NAME, auto_choice.STACKED_NAME, auto_choice.FINE_TUNE_NAME]
    assert table["candidate"].tolist().index(job.choice.chosen.name + chosen) in (0, 1)  # one marked, measured
    assert table["validation ROC AUC"].tolist()[:2] == [c.roc_auc for c in job.choice.candidates[:2]]
    assert table["note"].tolist()[2].startswith("not started: ")
    assert f"saved as **{job.result.folder.name}**" in finished_box(at, job).value
    # The folder saved is the chosen model, every candidate's figures in its config; the page's verdict against
    # zero-shot MiniLM is the chosen candidate's.
    from core.saving import read_config

    assert job.result.folder.parent == runs_root
    assert read_config(job.result.folder)["auto"]["chosen"] == job.choice.chosen.name
    assert f"auto chose {job.choice.chosen.name} of 3 candidates" in job.result.outcome.message
    if job.choice.chosen.verdict:
        assert job.result.judged().verdicts["zero_shot"] == job.choice.chosen.verdict


def test_mined_hard_negatives_are_a_tick_of_the_in_batch_losses(train_page, monkeypatch):
    started, specs, held = holding_run()
    monkeypatch.setattr(core.training.jobs, "train_run", held)
    at = train_page
    assert at.checkbox(key="mine_negatives").value is False
    at.checkbox(key="mine_negatives").check().run()
    at.button(key="start").click().run()
    assert not at.exception and not at.error and started.wait(60)
    assert specs[0].mine_negatives and specs[0].hard_negatives and specs[0].loss.batch_kind == "duplicates"
    assert "mined hard negatives" in session_job(at).label


def test_the_augmented_preset_runs_the_recipe_and_says_what_its_teacher_did(train_page, rerun_until, monkeypatch):
    from core.training.pipeline import RunResult
    from core.training.trainer import TrainOutcome

    record = {"teacher": {"model": "cross-encoder", "validation_roc_auc": 0.912, "threshold": 0.61},
              "silver_pairs": 321, "questions": 400, "questions_from": "the training pairs", "neighbour_pairs": 300,
              "random_pairs": 21, "silver_duplicates": 40}
    specs, given = [], []

    def recipe(spec, pairs, output, callbacks, stop_event, budget_minutes, **files):
        specs.append(spec)
        given.append((files["questions"], files["questions_name"]))
        output.release()
        return RunResult(output.target, TrainOutcome(DONE, "all 1 epoch(s) trained", 1, {}), {}, {}, {},
                         metadata={"augmented": record})

    monkeypatch.setattr(core.training.jobs, "run_augmented", recipe)
    at = train_page
    at.selectbox(key="preset").set_value("augmented").run()
    assert at.selectbox(key="preset").value == "augmented" and at.selectbox(key="model").value == "minilm"
    assert any("Read off" in box.value for box in at.info)  # its settings are read off the data, as auto's
    # A file of unlabelled questions: a bad one stops the page with its error, a good one goes to the recipe.
    at.file_uploader(key="unlabelled_upload").set_value(("empty.txt", b"question\n", "text/plain")).run()
    assert any("empty.txt" in error.value for error in at.error) and "start" not in [b.key for b in at.button]
    questions = b"How do I learn Python?\nWhat is a prime number?\n\nHow can I learn Python?\n"
    reads = []
    read = training_view.uploaded_questions
    monkeypatch.setattr(training_view, "uploaded_questions", lambda *args: reads.append(args[0]) or read(*args))
    at.file_uploader(key="unlabelled_upload").set_value(("mine.txt", questions, "text/plain")).run()
    at.run()  # a rerun (the page polls while a run is unfinished) keeps the file read once
    assert any("3 questions of **mine.txt**" in caption.value for caption in at.caption) and reads == ["mine.txt"]
    at.button(key="start").click().run()
    assert not at.exception and not at.error
    rerun_until(at, lambda at: session_job(at).finished)
    at.run()
    assert given == [(["How do I learn Python?", "What is a prime number?", "How can I learn Python?"], "mine.txt")]
    assert specs[0].model == "minilm" and specs[0].loss.name == "contrastive"
    assert any("labelled 321 silver pairs of 400 questions" in caption.value and "ROC AUC 0.912" in caption.value
               for caption in at.caption)
