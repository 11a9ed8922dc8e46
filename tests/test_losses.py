"""Loss functions against hand-computed values, sklearn, and naive references."""

import doctest
import math

import pytest
import torch
import torch.nn.functional as F
from sklearn.metrics.pairwise import cosine_similarity

import core.losses
import core.losses.contrastive
import core.losses.cosent
import core.losses.multitask
import core.losses.similarity
import core.losses.softmax
import core.losses.triplet
from core.losses import (
    CONTRASTIVE_FORMS,
    closest_negative,
    contrastive_loss,
    in_batch_softmax_loss,
    mean_negative,
    similarity_matrix,
    triplet_loss,
)
from core.losses.similarity import reduce
from core.losses.softmax import in_batch_softmax_loss_from_scores
from core.losses.triplet import triplet_terms

BATCH, DIM = 13, 32  # deliberately different so a transposed shape cannot pass
RAW_DIM = 7  # the raw-vector tests: 13 x 7, again so that a transpose fails loudly

# The seeds' example (rows = v1, columns = v2); float64 so hand values compare tightly.
SEED_SCORES = torch.tensor(
    [
        [0.9, -0.8, 0.3, -0.5],
        [-0.8, 0.5, 0.1, -0.2],
        [0.3, 0.1, 0.7, -0.8],
        [-0.5, -0.2, -0.8, 1.0],
    ],
    dtype=torch.float64,
)

# Row 0: diagonal 0.1 is below both off-diagonals (0.5, and 0.1 as a tie) -> no closest negative.
# Row 1: diagonal 0.6, off-diagonals 0.2 and 0.4 -> closest 0.4 in column 2.
# Row 2: every cell equals the diagonal -> ties are not "strictly below" -> no closest negative.
NO_CLOSEST_SCORES = torch.tensor(
    [
        [0.1, 0.5, 0.1],
        [0.2, 0.6, 0.4],
        [0.3, 0.3, 0.3],
    ],
    dtype=torch.float64,
)


def triplet_loss_from_scores(scores, margin=0.25, reduction="mean"):
    """The full triplet loss L1 + L2 of a score matrix, as ``triplet_loss`` reduces it."""
    l1, l2 = triplet_terms(scores, margin)
    return reduce(l1 + l2, reduction)


def _random(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _close(actual, expected, atol: float = 1e-12) -> None:
    torch.testing.assert_close(
        torch.as_tensor(actual, dtype=torch.float64),
        torch.as_tensor(expected, dtype=torch.float64),
        atol=atol,
        rtol=0.0,
    )


def test_package_exports_exactly_the_public_losses():
    assert sorted(core.losses.__all__) == sorted(
        [
            "similarity_matrix",
            "mean_negative",
            "closest_negative",
            "triplet_loss",
            "contrastive_loss",
            "CONTRASTIVE_FORMS",
            "in_batch_softmax_loss",
            "cosent_loss",
            "multitask_loss",
        ]
    )
    for name in core.losses.__all__:
        if name != "CONTRASTIVE_FORMS":
            assert callable(getattr(core.losses, name))


def test_contrastive_forms_are_declared_once():
    import core.training.objectives

    assert CONTRASTIVE_FORMS == ("squared_hinge", "margin_squared")
    assert core.losses.contrastive.CONTRASTIVE_FORMS is CONTRASTIVE_FORMS
    assert core.training.objectives.CONTRASTIVE_FORMS is CONTRASTIVE_FORMS  # re-exported, not a copy


@pytest.mark.parametrize(
    "module",
    [core.losses.similarity, core.losses.triplet, core.losses.contrastive, core.losses.softmax,
     core.losses.cosent, core.losses.multitask],
)
def test_docstring_examples_are_correct(module):
    result = doctest.testmod(module, extraglobs={"torch": torch}, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


# --- similarity_matrix -------------------------------------------------------------------------


def test_similarity_matrix_hand_computed():
    vectors = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    r = 1 / math.sqrt(2)  # cos 45 degrees, between an axis and the diagonal
    expected = [[1.0, 0.0, r], [0.0, 1.0, r], [r, r, 1.0]]
    _close(similarity_matrix(vectors, vectors), expected)
    # Length must not matter, only direction.
    _close(similarity_matrix(3 * vectors, 0.5 * vectors), expected)


def test_similarity_matrix_matches_sklearn_square():
    v1, v2 = _random(BATCH, DIM, seed=0), _random(BATCH, DIM, seed=1)
    scores = similarity_matrix(v1, v2)
    assert scores.shape == (BATCH, BATCH)
    _close(scores, cosine_similarity(v1.numpy(), v2.numpy()), atol=1e-10)


def test_similarity_matrix_non_square_3_by_5():
    v1, v2 = _random(3, DIM, seed=2), _random(5, DIM, seed=3)
    scores = similarity_matrix(v1, v2)
    assert scores.shape == (3, 5)
    _close(scores, cosine_similarity(v1.numpy(), v2.numpy()), atol=1e-10)


# --- mean and closest negatives on the seeds' matrix -------------------------------------------


def test_mean_negative_seed_matrix():
    # Row 0: (-0.8 + 0.3 - 0.5) / 3 = -1.0 / 3
    # Row 1: (-0.8 + 0.1 - 0.2) / 3 = -0.9 / 3 = -0.3
    # Row 2: ( 0.3 + 0.1 - 0.8) / 3 = -0.4 / 3 = -2 / 15
    # Row 3: (-0.5 - 0.2 - 0.8) / 3 = -1.5 / 3 = -0.5
    _close(mean_negative(SEED_SCORES), [-1 / 3, -0.3, -2 / 15, -0.5])


def test_closest_negative_seed_matrix():
    # Row 0 (diag 0.9): -0.8, 0.3, -0.5 below it -> largest 0.3 at column 2
    # Row 1 (diag 0.5): -0.8, 0.1, -0.2 below it -> largest 0.1 at column 2
    # Row 2 (diag 0.7):  0.3, 0.1, -0.8 below it -> largest 0.3 at column 0
    # Row 3 (diag 1.0): -0.5, -0.2, -0.8 below it -> largest -0.2 at column 1
    values, columns = closest_negative(SEED_SCORES)
    _close(values, [0.3, 0.1, 0.3, -0.2])
    assert columns.tolist() == [2, 2, 0, 1]
    assert columns.dtype == torch.long


def test_triplet_terms_seed_matrix_margin_quarter():
    # L1 = max(mean_neg - diag + 0.25, 0):
    #   -1/3 - 0.9 + 0.25 = -0.983; -0.3 - 0.5 + 0.25 = -0.55; -2/15 - 0.7 + 0.25 = -0.583; -0.5 - 1 + 0.25 = -1.25
    # L2 = max(closest - diag + 0.25, 0):
    #   0.3 - 0.9 + 0.25 = -0.35; 0.1 - 0.5 + 0.25 = -0.15; 0.3 - 0.7 + 0.25 = -0.15; -0.2 - 1 + 0.25 = -0.95
    # The seeds' matrix is already well separated at the course's margin: every term is 0, J = 0.
    l1, l2 = triplet_terms(SEED_SCORES, margin=0.25)
    _close(l1, [0.0, 0.0, 0.0, 0.0])
    _close(l2, [0.0, 0.0, 0.0, 0.0])
    _close(triplet_loss_from_scores(SEED_SCORES, margin=0.25, reduction="sum"), 0.0)


def test_triplet_terms_seed_matrix_margin_one():
    # L1 = max(mean_neg - diag + 1, 0):
    #   -1/3 + 0.1 = -0.2333 -> 0;  -0.3 + 0.5 = 0.2;  -2/15 + 0.3 = 1/6;  -0.5 + 0 = -0.5 -> 0
    # L2 = max(closest - diag + 1, 0):
    #   0.3 + 0.1 = 0.4;  0.1 + 0.5 = 0.6;  0.3 + 0.3 = 0.6;  -0.2 + 0 = -0.2 -> 0
    # J = 0.2 + 1/6 + 0.4 + 0.6 + 0.6 = 1.9666...
    l1, l2 = triplet_terms(SEED_SCORES, margin=1.0)
    _close(l1, [0.0, 0.2, 1 / 6, 0.0])
    _close(l2, [0.4, 0.6, 0.6, 0.0])
    j = 0.2 + 1 / 6 + 0.4 + 0.6 + 0.6
    _close(triplet_loss_from_scores(SEED_SCORES, margin=1.0, reduction="sum"), j)
    _close(triplet_loss_from_scores(SEED_SCORES, margin=1.0, reduction="mean"), j / 4)
    _close(triplet_loss_from_scores(SEED_SCORES, margin=1.0, reduction="none"), [0.4, 0.8, 0.6 + 1 / 6, 0.0])


# --- rows without a closest negative, ties ------------------------------------------------------


def test_closest_negative_missing_and_ties():
    values, columns = closest_negative(NO_CLOSEST_SCORES)
    assert columns.tolist() == [-1, 2, -1]
    # Documented contract: NaN marks "no closest negative", never a fake similarity.
    assert torch.isnan(values[0]) and torch.isnan(values[2])
    _close(values[1], 0.4)


def test_closest_negative_equal_candidates_pick_lowest_column():
    scores = torch.tensor([[0.9, 0.3, 0.3], [0.0, 0.5, 0.0], [0.2, 0.2, 0.2]], dtype=torch.float64)
    values, columns = closest_negative(scores)
    assert columns.tolist() == [1, 0, -1]
    _close(values[:2], [0.3, 0.0])


def test_triplet_rows_without_closest_negative_contribute_l1_only():
    # Row 0: mean_neg (0.5 + 0.1) / 2 = 0.3 -> L1 = 0.3 - 0.1 + 0.25 = 0.45; no closest -> L2 = 0
    # Row 1: mean_neg (0.2 + 0.4) / 2 = 0.3 -> L1 = 0.3 - 0.6 + 0.25 = -0.05 -> 0; L2 = 0.4 - 0.6 + 0.25 = 0.05
    # Row 2: mean_neg 0.3 -> L1 = 0.3 - 0.3 + 0.25 = 0.25; only ties -> L2 = 0
    l1, l2 = triplet_terms(NO_CLOSEST_SCORES, margin=0.25)
    _close(l1, [0.45, 0.0, 0.25])
    _close(l2, [0.0, 0.05, 0.0])
    assert not torch.isnan(l2).any()


def test_triplet_gradient_reaches_diagonal_mean_and_closest_negative_only():
    scores = NO_CLOSEST_SCORES.clone().requires_grad_(True)
    triplet_loss_from_scores(scores, margin=0.25, reduction="sum").backward()
    # dJ/ds from the active hinges above:
    #   row 0: L1 active -> diag -1, each off-diagonal +1/2 (mean over 2); no L2
    #   row 1: L1 inactive, L2 active -> diag -1, closest (column 2) +1, column 0 untouched
    #   row 2: L1 active -> diag -1, each off-diagonal +1/2; no L2 (the tie row)
    expected = [[-1.0, 0.5, 0.5], [0.0, -1.0, 1.0], [0.5, 0.5, -1.0]]
    _close(scores.grad, expected)


def test_mean_and_closest_negative_match_a_naive_loop():
    scores = similarity_matrix(_random(BATCH, DIM, seed=4), _random(BATCH, DIM, seed=5))
    values, columns = closest_negative(scores)
    means = mean_negative(scores)
    for i in range(BATCH):
        others = [scores[i, j].item() for j in range(BATCH) if j != i]
        assert means[i].item() == pytest.approx(sum(others) / (BATCH - 1), abs=1e-12)
        below = [(scores[i, j].item(), j) for j in range(BATCH) if j != i and scores[i, j] < scores[i, i]]
        if below:
            best_value, best_column = max(below, key=lambda pair: (pair[0], -pair[1]))
            assert columns[i].item() == best_column
            assert values[i].item() == best_value
        else:
            assert columns[i].item() == -1


def test_extra_columns_are_extra_negatives():
    # Two pairs plus one hard negative column (K = 1).
    # Row 0: diag 0.9, negatives 0.1 and 0.8 -> mean (0.1 + 0.8) / 2 = 0.45, closest 0.8 (col 2)
    # Row 1: diag 0.5, negatives 0.2 and 0.6 -> mean 0.4, closest 0.2 (col 0; 0.6 is not below 0.5)
    scores = torch.tensor([[0.9, 0.1, 0.8], [0.2, 0.5, 0.6]])
    assert torch.allclose(mean_negative(scores), torch.tensor([0.45, 0.4]))
    values, columns = closest_negative(scores)
    assert columns.tolist() == [2, 0]
    assert torch.allclose(values, torch.tensor([0.8, 0.2]))
    # margin 0.25: L1 = [max(0.45-0.9+0.25,0), max(0.4-0.5+0.25,0)] = [0, 0.15]
    #              L2 = [max(0.8-0.9+0.25,0), max(0.2-0.5+0.25,0)] = [0.15, 0]
    l1, l2 = triplet_terms(scores, margin=0.25)
    assert torch.allclose(l1, torch.tensor([0.0, 0.15]))
    assert torch.allclose(l2, torch.tensor([0.15, 0.0]))


def test_triplet_loss_with_hard_negatives_appends_columns():
    v1, v2, vn = _random(BATCH, DIM, seed=11), _random(BATCH, DIM, seed=12), _random(4, DIM, seed=13)
    scores = similarity_matrix(v1, torch.cat([v2, vn]))  # (13, 17)
    expected = triplet_loss_from_scores(scores, margin=0.3)
    assert torch.allclose(triplet_loss(v1, v2, margin=0.3, negatives=vn), expected)
    assert not torch.allclose(triplet_loss(v1, v2, margin=0.3), expected)


# --- triplet_loss from vectors ------------------------------------------------------------------


def test_triplet_loss_from_vectors_equals_loss_from_scores():
    v1, v2 = _random(BATCH, DIM, seed=6), _random(BATCH, DIM, seed=7)
    scores = similarity_matrix(v1, v2)
    for margin in (0.25, 1.0):
        for reduction in ("mean", "sum", "none"):
            _close(
                triplet_loss(v1, v2, margin=margin, reduction=reduction),
                triplet_loss_from_scores(scores, margin=margin, reduction=reduction),
            )


def test_triplet_loss_reductions():
    v1, v2 = _random(BATCH, DIM, seed=8), _random(BATCH, DIM, seed=9)
    per_row = triplet_loss(v1, v2, reduction="none")
    assert per_row.shape == (BATCH,)
    assert per_row.sum() > 0  # random vectors are not separated: the test is not vacuous
    l1, l2 = triplet_terms(similarity_matrix(v1, v2))
    _close(per_row, l1 + l2)
    _close(triplet_loss(v1, v2, reduction="sum"), BATCH * triplet_loss(v1, v2, reduction="mean"), atol=1e-10)


def test_triplet_loss_backward_is_finite():
    v1 = _random(BATCH, DIM, seed=10).requires_grad_(True)
    v2 = _random(BATCH, DIM, seed=11).requires_grad_(True)
    # Make row 0 have no closest negative, so the NaN placeholder is in play.
    with torch.no_grad():
        v2[0] = -v1[0]
    loss = triplet_loss(v1, v2, margin=1.0)
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.isfinite(v1.grad).all() and torch.isfinite(v2.grad).all()
    assert v1.grad.abs().sum() > 0 and v2.grad.abs().sum() > 0


# --- contrastive --------------------------------------------------------------------------------

# Unit vectors at distances D = 0, 0.5, 2 (contrastive_loss normalises, so the pairs are unit
# vectors to keep the hand values of the distance):
#   pair 0: (1, 0) and (1, 0)                  -> D = 0
#   pair 1: (1, 0) and (7/8, sqrt(15)/8)       -> D^2 = (1/8)^2 + 15/64 = 16/64 = 1/4, D = 0.5
#           (7/8)^2 + 15/64 = 49/64 + 15/64 = 1: a unit vector, at cos = 7/8 from (1, 0)
#   pair 2: (1, 0) and (-1, 0)                 -> D = 2
PAIR_V1 = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
PAIR_V2 = torch.tensor([[1.0, 0.0], [7 / 8, math.sqrt(15) / 8], [-1.0, 0.0]], dtype=torch.float64)


@pytest.mark.parametrize(
    "labels",
    [
        torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64),
        torch.tensor([1, 0, 0]),
        torch.tensor([True, False, False]),
    ],
)
def test_contrastive_hand_computed(labels):
    # Labels 1, 0, 0; margin 1.
    # squared_hinge:  1 * 0^2 = 0;  max(1 - 0.5, 0)^2 = 0.25;   max(1 - 2, 0)^2 = 0
    # margin_squared: 1 * 0^2 = 0;  max(1 - 0.25, 0) = 0.75;     max(1 - 4, 0) = 0
    _close(contrastive_loss(PAIR_V1, PAIR_V2, labels, margin=1.0, form="squared_hinge"), 0.25 / 3)
    _close(contrastive_loss(PAIR_V1, PAIR_V2, labels, margin=1.0, form="margin_squared"), 0.75 / 3)
    _close(contrastive_loss(PAIR_V1, PAIR_V2, labels, margin=1.0, reduction="none"), [0.0, 0.25, 0.0])
    _close(contrastive_loss(PAIR_V1, PAIR_V2, labels, margin=1.0, form="margin_squared", reduction="sum"), 0.75)
    _close(contrastive_loss(PAIR_V1, PAIR_V2, labels, form="margin_squared", reduction="none"), [0.0, 0.75, 0.0])


def test_contrastive_distance_is_between_unit_vectors():
    # Raw (1, 0) vs (3, 4): the old loss on raw vectors read D^2 = 4 + 16 = 20; between the unit
    # vectors (1, 0) and (0.6, 0.8) it is D^2 = 0.16 + 0.64 = 0.8 (= 2 - 2 cos, cos = 0.6).
    v1 = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    v2 = torch.tensor([[3.0, 4.0]], dtype=torch.float64)
    _close(contrastive_loss(v1, v2, torch.ones(1)), 0.8)
    # Non-duplicate, margin 1: squared_hinge (1 - sqrt(0.8))^2 = 1.8 - 2 sqrt(0.8); margin_squared 1 - 0.8 = 0.2
    _close(contrastive_loss(v1, v2, torch.zeros(1)), 1.8 - 2 * math.sqrt(0.8))
    _close(contrastive_loss(v1, v2, torch.zeros(1), form="margin_squared"), 0.2)


def test_contrastive_duplicates_pay_squared_distance():
    # All pairs duplicates: mean of D^2 = (0 + 0.25 + 4) / 3, the same under both forms.
    labels = torch.ones(3)
    for form in ("squared_hinge", "margin_squared"):
        _close(contrastive_loss(PAIR_V1, PAIR_V2, labels, form=form), 4.25 / 3)
    # All non-duplicates with margin 3: squared_hinge (9 + 6.25 + 1) / 3, margin_squared (9 + 8.75 + 5) / 3.
    labels = torch.zeros(3)
    # (squared_hinge reads D, which the clamped sqrt puts at 1e-6 for the identical pair.)
    _close(contrastive_loss(PAIR_V1, PAIR_V2, labels, margin=3.0, form="squared_hinge"), 16.25 / 3, atol=1e-5)
    _close(contrastive_loss(PAIR_V1, PAIR_V2, labels, margin=3.0, form="margin_squared"), 22.75 / 3)


@pytest.mark.parametrize("form", ["squared_hinge", "margin_squared"])
@pytest.mark.parametrize("label", [0.0, 1.0])
@pytest.mark.parametrize("factor", [1.0, 2.5])  # identical vectors, and parallel ones of another length
def test_contrastive_identical_vectors_have_finite_gradients(form, label, factor):
    v1 = _random(BATCH, DIM, seed=12).requires_grad_(True)
    v2 = (factor * v1.detach()).requires_grad_(True)
    loss = contrastive_loss(v1, v2, torch.full((BATCH,), label), form=form)
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.isfinite(v1.grad).all() and torch.isfinite(v2.grad).all()
    if factor == 1.0:  # D^2 is exactly 0 for identical vectors: no rounding noise enters the loss
        assert contrastive_loss(v1, v2, torch.ones(BATCH), reduction="none").eq(0).all()


def test_contrastive_gradient_of_duplicate_pair_is_exact():
    # All duplicates: L = (1/3) sum_i D_i^2, D_i^2 = ||u1_i - u2_i||^2 with u = v / ||v||.
    # At ||v2_i|| = 1, d D^2 / d v2 = (I - u2 u2^T) 2 (u2 - u1) = 2 ((u1 . u2) u2 - u1):
    # minus twice the part of u1 orthogonal to u2 (a length change of v2 costs nothing).
    #   pair 0: u2 = u1 = (1, 0)             -> 2 ((1, 0) - (1, 0)) = (0, 0)
    #   pair 1: u2 = (7/8, sqrt(15)/8), u1 . u2 = 7/8
    #           -> 2 ((49/64, 7 sqrt(15)/64) - (1, 0)) = (-15/32, 7 sqrt(15)/32)
    #   pair 2: u2 = (-1, 0), u1 . u2 = -1   -> 2 ((1, 0) - (1, 0)) = (0, 0)
    v2 = PAIR_V2.clone().requires_grad_(True)
    contrastive_loss(PAIR_V1, v2, torch.ones(3)).backward()
    expected = torch.tensor([[0.0, 0.0], [-15 / 32, 7 * math.sqrt(15) / 32], [0.0, 0.0]], dtype=torch.float64) / 3
    _close(v2.grad, expected)
    # Twice as long a v2 points the same way: same loss, half the gradient (d u / d v = (I - u u^T) / ||v||).
    v2_long = (2 * PAIR_V2).requires_grad_(True)
    contrastive_loss(PAIR_V1, v2_long, torch.ones(3)).backward()
    _close(v2_long.grad, expected / 2)


# --- in-batch softmax ---------------------------------------------------------------------------


def test_in_batch_softmax_hand_computed():
    scores = torch.tensor([[2.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    # Row 0: -log(e^2 / (e^2 + e^0)) = log(1 + e^-2);  row 1: -log(e / (2e)) = log 2
    expected = (math.log(1 + math.exp(-2)) + math.log(2)) / 2
    _close(in_batch_softmax_loss_from_scores(scores), expected)
    by_hand = -torch.log_softmax(scores, dim=1).diagonal().mean()
    _close(in_batch_softmax_loss_from_scores(scores), by_hand)
    _close(in_batch_softmax_loss_from_scores(scores), F.cross_entropy(scores, torch.tensor([0, 1])))
    # scale multiplies the logits: row 0 becomes log(1 + e^-6), row 1 stays log 2.
    _close(in_batch_softmax_loss_from_scores(scores, scale=3.0), (math.log(1 + math.exp(-6)) + math.log(2)) / 2)


def test_in_batch_softmax_uses_cosine_of_raw_vectors():
    q = torch.tensor([[2.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    a = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    # Unit vectors: q -> (1, 0), (0, 1); a -> (1, 0), (r, r) with r = 1/sqrt(2).
    # Cosines [[1, r], [0, r]] (the raw dot products were [[2, 2], [0, 1]]):
    #   row 0: -log(e^1 / (e^1 + e^r)) = log(1 + e^(r - 1));  row 1: -log(e^r / (e^0 + e^r)) = log(1 + e^-r)
    r = 1 / math.sqrt(2)
    _close(in_batch_softmax_loss(q, a, scale=1.0), (math.log(1 + math.exp(r - 1)) + math.log(1 + math.exp(-r))) / 2)
    # The default scale is 20 (MultipleNegativesRankingLoss): log(1 + e^(20 (r - 1))), log(1 + e^(-20 r)).
    at_20 = [math.log(1 + math.exp(20 * (r - 1))), math.log(1 + math.exp(-20 * r))]
    _close(in_batch_softmax_loss(q, a, reduction="none"), at_20)
    _close(in_batch_softmax_loss(q, a), sum(at_20) / 2)


def test_in_batch_softmax_extra_negatives():
    q, a = _random(3, DIM, seed=13), _random(5, DIM, seed=14)
    # (3, 5) cosines: columns 3 and 4 are extra negatives for every row
    scores = torch.tensor(cosine_similarity(q.numpy(), a.numpy()), dtype=torch.float64)
    expected = (torch.logsumexp(scores, dim=1) - scores.diagonal()).mean()
    _close(in_batch_softmax_loss(q, a, scale=1.0), expected, atol=1e-10)


def test_in_batch_softmax_scale_20_on_raw_vectors_is_mnrl():
    q = 4.0 * _random(BATCH, DIM, seed=15)  # raw, not unit length
    a = 0.3 * _random(BATCH, DIM, seed=16)
    # MultipleNegativesRankingLoss: cross-entropy of 20 * cos(q_i, a_j) with the positive at j = i.
    cos = torch.tensor(cosine_similarity(q.numpy(), a.numpy()), dtype=torch.float64)
    logits = 20.0 * cos
    mnrl = torch.stack([torch.log(torch.exp(logits[i]).sum()) - logits[i, i] for i in range(BATCH)]).mean()
    _close(in_batch_softmax_loss(q, a, scale=20.0), mnrl, atol=1e-9)
    _close(in_batch_softmax_loss(q, a), mnrl, atol=1e-9)  # 20 is the default


# --- the one convention: raw vectors, one reduction ---------------------------------------------


def _raw_batch(seed: int):
    """(13, 7) raw vectors of very different lengths, (4, 7) extra negatives, labels with both classes."""
    lengths = torch.logspace(-2, 2, BATCH, dtype=torch.float64)[:, None]  # 0.01 .. 100
    v1 = _random(BATCH, RAW_DIM, seed=seed) * lengths
    v2 = _random(BATCH, RAW_DIM, seed=seed + 1) * lengths.flip(0)
    negatives = _random(4, RAW_DIM, seed=seed + 2) * 7.0
    labels = (torch.arange(BATCH) % 3 == 0).to(torch.float64)
    return v1, v2, negatives, labels


# Each loss as f(v1, v2, reduction=...), on the batch of _raw_batch.
LOSS_CALLS = {
    "triplet": lambda v1, v2, negatives, labels, **kw: triplet_loss(v1, v2, margin=0.3, **kw),
    "triplet_hard_negatives": lambda v1, v2, negatives, labels, **kw: triplet_loss(
        v1, v2, margin=0.3, negatives=negatives, **kw
    ),
    "contrastive_squared_hinge": lambda v1, v2, negatives, labels, **kw: contrastive_loss(
        v1, v2, labels, margin=1.2, form="squared_hinge", **kw
    ),
    "contrastive_margin_squared": lambda v1, v2, negatives, labels, **kw: contrastive_loss(
        v1, v2, labels, margin=1.2, form="margin_squared", **kw
    ),
    "softmax": lambda v1, v2, negatives, labels, **kw: in_batch_softmax_loss(v1, v2, scale=5.0, **kw),
    "softmax_hard_negatives": lambda v1, v2, negatives, labels, **kw: in_batch_softmax_loss(
        v1, torch.cat([v2, negatives]), scale=5.0, **kw
    ),
}


@pytest.mark.parametrize("name", LOSS_CALLS)
def test_scaling_a_vector_changes_no_loss(name):
    loss = LOSS_CALLS[name]
    v1, v2, negatives, labels = _raw_batch(seed=20)
    reference = loss(v1, v2, negatives, labels, reduction="none")  # (B,)
    assert reference.shape == (BATCH,)
    assert reference.abs().sum() > 0  # not vacuous
    # Every row by its own positive factor, on either side, and the negatives.
    factors = torch.logspace(-3, 3, BATCH, dtype=torch.float64)[:, None]  # 0.001 .. 1000
    _close(loss(factors * v1, v2, negatives, labels, reduction="none"), reference, atol=1e-10)
    _close(loss(v1, factors.flip(0) * v2, negatives, labels, reduction="none"), reference, atol=1e-10)
    _close(loss(v1, v2, 123.0 * negatives, labels, reduction="none"), reference, atol=1e-10)
    # Unit vectors are just one more scaling.
    unit = loss(F.normalize(v1, dim=1), F.normalize(v2, dim=1), F.normalize(negatives, dim=1), labels, reduction="none")
    _close(unit, reference, atol=1e-10)


@pytest.mark.parametrize("name", LOSS_CALLS)
def test_reductions_agree(name):
    loss = LOSS_CALLS[name]
    v1, v2, negatives, labels = _raw_batch(seed=30)
    per_item = loss(v1, v2, negatives, labels, reduction="none")
    assert per_item.shape == (BATCH,)
    mean = loss(v1, v2, negatives, labels)  # "mean" is the default
    assert mean.dim() == 0
    _close(loss(v1, v2, negatives, labels, reduction="mean"), mean)
    _close(mean, per_item.mean())
    _close(loss(v1, v2, negatives, labels, reduction="sum"), BATCH * mean, atol=1e-10)
    _close(loss(v1, v2, negatives, labels, reduction="sum"), per_item.sum())


def test_score_level_losses_take_the_same_reduction():
    # Softmax rows of SEED_SCORES at scale 1: L_i = logsumexp(row i) - s_ii
    per_row = torch.logsumexp(SEED_SCORES, dim=1) - SEED_SCORES.diagonal()
    _close(in_batch_softmax_loss_from_scores(SEED_SCORES, reduction="none"), per_row)
    _close(in_batch_softmax_loss_from_scores(SEED_SCORES, reduction="sum"), per_row.sum())
    _close(in_batch_softmax_loss_from_scores(SEED_SCORES), per_row.mean())
    # The helper itself, by hand: (0.5 + 1 + 3) / 3 = 1.5, sum 4.5.
    losses = torch.tensor([0.5, 1.0, 3.0], dtype=torch.float64)
    _close(reduce(losses), 1.5)
    _close(reduce(losses, "sum"), 4.5)
    assert reduce(losses, "none") is losses


def _contrastive_reference(squared, labels, margin, form):
    """The two forms written out from their formulas, on given squared distances D^2."""
    y = labels.to(squared.dtype)
    if form == "squared_hinge":
        apart = (margin - squared.sqrt()).clamp(min=0).square()
    else:
        apart = (margin**2 - squared).clamp(min=0)
    return y * squared + (1 - y) * apart


@pytest.mark.parametrize("form", CONTRASTIVE_FORMS)
def test_contrastive_of_raw_vectors_equals_the_old_normalised_from_outside(form):
    v1, v2, _, labels = _raw_batch(seed=50)
    # What the objective used to do: normalise outside, then Euclidean distances with exact D^2.
    u1, u2 = F.normalize(v1, dim=-1), F.normalize(v2, dim=-1)
    squared = (u1 - u2).square().sum(dim=1)
    old = _contrastive_reference(squared, labels, 1.2, form)
    _close(contrastive_loss(v1, v2, labels, margin=1.2, form=form, reduction="none"), old)
    _close(contrastive_loss(v1, v2, labels, margin=1.2, form=form), old.mean())
    # and the raw vectors are far from unit length: distances on them would be another loss altogether
    raw_squared = (v1 - v2).square().sum(dim=1)
    old_on_raw = _contrastive_reference(raw_squared, labels, 1.2, form)
    assert not torch.allclose(old_on_raw, old)


@pytest.mark.parametrize("with_negatives", [False, True])
def test_softmax_of_raw_vectors_equals_the_old_normalised_from_outside(with_negatives):
    v1, v2, negatives, _ = _raw_batch(seed=60)
    candidates = torch.cat([v2, negatives]) if with_negatives else v2  # (13 + 4, 7) or (13, 7)
    # What the objective used to do: normalise outside, raw dot product, cross-entropy on targets 0..B-1.
    logits = 20.0 * F.normalize(v1, dim=-1) @ F.normalize(candidates, dim=-1).T  # (13, 17) or (13, 13)
    old = F.cross_entropy(logits, torch.arange(BATCH), reduction="none")
    _close(in_batch_softmax_loss(v1, candidates, scale=20.0, reduction="none"), old, atol=1e-10)
    _close(in_batch_softmax_loss(v1, candidates, scale=20.0), old.mean(), atol=1e-10)
    # the raw dot product would be another loss altogether
    raw = F.cross_entropy(20.0 * v1 @ candidates.T, torch.arange(BATCH))
    assert not torch.isclose(raw, old.mean())


def test_seed_dual_encoder_experiment():
    # The seeds' experiment: 4 rounds of "+0.5 on the diagonal, -0.02 everywhere else".
    # Triplet at margin 1, hand-computed after round 1 (diag 1.4, 1.0, 1.2, 1.5; off-diagonals -0.02):
    #   row 1: L1 = -0.3 - 0.02 - 1.0 + 1 < 0; L2 = 0.08 - 1.0 + 1 = 0.08
    #   row 2: L1 = -2/15 - 0.02 - 1.2 + 1 < 0; L2 = 0.28 - 1.2 + 1 = 0.08
    #   rows 0 and 3: all hinges negative -> J = 0.16, then 0 from round 2 on.
    eye = torch.eye(4, dtype=torch.bool)
    scores = SEED_SCORES.clone()
    softmax_losses = [in_batch_softmax_loss_from_scores(scores).item()]
    triplet_quarter = [triplet_loss_from_scores(scores, margin=0.25).item()]
    triplet_one_sum = [triplet_loss_from_scores(scores, margin=1.0, reduction="sum").item()]
    for _ in range(4):
        scores = torch.where(eye, scores + 0.5, scores - 0.02)
        softmax_losses.append(in_batch_softmax_loss_from_scores(scores).item())
        triplet_quarter.append(triplet_loss_from_scores(scores, margin=0.25).item())
        triplet_one_sum.append(triplet_loss_from_scores(scores, margin=1.0, reduction="sum").item())
    assert all(later < earlier for earlier, later in zip(softmax_losses, softmax_losses[1:]))
    assert all(later <= earlier for earlier, later in zip(triplet_quarter, triplet_quarter[1:]))
    assert all(later <= earlier for earlier, later in zip(triplet_one_sum, triplet_one_sum[1:]))
    assert triplet_one_sum == pytest.approx([0.2 + 1 / 6 + 1.6, 0.16, 0.0, 0.0, 0.0], abs=1e-12)
