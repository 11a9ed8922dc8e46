"""Every training loss described once (its function, batches, default margin, label and model-card line), for the
objective, the CLI and the card; importable without torch (the functions load on first call).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import core.losses as losses

# "duplicates": duplicate pairs only, no question twice per batch; "labelled": both classes;
# "labelled_distinct": both classes, no question twice per batch (for an in-batch term over labelled pairs).
BATCH_KINDS = ("duplicates", "labelled", "labelled_distinct")


@dataclass(frozen=True)
class Loss:
    name: str
    # compute(v1, v2, labels, negatives, config) -> scalar loss; config has margin, form, scale and weight.
    compute: Callable
    batch_kind: str  # one of BATCH_KINDS
    default_margin: float  # 0.0 where the loss has no margin
    # False where the loss compares pairs across a batch that is not gathered over processes (only "duplicates"
    # batches are): each process would train another objective, so multi-process runs refuse it.
    across_processes: bool
    label: str  # a run's loss in a few words: str.format template over the config's fields
    card: str  # the model card's line: str.format template over margin, form, scale and weight


def _triplet(v1, v2, labels, negatives, c):
    return losses.triplet_loss(v1, v2, margin=c.margin, negatives=negatives)


def _contrastive(v1, v2, labels, negatives, c):
    return losses.contrastive_loss(v1, v2, labels, margin=c.margin, form=c.form)


def _softmax(v1, v2, labels, negatives, c):
    import torch  # here, not above: the registry loads without torch; the vectors have loaded it already

    candidates = v2 if negatives is None else torch.cat([v2, negatives])  # (B + K, d)
    return losses.in_batch_softmax_loss(v1, candidates, scale=c.scale)


def _cosent(v1, v2, labels, negatives, c):
    return losses.cosent_loss(v1, v2, labels, scale=c.scale)


def _multitask(v1, v2, labels, negatives, c):
    # Its extra negatives are the batch's own non-duplicates, never `negatives`.
    return losses.multitask_loss(v1, v2, labels, margin=c.margin, form=c.form, scale=c.scale, weight=c.weight)


def _bce(logits, _, labels, negatives, c):
    import torch.nn.functional as F

    return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


# In the app's menu order (lab.loss_menu). Triplet margins live on the cosine scale (-1..1); contrastive margins
# (multitask's contrastive term too) on the Euclidean distance of unit vectors (0..2), where 1.0 means
# "non-duplicates at least 60 degrees apart".
LOSSES: dict[str, Loss] = {loss.name: loss for loss in (
    Loss(
        "triplet", _triplet, batch_kind="duplicates", default_margin=0.25, across_processes=True,
        label="triplet (mean + closest negative, alpha={margin:g})",  # in-batch mining
        card="triplet loss on cosine similarities (L1 + L2 with the mean and the closest in-batch negative), "
             "margin {margin}"),
    Loss(
        "contrastive", _contrastive, batch_kind="labelled", default_margin=1.0, across_processes=True,
        label="contrastive ({form}, m={margin:g})",
        card="contrastive loss on distances between unit vectors, form {form}, margin {margin}"),
    Loss(
        "softmax", _softmax, batch_kind="duplicates", default_margin=0.0, across_processes=True,
        label="in-batch softmax (scale={scale:g})",
        card="in-batch softmax (multiple negatives ranking) of cosines scaled by {scale}"),
    Loss(
        "cosent", _cosent, batch_kind="labelled", default_margin=0.0, across_processes=False,
        label="CoSENT (cosine ranking, lambda={scale:g})",
        card="CoSENT ranking of cosines, log(1 + Σ exp(λ·(sⱼ − sᵢ))) over every duplicate i and "
             "non-duplicate j of a batch, λ {scale}"),
    Loss(
        "multitask", _multitask, batch_kind="labelled_distinct", default_margin=1.0, across_processes=False,
        label="multitask: contrastive ({form}, m={margin:g}) + {weight:g} x in-batch softmax (scale={scale:g})",
        card="multitask: contrastive loss on distances between unit vectors, form {form}, margin {margin}, "
             "plus {weight} × in-batch softmax of the duplicates' cosines scaled by {scale}, with the batch's "
             "non-duplicates as extra negatives"),
    # The cross-encoder's, and only its (core.training.specs): v1 is its (B,) duplicate logits, v2 nothing. No menu
    # entry (lab.loss_menu): the Train page sets it with the model.
    Loss(
        "bce", _bce, batch_kind="labelled", default_margin=0.0, across_processes=True,
        label="binary cross-entropy on the duplicate logit",
        card="binary cross-entropy of each pair's duplicate logit against its label, on batches of both labels"),
)}
