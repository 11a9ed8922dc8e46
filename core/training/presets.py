"""Named training recipes: the settings behind the figures in docs/BENCHMARKS.md, one click away.

A preset is a set of run options in the vocabulary of ``core.training.specs.spec_from_options``; the CLI's
``--preset NAME`` and the Train page's preset menu start from it, and any option given explicitly
still overrides it. Building and checking a spec from a preset is ``core.training.specs``' job, not this
module's: this is data only.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    options: dict = field(default_factory=dict)  # run options, as spec_from_options takes them
    # (train seconds, validation ROC AUC) points measured on this machine; docs/BENCHMARKS.md says by
    # which command. The Train page draws them under a run of this preset, so a user sees whether the
    # run is on track. Empty: not measured yet.
    reference_curve: tuple = ()
    # Meant for a CUDA GPU: on 2 CPU threads its batches and epochs would take hours. The Train page marks
    # it "(GPU)"; it still runs on the CPU if asked.
    for_gpu: bool = False


PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset(
        name="auto",
        description="Read off your training pairs (core.training.auto_recipe): the pretrained MiniLM fine-tuned with "
                    "the contrastive loss, with epochs, batch size and learning rate from their number, max_length "
                    "from their token lengths, validated at least 8 times and at least every epoch, and a validation "
                    "share that holds enough pairs to trust; about 10 minutes on 2 CPU threads at most.",
        # The data-dependent settings are filled in when the data is known; these hold on any data.
        options={"model": "minilm", "loss": "contrastive", "form": "squared_hinge", "margin": 1.0},
    ),
    Preset(
        name="lstm-quora",
        description="Siamese LSTM for real Quora-size data: WordPiece tokens whose embeddings start from MiniLM's "
                    "(projected to 128 dimensions), a 1-layer bidirectional LSTM, the contrastive loss on labelled "
                    "pairs of both classes, validated every 250 steps; about 45 minutes on 2 CPU threads.",
        options={"model": "lstm", "loss": "contrastive", "form": "squared_hinge", "margin": 1.0,
                 "epochs": 6, "batch_size": 256, "lr": 2e-3, "patience": 0, "weight_decay": 0.0,
                 "validate_every": 250, "max_minutes": 45.0,
                 "model_options": {"embedding_dim": 128, "hidden_size": 160, "num_layers": 1, "bidirectional": True,
                                   "dropout": 0.1, "tokens": "wordpiece", "init_embeddings": "minilm"},
                 "max_length": 32, "val_fraction": 0.05},
        # bench/quality.py --only lstm-quora, 2026-11-24, 2 threads, quiet machine (test ROC AUC 0.9196)
        reference_curve=((91.9, 0.8551), (178.8, 0.8854), (267.6, 0.8987), (359.7, 0.9055), (383.5, 0.9058),
                         (449.7, 0.9092), (541.4, 0.9087), (633.4, 0.9142), (728.0, 0.9133), (778.1, 0.9179),
                         (814.7, 0.9159), (903.4, 0.9172), (998.1, 0.9186), (1087.9, 0.9200), (1170.4, 0.9232),
                         (1182.5, 0.9222), (1272.8, 0.9211), (1366.2, 0.9213), (1464.2, 0.9212), (1564.0, 0.9234),
                         (1579.6, 0.9230), (1655.7, 0.9224), (1745.3, 0.9228), (1840.1, 0.9233), (1940.5, 0.9232),
                         (1983.2, 0.9231), (2030.7, 0.9228), (2124.6, 0.9227), (2218.3, 0.9231), (2313.7, 0.9233),
                         (2379.9, 0.9233)),
    ),
    Preset(
        name="minilm-quora",
        description="Fine-tune the pretrained MiniLM with the contrastive loss on labelled pairs: the "
                    "non-duplicates are the signal MiniLM's own training never saw. Capped at 3,600 steps "
                    "(230,400 pairs, about 80 minutes on 2 CPU threads) and 100 minutes; the Train page shows "
                    "the time left from the speed it measures.",
        options={"model": "minilm", "loss": "contrastive", "form": "squared_hinge", "margin": 1.0,
                 "epochs": 1, "batch_size": 64, "lr": 1e-4, "patience": 0, "max_val_pairs": 2000, "max_steps": 3600,
                 "validate_every": 250, "max_minutes": 100.0,
                 "max_length": 40, "val_fraction": 0.05},
        # bench/quality.py --only minilm-quora --preset-options '{"lr": 1e-4}', 2026-11-24 late, 2 threads (test
        # ROC AUC 0.9428; lr 5e-5 reached 0.9410 and 2e-5 0.9350 the same day). The test suite shared the
        # machine for 6 of its minutes (250 steps took 460 s between the 1,482 s and 1,941 s points, not ~290).
        reference_curve=((290.1, 0.9138), (607.1, 0.9230), (901.7, 0.9298), (1192.7, 0.9299), (1481.6, 0.9312),
                         (1941.2, 0.9351), (2224.5, 0.9373), (2506.0, 0.9372), (2802.6, 0.9391), (3089.2, 0.9387),
                         (3389.7, 0.9413), (3715.4, 0.9421), (3996.7, 0.9437), (4289.8, 0.9435), (4397.1, 0.9435)),
    ),
    Preset(
        name="minilm-quora-gpu",
        description="minilm-quora for a CUDA GPU: batches of 256 pairs for 4 epochs of all pairs, bf16 where the GPU "
                    "has it and a compiled step (CUDA graphs), capped at 10 minutes. On one H100: 88 s of training "
                    "(about 30 s of it compiling), held-out ROC AUC 0.948; far too slow for a CPU.",
        options={"model": "minilm", "loss": "contrastive", "form": "squared_hinge", "margin": 1.0,
                 "epochs": 4, "batch_size": 256, "lr": 1e-4, "patience": 0, "max_val_pairs": 2000,
                 "validate_every": 250, "max_minutes": 10.0, "max_length": 40, "val_fraction": 0.05,
                 "precision": "auto", "compile": True},
        # measured by bench/quality.py --only minilm-quora-gpu on one H100, Inductor's cache warm (docs/BENCHMARKS.md
        # has the run: date, machine, a cold compile's cost and the test figure).
        reference_curve=((35.0, 0.9255), (37.9, 0.9358), (40.9, 0.9364), (43.7, 0.9423), (44.6, 0.9412),
                         (46.5, 0.9418), (49.6, 0.9453), (52.6, 0.9451), (55.6, 0.9464), (57.1, 0.9473),
                         (58.3, 0.9448), (60.9, 0.9472), (63.5, 0.9471), (65.9, 0.9493), (67.9, 0.9492),
                         (68.2, 0.9488), (70.5, 0.9491), (73.2, 0.9483), (75.7, 0.9489), (78.6, 0.949), (79.0, 0.949)),
        for_gpu=True,
    ),
    Preset(
        name="sample-demo",
        description="Under a minute on the bundled sample: fine-tune the pretrained MiniLM for one epoch with the "
                    "triplet loss (mean and closest in-batch negatives, labelled non-duplicates as hard negatives). "
                    "A Siamese LSTM trained from scratch on 479 pairs learns word overlap, which the sample's "
                    "near-miss non-duplicates punish: it scores below chance there (docs/BENCHMARKS.md, "
                    "\"The first run\").",
        options={"model": "minilm", "loss": "triplet", "margin": 0.25,
                 "epochs": 1, "batch_size": 16, "lr": 2e-5, "patience": 0, "max_length": 32, "hard_negatives": True},
    ),
]}


GPU_PRESET = "minilm-quora-gpu"
# Below this many pairs the GPU recipe's batches of 256 make a handful of steps, and compiling them costs more
# than it saves: the defaults (or sample-demo) suit such data on any device.
GPU_PRESET_MIN_PAIRS = 10_000


def preset_names() -> list[str]:
    return list(PRESETS)


SAMPLE_PRESET = "sample-demo"


def suggested_preset(n_pairs: int, cuda: bool, bundled_sample: bool = False) -> str | None:
    """The preset a run starts from when the user names none: the GPU recipe where a CUDA device is here and
    the data has at least GPU_PRESET_MIN_PAIRS pairs; sample-demo on the bundled sample (the plain defaults
    train an LSTM that scores below chance there); None (the plain defaults) otherwise.

    Example: suggested_preset(323_000, cuda=True) -> "minilm-quora-gpu"; suggested_preset(479, True) -> None;
    suggested_preset(479, False, bundled_sample=True) -> "sample-demo".
    """
    if cuda and n_pairs >= GPU_PRESET_MIN_PAIRS:
        return GPU_PRESET
    return SAMPLE_PRESET if bundled_sample else None


def default_preset(n_pairs: int, cuda: bool, bundled_sample: bool = False) -> str:
    """The preset the Train page opens on: ``suggested_preset``'s, else ``auto`` (the recipe read off the user's
    own data; the plain defaults train a Siamese LSTM from scratch, which a few thousand pairs cannot teach).

    Example: default_preset(500, cuda=False) -> "auto"; default_preset(479, False, bundled_sample=True) -> "sample-demo".
    """
    return suggested_preset(n_pairs, cuda, bundled_sample) or "auto"
