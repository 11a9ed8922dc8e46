"""Named training recipes: the settings behind the figures in docs/BENCHMARKS.md, one click away.

A preset is a complete ``RunSpec`` recipe; the CLI's ``--preset NAME`` and the Train page's preset
menu start from it, and any explicitly given option still overrides it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from core.objectives import LossConfig
from core.pipeline import RunSpec, default_train_config


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    model: str
    loss: dict  # LossConfig fields
    train: dict  # TrainConfig overrides on top of the model's defaults
    run: dict = field(default_factory=dict)  # other RunSpec fields (model_options, max_length, ...)

    def spec(self, **train_overrides) -> RunSpec:
        train = default_train_config(self.model, **{**self.train, **train_overrides})
        return RunSpec(model=self.model, loss=LossConfig(**self.loss), train=train, **self.run)


PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset(
        name="lstm-quora",
        description="Siamese LSTM from scratch for real Quora-size data: 1-layer bidirectional LSTM, "
                    "contrastive loss on labelled pairs of both classes, warm-up and decay, early stopping.",
        model="lstm",
        loss={"name": "contrastive", "form": "squared_hinge", "margin": 1.0},
        train={"epochs": 4, "batch_size": 256, "lr": 2e-3, "patience": 1, "weight_decay": 0.0},
        run={"model_options": {"embedding_dim": 128, "hidden_size": 160, "num_layers": 1, "bidirectional": True,
                               "dropout": 0.1},
             "max_length": 32, "min_freq": 2, "max_vocab": 80000, "val_fraction": 0.05},
    ),
    Preset(
        name="minilm-quora",
        description="Fine-tune the pretrained MiniLM with the contrastive loss on labelled pairs: the "
                    "non-duplicates are the signal MiniLM's own training never saw. Capped at 3,000 steps "
                    "(192,000 pairs, about 2 hours on a 2-core CPU).",
        model="minilm",
        loss={"name": "contrastive", "form": "squared_hinge", "margin": 1.0},
        train={"epochs": 1, "batch_size": 64, "lr": 2e-5, "patience": 0, "max_val_pairs": 2000,
               "max_steps": 3000},
        run={"max_length": 40, "val_fraction": 0.05},
    ),
    Preset(
        name="sample-demo",
        description="Seconds on the bundled sample: a small LSTM with the triplet loss and hard negatives.",
        model="lstm",
        loss={"name": "triplet", "margin": 0.25},
        train={"epochs": 5, "batch_size": 32, "lr": 3e-3, "patience": 0},
        run={"model_options": {"embedding_dim": 64, "hidden_size": 64}, "min_freq": 1, "hard_negatives": True},
    ),
]}


def preset_names() -> list[str]:
    return list(PRESETS)


def preset_as_dict(name: str) -> dict:
    return dataclasses.asdict(PRESETS[name])
