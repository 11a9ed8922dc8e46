"""Loss functions against hand-computed values, sklearn, and naive references."""

import math

import pytest
import torch
import torch.nn.functional as F
from sklearn.metrics.pairwise import cosine_similarity

import core.losses
from core.losses import (
    closest_negative,
    contrastive_loss,
    in_batch_softmax_loss,
    mean_negative,
    similarity_matrix,
    triplet_loss,
)
from core.losses.contrastive import contrastive_terms
from core.losses.similarity import diagonal
from core.losses.softmax import in_batch_softmax_loss_from_scores
from core.losses.triplet import triplet_loss_from_scores, triplet_terms

BATCH, DIM = 13, 32  # deliberately different so a transposed shape cannot pass

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
            "in_batch_softmax_loss",
        ]
    )
    for name in core.losses.__all__:
        assert callable(getattr(core.losses, name))


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


def test_diagonal_is_the_positive_similarities():
    _close(diagonal(SEED_SCORES), [0.9, 0.5, 0.7, 1.0])


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


def test_negatives_reject_fewer_columns_than_rows_or_single_row():
    with pytest.raises(ValueError):
        mean_negative(torch.zeros(5, 3))
    with pytest.raises(ValueError):
        closest_negative(torch.zeros(1, 1))


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
    with pytest.raises(ValueError):
        triplet_loss(v1, v2, reduction="max")


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

# Distances D = 0, 0.5, 2 (the middle pair is a 3-4-5 triangle scaled by 0.1).
PAIR_V1 = torch.zeros(3, 2, dtype=torch.float64)
PAIR_V2 = torch.tensor([[0.0, 0.0], [0.3, 0.4], [2.0, 0.0]], dtype=torch.float64)


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
    distances = torch.tensor([0.0, 0.5, 2.0], dtype=torch.float64)
    _close(contrastive_terms(distances, labels, 1.0, "squared_hinge"), [0.0, 0.25, 0.0])
    _close(contrastive_terms(distances, labels, 1.0, "margin_squared"), [0.0, 0.75, 0.0])


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
def test_contrastive_identical_vectors_have_finite_gradients(form, label):
    v1 = _random(BATCH, DIM, seed=12).requires_grad_(True)
    v2 = v1.detach().clone().requires_grad_(True)
    loss = contrastive_loss(v1, v2, torch.full((BATCH,), label), form=form)
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.isfinite(v1.grad).all() and torch.isfinite(v2.grad).all()


def test_contrastive_gradient_of_duplicate_pair_is_exact():
    # d/dv2 of D^2 = 2 (v2 - v1), averaged over the batch of 3.
    v2 = PAIR_V2.clone().requires_grad_(True)
    contrastive_loss(PAIR_V1, v2, torch.ones(3)).backward()
    _close(v2.grad, 2 * (PAIR_V2 - PAIR_V1) / 3)


def test_contrastive_rejects_unknown_form_and_bad_labels():
    with pytest.raises(ValueError):
        contrastive_loss(PAIR_V1, PAIR_V2, torch.ones(3), form="hinge")
    with pytest.raises(ValueError):
        contrastive_loss(PAIR_V1, PAIR_V2, torch.ones(4))


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


def test_in_batch_softmax_uses_raw_dot_product():
    q = torch.tensor([[2.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    a = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    # q @ a.T = [[2, 2], [0, 1]]: row 0 is a coin flip (log 2), row 1 is log(1 + e^-1).
    _close(in_batch_softmax_loss(q, a), (math.log(2) + math.log(1 + math.exp(-1))) / 2)


def test_in_batch_softmax_extra_negatives():
    q, a = _random(3, DIM, seed=13), _random(5, DIM, seed=14)
    scores = q @ a.T  # (3, 5): columns 3 and 4 are extra negatives for every row
    expected = (torch.logsumexp(scores, dim=1) - scores.diagonal()).mean()
    _close(in_batch_softmax_loss(q, a), expected)
    with pytest.raises(ValueError):
        in_batch_softmax_loss(a, q)  # 5 queries cannot have 3 positives


def test_in_batch_softmax_scale_20_on_normalised_vectors_is_mnrl():
    q = F.normalize(_random(BATCH, DIM, seed=15), dim=1)
    a = F.normalize(_random(BATCH, DIM, seed=16), dim=1)
    # MultipleNegativesRankingLoss: cross-entropy of 20 * cos(q_i, a_j) with the positive at j = i.
    cos = torch.tensor(cosine_similarity(q.numpy(), a.numpy()), dtype=torch.float64)
    logits = 20.0 * cos
    mnrl = torch.stack([torch.log(torch.exp(logits[i]).sum()) - logits[i, i] for i in range(BATCH)]).mean()
    _close(in_batch_softmax_loss(q, a, scale=20.0), mnrl, atol=1e-9)


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
