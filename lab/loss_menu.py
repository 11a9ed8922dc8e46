"""The losses a person picks from, as data: a short menu name, the help text with the formula, and the run
options each stands for (a loss of ``core.losses.registry`` with its settings). The Train page's menu and the
Home page's list read ``LOSS_CHOICES``; importable without torch."""
from __future__ import annotations

from typing import NamedTuple


class LossChoice(NamedTuple):
    label: str  # what a menu shows: a short name that fits the widget
    help: str  # what the loss does, with its formula: the menu's help text and the Home page's list
    options: dict  # the loss options it stands for


_CONTRASTIVE = ("Pairs of both classes: duplicates pulled together, non-duplicates pushed beyond the margin m. "
                "L = Y·D² + (1−Y)·{hinge}, D the distance between the unit vectors.")
# In the registry's order. A key is the loss's name followed by its settings, as ``loss_choice`` spells it.
LOSS_CHOICES = {key: LossChoice(label, text, {"loss": key.split("_")[0], **options}) for key, label, text, options in (
    ("triplet", "Triplet (mean + closest negative)",
     "Each duplicate pair is an anchor and its positive; the batch's other questions are its negatives. "
     "L = max(mean negative − s(A, P) + α, 0) + max(closest negative − s(A, P) + α, 0), on cosines.", {}),
    ("contrastive_squared_hinge", "Contrastive (squared hinge)", _CONTRASTIVE.format(hinge="max(m − D, 0)²"),
     {"form": "squared_hinge"}),
    ("contrastive_margin_squared", "Contrastive (margin squared)", _CONTRASTIVE.format(hinge="max(m² − D², 0)"),
     {"form": "margin_squared"}),
    ("softmax", "In-batch softmax", "Each question must pick its own duplicate among all the batch's candidates: "
     "cross-entropy over the rows of the scaled cosine matrix, the diagonal being the right answers.", {}),
    ("cosent", "CoSENT", "Cosines ranked across the batch: every duplicate pair should score above every "
     "non-duplicate. L = log(1 + Σ_{yᵢ>yⱼ} exp(λ·(sⱼ − sᵢ))).", {}),
    ("multitask", "Multitask", "The contrastive loss on every labelled pair, plus w × the in-batch softmax of the "
     "duplicates: L = Y·D² + (1−Y)·max(m − D, 0)² + w·softmax.", {}),
)}


def loss_choice(loss) -> str:
    """The menu key of a loss configuration (a ``core.training.objectives.LossConfig``)."""
    return f"contrastive_{loss.form}" if loss.name == "contrastive" else loss.name
