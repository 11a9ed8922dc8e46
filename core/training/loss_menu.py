"""The losses a person picks from, as data: a short menu name, the help text with the formula, and the
run options each stands for. Importable without torch, so the Home page can list them."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LossChoice:
    label: str  # what a menu shows: a short name that fits the widget
    help: str  # what the loss does, with its formula: the menu's help text and the Home page's list
    options: dict  # the loss options it stands for


# The one list of losses a person picks from: the Train page's menu and the Home page read it.
LOSS_CHOICES: dict[str, LossChoice] = {
    "triplet": LossChoice(
        "Triplet (mean + closest negative)",
        "Each duplicate pair is an anchor and its positive; the batch's other questions are its negatives. "
        "L = max(mean negative − s(A, P) + α, 0) + max(closest negative − s(A, P) + α, 0), on cosines.",
        {"loss": "triplet"}),
    "contrastive_squared_hinge": LossChoice(
        "Contrastive (squared hinge)",
        "Pairs of both classes: duplicates pulled together, non-duplicates pushed beyond the margin m. "
        "L = Y·D² + (1−Y)·max(m − D, 0)², D the distance between the unit vectors.",
        {"loss": "contrastive", "form": "squared_hinge"}),
    "contrastive_margin_squared": LossChoice(
        "Contrastive (margin squared)",
        "Pairs of both classes: duplicates pulled together, non-duplicates pushed beyond the margin m. "
        "L = Y·D² + (1−Y)·max(m² − D², 0), D the distance between the unit vectors.",
        {"loss": "contrastive", "form": "margin_squared"}),
    "softmax": LossChoice(
        "In-batch softmax",
        "Each question must pick its own duplicate among all the batch's candidates: cross-entropy over the "
        "rows of the scaled cosine matrix, the diagonal being the right answers.",
        {"loss": "softmax"}),
    "cosent": LossChoice(
        "CoSENT",
        "Cosines ranked across the batch: every duplicate pair should score above every non-duplicate. "
        "L = log(1 + Σ_{yᵢ>yⱼ} exp(λ·(sⱼ − sᵢ))).",
        {"loss": "cosent"}),
    "multitask": LossChoice(
        "Multitask",
        "The contrastive loss on every labelled pair, plus w × the in-batch softmax of the duplicates: "
        "L = Y·D² + (1−Y)·max(m − D, 0)² + w·softmax.",
        {"loss": "multitask"}),
}
