"""The one spec builder: defaults from the model configs, presets under explicit options, every check,
and the CLI and the Train page producing the same run for the same choices."""
import dataclasses
import json
import math

import pytest

from core.cli.main import build_parser
from core.cli.train import spec_from_args
from core.models import DualEncoderConfig, SiameseLSTMConfig
from core.training.objectives import LossConfig
from core.training.presets import PRESETS
from core.training.specs import (
    TRAINING_DEFAULTS,
    SpecError,
    size_defaults,
    spec_from_options,
)
from lab.loss_menu import LOSS_CHOICES, loss_choice
from lab.navigation import TRAIN
from lab.session import job_queue

SAMPLE = "assets/sample_pairs.csv"


def test_plain_defaults_come_from_the_model_configs_and_the_family_defaults():
    spec = spec_from_options()
    assert (spec.model, spec.loss.name, spec.loss.margin) == ("lstm", "triplet", 0.25)
    assert (spec.train.epochs, spec.train.batch_size, spec.train.lr, spec.train.patience) == (10, 64, 1e-2, 3)
    assert spec.min_freq == 1 and SiameseLSTMConfig().dropout == 0.3
    assert spec.model_options == {"embedding_dim": 128, "hidden_size": 128, "num_layers": 1, "bidirectional": False}
    lstm = SiameseLSTMConfig()
    assert size_defaults("lstm") == {"embedding_dim": lstm.embedding_dim, "hidden_size": lstm.hidden_size,
                                     "num_layers": lstm.num_layers, "bidirectional": lstm.bidirectional}
    dual = DualEncoderConfig()
    assert size_defaults("dual-transformer") == {"d_model": dual.d_model, "num_layers": dual.num_layers,
                                                 "num_heads": dual.num_heads, "ff_dim": dual.ff_dim,
                                                 "projection_dim": dual.projection_dim} == \
        {"d_model": 128, "num_layers": 2, "num_heads": 4, "ff_dim": 512, "projection_dim": 128}
    assert size_defaults("minilm") == {}
    minilm = spec_from_options(model="minilm", loss="softmax")
    assert (minilm.train.epochs, minilm.train.batch_size, minilm.train.lr) == (1, 32, 2e-5)
    assert minilm.loss.scale == 20.0 and minilm.loss.margin == 0.0


def test_a_preset_is_the_base_and_explicit_options_override_it():
    preset = PRESETS["lstm-quora"].options
    spec = spec_from_options("lstm-quora")
    assert (spec.loss.name, spec.loss.form, spec.loss.margin) == ("contrastive", "squared_hinge", 1.0)
    assert (spec.train.epochs, spec.train.batch_size, spec.val_fraction) == (6, 256, 0.05)
    assert (spec.train.validate_every, spec.train.max_minutes, spec.train.patience) == (250, 45.0, 0)
    assert spec.model_options == preset["model_options"]

    tuned = spec_from_options("lstm-quora", epochs=1, margin=0.5, model_options={"hidden_size": 48})
    assert (tuned.train.epochs, tuned.loss.margin, tuned.train.batch_size) == (1, 0.5, 256)
    assert tuned.model_options == {**preset["model_options"], "hidden_size": 48}  # dropout and biLSTM kept
    # None means "not given": the preset's value stays.
    assert spec_from_options("lstm-quora", epochs=None, lr=None) == spec


def test_another_model_or_loss_drops_only_the_preset_parts_that_belong_to_the_old_one():
    spec = spec_from_options("minilm-quora", model="lstm")
    assert (spec.train.max_steps, spec.train.max_val_pairs, spec.max_length) == (3600, 2000, 40)  # the schedule stays
    assert (spec.train.epochs, spec.train.batch_size, spec.train.lr, spec.train.patience) == \
        tuple(TRAINING_DEFAULTS["lstm"].values())
    assert spec.model_options == size_defaults("lstm")
    triplet = spec_from_options("lstm-quora", loss="triplet")
    assert triplet.loss.margin == 0.25 and triplet.train.batch_size == 256


def test_settings_that_mean_nothing_to_a_loss_are_normalised():
    assert spec_from_options(loss="contrastive", hard_negatives=True).hard_negatives is False
    assert spec_from_options(loss="softmax", hard_negatives=True).hard_negatives is True
    assert spec_from_options(loss="triplet", form="margin_squared").loss.form == "squared_hinge"
    assert spec_from_options(loss="softmax", margin=0.7).loss.margin == 0.0


@pytest.mark.parametrize("options,option", [
    ({"batch_size": 1}, "batch_size"), ({"epochs": 0}, "epochs"), ({"epochs": True}, "epochs"),
    ({"epochs": 1.5}, "epochs"), ({"lr": 0.0}, "lr"), ({"lr": math.nan}, "lr"), ({"margin": math.inf}, "margin"),
    ({"margin": -0.1}, "margin"), ({"scale": 0.0}, "scale"), ({"max_length": 0}, "max_length"),
    ({"max_length": 100_000_000}, "max_length"), ({"max_steps": -1}, "max_steps"), ({"patience": -1}, "patience"),
    ({"seed": -5}, "seed"), ({"min_freq": 0}, "min_freq"), ({"max_vocab": 0}, "max_vocab"),
    ({"model": "gru"}, "model"), ({"model": ["lstm"]}, "model"), ({"loss": "hinge"}, "loss"),
    ({"form": "cubic"}, "form"), ({"device": "tpu"}, "device"), ({"val_fraction": 0.9}, "val_fraction"),
    ({"val_fraction": 0.3, "test_fraction": 0.3}, "test_fraction"), ({"hard_negatives": "yes"}, "hard_negatives"),
    ({"model_options": {"hidden_size": 10**9}}, "model_options"), ({"model_options": {"vocab_size": 5}}, "model_options"),
    ({"model_options": {"nope": 1}}, "model_options"), ({"model_options": [1]}, "model_options"),
    ({"model": "dual-transformer", "model_options": {"d_model": 130}}, "model_options"),
    ({"model_options": {"dropout": 2.0}}, "model_options"), ({"colour": "red"}, "colour"),
    ({"max_vocab": 10_000_000, "model_options": {"embedding_dim": 1024}}, "model_options"),
    ({"model": "dual-transformer", "model_options": {"d_model": 1024, "num_layers": 12, "ff_dim": 8192}},
     "model_options"),
    ({"max_minutes": -1.0}, "max_minutes"), ({"max_minutes": math.nan}, "max_minutes"),
    ({"max_minutes": "ten"}, "max_minutes"), ({"max_minutes": 10**7}, "max_minutes"),
    ({"keep_unvalidated": 1}, "keep_unvalidated"),
    ({"validate_every": -1}, "validate_every"),
])
def test_every_bad_option_is_refused_naming_the_option(options, option):
    with pytest.raises(SpecError) as raised:
        spec_from_options(**options)
    assert raised.value.option == option
    assert str(raised.value).startswith(option)


def test_the_time_budget_and_keeping_unvalidated_runs_are_options():
    spec = spec_from_options()
    assert (spec.train.max_minutes, spec.train.max_steps, spec.keep_unvalidated) == (0.0, 0, False)
    spec = spec_from_options(max_minutes=45, max_steps=3000, keep_unvalidated=True)
    assert spec.train.max_minutes == 45.0 and isinstance(spec.train.max_minutes, float)
    assert spec.train.max_steps == 3000 and spec.keep_unvalidated is True
    assert spec_from_options("minilm-quora", max_minutes=30).train.max_steps == 3600  # the preset's cap stays
    assert cli_spec("--model", "lstm", "--max-minutes", "45", "--max-steps", "3000", "--keep-unvalidated") == \
        dataclasses.replace(spec, data_name="sample_pairs.csv")
    # a budget alone is no recipe: the auto recipe, planned within it
    assert cli_spec("--max-minutes", "45").model == "minilm"


def test_the_cli_names_the_time_budget_flag(capsys):
    from core.cli.main import main

    assert main(["train", "--data", SAMPLE, "--max-minutes", "-5"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == "error: --max-minutes must be at least 0 and at most 525600, got -5"


def test_an_unknown_preset_is_refused():
    with pytest.raises(SpecError, match="lstm-quora") as raised:
        spec_from_options("nope")
    assert raised.value.option == "preset"


def test_the_loss_menu_covers_every_loss_and_form_once():
    specs = [spec_from_options(**choice.options) for choice in LOSS_CHOICES.values()]
    assert {(s.loss.name, s.loss.form if s.loss.name == "contrastive" else None) for s in specs} == {
        ("triplet", None), ("softmax", None), ("contrastive", "squared_hinge"), ("contrastive", "margin_squared"),
        ("cosent", None), ("multitask", None)}
    assert [loss_choice(s.loss) for s in specs] == list(LOSS_CHOICES)
    assert not any("seed 00" in choice.label for choice in LOSS_CHOICES.values())
    # Short names fit the menu; the formula is in the help text.
    assert all(len(choice.label) <= 40 and ":" not in choice.label and choice.help for choice in LOSS_CHOICES.values())
    assert LOSS_CHOICES["cosent"].label == "CoSENT"
    assert "log(1 + Σ_{yᵢ>yⱼ} exp(λ·(sⱼ − sᵢ)))" in LOSS_CHOICES["cosent"].help


def test_cosent_and_multitask_keep_only_the_settings_they_use():
    cosent = spec_from_options(loss="cosent", margin=0.7, form="margin_squared", weight=3.0, hard_negatives=True)
    assert (cosent.loss.margin, cosent.loss.form, cosent.loss.scale, cosent.loss.weight, cosent.hard_negatives) == \
        (0.0, "squared_hinge", 20.0, 1.0, False)
    assert spec_from_options(loss="cosent", scale=12).loss.scale == 12.0
    multitask = spec_from_options(loss="multitask", hard_negatives=True)
    assert (multitask.loss.margin, multitask.loss.form, multitask.loss.scale, multitask.loss.weight) == \
        (1.0, "squared_hinge", 20.0, 1.0)
    assert multitask.hard_negatives is False  # its extra negatives are the batch's own non-duplicates
    tuned = spec_from_options(loss="multitask", margin=0.8, scale=10, weight=0.25, form="margin_squared")
    assert (tuned.loss.margin, tuned.loss.form, tuned.loss.scale, tuned.loss.weight) == \
        (0.8, "squared_hinge", 10.0, 0.25)  # one contrastive form for multitask, the recipe's
    assert spec_from_options(loss="contrastive", weight=3.0).loss.weight == 1.0  # means nothing there
    for bad in (-0.5, math.nan, "one", True, 1001):
        with pytest.raises(SpecError) as raised:
            spec_from_options(loss="multitask", weight=bad)
        assert raised.value.option == "weight"
    assert cli_spec("--loss", "multitask", "--weight", "0.25", "--scale", "10", "--margin", "0.8") == \
        dataclasses.replace(tuned, data_name="sample_pairs.csv")


def test_the_lstm_string_settings_are_checked_against_their_choices(monkeypatch):
    spec = spec_from_options(model_options={"pooling": "mean+max", "tokens": "wordpiece", "init_embeddings": "minilm"})
    assert {k: spec.model_options[k] for k in ("pooling", "tokens", "init_embeddings")} == \
        {"pooling": "mean+max", "tokens": "wordpiece", "init_embeddings": "minilm"}
    assert "pooling" not in spec_from_options().model_options  # not given: the config's default applies
    for name, value, choices in (("pooling", "avg", "mean, max, mean+max"), ("tokens", "chars", "words, wordpiece"),
                                 ("init_embeddings", 1, "random, minilm"), ("pooling", ["max"], "mean, max")):
        with pytest.raises(SpecError) as raised:
            spec_from_options(model_options={name: value})
        assert raised.value.option == "model_options"
        assert raised.value.problem.startswith(f"field {name} must be one of {choices}"), raised.value.problem
    # WordPiece tokens bring BERT's 30,522 entries whatever max_vocab says: the size check counts them.
    monkeypatch.setenv("SIAMESE_LAB_MAX_PARAMETERS", "900000")
    small = {"embedding_dim": 32, "hidden_size": 8}
    assert spec_from_options(max_vocab=1000, model_options=small).model_options["embedding_dim"] == 32
    with pytest.raises(SpecError, match="978,048 parameters"):  # 30,522 x 32 + the LSTM's 1,344
        spec_from_options(max_vocab=1000, model_options={**small, "tokens": "wordpiece"})


def test_the_cli_refuses_bad_options_with_the_flag_name(capsys):
    from core.cli.main import main

    assert main(["train", "--data", SAMPLE, "--batch-size", "1"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == "error: --batch-size must be at least 2 and at most 65536, got 1"
    assert main(["train", "--data", SAMPLE, "--model-options", '{"hidden_size": 0}']) == 2
    assert "--model-options field hidden_size must be at least 2" in capsys.readouterr().err
    assert main(["train", "--data", SAMPLE, "--loss", "multitask", "--weight", "-1"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == "error: --weight must be at least 0 and at most 1000, got -1"
    assert main(["train", "--data", SAMPLE, "--model-options", '{"pooling": "avg"}']) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == "error: --model-options field pooling must be one of mean, max, mean+max, got 'avg'"


# ---- the CLI and the page describe the same run ------------------------------------------------------
def cli_spec(*flags):
    return spec_from_args(build_parser().parse_args(["train", "--data", SAMPLE, *flags]))


def page_spec(at):
    at.button(key="start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    job = job_queue().jobs[at.session_state.jobs[-1]]
    job.cancel()  # only the spec matters here
    job_queue().wait(job, timeout=120)
    return job.spec


def same_run(a, b) -> bool:
    return dataclasses.replace(a, data_name="") == dataclasses.replace(b, data_name="")


@pytest.mark.slow
def test_the_cli_and_the_train_page_build_equal_specs(runs_root, open_page):
    at = open_page(TRAIN.path, preset="custom")  # the plain defaults, not the sample's sample-demo
    at.selectbox(key="loss").set_value("contrastive_margin_squared").run()
    for key, value in {"epochs": 1, "batch_size": 16, "lr": 0.01, "margin": 0.8, "max_length": 16, "seed": 3,
                       "patience": 1, "lstm.embedding_dim": 12, "lstm.hidden_size": 10, "max_steps": 40,
                       "max_minutes": 12.5}.items():
        at.number_input(key=key).set_value(value)
    at.checkbox(key="keep_unvalidated").check()
    at.run()
    from_page = page_spec(at)
    from_cli = cli_spec("--model", "lstm", "--loss", "contrastive", "--form", "margin_squared", "--epochs", "1",
                        "--batch-size", "16", "--lr", "0.01", "--margin", "0.8", "--max-length", "16", "--seed", "3",
                        "--patience", "1", "--model-options", json.dumps({"embedding_dim": 12, "hidden_size": 10}),
                        "--max-steps", "40", "--max-minutes", "12.5", "--keep-unvalidated")
    assert same_run(from_page, from_cli), (from_page, from_cli)
    assert from_page.loss.form == "margin_squared" and from_page.model_options["hidden_size"] == 10
    assert (from_page.train.max_steps, from_page.train.max_minutes, from_page.keep_unvalidated) == (40, 12.5, True)

    at = open_page(TRAIN.path)  # a new session: nothing left over from the custom run above
    at.selectbox(key="preset").set_value("sample-demo").run()
    at.number_input(key="epochs").set_value(2).run()
    assert same_run(page_spec(at), cli_spec("--preset", "sample-demo", "--epochs", "2"))


def test_the_train_page_shows_the_setting_each_new_loss_uses(runs_root, open_page):
    at = open_page(TRAIN.path, preset="custom")  # the plain defaults, not the sample's sample-demo
    at.selectbox(key="loss").set_value("cosent").run()
    keys = lambda widgets: {widget.key for widget in widgets}  # noqa: E731
    assert "scale" in keys(at.number_input) and "margin" not in keys(at.number_input)  # lambda, no margin
    assert "hard_negatives" not in keys(at.checkbox)  # only batches of duplicates take them
    at.number_input(key="scale").set_value(12.0)
    at.number_input(key="epochs").set_value(1).run()
    from_page = page_spec(at)
    assert from_page.loss == LossConfig("cosent", scale=12.0)
    assert same_run(from_page, cli_spec("--loss", "cosent", "--scale", "12", "--epochs", "1"))

    at = open_page(TRAIN.path, preset="custom")
    at.selectbox(key="loss").set_value("multitask").run()
    assert "margin" in keys(at.number_input) and "hard_negatives" not in keys(at.checkbox)
    assert at.number_input(key="margin").value == 1.0  # the contrastive term's default
    at.number_input(key="margin").set_value(0.8)
    at.number_input(key="epochs").set_value(1).run()
    from_page = page_spec(at)
    assert from_page.loss == LossConfig("multitask", margin=0.8)
    assert same_run(from_page, cli_spec("--loss", "multitask", "--margin", "0.8", "--epochs", "1"))


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_presets_reference_curve_is_a_measured_validation_curve(name):
    from lab.training_view import REFERENCE_CURVES

    curves = json.loads(REFERENCE_CURVES.read_text())
    assert set(curves) <= set(PRESETS)
    curve = curves.get(name, {}).get("points", [])
    seconds = [point[0] for point in curve]
    assert all(len(point) == 2 for point in curve) and seconds == sorted(seconds)
    assert all(0.5 < auc <= 1.0 and 0 < t <= PRESETS[name].options.get("max_minutes", 1e9) * 60 for t, auc in curve)
    if name == "lstm-quora":  # measured (docs/BENCHMARKS.md, issue 14): it must reach the run's best
        assert len(curve) == 31 and max(auc for _, auc in curve) == pytest.approx(0.9234)
    if name == "minilm-quora":
        assert len(curve) == 15 and max(auc for _, auc in curve) == pytest.approx(0.9437)


# ---- precision and compile (issue 26) -----------------------------------------------------------------
def test_precision_and_compile_are_options_with_cli_flags():
    spec = spec_from_options()
    assert (spec.train.precision, spec.train.compile) == ("auto", False)  # compile: not yet measured faster
    spec = spec_from_options(precision="bf16", compile=True)
    assert (spec.train.precision, spec.train.compile) == ("bf16", True)
    assert cli_spec("--model", "lstm", "--precision", "bf16", "--compile") == dataclasses.replace(
        spec, data_name="sample_pairs.csv")
    for options, option in (({"precision": "fp8"}, "precision"), ({"compile": "yes"}, "compile")):
        with pytest.raises(SpecError) as raised:
            spec_from_options(**options)
        assert raised.value.option == option


def test_the_gpu_preset_is_minilm_quora_at_batch_256_compiled():
    preset = PRESETS["minilm-quora-gpu"]
    assert preset.for_gpu and not any(PRESETS[name].for_gpu for name in ("lstm-quora", "minilm-quora", "sample-demo"))
    spec = spec_from_options("minilm-quora-gpu")
    assert (spec.model, spec.loss.name, spec.loss.form, spec.loss.margin) == ("minilm", "contrastive",
                                                                              "squared_hinge", 1.0)
    t = spec.train
    assert (t.batch_size, t.epochs, t.lr, t.validate_every, t.max_minutes) == (256, 4, 1e-4, 250, 10.0)
    assert (t.precision, t.compile, spec.max_length, spec.val_fraction) == ("auto", True, 40, 0.05)
    assert not cli_spec("--preset", "minilm-quora-gpu", "--no-compile").train.compile  # the preset's choice yields
    assert cli_spec("--preset", "minilm-quora-gpu", "--precision", "fp32").train.precision == "fp32"


def test_the_train_page_marks_gpu_presets_and_says_what_device_is_there(runs_root, open_page, monkeypatch):
    at = open_page(TRAIN.path, preset="custom")  # the plain defaults, not the sample's sample-demo
    labels = at.selectbox(key="preset").options
    assert labels[-1] == "Custom settings" and at.selectbox(key="preset").value == "custom"  # kept as it was set
    assert [label.split(":")[0] for label in labels[:-1]] == [
        f"{name} (GPU)" if PRESETS[name].for_gpu else name for name in PRESETS]
    assert "minilm-quora-gpu (GPU)" in [label.split(":")[0] for label in labels]
    import torch

    import lab.training_view

    if not torch.cuda.is_available():
        assert any(caption.value.startswith("CPU only (no CUDA device)") for caption in at.caption)
    monkeypatch.setattr(lab.training_view, "cuda_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=0: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=0: (int(78.5 * 2**30), 80 * 2**30))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    at.run()
    assert not at.exception, at.exception
    assert "GPU: NVIDIA H100 80GB HBM3 · 78.5 GiB free of 80.0 GiB" in [caption.value for caption in at.caption]
    assert at.radio(key="device").options == ["Auto", "CPU", "GPU (CUDA)"]


def test_the_gpu_preset_is_suggested_only_with_a_gpu_and_data_enough():
    from core.training.presets import GPU_PRESET, GPU_PRESET_MIN_PAIRS, PRESETS, suggested_preset

    assert PRESETS[GPU_PRESET].for_gpu
    assert suggested_preset(323_000, cuda=True) == GPU_PRESET
    assert suggested_preset(GPU_PRESET_MIN_PAIRS, cuda=True) == GPU_PRESET
    assert suggested_preset(GPU_PRESET_MIN_PAIRS - 1, cuda=True) is None  # the bundled sample: 479 pairs
    assert suggested_preset(323_000, cuda=False) is None
    assert suggested_preset(479, cuda=False) is None and "sample-demo" in PRESETS  # default_preset's first Start


def test_the_train_page_opens_on_the_auto_recipe_for_an_upload():
    from core.training.presets import GPU_PRESET, GPU_PRESET_MIN_PAIRS, default_preset

    assert default_preset(500, cuda=False) == "auto"  # a user's own data: the recipe read off it, never the LSTM
    assert default_preset(500, cuda=True) == "auto"
    assert default_preset(479, cuda=False, bundled_sample=True) == "sample-demo"
    assert default_preset(GPU_PRESET_MIN_PAIRS, cuda=True) == GPU_PRESET
