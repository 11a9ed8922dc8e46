"""Inference batches: longest first, at most batch_size rows and the token budget, every row once; the
vectors do not depend on how the rows were cut."""

import numpy as np
import pytest
import torch

from core.models import DualEncoder, DualEncoderConfig
from core.models import base as eb
from core.models.base import encoding_batches
from core.text.word_tokenizer import WordTokenizer


def test_hand_made_cut():
    lengths = np.array([3, 9, 5, 1, 5, 2])
    # widths in order 9 | 5 5 | 3 2 1: a budget of 10 tokens fits one 9, two 5s, three of width 3
    batches = encoding_batches(lengths, batch_size=4, max_tokens=10)
    assert [b.tolist() for b in batches] == [[1], [2, 4], [0, 5, 3]]


def test_rows_only_without_a_budget():
    batches = encoding_batches(np.array([1, 2, 3, 4, 5]), batch_size=2)
    assert [b.tolist() for b in batches] == [[4, 3], [2, 1], [0]]


def test_a_text_wider_than_the_budget_still_gets_a_batch():
    assert [b.tolist() for b in encoding_batches(np.array([50, 2]), batch_size=8, max_tokens=16)] == [[0], [1]]


@pytest.mark.parametrize("seed", range(5))
def test_every_row_once_and_both_caps_hold(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 65, size=int(rng.integers(1, 400)))
    batch_size, budget = int(rng.integers(1, 300)), int(rng.integers(1, 2000))
    batches = encoding_batches(lengths, batch_size, budget)
    rows = np.concatenate(batches)
    assert sorted(rows.tolist()) == list(range(len(lengths)))
    widths = [int(lengths[b].max()) for b in batches]
    assert widths == sorted(widths, reverse=True)  # longest first
    for batch in batches:
        assert 1 <= len(batch) <= batch_size
        assert len(batch) == 1 or len(batch) * int(lengths[batch].max()) <= budget


def test_empty_input():
    assert encoding_batches(np.array([], dtype=int), batch_size=4, max_tokens=8) == []


def test_budget_does_not_change_the_vectors(monkeypatch):
    torch.manual_seed(0)
    vocab = ["<pad>", "<unk>"] + [f"w{i}" for i in range(37)]
    model = DualEncoder(DualEncoderConfig(vocab_size=len(vocab), d_model=24, num_heads=4, num_layers=1, ff_dim=40,
                                          max_length=11, projection_dim=12), WordTokenizer(vocab, max_length=11)).eval()
    rng = np.random.default_rng(1)
    texts = [" ".join(f"w{i}" for i in rng.integers(0, 37, size=rng.integers(0, 12))) for _ in range(29)]
    whole = model.encode(texts, batch_size=1000)
    calls = []
    monkeypatch.setitem(eb.TOKEN_BUDGETS, "dual-transformer", 12)  # at most 12 padded tokens a batch
    cut = model.encode(texts, batch_size=1000, progress=lambda done, total: calls.append((done, total)))
    torch.testing.assert_close(cut, whole, atol=1e-5, rtol=1e-5)
    assert len(calls) > 3 and calls[-1] == (len(texts), len(texts))
