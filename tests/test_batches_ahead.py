"""Batches built ahead of the step on a background thread (``core.training.trainer.built_ahead``), and the Trainer
against a plain PyTorch loop: building batches off the step must not change what is trained."""
from __future__ import annotations

import threading

import pandas as pd
import pytest
import torch

from core.models import SiameseLSTM, SiameseLSTMConfig
from core.status import CANCELLED, DONE, FAILED
from core.text.pair_table import PairTable
from core.text.token_table import pad_widths
from core.text.word_tokenizer import WordTokenizer
from core.training.objectives import LossConfig
from core.training.trainer import built_ahead
from core.training.trainer import TrainConfig, Trainer, warmup_then_linear_decay
from tests.conftest import synthetic_pairs
from tests.test_trainer import CancelAt, NaNAtCall, make_trainer


def _builder_threads() -> int:
    return sum(thread.name.startswith("batches-ahead") for thread in threading.enumerate())


# ---- built_ahead ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ahead", [0, 1, 3])
def test_every_item_is_built_once_and_comes_in_order(ahead):
    built = []

    def build(item):
        built.append(item)
        return item * 10

    assert list(built_ahead(range(25), build, ahead)) == [(i, 10 * i) for i in range(25)]
    assert built == list(range(25))


def test_nothing_ahead_builds_each_item_when_the_loop_asks_for_it():
    events = []
    for item, _ in built_ahead(range(3), lambda item: events.append(("built", item)), ahead=0):
        events.append(("used", item))
    assert events == [("built", 0), ("used", 0), ("built", 1), ("used", 1), ("built", 2), ("used", 2)]


def test_an_error_while_building_is_raised_where_its_item_would_come():
    def build(item):
        if item == 3:
            raise ValueError("item 3 cannot be built")
        return item

    before, used = _builder_threads(), []
    with pytest.raises(ValueError, match="item 3 cannot be built"):
        for item, _ in built_ahead(range(10), build, ahead=2):
            used.append(item)
    assert used == [0, 1, 2]
    assert _builder_threads() == before


def test_leaving_the_loop_early_stops_the_thread():
    before = _builder_threads()
    for item, _ in built_ahead(range(10_000), lambda item: item, ahead=2):
        if item == 5:
            break
    assert _builder_threads() == before


# ---- the Trainer against a plain loop ------------------------------------------------------------------------------
def _tiny_lstm_setup():
    """A tiny Siamese LSTM with dropout (so that a change in the random stream would show) on the synthetic task."""
    train = synthetic_pairs(60, 0)
    tokenizer = WordTokenizer.build(pd.concat([train.question1, train.question2]), min_freq=1, max_length=11)
    torch.manual_seed(0)
    model = SiameseLSTM(SiameseLSTMConfig(vocab_size=tokenizer.vocab_size, embedding_dim=12, hidden_size=16,
                                          dropout=0.3), tokenizer)
    return model, PairTable(train, tokenizer)


def _plain_loop(model, table: PairTable, objective, config: TrainConfig, widths, steps: int) -> None:
    """What the Trainer does, written out: the same seed, batch order (epoch e draws with seed + e - 1), fused AdamW,
    clipping and schedule, each batch built in the loop."""
    batches = []
    for epoch in range(config.epochs):
        batches += table.index_batches(objective.batch_kind, config.batch_size, config.seed + epoch,
                                       config.length_buckets)
    torch.manual_seed(config.seed)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, fused=True)
    scheduler = warmup_then_linear_decay(optimizer, steps, config.warmup_ratio)
    for rows in batches[:steps]:
        batch = table.batch(rows, widths)
        v1, v2, vn = model(batch.first, batch.second, batch.negatives)
        loss = objective(v1.float(), v2.float(), batch.labels, None if vn is None else vn.float())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        scheduler.step()


@pytest.mark.parametrize("fixed_widths", [False, True])
def test_the_trainer_trains_what_a_plain_loop_trains(fixed_widths):
    """Over an epoch boundary and into a step cap: the same weights to 1e-6, batches built ahead on the thread."""
    model, table = _tiny_lstm_setup()
    reference = SiameseLSTM(model.config, model.tokenizer)
    reference.load_state_dict(model.state_dict())
    objective = LossConfig("triplet")
    config = TrainConfig(epochs=2, batch_size=7, lr=1e-2, device="cpu", patience=0, warmup_ratio=0.2, max_steps=8)
    widths = pad_widths(11) if fixed_widths else None
    trainer = Trainer(model, objective, table, config)
    assert trainer.batches_ahead == 0  # on the CPU batches are built in the loop...
    trainer.batches_ahead = 4  # ...but the thread is what is under test
    trainer._batch_widths = lambda: widths  # a compiled run's batches, without compiling
    assert trainer.run().status == DONE
    assert trainer.steps_per_epoch == 5 and trainer.step == 8  # 3 steps into the second epoch
    _plain_loop(reference, table, objective, config, widths, steps=8)
    trained, expected = model.state_dict(), reference.state_dict()
    assert trained.keys() == expected.keys()
    for name in trained:
        torch.testing.assert_close(trained[name], expected[name], rtol=0, atol=1e-6, msg=name)


@pytest.mark.parametrize("ending", ["done", "cancelled", "failed"])
def test_no_builder_thread_outlives_a_run(ending):
    before = _builder_threads()
    options = {"done": {}, "cancelled": {"callbacks": [CancelAt(3)]}, "failed": {"objective": NaNAtCall(2)}}[ending]
    trainer = make_trainer(n_val=0, epochs=2, **options)
    trainer.batches_ahead = 4  # a CUDA run's thread, on the CPU
    outcome = trainer.run()
    assert outcome.status == {"done": DONE, "cancelled": CANCELLED, "failed": FAILED}[ending]
    assert _builder_threads() == before
