"""core.inference.analysis: the seeds' worked example by hand, batch picking, the seeds' experiment."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from core.inference.analysis import (
    SEED_EXAMPLE,
    batch_scores,
    inspect_scores,
    pick_batch,
    seed_experiment,
)
from core.losses.triplet import triplet_terms


def test_seed_example_rows_by_hand():
    view = inspect_scores(SEED_EXAMPLE, margin=0.25)
    np.testing.assert_allclose(view.positives, [0.9, 0.5, 0.7, 1.0])
    # Row 1: (-0.8 + 0.3 - 0.5) / 3 = -1/3; the largest negative below 0.9 is 0.3 in column 2 (0-based).
    assert view.mean_negative[0] == pytest.approx(-1 / 3)
    assert view.closest_negative[0] == pytest.approx(0.3)
    assert view.closest_column[0] == 2
    # Row 2: (-0.8 + 0.1 - 0.2) / 3 = -0.3; closest below 0.5 is 0.1 (column 2).
    assert view.mean_negative[1] == pytest.approx(-0.3)
    assert view.closest_negative[1] == pytest.approx(0.1) and view.closest_column[1] == 2
    # L1 = max(mean_neg - s(A,P) + margin, 0), L2 = max(closest - s(A,P) + margin, 0), by hand for row 2:
    assert view.l1[1] == pytest.approx(max(-0.3 - 0.5 + 0.25, 0.0))
    assert view.l2[1] == pytest.approx(max(0.1 - 0.5 + 0.25, 0.0))
    assert view.triplet_cost == pytest.approx(float((view.l1 + view.l2).sum()))
    assert view.triplet_loss == pytest.approx(view.triplet_cost / 4)


def test_table_has_one_row_per_anchor_and_matches_triplet_terms():
    view = inspect_scores(SEED_EXAMPLE, margin=0.5, question1=list("abcd"))
    table = view.table()
    assert list(table["question1"]) == list("abcd")
    l1, l2 = triplet_terms(torch.tensor(SEED_EXAMPLE, dtype=torch.float64), 0.5)
    np.testing.assert_allclose(table["L1"], l1.numpy())
    np.testing.assert_allclose(table["L2"], l2.numpy())
    np.testing.assert_allclose(table["L_full"], (l1 + l2).numpy())


def test_a_row_with_no_closest_negative_is_nan_and_column_minus_one():
    view = inspect_scores([[0.1, 0.5], [0.2, 0.9]])
    assert math.isnan(view.closest_negative[0]) and view.closest_column[0] == -1
    assert view.closest_column[1] == 0


def test_inspect_scores_rejects_non_square():
    with pytest.raises(ValueError):
        inspect_scores([[0.1, 0.2, 0.3]])


def test_seed_experiment_losses_fall():
    table = seed_experiment(SEED_EXAMPLE, rounds=4)
    assert list(table["round"]) == [0, 1, 2, 3, 4]
    softmax = table["softmax loss"].to_numpy()
    assert np.all(np.diff(softmax) < 0)
    assert np.all(np.diff(table["triplet loss"].to_numpy()) <= 0)
    # The diagonal 0.9, 0.5, 0.7, 1.0 becomes 1.0, 1.0, 1.0, 1.0 after one round of +0.5 (clipped at 1).
    assert table["mean diagonal"].iloc[0] == pytest.approx(0.775)
    assert list(table["mean diagonal"].iloc[1:]) == pytest.approx([1.0] * 4)
    assert table["mean off-diagonal"].iloc[1] == pytest.approx(table["mean off-diagonal"].iloc[0] - 0.02)
    assert table[["mean diagonal", "mean off-diagonal"]].abs().to_numpy().max() <= 1.0
    assert table["triplet loss"].iloc[0] == pytest.approx(inspect_scores(SEED_EXAMPLE).triplet_loss)


def _pairs_with_shared_questions() -> pd.DataFrame:
    rows = [(f"q{i}", f"p{i}", 1) for i in range(30)]
    rows += [("q0", "p5", 1), ("p3", "q7", 1), ("Q0 ", "x", 1), ("n1", "n2", 0)]
    return pd.DataFrame(rows, columns=["question1", "question2", "is_duplicate"])


@pytest.mark.parametrize("seed", [None, 0, 1, 2])
def test_pick_batch_never_repeats_a_question(seed):
    batch = pick_batch(_pairs_with_shared_questions(), 16, seed=seed)
    assert len(batch) == 16
    assert (batch["is_duplicate"] == 1).all()
    texts = pd.concat([batch["question1"], batch["question2"]]).str.strip().str.lower()
    assert texts.is_unique


def test_pick_batch_by_index_starts_at_that_duplicate_pair():
    pairs = _pairs_with_shared_questions()
    batch = pick_batch(pairs, 4, seed=None, start=10)
    assert list(batch["question1"]) == ["q10", "q11", "q12", "q13"]
    assert pick_batch(pairs, 4, seed=7).equals(pick_batch(pairs, 4, seed=7))


def test_pick_batch_too_few_pairs_raises():
    pairs = pd.DataFrame({"question1": ["a"], "question2": ["b"], "is_duplicate": [1]})
    with pytest.raises(ValueError):
        pick_batch(pairs, 4)


class _AxisEncoder:
    """Texts "e0", "e1"... map to the unit axes; tower 1 flips the sign of axis 0."""

    def encode(self, texts, tower=0):
        out = torch.zeros(len(texts), 3)
        for row, text in enumerate(texts):
            out[row, int(text[1:])] = 1.0
        if tower == 1:
            out[:, 0] *= -1
        return out


def test_batch_scores_uses_both_towers():
    scores = batch_scores(_AxisEncoder(), ["e0", "e1"], ["e0", "e2"])
    np.testing.assert_allclose(scores, [[-1.0, 0.0], [0.0, 0.0]])
