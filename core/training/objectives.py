"""Which loss a run trains with and what batch it needs: ``LossConfig``, a loss of ``core.losses`` with its settings,
called as ``loss(v1, v2, labels, negatives)`` by the trainer, which does not know which loss it is."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

# CONTRASTIVE_FORMS is declared in core.losses.contrastive; it stays importable from here (core.cli).
from core.losses import CONTRASTIVE_FORMS
from core.losses.registry import LOSSES

# Read from the registry, for the modules that need only names (specs, the CLI, the pages).
LOSS_NAMES = tuple(LOSSES)
# Softmax and CoSENT have no margin: 0.0 is stored.
DEFAULT_MARGINS = {name: loss.default_margin for name, loss in LOSSES.items()}
# Multi-process runs refuse these (see Loss.across_processes).
SINGLE_PROCESS_LOSSES = tuple(name for name, loss in LOSSES.items() if not loss.across_processes)


@dataclass
class LossConfig:
    name: str = "triplet"  # a key of core.losses.registry.LOSSES
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
        """"duplicates", "labelled" or "labelled_distinct" (``core.losses.registry.BATCH_KINDS``)."""
        return LOSSES[self.name].batch_kind

    def label(self) -> str:
        return LOSSES[self.name].label.format(**dataclasses.asdict(self))

    def __call__(self, v1: torch.Tensor, v2: torch.Tensor, labels: torch.Tensor | None = None,
                 negatives: torch.Tensor | None = None) -> torch.Tensor:
        """Scalar loss of a batch: v1, v2 (B, d); labels (B,) for the labelled losses; negatives (K, d) or None."""
        return LOSSES[self.name].compute(v1, v2, labels, negatives, self)
