"""Which loss a run trains with, and what kind of batch it needs.

The loss maths live in ``core.losses``; this module only binds a loss to its settings so the
trainer can call ``objective(v1, v2, labels)`` without knowing which loss it is. Every loss takes
raw vectors and normalises them itself, so nothing is normalised here; gathering the vectors of
every process for the in-batch losses happens in ``core.distributed.wrap``, not here.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

# CONTRASTIVE_FORMS is declared in core.losses.contrastive; it stays importable from here (core.cli).
from core.losses import CONTRASTIVE_FORMS, contrastive_loss, in_batch_softmax_loss, triplet_loss

LOSS_NAMES = ("triplet", "contrastive", "softmax")
# Triplet margins live on the cosine scale (-1..1); contrastive margins on the Euclidean
# distance of unit vectors (0..2), where 1.0 means "non-duplicates at least 60 degrees apart".
DEFAULT_MARGINS = {"triplet": 0.25, "contrastive": 1.0, "softmax": 0.0}


@dataclass
class LossConfig:
    name: str = "triplet"  # triplet | contrastive | softmax
    margin: float | None = None  # None takes DEFAULT_MARGINS[name]; unused by softmax
    form: str = "squared_hinge"  # contrastive only: squared_hinge, max(m - D, 0)^2 | margin_squared, max(m^2 - D^2, 0)
    scale: float = 20.0  # softmax only: multiplies cosine similarities before the softmax

    def __post_init__(self):
        if self.name not in LOSS_NAMES:
            raise ValueError(f"unknown loss {self.name!r}; expected one of {', '.join(LOSS_NAMES)}")
        if self.form not in CONTRASTIVE_FORMS:
            raise ValueError(f"unknown contrastive form {self.form!r}; expected one of {', '.join(CONTRASTIVE_FORMS)}")
        if self.margin is None:
            self.margin = DEFAULT_MARGINS[self.name]

    @property
    def batch_kind(self) -> str:
        """"duplicates": duplicate pairs only, no question twice per batch; "labelled": both classes."""
        return "labelled" if self.name == "contrastive" else "duplicates"

    def label(self) -> str:
        if self.name == "contrastive":
            return f"contrastive ({self.form}, m={self.margin:g})"
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
        """Scalar loss of a batch: v1, v2 (B, d); labels (B,) for contrastive; negatives (K, d) or None."""
        c = self.config
        if c.name == "contrastive":
            return contrastive_loss(v1, v2, labels, margin=c.margin, form=c.form)
        if c.name == "triplet":
            return triplet_loss(v1, v2, margin=c.margin, negatives=negatives)
        candidates = v2 if negatives is None else torch.cat([v2, negatives])  # (B + K, d)
        return in_batch_softmax_loss(v1, candidates, scale=c.scale)
