"""Cancelling a run stops it at once: part-way through a training step's forward pass, and in the scoring after
training, which a cancelled run skips (no baselines, no test figures) or, when the cancel comes during it, stops within
one batch.

Every cancel here is pressed from inside the run (a module hook, a callback), so the tests say where the run stopped,
not how fast the machine is."""

import json
import threading

import pytest
import torch

import core.training.pipeline
from core.status import CANCELLED
from core.training.pipeline import train_run
from core.training.specs import spec_from_options
from tests.test_trainer import StateRecorder, _same_state, _state, make_trainer


# ---- part-way through a training step ------------------------------------------------------------------------
class CancelDuringForward:
    """Presses Cancel while the model's first module runs its forward pass in step ``step`` (a forward hook)."""

    def __init__(self, trainer, stop: threading.Event, step: int):
        self.trainer, self.stop, self.step, self.calls = trainer, stop, step, 0
        first_module = next(module for module in trainer.model.modules() if not list(module.children()))
        first_module.register_forward_hook(self)

    def __call__(self, module, args, output):
        if self.trainer.step == self.step - 1 and module.training:  # inside that step, not a validation
            self.calls += 1
            self.stop.set()


def hooks_left(model: torch.nn.Module) -> int:
    """The stop hooks still on the model (``CancelDuringForward`` adds a forward hook, not a pre-hook)."""
    return sum(len(module._forward_pre_hooks) for module in model.modules())


def test_a_cancel_during_a_step_drops_that_step_before_it_changes_a_weight():
    stop, recorder = threading.Event(), StateRecorder()
    trainer = make_trainer(epochs=3, callbacks=[recorder], stop_event=stop)
    canceller = CancelDuringForward(trainer, stop, step=3)
    outcome = trainer.run()
    assert outcome.status == CANCELLED
    assert canceller.calls == 1  # stopped at the next module: the first one ran once in that step, not again
    assert trainer.step == 2 and outcome.message == "cancelled at step 2 of 15, before the first validation"
    assert _same_state(_state(trainer.model), recorder.after_step[2])  # no backward pass, no update
    assert hooks_left(trainer.model) == 0  # the model scores and saves without them


def test_the_stop_hooks_never_act_outside_a_training_step():
    stop = threading.Event()
    trainer = make_trainer(epochs=1, stop_event=stop)
    assert trainer.run().status == "done" and hooks_left(trainer.model) == 0
    stop.set()  # a stop flag set after the run: scoring still runs the model
    assert "roc_auc" in trainer.validation_hook(trainer.model, lambda done, total: None)


# ---- the scoring after training --------------------------------------------------------------------------
@pytest.fixture
def small_run(sample_pairs):
    """(spec, pairs): a tiny Siamese LSTM on the bundled sample, three epochs, with validation and test pairs."""
    pairs, _ = sample_pairs
    spec = spec_from_options(model="lstm", epochs=3, batch_size=32, device="cpu", max_length=16, patience=0,
                             test_fraction=0.1, model_options={"hidden_size": 10, "embedding_dim": 12})
    return spec, pairs


@pytest.fixture
def nothing_scored_after_training(monkeypatch):
    """Fails the test if the baselines or the test pairs are scored: a cancelled run needs neither."""

    def refused(*args, **kwargs):
        raise AssertionError("a cancelled run was scored after training")

    monkeypatch.setattr(core.training.pipeline, "validation_baselines", refused)
    monkeypatch.setattr(core.training.pipeline, "pair_scores", refused)


class CancelAtValidation:
    """Presses Cancel at the first progress report of the validation of ``epoch``."""

    def __init__(self, stop: threading.Event, epoch: int):
        self.stop, self.epoch = stop, epoch

    def on_validation_progress(self, trainer):
        if trainer.epoch == self.epoch:
            self.stop.set()


def test_a_run_cancelled_while_validating_is_saved_without_scoring_anything_more(
        small_run, tmp_path, nothing_scored_after_training):
    spec, pairs = small_run
    stop = threading.Event()
    result = train_run(spec, pairs, runs_root=tmp_path, stop_event=stop, callbacks=[CancelAtValidation(stop, 2)])
    assert result.outcome.status == CANCELLED and result.outcome.best_epoch == 1
    assert result.test == {} and result.baselines == {}
    assert result.validation == result.outcome.best_metrics  # the best validation's own figures, not scored again
    saved = json.loads((result.folder / "config.json").read_text())
    assert saved["training"]["status"] == CANCELLED and saved["metrics"]["test"] == {}


class CancelAtStage:
    """Presses Cancel at the first progress report of a scoring stage after training, and counts the reports."""

    def __init__(self, stop: threading.Event, stage: str):
        self.stop, self.stage, self.reports = stop, stage, 0

    def on_stage_progress(self, stage: str, done: int, total: int):
        if stage == self.stage:
            self.reports += 1
            self.stop.set()


def test_a_cancel_while_the_trained_run_is_scored_stops_the_scoring(small_run, tmp_path,
                                                                     nothing_scored_after_training):
    spec, pairs = small_run
    stop = threading.Event()
    canceller = CancelAtStage(stop, "scoring validation")
    result = train_run(spec, pairs, runs_root=tmp_path, stop_event=stop, callbacks=[canceller])
    assert canceller.reports == 1  # stopped within the first batch of the final calibration
    assert result.outcome.status == CANCELLED and result.outcome.best_epoch >= 1
    assert result.outcome.message == "all 3 epoch(s) trained, then cancelled while it was scored"
    assert result.test == {} and result.baselines == {}
    assert result.validation == result.outcome.best_metrics  # the best validation's, as for any cancelled run
    assert result.folder is not None  # nothing to replace: the trained model is kept
