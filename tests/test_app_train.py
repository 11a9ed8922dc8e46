"""The Train page (AppTest): per-model defaults, a real background run that saves a folder, cancelling."""
import json

import pytest

from core.device import cuda_available
from core.objectives import DEFAULT_MARGINS
from core.specs import TRAINING_DEFAULTS, spec_from_options
from core.status import CANCELLED, DONE
from lab.session import job_queue

TRAIN = "pages/2_Train.py"


@pytest.fixture
def train_page(runs_root, open_page):
    at = open_page(TRAIN)
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


def test_defaults_follow_the_model_and_the_loss(train_page, runs_root):
    at = train_page
    assert at.selectbox(key="model").value == "lstm"
    assert at.selectbox(key="loss").value == "triplet"
    lstm = TRAINING_DEFAULTS["lstm"]
    assert (values(at)["epochs"], values(at)["batch_size"], values(at)["lr"]) == (lstm["epochs"], lstm["batch_size"], lstm["lr"])
    assert values(at)["margin"] == DEFAULT_MARGINS["triplet"]
    assert {"lstm.embedding_dim", "lstm.hidden_size", "lstm.num_layers"} <= set(values(at))
    assert at.text_input(key="runs_root").value == str(runs_root)

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
    [folder] = [path for path in runs_root.iterdir()]
    assert job.result.folder == folder
    config = json.loads((folder / "config.json").read_text())
    assert config["loss"]["name"] == "contrastive" and config["loss"]["form"] == "margin_squared"
    assert config["loss"]["margin"] == 0.8
    assert config["model_config"]["hidden_size"] == 10 and config["train_config"]["epochs"] == 1

    at.run()  # the page after the run: static, success message, saved models listed
    [success] = at.success
    assert folder.name in success.value and "ROC AUC" in success.value
    assert folder.name in at.dataframe[-1].value["name"].tolist()
    titles = [figure["layout"]["title"]["text"] for figure in plotly_figures(at)]
    assert titles == ["Training loss", "Validation metrics per epoch"]
    losses = plotly_figures(at)[0]["data"][0]["y"]
    assert losses == pytest.approx([loss for _, loss in job.progress.losses])
    epochs = at.dataframe[0].value
    assert epochs["epoch"].tolist() == [1]
    assert epochs["ROC AUC"].iloc[0] == pytest.approx(job.progress.epochs[0]["roc_auc"])


def test_cancel_stops_the_run_and_keeps_the_model(train_page, runs_root, rerun_until):
    at = train_page
    at.selectbox(key="model").set_value("dual-transformer").run()
    at.number_input(key="epochs").set_value(50)
    at.number_input(key="patience").set_value(0)
    at.number_input(key="dual-transformer.d_model").set_value(32)
    at.number_input(key="dual-transformer.num_layers").set_value(1)
    at.number_input(key="dual-transformer.ff_dim").set_value(64)
    at.number_input(key="max_length").set_value(16)
    at.button(key="start").click().run()
    rerun_until(at, lambda at: session_job(at).progress.step > 0, timeout=60, pause=0.2)

    at.button(key="cancel").click().run()
    assert not at.exception
    rerun_until(at, lambda at: session_job(at).finished, timeout=60)
    job = session_job(at)
    assert job.status == CANCELLED
    assert job.progress.epoch < 50
    at.run()
    [warning] = at.warning
    assert warning.value.startswith("Cancelled")
    assert job.result.folder is not None and job.result.folder.parent == runs_root
    config = json.loads((job.result.folder / "config.json").read_text())
    assert config["training"]["status"] == "cancelled"


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
    at = open_page(TRAIN)
    assert not at.exception
    assert sorted(at.dataframe[-1].value["name"]) == sorted(folder.name for folder in folders.values())
    assert any("left over from an interrupted save" in warning.value for warning in at.warning)

    other = root.parent / "elsewhere"
    at.text_input(key="runs_root").set_value(f"  {other}  ").run()
    assert at.session_state.runs_root == str(other)
    assert any(f"No saved model in `{other}`" in caption.value for caption in at.caption)


def test_preset_fills_the_settings_and_trains_with_them(train_page, runs_root, rerun_until):
    at = train_page
    at.selectbox(key="preset").set_value("sample-demo").run()
    spec = spec_from_options("sample-demo")
    assert at.selectbox(key="model").value == spec.model and at.selectbox(key="loss").value == "triplet"
    assert (values(at)["epochs"], values(at)["batch_size"]) == (spec.train.epochs, spec.train.batch_size)
    assert values(at)["lstm.hidden_size"] == spec.model_options["hidden_size"]
    assert at.checkbox(key="hard_negatives").value is True

    at.number_input(key="epochs").set_value(1)  # an explicit change still overrides the preset
    at.button(key="start").click().run()
    rerun_until(at, lambda at: session_job(at).finished)
    job = session_job(at)
    assert job.status == DONE, job.error
    config = json.loads((job.result.folder / "config.json").read_text())
    assert config["run"]["hard_negatives"] is True and config["run"]["min_freq"] == spec.min_freq
    assert config["train_config"]["epochs"] == 1 and config["model_config"]["hidden_size"] == 64


def test_a_preset_step_cap_travels_with_the_run(train_page, rerun_until):
    at = train_page
    at.selectbox(key="preset").set_value("minilm-quora").run()
    assert at.selectbox(key="model").value == "minilm"
    # Keep the preset's hidden settings but train a small LSTM, so the test takes seconds.
    at.selectbox(key="model").set_value("lstm").run()
    at.number_input(key="epochs").set_value(1)
    at.button(key="start").click().run()
    rerun_until(at, lambda at: session_job(at).finished)
    job = session_job(at)
    assert job.status == DONE, job.error
    config = json.loads((job.result.folder / "config.json").read_text())
    assert config["train_config"]["max_steps"] == spec_from_options("minilm-quora").train.max_steps == 3000
    assert config["train_config"]["max_val_pairs"] == 2000
