"""Which loss a run trains with, and what kind of batch it needs.

The loss maths live in ``core.losses``; this module only binds a loss to its settings so the
trainer can call ``objective(v1, v2, labels)`` without knowing which loss it is. Every loss takes
raw vectors and normalises them itself, so nothing is normalised here; gathering the vectors of
every process for the in-batch losses happens in ``core.training.distributed.wrap``, not here.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

# CONTRASTIVE_FORMS is declared in core.losses.contrastive; it stays importable from here (core.cli).
from core.losses import (
    CONTRASTIVE_FORMS,
    contrastive_loss,
    cosent_loss,
    in_batch_softmax_loss,
    multitask_loss,
    triplet_loss,
)

LOSS_NAMES = ("triplet", "contrastive", "softmax", "cosent", "multitask")
# Triplet margins live on the cosine scale (-1..1); contrastive margins (multitask's contrastive term
# too) on the Euclidean distance of unit vectors (0..2), where 1.0 means "non-duplicates at least 60
# degrees apart". Softmax and CoSENT have no margin: 0.0 is stored.
DEFAULT_MARGINS = {"triplet": 0.25, "contrastive": 1.0, "softmax": 0.0, "cosent": 0.0, "multitask": 1.0}
# Losses whose terms compare pairs across the batch but whose batches are not gathered over processes
# (core.training.distributed.wrap gathers only "duplicates" batches, and never the labels): with several
# processes each would train on its local slice only, another objective, so multi-process runs refuse them.
SINGLE_PROCESS_LOSSES = ("cosent", "multitask")


@dataclass
class LossConfig:
    name: str = "triplet"  # triplet | contrastive | softmax | cosent | multitask
    margin: float | None = None  # None takes DEFAULT_MARGINS[name]; unused by softmax and cosent
    # contrastive and multitask's contrastive term: squared_hinge, max(m - D, 0)^2 | margin_squared, max(m^2 - D^2, 0)
    form: str = "squared_hinge"
    scale: float = 20.0  # softmax, multitask: multiplies cosines before the softmax; cosent: lambda
    weight: float = 1.0  # multitask only: weight of the in-batch softmax term beside the contrastive one

    def __post_init__(self):
        if self.name not in LOSS_NAMES:
            raise ValueError(f"unknown loss {self.name!r}; expected one of {', '.join(LOSS_NAMES)}")
        if self.form not in CONTRASTIVE_FORMS:
            raise ValueError(f"unknown contrastive form {self.form!r}; expected one of {', '.join(CONTRASTIVE_FORMS)}")
        if self.margin is None:
            self.margin = DEFAULT_MARGINS[self.name]

    @property
    def batch_kind(self) -> str:
        """"duplicates": duplicate pairs only, no question twice per batch; "labelled": both classes;
        "labelled_distinct": both classes, no question twice per batch (multitask's in-batch term)."""
        if self.name in ("contrastive", "cosent"):
            return "labelled"
        return "labelled_distinct" if self.name == "multitask" else "duplicates"

    def label(self) -> str:
        if self.name == "contrastive":
            return f"contrastive ({self.form}, m={self.margin:g})"
        if self.name == "cosent":
            return f"CoSENT (cosine ranking, lambda={self.scale:g})"
        if self.name == "multitask":
            return (f"multitask: contrastive ({self.form}, m={self.margin:g}) "
                    f"+ {self.weight:g} x in-batch softmax (scale={self.scale:g})")
        if self.name == "triplet":
            return f"triplet (mean + closest negative, alpha={self.margin:g})"  # in-batch mining
        return f"in-batch softmax (scale={self.scale:g})"


class Objective:
    """``objective(v1, v2, labels, negatives) -> scalar loss`` for the configured loss.

    A thin binding: the loss function with its settings, and the batch kind it needs. The vectors
    go to the loss as the model made them (each loss owns its normalisation), and in multi-process
    training the in-batch losses receive the already gathered global batch from the wrapped model.
    """

    def __init__(self, config: LossConfig):
        self.config = config
        self.batch_kind = config.batch_kind

    def __call__(self, v1: torch.Tensor, v2: torch.Tensor, labels: torch.Tensor | None = None,
                 negatives: torch.Tensor | None = None) -> torch.Tensor:
        """Scalar loss of a batch: v1, v2 (B, d); labels (B,) for the labelled losses; negatives (K, d) or None."""
        c = self.config
        if c.name == "contrastive":
            return contrastive_loss(v1, v2, labels, margin=c.margin, form=c.form)
        if c.name == "cosent":
            return cosent_loss(v1, v2, labels, scale=c.scale)
        if c.name == "multitask":  # its extra negatives are the batch's own non-duplicates, never `negatives`
            return multitask_loss(v1, v2, labels, margin=c.margin, form=c.form, scale=c.scale, weight=c.weight)
        if c.name == "triplet":
            return triplet_loss(v1, v2, margin=c.margin, negatives=negatives)
        candidates = v2 if negatives is None else torch.cat([v2, negatives])  # (B + K, d)
        return in_batch_softmax_loss(v1, candidates, scale=c.scale)
