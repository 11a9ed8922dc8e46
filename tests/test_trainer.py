"""Objectives and the training loop: learning, callbacks, cancellation, early stopping, failures."""

import math
import shutil
import threading

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from core.inference.metrics import calibrate
from core.losses import contrastive_loss, in_batch_softmax_loss, triplet_loss
from core.models import SiameseLSTM, SiameseLSTMConfig
from core.status import CANCELLED, DONE
from core.text.pair_table import PairTable
from core.text.word_tokenizer import WordTokenizer
from core.training.objectives import DEFAULT_MARGINS, LOSS_NAMES, LossConfig
from core.training.trainer import (FP32, AutocastPlan, TrainConfig, Trainer, TrainingError, autocast_plan,
                                   compile_mode)
from tests.conftest import synthetic_pairs

BATCH, DIM = 13, 24


# ---- objectives ------------------------------------------------------------------------------
def test_loss_config_defaults():
    assert LossConfig().name == "triplet"
    assert LossConfig("triplet").margin == 0.25
    assert LossConfig("contrastive").margin == 1.0
    assert LossConfig("contrastive").form == "squared_hinge"
    assert LossConfig("softmax").scale == 20.0
    assert LossConfig("triplet", margin=0.4).margin == 0.4
    assert LOSS_NAMES == ("triplet", "contrastive", "softmax", "cosent", "multitask", "bce")
    assert LossConfig("cosent").margin == 0.0 and LossConfig("multitask").margin == 1.0  # the contrastive term's
    assert DEFAULT_MARGINS["triplet"] == 0.25


def test_loss_config_batch_kind():
    assert LossConfig("triplet").batch_kind == "duplicates"
    assert LossConfig("softmax").batch_kind == "duplicates"
    assert LossConfig("contrastive").batch_kind == "labelled"
    assert LossConfig("cosent").batch_kind == "labelled"
    assert LossConfig("multitask").batch_kind == "labelled_distinct"
    assert LossConfig("contrastive").batch_kind == "labelled"


@pytest.mark.parametrize("kwargs", [{"name": "hinge"}, {"name": "contrastive", "form": "cubic"}, {"name": ""}])
def test_loss_config_rejects_unknown_names(kwargs):
    with pytest.raises(ValueError, match="unknown"):
        LossConfig(**kwargs)


def _vectors(seed: int):
    g = torch.Generator().manual_seed(seed)
    v1 = torch.randn(BATCH, DIM, generator=g, dtype=torch.float64) * 3  # not unit length on purpose
    v2 = torch.randn(BATCH, DIM, generator=g, dtype=torch.float64) * 0.5
    labels = (torch.arange(BATCH) % 3 == 0).to(torch.float64)
    return v1, v2, labels


def test_triplet_objective_equals_triplet_loss():
    v1, v2, labels = _vectors(0)
    value = LossConfig("triplet", margin=0.3)(v1, v2, labels)
    torch.testing.assert_close(value, triplet_loss(v1, v2, margin=0.3))
    assert value.dim() == 0


@pytest.mark.parametrize("form", ["squared_hinge", "margin_squared"])
def test_contrastive_objective_equals_contrastive_loss_on_unit_vectors(form):
    v1, v2, labels = _vectors(1)
    value = LossConfig("contrastive", margin=0.8, form=form)(v1, v2, labels)
    expected = contrastive_loss(F.normalize(v1, dim=-1), F.normalize(v2, dim=-1), labels, margin=0.8, form=form)
    torch.testing.assert_close(value, expected)
    # the loss normalises itself: raw vectors give the same value
    torch.testing.assert_close(value, contrastive_loss(v1, v2, labels, margin=0.8, form=form))


def test_softmax_objective_equals_in_batch_softmax_on_cosines():
    v1, v2, labels = _vectors(2)
    value = LossConfig("softmax", scale=7.0)(v1, v2, labels)
    expected = in_batch_softmax_loss(F.normalize(v1, dim=-1), F.normalize(v2, dim=-1), scale=7.0)
    torch.testing.assert_close(value, expected)
    # by hand: cross-entropy of scaled cosine logits with targets on the diagonal
    cosines = F.cosine_similarity(v1[:, None, :], v2[None, :, :], dim=-1)  # (B, B)
    torch.testing.assert_close(value, F.cross_entropy(7.0 * cosines, torch.arange(BATCH)))


# ---- a synthetic task (tests.conftest.synthetic_pairs) ---------------------------------------------
def make_trainer(n_train=60, n_val=31, epochs=2, batch_size=7, callbacks=(), objective=None, lr=1e-2,
                 patience=0, trainer_class=Trainer, stop_event=None, clock=None, validation_batch=256, **config):
    train, val = synthetic_pairs(n_train, 0), synthetic_pairs(n_val, 1)
    tokenizer = WordTokenizer.build(pd.concat([train.question1, train.question2]), min_freq=1, max_length=11)
    torch.manual_seed(0)
    model = SiameseLSTM(SiameseLSTMConfig(vocab_size=tokenizer.vocab_size, embedding_dim=12, hidden_size=16, dropout=0.0),
                        tokenizer)
    config = TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, device="cpu", patience=patience, warmup_ratio=0.0,
                         **config)
    validate = None
    if n_val:
        val_table = PairTable(val, tokenizer)
        validate = lambda trained, progress: calibrate(  # noqa: E731
            trained, val_table, batch_size=validation_batch, progress=progress).metrics
    return trainer_class(model, objective or LossConfig("triplet"), PairTable(train, tokenizer), config,
                         validate=validate, callbacks=callbacks, stop_event=stop_event,
                         **({"clock": clock} if clock else {}))


def _state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same_state(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_training_learns_the_synthetic_task():
    trainer = make_trainer(n_train=200, n_val=97, epochs=3, batch_size=13)
    before = trainer.validate()["roc_auc"]
    outcome = trainer.run()
    assert outcome.status == DONE
    assert [e.epoch for e in outcome.epochs] == [1, 2, 3]
    assert outcome.epochs[-1].train_loss < outcome.epochs[0].train_loss
    after = trainer.validate()["roc_auc"]
    assert after > before
    assert after > 0.97
    assert outcome.best_metrics["roc_auc"] == max(e.metrics["roc_auc"] for e in outcome.epochs)
    assert trainer.total_steps == 3 * 8  # 100 duplicates in batches of 13
    assert outcome.pairs_seen == 3 * 100
    assert outcome.pairs_per_second > 0


class EventLog:
    def __init__(self):
        self.events = []

    def on_train_start(self, trainer):
        self.events.append(("start", trainer.step, trainer.total_steps))

    def on_batch_end(self, trainer):
        self.events.append(("batch", trainer.step, trainer.epoch))
        assert math.isfinite(trainer.loss)

    def on_epoch_end(self, trainer):
        self.events.append(("epoch", trainer.step, trainer.epoch))
        assert trainer.epoch_results[-1].epoch == trainer.epoch

    def on_train_end(self, trainer):
        self.events.append(("end", trainer.step, trainer.outcome.status))


def test_callbacks_receive_events_in_order():
    log = EventLog()
    trainer = make_trainer(epochs=2, callbacks=[log])
    trainer.run()
    names = [e[0] for e in log.events]
    per_epoch = trainer.steps_per_epoch
    assert per_epoch == 5  # 30 duplicates in batches of 7
    assert trainer.total_steps == 2 * per_epoch
    assert names == ["start"] + (["batch"] * per_epoch + ["epoch"]) * 2 + ["end"]
    assert names.count("batch") == trainer.total_steps
    assert log.events[0] == ("start", 0, trainer.total_steps)
    assert [e[1] for e in log.events if e[0] == "batch"] == list(range(1, trainer.total_steps + 1))
    assert [e[2] for e in log.events if e[0] == "epoch"] == [1, 2]
    assert log.events[-1] == ("end", trainer.total_steps, DONE)


class CancelAt:
    def __init__(self, step):
        self.step = step
        self.batches = 0

    def on_batch_end(self, trainer):
        self.batches += 1
        if trainer.step == self.step:
            trainer.cancel()


def test_cancel_from_callback_stops_within_one_step():
    canceller, log = CancelAt(3), EventLog()
    trainer = make_trainer(epochs=3, callbacks=[canceller, log])
    outcome = trainer.run()
    assert outcome.status == "cancelled"
    assert trainer.step == 3 and canceller.batches == 3
    assert outcome.message == "cancelled at step 3 of 15, before the first validation"
    assert outcome.best_epoch == 0 and outcome.epochs == []
    assert [e[0] for e in log.events] == ["start", "batch", "batch", "batch", "end"]


def test_stop_event_set_before_run_trains_nothing():
    stop = threading.Event()
    stop.set()
    trainer = make_trainer(stop_event=stop)
    before = _state(trainer.model)
    outcome = trainer.run()
    assert outcome.status == "cancelled" and trainer.step == 0
    assert _same_state(before, _state(trainer.model))


class ScriptedValidation(Trainer):
    """A trainer whose validation ROC AUC follows a script, to test model selection exactly."""

    script: list = []

    def validate(self):
        return {"roc_auc": self.script[self.epoch - 1], "accuracy": 0.5, "f1": 0.5}


def _scripted(aucs):
    return type("Scripted", (ScriptedValidation,), {"script": list(aucs)})


def test_early_stopping_after_patience_epochs_without_improvement():
    trainer = make_trainer(epochs=6, patience=2, trainer_class=_scripted([0.7, 0.8, 0.75, 0.79, 0.95, 0.99]))
    outcome = trainer.run()
    assert outcome.status == DONE and outcome.stopped_early
    assert len(outcome.epochs) == 4  # best at 2; 3 and 4 do not improve -> stop after 4
    assert outcome.best_epoch == 2
    assert outcome.best_metrics["roc_auc"] == 0.8
    assert outcome.message == "stopped after epoch 4: validation ROC AUC did not improve for 2 epoch(s)"


def test_patience_zero_disables_early_stopping():
    trainer = make_trainer(epochs=4, patience=0, trainer_class=_scripted([0.9, 0.5, 0.5, 0.5]))
    outcome = trainer.run()
    assert outcome.status == DONE and len(outcome.epochs) == 4 and outcome.best_epoch == 1
    assert not outcome.stopped_early


class StateRecorder:
    def __init__(self):
        self.after_epoch = {}
        self.after_step = {}

    def on_batch_end(self, trainer):
        self.after_step[trainer.step] = _state(trainer.model)

    def on_epoch_end(self, trainer):
        self.after_epoch[trainer.epoch] = _state(trainer.model)


def test_best_epoch_weights_are_restored():
    recorder = StateRecorder()
    trainer = make_trainer(epochs=3, callbacks=[recorder], trainer_class=_scripted([0.7, 0.9, 0.8]))
    outcome = trainer.run()
    assert outcome.status == DONE and outcome.best_epoch == 2
    final = _state(trainer.model)
    assert _same_state(final, recorder.after_epoch[2])
    assert not _same_state(final, recorder.after_epoch[3])  # training did move the weights


def test_best_epoch_weights_with_real_validation():
    recorder = StateRecorder()
    trainer = make_trainer(epochs=3, callbacks=[recorder])
    outcome = trainer.run()
    aucs = [e.metrics["roc_auc"] for e in outcome.epochs]
    assert outcome.best_epoch == int(np.argmax(aucs)) + 1
    assert _same_state(_state(trainer.model), recorder.after_epoch[outcome.best_epoch])


class NaNAtCall:
    """Wraps an objective and returns NaN on its n-th call (keeping the graph, like a real blow-up)."""

    def __init__(self, n, inner=None):
        self.n, self.calls = n, 0
        self.inner = inner or LossConfig("triplet")
        self.batch_kind = self.inner.batch_kind

    def __call__(self, v1, v2, labels=None, *rest):
        self.calls += 1
        loss = self.inner(v1, v2, labels, *rest)
        return loss * float("nan") if self.calls == self.n else loss


def test_nan_loss_fails_and_keeps_last_good_weights():
    recorder, log = StateRecorder(), EventLog()
    trainer = make_trainer(epochs=2, callbacks=[recorder, log], objective=NaNAtCall(2))
    outcome = trainer.run()
    assert outcome.status == "failed"
    assert outcome.message == f"the loss became nan at step 2; try a lower learning rate (now {trainer.config.lr:g})"
    assert trainer.step == 1
    final = _state(trainer.model)
    assert all(torch.isfinite(v).all() for v in final.values() if v.is_floating_point())
    assert _same_state(final, recorder.after_step[1])
    assert log.events[-1] == ("end", 1, "failed")


class OutOfMemory:
    batch_kind = "duplicates"

    def __call__(self, v1, v2, labels=None, *rest):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 4.00 GiB total)")


def test_out_of_memory_suggests_smaller_batch_or_length():
    trainer = make_trainer(objective=OutOfMemory())
    outcome = trainer.run()
    assert outcome.status == "failed"
    assert outcome.message == ("out of memory (CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 4.00 GiB "
                               "total)); try a smaller batch size or a shorter max length")
    assert outcome.best_epoch == 0


def test_no_possible_batch_raises_training_error():
    trainer = make_trainer(n_train=1)  # one duplicate pair cannot form a batch with a negative
    with pytest.raises(TrainingError, match="no training batch"):
        trainer.run()


def test_without_validation_every_epoch_counts_as_best():
    recorder = StateRecorder()
    trainer = make_trainer(n_val=0, epochs=2, callbacks=[recorder])
    outcome = trainer.run()
    assert outcome.status == DONE and outcome.best_epoch == 2
    assert outcome.epochs[0].metrics == {}
    assert _same_state(_state(trainer.model), recorder.after_epoch[2])


def test_contrastive_training_uses_every_pair():
    log = EventLog()
    trainer = make_trainer(epochs=1, callbacks=[log], objective=LossConfig("contrastive"))
    outcome = trainer.run()
    assert outcome.status == DONE
    assert trainer.total_steps == math.ceil(60 / 7)
    assert outcome.pairs_seen == 60


# ---- cancelling while validation scores ----------------------------------------------------------------
class ValidationProgressLog:
    def __init__(self):
        self.seen = []

    def on_validation_progress(self, trainer):
        self.seen.append((trainer.epoch, *trainer.validation_progress))


def test_validation_reports_its_progress_to_the_callbacks():
    log = ValidationProgressLog()
    trainer = make_trainer(n_val=31, epochs=2, callbacks=[log], validation_batch=10)
    trainer.run()
    # 31 pairs in chunks of 10 questions, each side's questions counting half a pair: the first side
    # brings 10, 20, 30, 31 questions (5, 10, 15, 15 pairs), the second 31 + those (20, 25, 30, 31 pairs).
    one_validation = [(5, 31), (10, 31), (15, 31), (15, 31), (20, 31), (25, 31), (30, 31), (31, 31)]
    assert log.seen == [(1, *seen) for seen in one_validation] + [(2, *seen) for seen in one_validation]
    assert trainer.validation_progress is None  # only set while scoring


class CancelWhenValidationStarts:
    """Sets the stop event at the first validation progress report of ``epoch``; counts the reports."""

    def __init__(self, stop: threading.Event, epoch: int):
        self.stop, self.epoch, self.reports = stop, epoch, 0

    def on_validation_progress(self, trainer):
        if trainer.epoch == self.epoch:
            self.reports += 1
            self.stop.set()


def test_cancel_during_validation_stops_within_one_validation_batch():
    stop = threading.Event()
    canceller, log, recorder = CancelWhenValidationStarts(stop, epoch=1), EventLog(), StateRecorder()
    # 3,000 validation pairs in chunks of 50: 120 chunks to score if nothing stopped it
    trainer = make_trainer(n_val=3000, epochs=3, callbacks=[canceller, log, recorder], stop_event=stop,
                           validation_batch=50)
    finished = []
    hook = trainer.validation_hook
    trainer.validation_hook = lambda model, progress: finished.append(hook(model, progress))
    outcome = trainer.run()
    assert outcome.status == CANCELLED
    assert canceller.reports == 1 and finished == []  # the hook stopped after its first chunk
    assert trainer.step == trainer.steps_per_epoch == 5  # the first epoch had trained
    assert outcome.best_epoch == 0 and outcome.epochs == []
    assert outcome.message == "cancelled at step 5 of 15, during the first validation"
    assert [e[0] for e in log.events] == ["start"] + ["batch"] * 5 + ["end"]
    assert _same_state(_state(trainer.model), recorder.after_step[5])  # no epoch finished: the weights as they were


def test_cancel_during_a_later_validation_keeps_the_best_epoch_so_far():
    stop = threading.Event()
    canceller, recorder = CancelWhenValidationStarts(stop, epoch=2), StateRecorder()
    trainer = make_trainer(n_val=300, epochs=3, callbacks=[canceller, recorder], stop_event=stop, validation_batch=50)
    outcome = trainer.run()
    assert outcome.status == CANCELLED and canceller.reports == 1
    assert trainer.step == 10 and outcome.best_epoch == 1 and [e.epoch for e in outcome.epochs] == [1]
    assert outcome.message == ("cancelled at step 10 of 15 while scoring the validation of epoch 2; "
                               "the best model so far (epoch 1) is kept")
    assert _same_state(_state(trainer.model), recorder.after_epoch[1])
    assert not _same_state(_state(trainer.model), recorder.after_step[10])


# ---- the step cap and the time budget ------------------------------------------------------------------
class FakeClock:
    """A clock that only moves when told: each training step "takes" ``step_seconds``."""

    def __init__(self, step_seconds: float):
        self.now, self.step_seconds = 1000.0, step_seconds

    def __call__(self) -> float:
        return self.now

    def on_batch_end(self, trainer):
        self.now += self.step_seconds


def test_the_time_budget_stops_the_run_with_a_final_validation():
    clock, log = FakeClock(step_seconds=25.0), EventLog()
    # 1 minute at 25 s a step: the budget is spent after step 3 (75 s), in the first of 3 planned epochs
    trainer = make_trainer(epochs=3, max_minutes=1.0, clock=clock, callbacks=[clock, log])
    outcome = trainer.run()
    assert outcome.status == DONE and not outcome.stopped_early
    assert trainer.step == 3 and trainer.total_steps == 15
    assert outcome.message == "stopped by the time budget of 1 min at step 3 of 15"
    assert [e.epoch for e in outcome.epochs] == [1] and outcome.best_epoch == 1
    assert set(outcome.epochs[0].metrics) >= {"roc_auc", "accuracy", "f1"}  # the final validation ran
    assert [e[0] for e in log.events] == ["start", "batch", "batch", "batch", "epoch", "end"]
    assert outcome.seconds == 75.0


def test_a_budget_spent_at_the_end_of_an_epoch_adds_no_second_validation():
    clock, log = FakeClock(step_seconds=12.0), EventLog()
    # 1 minute at 12 s a step: exactly spent after step 5, the last step of epoch 1
    trainer = make_trainer(epochs=3, max_minutes=1.0, clock=clock, callbacks=[clock, log])
    outcome = trainer.run()
    assert outcome.status == DONE and trainer.step == 5
    assert outcome.message == "stopped by the time budget of 1 min at step 5 of 15"
    assert [e[0] for e in log.events] == ["start"] + ["batch"] * 5 + ["epoch", "end"]


def test_no_time_budget_means_no_cap():
    clock = FakeClock(step_seconds=3600.0)  # an hour a step
    outcome = make_trainer(epochs=2, clock=clock, callbacks=[clock]).run()
    assert outcome.status == DONE and outcome.message == "all 2 epoch(s) trained" and len(outcome.epochs) == 2


def test_the_step_cap_ends_with_a_validation_and_says_so():
    log = EventLog()
    trainer = make_trainer(epochs=3, max_steps=7, callbacks=[log])
    outcome = trainer.run()
    assert outcome.status == DONE and trainer.step == 7 and trainer.total_epochs == 2
    assert outcome.message == "stopped at the step cap of 7 steps"
    assert [e[0] for e in log.events] == ["start"] + ["batch"] * 5 + ["epoch"] + ["batch"] * 2 + ["epoch", "end"]


# ---- validating every N steps ---------------------------------------------------------------------------
class TimedObjective:
    """The triplet objective on a clock that each call (one per training step) moves by ``seconds``."""

    def __init__(self, clock: FakeClock, seconds: float, name: str = "triplet"):
        self.clock, self.seconds, self.inner = clock, seconds, LossConfig(name)
        self.batch_kind = self.inner.batch_kind

    def __call__(self, *args):
        self.clock.now += self.seconds
        return self.inner(*args)


def slow_validation(trainer: Trainer, clock: FakeClock, seconds: float) -> None:
    """Every validation of ``trainer`` now "takes" ``seconds`` on ``clock``."""
    hook = trainer.validation_hook

    def validate(model, progress):
        clock.now += seconds
        return hook(model, progress)

    trainer.validation_hook = validate


class ValidationLog(EventLog):
    def on_validation_end(self, trainer):
        record = trainer.validations[-1]
        self.events.append(("validation", trainer.step, record.step))
        assert trainer.validation_progress is None


def test_validate_every_scores_inside_the_epoch_and_at_its_end():
    clock, log = FakeClock(step_seconds=0.0), ValidationLog()
    # 9 contrastive steps a epoch, capped at 7: validations after steps 2, 4, 6 and at the end (7)
    trainer = make_trainer(epochs=1, max_steps=7, validate_every=2, clock=clock, callbacks=[log],
                           objective=TimedObjective(clock, 3.0, "contrastive"))
    slow_validation(trainer, clock, 100.0)
    outcome = trainer.run()
    assert outcome.status == DONE and trainer.step == 7 and outcome.message == "stopped at the step cap of 7 steps"
    assert [v.step for v in outcome.validations] == [2, 4, 6, 7]
    assert [v.epoch for v in outcome.validations] == [1, 1, 1, 1]
    # training time counts the steps only (3 s each); wall time adds the 100 s validations before each record
    assert [v.train_seconds for v in outcome.validations] == [6.0, 12.0, 18.0, 21.0]
    assert [v.seconds for v in outcome.validations] == [106.0, 212.0, 318.0, 421.0]
    assert all(0.0 <= v.metrics["roc_auc"] <= 1.0 for v in outcome.validations)
    assert [e[0] for e in log.events] == (["start"] + ["batch", "batch", "validation"] * 3
                                          + ["batch", "validation", "epoch", "end"])
    [epoch] = outcome.epochs
    assert epoch.metrics is outcome.validations[-1].metrics  # the epoch's own validation is the step-7 one
    best = max(range(4), key=lambda i: outcome.validations[i].metrics["roc_auc"])
    assert outcome.best_step == outcome.validations[best].step and outcome.best_epoch == 1
    assert outcome.best_metrics is outcome.validations[best].metrics
    assert trainer.validations == outcome.validations


def test_a_validation_on_an_epochs_last_step_is_that_epochs_own():
    log = ValidationLog()
    trainer = make_trainer(epochs=2, validate_every=2, callbacks=[log])  # 5 steps an epoch
    outcome = trainer.run()
    assert [v.step for v in outcome.validations] == [2, 4, 5, 6, 8, 10]  # step 10 is scored once
    assert [v.epoch for v in outcome.validations] == [1, 1, 1, 2, 2, 2]
    names = [e[0] for e in log.events]
    assert names.count("validation") == 6 and names.count("epoch") == 2
    assert names[-3:] == ["validation", "epoch", "end"]
    assert [e.metrics for e in outcome.epochs] == [outcome.validations[2].metrics, outcome.validations[5].metrics]


def test_validate_every_zero_validates_once_per_epoch_as_before():
    clock, log = FakeClock(step_seconds=0.0), ValidationLog()
    trainer = make_trainer(epochs=2, clock=clock, callbacks=[log], objective=TimedObjective(clock, 2.0))
    outcome = trainer.run()
    assert trainer.config.validate_every == 0
    assert [(v.step, v.epoch, v.train_seconds) for v in outcome.validations] == [(5, 1, 10.0), (10, 2, 20.0)]
    assert [v.metrics for v in outcome.validations] == [e.metrics for e in outcome.epochs]
    per_epoch = ["batch"] * 5 + ["validation", "epoch"]
    assert [e[0] for e in log.events] == ["start"] + per_epoch * 2 + ["end"]


class ScriptedPerValidation(Trainer):
    """Validation ROC AUC follows a script, one value per validation (not per epoch)."""

    script: list = []

    def validate(self):
        return {"roc_auc": self.script[len(self.validations)], "accuracy": 0.5, "f1": 0.5}


def test_patience_counts_validations_when_validating_every_n_steps():
    recorder = StateRecorder()
    scripted = type("Scripted", (ScriptedPerValidation,), {"script": [0.7, 0.8, 0.75, 0.79, 0.95, 0.99]})
    # validations after steps 2, 4, 5 (epoch 1's end), 6, 8, 10: the best is at step 4; steps 5 and 6
    # do not beat it, so the run stops at step 6, inside epoch 2, which ends there
    trainer = make_trainer(epochs=2, patience=2, validate_every=2, trainer_class=scripted, callbacks=[recorder])
    outcome = trainer.run()
    assert outcome.status == DONE and outcome.stopped_early and trainer.step == 6
    assert [v.step for v in outcome.validations] == [2, 4, 5, 6]
    assert (outcome.best_step, outcome.best_epoch, outcome.best_metrics["roc_auc"]) == (4, 1, 0.8)
    assert outcome.message == "stopped at step 6 (epoch 2): validation ROC AUC did not improve for 2 validation(s)"
    assert [(e.epoch, e.metrics["roc_auc"]) for e in outcome.epochs] == [(1, 0.75), (2, 0.79)]
    assert _same_state(_state(trainer.model), recorder.after_step[4])  # the best validation's weights


def test_validating_the_start_keeps_the_starting_weights_when_no_step_beats_them():
    scripted = type("Scripted", (ScriptedPerValidation,), {"script": [0.9, 0.8, 0.85, 0.7, 0.6, 0.5, 0.4]})
    trainer = make_trainer(epochs=2, validate_every=2, trainer_class=scripted, validate_at_start=True)
    start = _state(trainer.model)
    outcome = trainer.run()
    assert [(v.step, v.epoch) for v in outcome.validations][:2] == [(0, 0), (2, 1)]  # the start is scored first
    assert (outcome.best_step, outcome.best_epoch, outcome.best_metrics["roc_auc"]) == (0, 0, 0.9)
    assert _same_state(_state(trainer.model), start)  # no step validated better: the weights it started from


def test_a_run_validates_the_start_only_when_asked():
    scripted = type("Scripted", (ScriptedPerValidation,), {"script": [0.9, 0.8, 0.85, 0.7, 0.6, 0.5]})
    outcome = make_trainer(epochs=2, validate_every=2, trainer_class=scripted).run()
    assert outcome.validations[0].step == 2 and outcome.best_step == 2


class CancelAtValidationOfStep:
    """Sets the stop event at the first validation progress report after ``step``; counts the reports."""

    def __init__(self, stop: threading.Event, step: int):
        self.stop, self.step, self.reports = stop, step, 0

    def on_validation_progress(self, trainer):
        if trainer.step == self.step:
            self.reports += 1
            self.stop.set()


def test_cancel_during_a_validation_inside_the_epoch_keeps_the_best_so_far():
    stop = threading.Event()
    canceller, recorder = CancelAtValidationOfStep(stop, step=4), StateRecorder()
    trainer = make_trainer(n_val=300, epochs=2, validate_every=2, callbacks=[canceller, recorder], stop_event=stop,
                           validation_batch=50)
    outcome = trainer.run()
    assert outcome.status == CANCELLED and canceller.reports == 1  # stopped within one validation batch
    assert trainer.step == 4 and [v.step for v in outcome.validations] == [2] and outcome.epochs == []
    assert (outcome.best_step, outcome.best_epoch) == (2, 1)
    assert outcome.best_metrics is outcome.validations[0].metrics
    assert outcome.message == ("cancelled at step 4 of 10 while scoring a validation; "
                               "the best model so far (step 2, epoch 1) is kept")
    assert _same_state(_state(trainer.model), recorder.after_step[2])
    assert trainer.validation_progress is None


def test_a_cancel_before_a_due_validation_skips_it():
    canceller, log = CancelAt(2), ValidationLog()
    trainer = make_trainer(epochs=2, validate_every=2, callbacks=[canceller, log])
    outcome = trainer.run()
    assert outcome.status == CANCELLED and trainer.step == 2 and outcome.validations == []
    assert outcome.message == "cancelled at step 2 of 10, before the first validation"
    assert [e[0] for e in log.events] == ["start", "batch", "batch", "end"]


def test_validate_every_without_a_validation_split_validates_per_epoch_only():
    trainer = make_trainer(n_val=0, epochs=2, validate_every=2)
    outcome = trainer.run()
    assert [(v.step, v.metrics) for v in outcome.validations] == [(5, {}), (10, {})]
    assert outcome.best_epoch == 2 and outcome.best_step == 10


def test_the_time_budget_after_a_validation_inside_the_epoch_scores_no_second_one():
    clock, log = FakeClock(step_seconds=0.0), ValidationLog()
    # 1 minute at 20 s a step: spent after step 3, where a validation is due (validate_every=3)
    trainer = make_trainer(epochs=2, max_minutes=1.0, validate_every=3, clock=clock, callbacks=[log],
                           objective=TimedObjective(clock, 20.0))
    outcome = trainer.run()
    assert outcome.status == DONE and trainer.step == 3
    assert outcome.message == "stopped by the time budget of 1 min at step 3 of 10"
    assert [v.step for v in outcome.validations] == [3] and [e.epoch for e in outcome.epochs] == [1]
    assert [e[0] for e in log.events] == ["start", "batch", "batch", "batch", "validation", "epoch", "end"]


# ---- the curve reaches the saved model ------------------------------------------------------------------
def test_the_validation_curve_is_saved_with_the_model(train_tiny_model, tmp_path):
    import json

    from core.saving import ModelLoadError, read_config

    folder = train_tiny_model("lstm", tmp_path, validate_every=2)
    config = read_config(folder)
    curve, training = config["training"]["validation_curve"], config["training"]
    steps = [point["step"] for point in curve]
    assert steps[:2] == [2, 4] and steps == sorted(set(steps)) and len(curve) >= 3
    seconds = [point["train_seconds"] for point in curve]
    assert seconds == sorted(seconds) and seconds[0] > 0
    assert all(0.0 <= point["roc_auc"] <= 1.0 for point in curve)
    assert training["best_step"] in steps
    assert config["train_config"]["validate_every"] == 2

    for bad in ([{"step": 2, "train_seconds": 1.0, "roc_auc": 1.5}],
                [{"step": -1, "train_seconds": 1.0, "roc_auc": 0.5}],
                [{"step": 2, "train_seconds": float("nan"), "roc_auc": 0.5}], {"step": 2}, ["point"]):
        config["training"]["validation_curve"] = bad
        (folder / "config.json").write_text(json.dumps(config))
        with pytest.raises(ModelLoadError, match="validation_curve"):
            read_config(folder)


# ---- precision and compile (core.training.trainer.autocast_plan) -------------------------------------------
BF16 = AutocastPlan(True, torch.bfloat16, False)
FP16_SCALED = AutocastPlan(True, torch.float16, True)


@pytest.mark.parametrize("device_type, precision, bf16_supported, expected", [
    ("cuda", "auto", True, BF16),  # bf16 keeps fp32's range: no scaler
    ("cuda", "auto", False, FP16_SCALED),  # an older GPU: fp16, whose small gradients need the scaler
    ("cuda", "fp32", True, FP32),
    ("cuda", "bf16", True, BF16),
    ("cuda", "fp16", True, FP16_SCALED),
    ("cpu", "auto", False, FP32),  # today's CPU behaviour: no autocast
    ("cpu", "auto", True, FP32),
    ("cpu", "fp32", False, FP32),
    ("cpu", "bf16", False, BF16),  # the CPU always has bf16 autocast, whatever CUDA would say
])
def test_autocast_plan(device_type, precision, bf16_supported, expected):
    assert autocast_plan(device_type, precision, bf16_supported) == expected


@pytest.mark.parametrize("device_type, precision, bf16_supported, problem", [
    ("cpu", "fp16", True, "fp16 needs a CUDA device"),
    ("cuda", "bf16", False, "bf16 is not supported by this GPU"),
])
def test_autocast_plan_refuses_what_cannot_run(device_type, precision, bf16_supported, problem):
    with pytest.raises(ValueError, match=problem):
        autocast_plan(device_type, precision, bf16_supported)


def test_compile_mode_uses_cuda_graphs_on_cuda_only():
    assert compile_mode("cuda") == "reduce-overhead"
    assert compile_mode("cpu") == "default"


class StepLosses:
    def __init__(self):
        self.losses = []

    def on_batch_end(self, trainer):
        self.losses.append(trainer.loss)


def _autocast_seen_by_the_model(trainer) -> list:
    """(autocast enabled, its dtype) as each forward pass of ``trainer.model`` finds them."""
    seen = []
    trainer.model.register_forward_pre_hook(
        lambda module, args: seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))))
    return seen


def _tiny_dual_encoder_trainer(precision: str, callbacks) -> Trainer:
    """Two steps of a one-layer dual encoder on the synthetic task. Not the LSTM: oneDNN on some CPUs has no
    bf16 LSTM kernel ("could not create a primitive descriptor"), while attention and linear layers run."""
    from core.models import DualEncoder, DualEncoderConfig

    train = synthetic_pairs(60, 0)
    tokenizer = WordTokenizer.build(pd.concat([train.question1, train.question2]), min_freq=1, max_length=11)
    torch.manual_seed(0)
    model = DualEncoder(DualEncoderConfig(vocab_size=tokenizer.vocab_size, d_model=16, num_heads=2, num_layers=1,
                                          ff_dim=32, dropout=0.0, max_length=11, projection_dim=8), tokenizer)
    config = TrainConfig(epochs=1, batch_size=7, lr=1e-2, device="cpu", patience=0, warmup_ratio=0.0, max_steps=2,
                         precision=precision)
    return Trainer(model, LossConfig("triplet"), PairTable(train, tokenizer), config, callbacks=callbacks)


@pytest.mark.parametrize("precision, autocast", [("auto", False), ("fp32", False), ("bf16", True)])
def test_precision_sets_the_cpu_steps_autocast(precision, autocast):
    eager, losses = StepLosses(), StepLosses()
    _tiny_dual_encoder_trainer("fp32", [eager]).run()
    trainer = _tiny_dual_encoder_trainer(precision, [losses])
    seen = _autocast_seen_by_the_model(trainer)
    assert trainer.run().status == DONE
    assert [enabled for enabled, _ in seen] == [autocast, autocast]  # one forward pass per step
    if autocast:
        assert {dtype for _, dtype in seen} == {torch.bfloat16}
        # bf16 keeps 8 bits of mantissa: the same start gives nearly, not exactly, the same losses
        assert losses.losses != eager.losses
        assert losses.losses == pytest.approx(eager.losses, rel=0.05)
    else:
        assert losses.losses == eager.losses


def test_fp16_on_the_cpu_is_refused_before_a_step():
    trainer = make_trainer(n_val=0, precision="fp16")
    with pytest.raises(TrainingError, match="fp16 needs a CUDA device"):
        trainer.run()
    assert trainer.step == 0


def test_a_compiled_step_gives_the_eager_losses():
    pytest.importorskip("torch._inductor")
    eager, compiled = StepLosses(), StepLosses()
    make_trainer(n_val=0, epochs=1, max_steps=2, callbacks=[eager]).run()
    trainer = make_trainer(n_val=0, epochs=1, max_steps=2, callbacks=[compiled], compile=True)
    assert trainer.run().status == DONE
    assert trainer._module is not trainer.model  # the steps went through the compiled wrapper
    assert compiled.losses == pytest.approx(eager.losses, rel=1e-4)
    assert all(not key.startswith("_orig_mod") for key in trainer.model.state_dict())  # saved under its own names
