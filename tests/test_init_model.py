"""``--init-model``: a run that starts from a saved model's weights and tokenizer, and records its parent."""
from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest
import torch

import core.training.jobs
from core.cli.main import main
from core.export.export_folder import export_model
from core.export.manifest import MANIFEST_FILE
from core.models import build_model, load_model
from core.training.pipeline import train_run
from core.training.specs import TRAINING_DEFAULTS, SpecError, spec_from_options
from lab.navigation import TRAIN
from lab.session import job_queue
from tests.conftest import synthetic_pairs

# The parent's sizes: none of them is a default, so a model rebuilt from the child's options would show.
PARENT_OPTIONS = {"embedding_dim": 6, "hidden_size": 5, "num_layers": 1}
PARENT_MAX_LENGTH = 12


def child_pairs():
    """Pairs of the parent's task whose topic words the parent never saw ("zorb7", not "topic7")."""
    pairs = synthetic_pairs(120, seed=2, topics=60)
    for column in ("question1", "question2"):
        pairs[column] = pairs[column].str.replace("topic", "zorb")
    return pairs


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    """A trained tiny LSTM (the parent) and a child trained from it by the CLI with a learning rate of 1e-12."""
    root = tmp_path_factory.mktemp("init_model")
    spec = spec_from_options(model="lstm", epochs=1, batch_size=16, device="cpu", model_options=PARENT_OPTIONS,
                             max_length=PARENT_MAX_LENGTH, data_name="parent data")
    parent = train_run(spec, synthetic_pairs(120, seed=1, topics=60), out_dir=root / "parent").folder
    data = root / "child.csv"
    child_pairs().to_csv(data, index=False)
    child = root / "child"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(["train", "--data", str(data), "--init-model", str(parent), "--lr", "1e-12", "--epochs", "1",
                     "--batch-size", "16", "--device", "cpu", "--max-length", "40", "--out", str(child)])
    assert code == 0
    return parent, child


def run_cli(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def test_the_child_starts_from_the_parents_weights_and_keeps_its_architecture(family):
    parent, child = family
    parent_model, parent_config = load_model(parent)
    child_model, child_config = load_model(child)
    assert child_config["model_type"] == "lstm"  # --model defaulted to the folder's family
    # The parent's sizes and max length, not the defaults nor --max-length 40.
    assert child_config["model_config"] == parent_config["model_config"]
    assert child_config["model_config"]["embedding_dim"] == 6 and child_model.tokenizer.max_length == PARENT_MAX_LENGTH
    child_weights, parent_weights = child_model.state_dict(), parent_model.state_dict()
    assert child_weights.keys() == parent_weights.keys()
    for name, tensor in parent_weights.items():  # a learning rate of 1e-12 moves nothing visibly
        torch.testing.assert_close(child_weights[name], tensor, atol=1e-6, rtol=0.0)
    # ... and those weights are the parent's training, not a fresh model of the same sizes and seed.
    torch.manual_seed(0)
    fresh = build_model(spec_from_options(model="lstm", model_options=PARENT_OPTIONS, max_length=PARENT_MAX_LENGTH),
                        ["topic1 topic2 filler1"]).state_dict()
    lstm_weights = [name for name in parent_weights if "lstm" in name]
    assert lstm_weights
    assert all(fresh[name].shape == parent_weights[name].shape for name in lstm_weights)
    assert not any(torch.allclose(fresh[name], parent_weights[name], atol=1e-3) for name in lstm_weights)


def test_the_child_keeps_the_parents_vocabulary_though_its_data_has_other_words(family):
    parent, child = family
    parent_vocab, child_vocab = load_model(parent)[0].tokenizer.vocab, load_model(child)[0].tokenizer.vocab
    assert child_vocab == parent_vocab
    assert "topic7" in child_vocab and "zorb7" not in child_vocab
    assert (child / "tokenizer.json").read_bytes() == (parent / "tokenizer.json").read_bytes()


def test_config_records_the_parent(family):
    parent, child = family
    _, parent_config = load_model(parent)
    _, config = load_model(child)
    auc = parent_config["metrics"]["validation"]["roc_auc"]
    assert isinstance(auc, float) and 0.0 <= auc <= 1.0
    assert config["run"]["init_model"] == str(parent)
    assert config["parent"] == {"name": "parent", "path": str(parent), "validation_roc_auc": auc}
    assert "parent" not in parent_config and parent_config["run"]["init_model"] == ""


def test_the_model_card_names_the_parent(family, tmp_path):
    parent, child = family
    auc = load_model(parent)[1]["metrics"]["validation"]["roc_auc"]
    model, config = load_model(child)
    manifest = export_model(model, config, tmp_path / "export", "onnx")
    card = (tmp_path / "export" / "README.md").read_text(encoding="utf-8")
    assert f"- **Parent model:** Fine-tuned from `parent` (validation ROC AUC {auc:.4f})." in card
    assert "- **Base model:** none (trained from scratch, then fine-tuned)" in card
    assert manifest["config"]["parent"]["name"] == "parent"
    assert (tmp_path / "export" / MANIFEST_FILE).is_file()


def test_a_model_of_another_family_is_one_cli_error_line(family, capsys, tmp_path):
    parent, _ = family
    data = tmp_path / "pairs.csv"
    child_pairs().to_csv(data, index=False)
    code, err = run_cli(capsys, "train", "--data", str(data), "--init-model", str(parent), "--model", "minilm",
                        "--out", str(tmp_path / "out"))
    assert (code, err) == (2, f"error: --init-model {parent} is a lstm model, but the run's model is minilm\n")
    # A preset of another family: the same line.
    code, err = run_cli(capsys, "train", "--data", str(data), "--init-model", str(parent), "--preset", "minilm-quora",
                        "--out", str(tmp_path / "out"))
    assert (code, err) == (2, f"error: --init-model {parent} is a lstm model, but the run's model is minilm\n")
    assert not (tmp_path / "out").exists()


def test_a_folder_that_is_not_a_model_is_one_cli_error_line(capsys, tmp_path):
    data = tmp_path / "pairs.csv"
    child_pairs().to_csv(data, index=False)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "todo.txt").write_text("not a model\n")
    code, err = run_cli(capsys, "train", "--data", str(data), "--init-model", str(folder), "--runs", str(tmp_path))
    message = f"error: --init-model cannot be used: {folder} has no config.json; it is not a saved model\n"
    assert (code, err) == (2, message)


def test_the_spec_checks_the_family_and_reads_minilm_as_the_usual_start(family):
    parent, _ = family
    assert spec_from_options(model="lstm", init_model=str(parent)).init_model == str(parent)
    assert spec_from_options(model="minilm", init_model="minilm").init_model == ""  # the pretrained MiniLM
    assert spec_from_options(model="lstm", init_model="").init_model == ""
    with pytest.raises(SpecError) as raised:
        spec_from_options(model="lstm", init_model="minilm")
    assert (raised.value.option, raised.value.problem) == ("init_model", "minilm is a minilm model, but the run's model is lstm")
    with pytest.raises(SpecError) as raised:
        spec_from_options(model="lstm", init_model=3)
    assert raised.value.option == "init_model"


class RecordedRun:
    """Stands in for core.training.jobs.train_run: keeps the spec it was given and ends the job."""

    def __init__(self):
        self.specs = []

    def __call__(self, spec, pairs, runs_root, callbacks, stop_event, **_):
        self.specs.append(spec)
        raise RuntimeError("recorded by the test")


def test_the_train_pages_start_from_reaches_the_jobs_spec(family, runs_root, open_page, monkeypatch):
    saved = Path(shutil.copytree(family[0], runs_root / "parent"))
    recorded = RecordedRun()
    monkeypatch.setattr(core.training.jobs, "train_run", recorded)
    at = open_page(TRAIN.path)
    start_from = at.selectbox(key="init_model")
    assert start_from.value == "" and start_from.options[0] == "Scratch / the pretrained model"
    assert any(option.startswith("parent") for option in start_from.options)

    at.selectbox(key="model").set_value("dual-transformer").run()
    at.selectbox(key="init_model").set_value(str(saved)).run()
    assert at.selectbox(key="model").value == "lstm"  # the Model follows the saved model's family
    assert at.number_input(key="epochs").value == TRAINING_DEFAULTS["lstm"]["epochs"]  # its family's defaults
    at.button(key="start").click().run()
    assert not at.exception, at.exception
    job = job_queue().jobs[at.session_state.jobs[-1]]
    assert job_queue().wait(job, timeout=60)
    [spec] = recorded.specs
    assert (spec.model, spec.init_model) == ("lstm", str(saved))

    at.selectbox(key="model").set_value("minilm").run()  # another family cannot start from it
    assert at.selectbox(key="init_model").value == ""
