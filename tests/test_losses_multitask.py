"""Multitask loss: the sum of the existing contrastive and in-batch softmax losses on the right rows,
hand-computed values, reductions, edge batches, its binding in ``LossConfig``, the model card line,
the multi-process refusal, and a tiny end-to-end run through ``train_run``."""

import dataclasses
import math

import pytest
import torch

from core.export.model_card import loss_line
from core.losses import contrastive_loss, in_batch_softmax_loss, multitask_loss
from core.training.objectives import LossConfig
from tests.conftest import synthetic_pairs

BATCH, DIM = 7, 5
LABELS = torch.tensor([1, 0, 1, 1, 0, 0, 1])
DUPLICATE_ROWS, OTHER_ROWS = [0, 2, 3, 6], [1, 4, 5]


def _random(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _close(actual, expected, atol: float = 1e-12) -> None:
    torch.testing.assert_close(torch.as_tensor(actual, dtype=torch.float64),
                               torch.as_tensor(expected, dtype=torch.float64), atol=atol, rtol=0.0)


def _vectors(seed: int):
    return 3 * _random(BATCH, DIM, seed=seed), 0.5 * _random(BATCH, DIM, seed=seed + 1)


# ---- the sum of the two existing losses ------------------------------------------------------------
@pytest.mark.parametrize("form", ["squared_hinge", "margin_squared"])
def test_equals_contrastive_on_every_row_plus_weighted_softmax_on_the_duplicates(form):
    v1, v2 = _vectors(0)
    # Anchors: v1 of rows 0, 2, 3, 6; candidates: v2 of the same rows (targets 0..3), then of rows 1, 4, 5.
    contrastive = contrastive_loss(v1, v2, LABELS, margin=0.8, form=form)
    softmax = in_batch_softmax_loss(v1[DUPLICATE_ROWS], v2[DUPLICATE_ROWS + OTHER_ROWS], scale=7.0)
    value = multitask_loss(v1, v2, LABELS, margin=0.8, form=form, scale=7.0, weight=0.5)
    _close(value, contrastive + 0.5 * softmax)
    assert contrastive > 0 and softmax > 0  # neither term is trivially zero here


def test_sum_and_none_reductions_split_the_same_terms_per_row():
    v1, v2 = _vectors(2)
    contrastive = contrastive_loss(v1, v2, LABELS, reduction="none")  # (7,)
    softmax = in_batch_softmax_loss(v1[DUPLICATE_ROWS], v2[DUPLICATE_ROWS + OTHER_ROWS], reduction="none")  # (4,)
    expected = contrastive.clone()
    expected[DUPLICATE_ROWS] += 2.0 * softmax
    per_row = multitask_loss(v1, v2, LABELS, weight=2.0, reduction="none")
    _close(per_row, expected)
    _close(multitask_loss(v1, v2, LABELS, weight=2.0, reduction="sum"), contrastive.sum() + 2.0 * softmax.sum())
    _close(per_row.sum(), multitask_loss(v1, v2, LABELS, weight=2.0, reduction="sum"))
    # "mean" averages each term over its own rows: 7 pairs, 4 anchors.
    _close(multitask_loss(v1, v2, LABELS, weight=2.0), contrastive.sum() / 7 + 2.0 * softmax.sum() / 4)


def test_hand_computed_three_pairs():
    # v1 = (1,0), (0,2), (3,0); v2 = (1,0), (0,1), (-1,0); labels 1, 1, 0.
    # Contrastive (m = 1): D = 0, 0, 2 -> 0, 0, max(1 - 2, 0)^2 = 0.
    # Softmax (scale 1): anchors v1_0, v1_1 against v2_0, v2_1 and the non-duplicate's v2_2:
    #   row 0 cosines (1, 0, -1): -log(e^1 / (e^1 + e^0 + e^-1)) = log(1 + e^-1 + e^-2) = 0.40761
    #   row 1 cosines (0, 1, 0):  -log(e^1 / (e^0 + e^1 + e^0)) = log(1 + 2 e^-1)       = 0.55144
    v1 = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]], dtype=torch.float64)
    v2 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    labels = torch.tensor([1, 1, 0])
    row0, row1 = math.log(1 + math.exp(-1) + math.exp(-2)), math.log(1 + 2 * math.exp(-1))
    assert (round(row0, 5), round(row1, 5)) == (0.40761, 0.55144)
    _close(multitask_loss(v1, v2, labels, scale=1.0, reduction="none"), [row0, row1, 0.0])
    _close(multitask_loss(v1, v2, labels, scale=1.0), (row0 + row1) / 2)  # 0.47953
    # The non-duplicate's v2 is a real negative: without it row 0 would be log(1 + e^-1) = 0.31326.
    _close(multitask_loss(v1[:2], v2[:2], labels[:2], scale=1.0, reduction="none")[0], math.log(1 + math.exp(-1)))
    # A non-duplicate inside the margin adds its contrastive cost: v2_2 = (1, 1) is at D^2 = 2 - sqrt(2)
    # from v1_2, so it costs (1 - D)^2 = (1 - 0.76537)^2 = 0.05505 and moves the softmax rows too.
    near = v2.clone()
    near[2] = torch.tensor([1.0, 1.0])
    distance = math.sqrt(2 - math.sqrt(2))
    assert multitask_loss(v1, near, labels, scale=1.0, reduction="none")[2].item() == \
        pytest.approx((1 - distance) ** 2, abs=1e-12)
    assert round((1 - distance) ** 2, 5) == 0.05505


def test_weight_zero_is_the_contrastive_loss():
    v1, v2 = _vectors(4)
    _close(multitask_loss(v1, v2, LABELS, weight=0.0), contrastive_loss(v1, v2, LABELS))


def test_all_duplicates_is_contrastive_plus_the_plain_in_batch_softmax():
    v1, v2 = _vectors(6)
    ones = torch.ones(BATCH)
    _close(multitask_loss(v1, v2, ones, scale=9.0), contrastive_loss(v1, v2, ones) + in_batch_softmax_loss(v1, v2, 9.0))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_no_duplicates_leaves_the_contrastive_term_with_a_graph(reduction):
    v1, v2 = _vectors(8)
    v1.requires_grad_(True)
    zeros = torch.zeros(BATCH)
    value = multitask_loss(v1, v2, zeros, reduction=reduction)
    _close(value, contrastive_loss(v1, v2, zeros, reduction=reduction))
    assert torch.isfinite(value).all()
    value.sum().backward()
    assert torch.isfinite(v1.grad).all() and v1.grad.abs().sum() > 0


def test_gradients_are_finite_and_match_finite_differences():
    v1 = _random(5, 3, seed=10).requires_grad_(True)
    v2 = _random(5, 3, seed=11).requires_grad_(True)
    labels = torch.tensor([1, 0, 1, 0, 1])
    assert torch.autograd.gradcheck(lambda a, b: multitask_loss(a, b, labels, scale=3.0, weight=0.7), (v1, v2))


def test_bool_int_and_float_labels_give_the_same_loss():
    v1, v2 = _vectors(12)
    values = [multitask_loss(v1, v2, LABELS.to(dtype)) for dtype in (torch.bool, torch.int64, torch.float32)]
    _close(values[1], values[0])
    _close(values[2], values[0])


# ---- wiring --------------------------------------------------------------------------------------
def test_objective_binds_every_setting():
    config = LossConfig("multitask", margin=0.8, form="margin_squared", scale=7.0, weight=0.5)
    assert config.batch_kind == "labelled_distinct"
    assert config.label() == "multitask: contrastive (margin_squared, m=0.8) + 0.5 x in-batch softmax (scale=7)"
    assert (LossConfig("multitask").margin, LossConfig("multitask").weight) == (1.0, 1.0)
    v1, v2 = _vectors(16)
    expected = contrastive_loss(v1, v2, LABELS, margin=0.8, form="margin_squared") + 0.5 * in_batch_softmax_loss(
        v1[DUPLICATE_ROWS], v2[DUPLICATE_ROWS + OTHER_ROWS], scale=7.0)
    _close(config(v1, v2, LABELS.double()), expected)


def test_the_model_card_names_both_terms():
    line = loss_line({"loss": dataclasses.asdict(LossConfig("multitask", weight=0.5, scale=10.0))})
    assert line == ("multitask: contrastive loss on distances between unit vectors, form `squared_hinge`, "
                    "margin 1.000, plus 0.50 × in-batch softmax of the duplicates' cosines scaled by 10.0, "
                    "with the batch's non-duplicates as extra negatives")


@pytest.mark.parametrize("loss", ["multitask", "cosent"])
def test_multi_process_runs_are_refused_in_one_line(monkeypatch, loss):
    import core.training.distributed
    from core.training.pipeline import train_run
    from core.training.specs import spec_from_options

    monkeypatch.setattr(core.training.distributed, "current", lambda: core.training.distributed.DistContext(0, 2, 0))
    spec = spec_from_options(model="lstm", loss=loss, epochs=1, batch_size=8, device="cpu",
                             model_options={"embedding_dim": 12, "hidden_size": 10})
    with pytest.raises(ValueError) as raised:
        train_run(spec, synthetic_pairs(40, seed=1, topics=60), save=False)
    assert str(raised.value) == (f"the {loss} loss is not supported in multi-process training yet "
                                 "(its batches are not gathered across processes): train it in one process")


# ---- end to end ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_tiny_multitask_run_learns_the_synthetic_task():
    from core.status import DONE
    from core.training.pipeline import train_run
    from core.training.specs import spec_from_options

    spec = spec_from_options(model="lstm", loss="multitask", epochs=6, batch_size=16, lr=2e-2, device="cpu",
                             patience=0, max_length=11, val_fraction=0.2, weight=0.5,
                             model_options={"embedding_dim": 14, "hidden_size": 10})
    assert (spec.loss.margin, spec.loss.form, spec.loss.scale, spec.loss.weight) == (1.0, "squared_hinge", 20.0, 0.5)
    result = train_run(spec, synthetic_pairs(400, seed=0, topics=60), save=False)
    outcome = result.outcome
    assert outcome.status == DONE and len(outcome.epochs) == 6
    assert outcome.pairs_seen == 6 * 320  # distinct-text batches defer rows, never drop them: both classes, all
    assert outcome.epochs[-1].train_loss < 0.7 * outcome.epochs[0].train_loss
    aucs = [epoch.metrics["roc_auc"] for epoch in outcome.epochs]
    assert aucs[-1] > aucs[0] + 0.05
    assert result.validation["roc_auc"] > 0.9
