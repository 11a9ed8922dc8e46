"""Which loss a run trains with, and what kind of batch it needs.

The loss maths live in ``core.losses``; this module only binds a loss to its settings so the
trainer can call ``objective(v1, v2, labels)`` without knowing which loss it is.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from core.distributed import gather_batch
from core.losses import contrastive_loss, in_batch_softmax_loss, triplet_loss

LOSS_NAMES = ("triplet", "contrastive", "softmax")
CONTRASTIVE_FORMS = ("squared_hinge", "margin_squared")
# Triplet margins live on the cosine scale (-1..1); contrastive margins on the Euclidean
# distance of unit vectors (0..2), where 1.0 means "non-duplicates at least 60 degrees apart".
DEFAULT_MARGINS = {"triplet": 0.25, "contrastive": 1.0, "softmax": 0.0}


@dataclass
class LossConfig:
    name: str = "triplet"  # triplet | contrastive | softmax
    margin: float | None = None  # None takes DEFAULT_MARGINS[name]; unused by softmax
    form: str = "squared_hinge"  # contrastive only: squared_hinge (seed 004) | margin_squared (seed 003)
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
            return f"triplet (hard negatives, alpha={self.margin:g})"
        return f"in-batch softmax (scale={self.scale:g})"


class Objective:
    """``objective(v1, v2, labels) -> scalar loss`` for the configured loss."""

    def __init__(self, config: LossConfig):
        self.config = config
        self.batch_kind = config.batch_kind

    def __call__(self, v1: torch.Tensor, v2: torch.Tensor, labels: torch.Tensor | None = None,
                 negatives: torch.Tensor | None = None) -> torch.Tensor:
        """Scalar loss of a batch: v1, v2 (B, d); labels (B,) for contrastive; negatives (K, d) or None."""
        c = self.config
        if c.name == "contrastive":
            # Distances are only comparable to a fixed margin between unit vectors.
            return contrastive_loss(F.normalize(v1, dim=-1), F.normalize(v2, dim=-1), labels, margin=c.margin, form=c.form)
        # In-batch losses see the global batch when several processes train together.
        v1, v2 = gather_batch(v1), gather_batch(v2)
        if c.name == "triplet":
            return triplet_loss(v1, v2, margin=c.margin, negatives=negatives)
        candidates = v2 if negatives is None else torch.cat([v2, negatives])  # (B + K, d)
        # Cosine logits, as MultipleNegativesRankingLoss: the verdict is a cosine threshold too.
        return in_batch_softmax_loss(F.normalize(v1, dim=-1), F.normalize(candidates, dim=-1), scale=c.scale)
