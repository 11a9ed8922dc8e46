"""Issue 26's step that never waits for the device: the loss read back every few steps, fixed batch widths
for a compiled step, page-locked copies. Run on the CPU (CI has no GPU); the same code paths run on CUDA."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from core.status import DONE
from core.text.pair_table import PairTable
from core.text.token_table import TokenTable, pad_widths, padded_width
from core.text.word_tokenizer import WordTokenizer
from core.training.objectives import LossConfig
from core.training.trainer import LOSS_READ_EVERY_CUDA, TrainConfig, Trainer
from tests.conftest import synthetic_pairs
from tests.test_trainer import NaNAtCall, StepLosses, make_trainer


class LossReads:
    """(step, loss_step, loss) as each on_batch_end sees them."""

    def __init__(self):
        self.seen = []

    def on_batch_end(self, trainer):
        self.seen.append((trainer.step, trainer.loss_step, trainer.loss))


def test_reading_every_third_step_gives_the_same_losses_later():
    every_step, every_third = LossReads(), LossReads()
    first = make_trainer(n_val=0, epochs=1, callbacks=[every_step])
    first.run()
    second = make_trainer(n_val=0, epochs=1, callbacks=[every_third], read_loss_every=3)
    assert second.run().status == DONE
    steps = len(every_step.seen)
    assert steps == 5 and len(every_third.seen) == steps  # step 5's loss: read at the epoch's end
    losses = {step: loss for step, _, loss in every_step.seen}
    # between reads the callbacks see the last loss read (none before the first read)
    for step, loss_step, loss in every_third.seen:
        assert loss_step == step - step % 3
        assert (np.isnan(loss) if loss_step == 0 else loss == losses[loss_step])
    # every loss is read in the end: the epoch's mean is the same, the last steps included
    assert second.epoch_results[0].train_loss == pytest.approx(first.epoch_results[0].train_loss, rel=1e-6)
    assert second.loss_step == steps and second.loss == losses[steps]


def test_a_nan_loss_read_late_still_names_its_step():
    trainer = make_trainer(n_val=0, epochs=2, objective=NaNAtCall(2), read_loss_every=3)
    outcome = trainer.run()
    assert outcome.status == "failed"
    assert "nan" in outcome.message and "step 2" in outcome.message  # found at step 3's read
    assert trainer.step == 3


# ---- fixed widths ------------------------------------------------------------------------------------------------
def test_pad_widths_are_few_and_end_at_the_limit():
    assert pad_widths(40) == (8, 16, 24, 32, 40)
    assert pad_widths(32) == (8, 16, 24, 32)
    assert pad_widths(5) == (5,)
    assert pad_widths(128) == (8, 16, 24, 32, 48, 64, 96, 128)
    assert [padded_width((8, 16, 24), n) for n in (1, 8, 9, 24, 30)] == [8, 8, 16, 24, 24]


def test_take_pads_to_a_width_wider_than_the_table():
    table = TokenTable.padded([[5, 6, 7], [8]], max_length=10, pad_id=3)  # stored 3 wide
    ids, mask = table.take([1, 0], width=5)
    assert ids.tolist() == [[8, 3, 3, 3, 3], [5, 6, 7, 3, 3]]
    assert mask.tolist() == [[True, False, False, False, False], [True, True, True, False, False]]
    ids, mask = table.take([1])  # trimmed to the longest text by default
    assert ids.tolist() == [[8]] and mask.tolist() == [[True]]


def test_a_fixed_width_batch_pads_both_sides_to_one_width():
    pairs = pd.DataFrame({"question1": ["a b c d e f g h i j", "a b"], "question2": ["k l", "m"],
                          "is_duplicate": [1, 0]})
    tokenizer = WordTokenizer.build(pd.concat([pairs.question1, pairs.question2]), min_freq=1, max_length=12)
    table = PairTable(pairs, tokenizer)
    trimmed = table.batch(np.array([0, 1]))
    fixed = table.batch(np.array([0, 1]), widths=(4, 8, 12))
    assert trimmed.first[0].shape == (2, 10) and trimmed.second[0].shape == (2, 2)
    assert fixed.first[0].shape == (2, 12) and fixed.second[0].shape == (2, 12)  # 10 tokens -> width 12
    for side_trimmed, side_fixed in ((trimmed.first, fixed.first), (trimmed.second, fixed.second)):
        width = side_trimmed[0].shape[1]
        assert torch.equal(side_fixed[0][:, :width], side_trimmed[0])  # same ids, then padding
        assert torch.equal(side_fixed[1][:, :width], side_trimmed[1]) and not side_fixed[1][:, width:].any()
    assert table.batch(np.array([1]), widths=(4, 8, 12)).first[0].shape == (1, 4)


def test_a_compiled_run_gets_batches_of_the_fixed_widths(monkeypatch):
    trainer = make_trainer(n_val=0, epochs=1, max_steps=3, compile=True)
    widths_asked = []
    table_batch = PairTable.batch
    monkeypatch.setattr(trainer.train_table, "batch",
                        lambda rows, widths=None: widths_asked.append(widths) or table_batch(trainer.train_table, rows,
                                                                                             widths))
    monkeypatch.setattr(torch, "compile", lambda module, **options: module)  # the widths, not Inductor, under test
    assert trainer.run().status == DONE
    table_width = max(trainer.train_table.first.ids.shape[1], trainer.train_table.second.ids.shape[1])
    assert widths_asked == [pad_widths(table_width)] * 3
    eager = make_trainer(n_val=0, epochs=1, max_steps=3, callbacks=[StepLosses()])
    asked_eager = []
    monkeypatch.setattr(eager.train_table, "batch",
                        lambda rows, widths=None: asked_eager.append(widths) or table_batch(eager.train_table, rows,
                                                                                            widths))
    eager.run()
    assert asked_eager == [None] * 3  # eager steps keep trimmed batches: no padding to compute


def test_the_fixed_widths_give_the_trimmed_losses():
    """Padding is masked: an LSTM fed fixed-width batches computes the losses of trimmed ones."""
    trimmed, fixed = StepLosses(), StepLosses()
    make_trainer(n_val=0, epochs=1, max_steps=4, callbacks=[trimmed]).run()
    trainer = make_trainer(n_val=0, epochs=1, max_steps=4, callbacks=[fixed])
    trainer._batch_widths = lambda: pad_widths(11)  # what a compiled run uses, without compiling
    assert trainer.run().status == DONE
    assert fixed.losses == pytest.approx(trimmed.losses, rel=1e-5)



# ---- on a CUDA device (skipped without one: CI has none; run on a GPU machine) -----------------------------------
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _cuda_dual_encoder_trainer(callbacks=(), n_train=60, **config) -> Trainer:
    from core.models import DualEncoder, DualEncoderConfig

    train = synthetic_pairs(n_train, 0)
    tokenizer = WordTokenizer.build(pd.concat([train.question1, train.question2]), min_freq=1, max_length=11)
    torch.manual_seed(0)
    model = DualEncoder(DualEncoderConfig(vocab_size=tokenizer.vocab_size, d_model=16, num_heads=2, num_layers=1,
                                          ff_dim=32, dropout=0.0, max_length=11, projection_dim=8), tokenizer)
    settings = dict(epochs=20, batch_size=7, lr=1e-2, device="cuda", patience=0, warmup_ratio=0.0, max_steps=60)
    return Trainer(model, LossConfig("triplet"), PairTable(train, tokenizer),
                   TrainConfig(**{**settings, **config}), callbacks=callbacks)


@needs_cuda
def test_on_cuda_the_loss_is_read_every_50_steps():
    reads = LossReads()
    trainer = _cuda_dual_encoder_trainer([reads], n_train=300, batch_size=2, max_steps=60)  # 75 steps an epoch
    assert trainer.run().status == DONE
    assert trainer.steps_per_epoch > 60 and trainer._read_every == LOSS_READ_EVERY_CUDA == 50
    # read at step 50 and, after the last step's callbacks, at the run's end (step 60): never in between
    assert [loss_step for _, loss_step, _ in reads.seen] == [0] * 49 + [50] * 11
    assert trainer.loss_step == 60 and np.isfinite(trainer.epoch_results[-1].train_loss)


@needs_cuda
@pytest.mark.parametrize("precision", ["fp32", "auto", "fp16"])
def test_on_cuda_a_compiled_step_gives_the_eager_losses(precision):
    eager, compiled = LossReads(), LossReads()
    _cuda_dual_encoder_trainer([eager], precision=precision, read_loss_every=1).run()
    trainer = _cuda_dual_encoder_trainer([compiled], precision=precision, read_loss_every=1, compile=True)
    assert trainer.run().status == DONE
    table = trainer.train_table
    assert trainer._widths == pad_widths(max(table.first.ids.shape[1], table.second.ids.shape[1]))
    # Fixed widths pad with masked positions and Inductor fuses differently, so the losses agree to rounding at
    # first; bf16 (auto on a recent GPU) and fp16 (with its GradScaler) round coarsely, and at lr 1e-2 the two runs
    # drift apart after some steps.
    steps, rel, abs_ = (60, 1e-3, 1e-4) if precision == "fp32" else (5, 5e-2, 1e-2)
    assert [loss for *_, loss in compiled.seen][:steps] == pytest.approx([loss for *_, loss in eager.seen][:steps],
                                                                         rel=rel, abs=abs_)
