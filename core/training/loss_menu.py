"""The losses a person picks from, as data: a short menu name, the help text with the formula, and the
run options each stands for. Read from ``core.losses.registry``; importable without torch, so the Home
page can list them."""
from __future__ import annotations

from dataclasses import dataclass

from core.losses.registry import LOSSES


@dataclass(frozen=True)
class LossChoice:
    label: str  # what a menu shows: a short name that fits the widget
    help: str  # what the loss does, with its formula: the menu's help text and the Home page's list
    options: dict  # the loss options it stands for


# The one list of losses a person picks from: the Train page's menu and the Home page read it. A key is the
# loss's name followed by its settings, as core.training.specs.loss_choice spells it ("contrastive_margin_squared").
LOSS_CHOICES: dict[str, LossChoice] = {
    "_".join((name, *entry.settings.values())): LossChoice(entry.label, entry.help, {"loss": name, **entry.settings})
    for name, loss in LOSSES.items() for entry in loss.menu
}
