"""The loss registry is the one description of each loss: the objective, the CLI, the card and the run labels
all read it, with the very texts they had before it existed; the app's menu (``lab.loss_menu``) offers each."""
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.cli.common import CliError
from core.cli.main import build_parser
from core.export.model_card import loss_line
from core.losses.registry import BATCH_KINDS, LOSSES, Loss
from core.training.objectives import DEFAULT_MARGINS, LOSS_NAMES, SINGLE_PROCESS_LOSSES, LossConfig
from lab.loss_menu import LOSS_CHOICES

ROOT = Path(__file__).resolve().parents[1]

# The menu as it was written out by hand before the registry.
MENU = {
    "triplet": ("Triplet (mean + closest negative)",
                "Each duplicate pair is an anchor and its positive; the batch's other questions are its negatives. "
                "L = max(mean negative − s(A, P) + α, 0) + max(closest negative − s(A, P) + α, 0), on cosines.",
                {"loss": "triplet"}),
    "contrastive_squared_hinge": ("Contrastive (squared hinge)",
                                  "Pairs of both classes: duplicates pulled together, non-duplicates pushed beyond "
                                  "the margin m. L = Y·D² + (1−Y)·max(m − D, 0)², D the distance between the unit "
                                  "vectors.",
                                  {"loss": "contrastive", "form": "squared_hinge"}),
    "contrastive_margin_squared": ("Contrastive (margin squared)",
                                   "Pairs of both classes: duplicates pulled together, non-duplicates pushed beyond "
                                   "the margin m. L = Y·D² + (1−Y)·max(m² − D², 0), D the distance between the unit "
                                   "vectors.",
                                   {"loss": "contrastive", "form": "margin_squared"}),
    "softmax": ("In-batch softmax",
                "Each question must pick its own duplicate among all the batch's candidates: cross-entropy over the "
                "rows of the scaled cosine matrix, the diagonal being the right answers.",
                {"loss": "softmax"}),
    "cosent": ("CoSENT",
               "Cosines ranked across the batch: every duplicate pair should score above every non-duplicate. "
               "L = log(1 + Σ_{yᵢ>yⱼ} exp(λ·(sⱼ − sᵢ))).",
               {"loss": "cosent"}),
    "multitask": ("Multitask",
                  "The contrastive loss on every labelled pair, plus w × the in-batch softmax of the duplicates: "
                  "L = Y·D² + (1−Y)·max(m − D, 0)² + w·softmax.",
                  {"loss": "multitask"}),
}
# label() and the card's line of LossConfig(name, margin=0.4, scale=7.5, weight=0.3, form="margin_squared"),
# trained with hard negatives, as the hand-written branches gave them.
LABELS = {
    "triplet": "triplet (mean + closest negative, alpha=0.4)",
    "contrastive": "contrastive (margin_squared, m=0.4)",
    "softmax": "in-batch softmax (scale=7.5)",
    "cosent": "CoSENT (cosine ranking, lambda=7.5)",
    "multitask": "multitask: contrastive (margin_squared, m=0.4) + 0.3 x in-batch softmax (scale=7.5)",
    "bce": "binary cross-entropy on the duplicate logit",
}
CARD_LINES = {
    "triplet": "triplet loss on cosine similarities (L1 + L2 with the mean and the closest in-batch negative), "
               "margin 0.400, plus labelled hard negatives",
    "contrastive": "contrastive loss on distances between unit vectors, form `margin_squared`, margin 0.400",
    "softmax": "in-batch softmax (multiple negatives ranking) of cosines scaled by 7.5, plus labelled hard negatives",
    "cosent": "CoSENT ranking of cosines, log(1 + Σ exp(λ·(sⱼ − sᵢ))) over every duplicate i and non-duplicate j "
              "of a batch, λ 7.5",
    "multitask": "multitask: contrastive loss on distances between unit vectors, form `margin_squared`, margin 0.400, "
                 "plus 0.30 × in-batch softmax of the duplicates' cosines scaled by 7.5, with the batch's "
                 "non-duplicates as extra negatives",
    "bce": "binary cross-entropy of each pair's duplicate logit against its label, on batches of both labels",
}


def _fixed_config(name: str) -> LossConfig:
    return LossConfig(name, margin=0.4, scale=7.5, weight=0.3, form="margin_squared")


def _cli_accepts_loss(name: str) -> bool:
    try:
        return build_parser().parse_args(["train", "--data", "pairs.csv", "--loss", name]).loss == name
    except CliError:
        return False


def test_every_registered_loss_reaches_every_reader():
    assert LOSS_NAMES == tuple(LOSSES) == ("triplet", "contrastive", "softmax", "cosent", "multitask", "bce")
    # bce is the cross-encoder's alone: the Train page sets it with the model, no menu offers it
    assert {choice.options["loss"] for choice in LOSS_CHOICES.values()} == set(LOSSES) - {"bce"}
    assert DEFAULT_MARGINS == {name: loss.default_margin for name, loss in LOSSES.items()}
    assert SINGLE_PROCESS_LOSSES == ("cosent", "multitask")
    for name, loss in LOSSES.items():
        assert _cli_accepts_loss(name)
        assert loss.batch_kind in BATCH_KINDS and LossConfig(name).batch_kind == loss.batch_kind
        assert not loss_line({"loss": dataclasses.asdict(LossConfig(name))}).startswith("`")  # not the fallback
    assert not _cli_accepts_loss("nope")


def test_the_texts_are_those_written_before_the_registry():
    assert {key: (c.label, c.help, c.options) for key, c in LOSS_CHOICES.items()} == MENU
    assert list(LOSS_CHOICES) == list(MENU)
    for name in LOSSES:
        config = dataclasses.asdict(_fixed_config(name))
        assert _fixed_config(name).label() == LABELS[name]
        assert loss_line({"loss": config, "run": {"hard_negatives": True}}) == CARD_LINES[name]
        without = CARD_LINES[name].removesuffix(", plus labelled hard negatives")
        assert loss_line({"loss": config, "run": {"hard_negatives": False}}) == without


def test_the_card_formats_only_sanitised_values():
    line = loss_line({"loss": {"name": "multitask", "form": "a`b\n<x>{scale}", "margin": float("nan"),
                               "scale": "{weight}", "weight": True}})
    assert line.startswith("multitask: contrastive loss on distances between unit vectors, form `a'b <x>{scale}`, "
                           "margin n/a, plus n/a × in-batch softmax")
    assert "\n" not in line and "scaled by n/a" in line
    assert loss_line({"loss": {"name": ["triplet"]}}) == "`['triplet']`"  # an unhashable name is no entry
    assert loss_line({"loss": {"name": "nope"}}) == "`nope`" and loss_line({}) == "n/a"


def test_every_loss_has_a_known_batch_kind():
    assert {loss.batch_kind for loss in LOSSES.values()} <= set(BATCH_KINDS)


def test_the_registry_menu_and_card_load_without_torch():
    script = ("import json, sys; import core.losses, core.losses.registry, lab.loss_menu, "
              "core.export.model_card; print(json.dumps('torch' in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) is False


# A fresh interpreter registers one more loss before anything reads the registry: nothing else is edited.
NEW_LOSS = r"""
import dataclasses, json, sys
sys.path.insert(0, {root!r})
import torch
from core.losses.registry import LOSSES, Loss

LOSSES["squared"] = Loss(
    "squared", lambda v1, v2, labels, negatives, c: c.scale * (v1 - v2).pow(2).sum(), batch_kind="duplicates",
    default_margin=0.5, across_processes=False,
    label="squared distance (scale={{scale:g}})", card="squared distance scaled by {{scale}}")

from core.cli.common import CliError
from core.cli.main import build_parser
from core.export.model_card import loss_line
from core.training.objectives import DEFAULT_MARGINS, LOSS_NAMES, SINGLE_PROCESS_LOSSES, LossConfig

config = LossConfig("squared", scale=2.0)
print(json.dumps({{
    "cli": build_parser().parse_args(["train", "--data", "pairs.csv", "--loss", "squared"]).loss,
    "names": "squared" in LOSS_NAMES, "margin": DEFAULT_MARGINS["squared"],
    "single": "squared" in SINGLE_PROCESS_LOSSES,
    "label": config.label(), "kind": config.batch_kind,
    "card": loss_line({{"loss": dataclasses.asdict(config), "run": {{"hard_negatives": True}}}}),
    "value": config(torch.ones(2, 3), torch.zeros(2, 3)).item(),
}}))
"""


@pytest.mark.slow
def test_a_new_loss_needs_only_its_registry_entry_outside_the_app():
    done = subprocess.run([sys.executable, "-c", NEW_LOSS.format(root=str(ROOT))], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "cli": "squared", "names": True, "margin": 0.5, "single": True,
        "label": "squared distance (scale=2)", "kind": "duplicates",
        "card": "squared distance scaled by 2.0, plus labelled hard negatives", "value": 12.0,
    }
