"""CoSENT loss: hand-computed values, a double-loop reference, stability, gradients, labels, errors,
its binding in ``LossConfig``, the model card line, and a tiny end-to-end run through ``train_run``."""

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

from core.export.model_card import loss_line
from core.losses import cosent_loss
from core.losses.similarity import pair_similarity, similarity_matrix
from core.training.objectives import LossConfig
from tests.conftest import synthetic_pairs

BATCH, DIM = 11, 6  # deliberately different so a transposed shape cannot pass
R = 1 / math.sqrt(2)  # cos 45 degrees

# Three pairs with known cosines s = (1, 0, 1/sqrt(2)); the v1 lengths differ on purpose.
V1 = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]], dtype=torch.float64)
V2 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)


def _random(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _close(actual, expected, atol: float = 1e-12) -> None:
    torch.testing.assert_close(torch.as_tensor(actual, dtype=torch.float64),
                               torch.as_tensor(expected, dtype=torch.float64), atol=atol, rtol=0.0)


def reference_cosent(v1, v2, labels, scale):
    """The formula read literally: two loops over the pairs, exp and log in Python floats."""
    s = [F.cosine_similarity(v1[i : i + 1], v2[i : i + 1]).item() for i in range(len(v1))]
    y = [float(label) for label in labels]
    total = 0.0
    for i in range(len(s)):
        for j in range(len(s)):
            if y[i] > y[j]:
                total += math.exp(scale * (s[j] - s[i]))
    return math.log(1.0 + total)


# ---- values --------------------------------------------------------------------------------------
def test_pair_similarity_is_the_diagonal_of_the_similarity_matrix():
    _close(pair_similarity(V1, V2), [1.0, 0.0, R])
    v1, v2 = _random(BATCH, DIM, seed=0), _random(BATCH, DIM, seed=1)
    _close(pair_similarity(v1, v2), similarity_matrix(v1, v2).diagonal(), atol=1e-14)


def test_hand_computed_three_pairs():
    # y = (1, 0, 0): pair 0 must beat pairs 1 and 2.
    # scale 1: log(1 + e^(0 - 1) + e^(0.70711 - 1)) = log(1 + 0.36788 + 0.74610) = log(2.11398) = 0.74857
    _close(cosent_loss(V1, V2, torch.tensor([1, 0, 0]), scale=1.0), math.log(1 + math.exp(-1) + math.exp(R - 1)))
    assert cosent_loss(V1, V2, torch.tensor([1, 0, 0]), scale=1.0).item() == pytest.approx(0.74857, abs=1e-5)
    # y = (0, 1, 1), the wrong order: pairs 1 and 2 must beat pair 0.
    # scale 1: log(1 + e^(1 - 0) + e^(1 - 0.70711)) = log(1 + 2.71828 + 1.34034) = log(5.05862) = 1.62108
    assert cosent_loss(V1, V2, torch.tensor([0, 1, 1]), scale=1.0).item() == pytest.approx(1.62108, abs=1e-5)
    # y = (1, 0, 1): pairs 0 and 2 must beat pair 1, and both do, by 1 and 0.70711.
    # scale 20: log(1 + e^-20 + e^-14.142) = 7.2342e-07, almost nothing left to learn.
    value = cosent_loss(V1, V2, torch.tensor([1, 0, 1]))
    _close(value, math.log1p(math.exp(-20) + math.exp(-20 * R)))
    assert value.item() == pytest.approx(7.2342e-07, rel=1e-4)


def test_graded_labels_only_their_order_counts():
    # y = (0.9, 0.1, 0.5): ranked pairs (0,1), (0,2), (2,1): the same cells as labels (2, 0, 1).
    # scale 1: log(1 + e^(0 - 1) + e^(0.70711 - 1) + e^(0 - 0.70711)) = log(1 + 0.36788 + 0.74610 + 0.49307)
    #        = log(2.60705) = 0.95822
    graded = cosent_loss(V1, V2, torch.tensor([0.9, 0.1, 0.5]), scale=1.0)
    assert graded.item() == pytest.approx(0.95822, abs=1e-5)
    _close(graded, cosent_loss(V1, V2, torch.tensor([2, 0, 1]), scale=1.0))


@pytest.mark.parametrize("scale", [1.0, 20.0])
@pytest.mark.parametrize("seed", range(3))
def test_matches_a_double_loop_reference(scale, seed):
    v1, v2 = 3 * _random(BATCH, DIM, seed=seed), 0.5 * _random(BATCH, DIM, seed=seed + 10)
    labels = torch.randint(0, 2, (BATCH,), generator=torch.Generator().manual_seed(seed))
    _close(cosent_loss(v1, v2, labels, scale=scale), reference_cosent(v1, v2, labels, scale), atol=1e-10)
    graded = torch.randint(0, 5, (BATCH,), generator=torch.Generator().manual_seed(seed + 20)).double() / 4
    _close(cosent_loss(v1, v2, graded, scale=scale), reference_cosent(v1, v2, graded, scale), atol=1e-10)


def test_vector_lengths_do_not_matter():
    v1, v2 = _random(BATCH, DIM, seed=3), _random(BATCH, DIM, seed=4)
    labels = torch.arange(BATCH) % 3 == 0
    _close(cosent_loss(7 * v1, 0.1 * v2, labels), cosent_loss(F.normalize(v1, dim=1), F.normalize(v2, dim=1), labels),
           atol=1e-12)


def test_stable_where_the_plain_formula_overflows():
    # One duplicate scored at cosine 0 below one non-duplicate at cosine 1: L = log(1 + e^lambda).
    v1 = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64, requires_grad=True)
    v2 = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    with pytest.raises(OverflowError):
        math.exp(1000.0)  # what the formula read literally would have to compute
    value = cosent_loss(v1, v2, torch.tensor([1, 0]), scale=1000.0)
    _close(value, 1000.0)  # log(1 + e^1000) = 1000 + log(1 + e^-1000)
    value.backward()
    assert torch.isfinite(v1.grad).all() and v1.grad.abs().sum() > 0


# ---- no ranked pair ------------------------------------------------------------------------------
@pytest.mark.parametrize("labels", [[1, 1, 1], [0, 0, 0], [0.5, 0.5, 0.5]])
def test_a_batch_with_nothing_to_rank_is_zero_with_a_graph(labels):
    v1 = V1.clone().requires_grad_(True)
    value = cosent_loss(v1, V2, torch.tensor(labels))
    assert value.item() == 0.0 and value.requires_grad
    value.backward()
    assert torch.equal(v1.grad, torch.zeros_like(v1))


def test_a_single_pair_is_zero():
    assert cosent_loss(V1[:1], V2[:1], torch.tensor([1])).item() == 0.0


# ---- gradients -----------------------------------------------------------------------------------
def test_gradients_are_finite_and_match_finite_differences():
    v1 = _random(5, 3, seed=5).requires_grad_(True)
    v2 = _random(5, 3, seed=6).requires_grad_(True)
    labels = torch.tensor([1, 0, 1, 0, 0])
    assert torch.autograd.gradcheck(lambda a, b: cosent_loss(a, b, labels, scale=3.0), (v1, v2))
    cosent_loss(v1, v2, labels).backward()
    assert torch.isfinite(v1.grad).all() and torch.isfinite(v2.grad).all()
    assert v1.grad.abs().sum() > 0


def test_a_step_down_the_gradient_raises_the_duplicates_above_the_rest():
    v1 = _random(BATCH, DIM, seed=7).requires_grad_(True)
    v2 = _random(BATCH, DIM, seed=8)
    labels = torch.arange(BATCH) % 2 == 0
    before = cosent_loss(v1, v2, labels, scale=5.0)
    before.backward()
    with torch.no_grad():
        after = cosent_loss(v1 - 0.05 * v1.grad, v2, labels, scale=5.0)
    assert after < before


# ---- labels ---------------------------------------------------------------------------------
def test_bool_int_and_float_labels_give_the_same_loss():
    v1, v2 = _random(BATCH, DIM, seed=9), _random(BATCH, DIM, seed=10)
    flags = torch.arange(BATCH) % 3 == 1
    values = [cosent_loss(v1, v2, flags.to(dtype)) for dtype in (torch.bool, torch.int64, torch.float32, torch.float64)]
    for value in values[1:]:
        _close(value, values[0])
    assert values[0].dtype == torch.float64  # the vectors' dtype, not the labels'



# ---- wiring --------------------------------------------------------------------------------------
def test_objective_binds_cosent_with_its_scale():
    config = LossConfig("cosent", scale=7.0)
    assert (config.batch_kind, config.margin, config.label()) == ("labelled", 0.0, "CoSENT (cosine ranking, lambda=7)")
    v1, v2 = _random(BATCH, DIM, seed=11), _random(BATCH, DIM, seed=12)
    labels = (torch.arange(BATCH) % 2).double()
    _close(config(v1, v2, labels), reference_cosent(v1, v2, labels, 7.0), atol=1e-10)


def test_the_model_card_names_cosent_and_its_lambda():
    line = loss_line({"loss": dataclasses.asdict(LossConfig("cosent", scale=15.0))})
    assert line == "CoSENT ranking of cosines, log(1 + Σ exp(λ·(sⱼ − sᵢ))) over every duplicate i and " \
                   "non-duplicate j of a batch, λ 15.0"


# ---- end to end ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_tiny_cosent_run_learns_the_synthetic_task():
    from core.status import DONE
    from core.training.pipeline import train_run
    from core.training.specs import spec_from_options

    spec = spec_from_options(model="lstm", loss="cosent", epochs=6, batch_size=16, lr=2e-2, device="cpu", patience=0,
                             max_length=11, val_fraction=0.2, model_options={"embedding_dim": 12, "hidden_size": 10})
    assert (spec.loss.name, spec.loss.scale, spec.hard_negatives) == ("cosent", 20.0, False)
    result = train_run(spec, synthetic_pairs(400, seed=0, topics=60), save=False)
    outcome = result.outcome
    assert outcome.status == DONE and len(outcome.epochs) == 6
    assert outcome.pairs_seen == 6 * 320  # labelled batches: every training pair, both classes, each epoch
    assert outcome.epochs[-1].train_loss < 0.6 * outcome.epochs[0].train_loss  # 5.68 -> 3.07 here
    aucs = [epoch.metrics["roc_auc"] for epoch in outcome.epochs]
    assert aucs[-1] > aucs[0] + 0.1  # 0.76 -> 0.96 on the 80 held-out pairs: topic words decide
    assert result.validation["roc_auc"] > 0.9
