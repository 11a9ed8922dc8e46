"""Named training recipes (run options under which an option given still wins; docs/BENCHMARKS.md has their
figures) and ``auto_options``, the recipe read off the user's own pairs: the named ones fit short Quora questions by
the hundred thousand, so auto picks epochs, batches, learning rate, validation and max_length for the data at hand.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    options: dict = field(default_factory=dict)  # run options, as spec_from_options takes them
    for_gpu: bool = False  # hours on a CPU: the Train page marks it "(GPU)"


# auto's and augmented's settings that hold on any data; the rest are read off the data when it is known.
READ_OFF_THE_DATA = {"model": "minilm", "loss": "contrastive", "form": "squared_hinge", "margin": 1.0}

PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset(
        name="auto",
        description="Read off your training pairs (core.training.presets): the pretrained MiniLM fine-tuned with "
                    "the contrastive loss, with epochs, batch size and learning rate from their number, max_length "
                    "from their token lengths, validated at least 8 times and at least every epoch, and a validation "
                    "share that holds enough pairs to trust; about 10 minutes on 2 CPU threads at most.",
        options=dict(READ_OFF_THE_DATA),
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
    Preset(
        name="augmented",
        description="Augmented SBERT (Thakur et al., 2021): a cross-encoder, trained on your labelled pairs, labels "
                    "pairs of your questions (each with its nearest neighbours under MiniLM, and random ones); MiniLM "
                    "then trains with the contrastive loss on both, its settings read off your data as auto's. One "
                    "time budget covers the three stages (10 minutes by default).",
        options=dict(READ_OFF_THE_DATA),
    ),
]}


GPU_PRESET = "minilm-quora-gpu"
# Below this many pairs the GPU recipe makes a handful of steps, and compiling them costs more than it saves.
GPU_PRESET_MIN_PAIRS = 10_000


def suggested_preset(n_pairs: int, cuda: bool) -> str | None:
    """The GPU recipe on CUDA with at least GPU_PRESET_MIN_PAIRS pairs, else None."""
    return GPU_PRESET if cuda and n_pairs >= GPU_PRESET_MIN_PAIRS else None


def default_preset(n_pairs: int, cuda: bool, bundled_sample: bool = False) -> str:
    """The preset the Train page opens on: ``suggested_preset``'s, sample-demo on the bundled sample, else ``auto``
    (a Siamese LSTM from scratch, the plain defaults, is not taught by a few thousand pairs)."""
    return suggested_preset(n_pairs, cuda) or ("sample-demo" if bundled_sample else "auto")

AUTO_PRESET = "auto"
AUGMENTED_PRESET = "augmented"  # reads its settings off the data as auto does (core.training.distillation)
# Questions are cut at this quantile of the token counts: the rare longest are not worth their attention cost.
LENGTH_QUANTILE = 0.95
MIN_MAX_LENGTH, MAX_MAX_LENGTH = 16, 256
LENGTH_SAMPLE = 2_000  # questions tokenised to measure lengths
TRUNCATION_NOTE_SHARE = 0.10  # a run that cuts more than this share of its questions says so
TARGET_VALIDATION_PAIRS = 2_000  # pairs a validation split should hold (about +-0.03 of ROC AUC)
VAL_FRACTION_BOUNDS = (0.02, 0.2)  # never more than a fifth of a small file, never under 2 % of a big one
# Pairs MiniLM trains and scores per second at 40 tokens (2 CPU threads; a GPU), scaled by 40 / the questions' mean
# token count: length-bucketed batches pay for the tokens the data has. The time budget becomes epochs.
PAIRS_PER_SECOND = {"cpu": 25.0, "cuda": 1_000.0}
SCORE_PAIRS_PER_SECOND = {"cpu": 120.0, "cuda": 5_000.0}
FIXED_SECONDS = {"cpu": 15.0, "cuda": 20.0}  # loading, tokenising, baselines and saving, around the training
# The planned training time; max_minutes (a quarter more) stops a slow run, so a first run on the CPU ends,
# everything included, within 10 minutes.
TRAIN_MINUTES = {"cpu": 6.0, "cuda": 5.0}
MAX_EPOCHS = 10
MIN_VALIDATIONS = 8  # a run draws a curve and early stopping has something to compare


@dataclass(frozen=True)
class AutoRecipe:
    options: dict  # run options, as core.training.specs.spec_from_options takes them
    reason: str  # one line: what was picked and why
    summary: tuple = field(default=())  # a few lines for the Train page: what was read off the data, what it costs
    estimated_seconds: float = 0.0  # from Start to the saved model, at the expected speeds of ``device``


# ---- the auto recipe ---------------------------------------------------------------------------------------------
def token_lengths(questions: pd.Series, tokenizer, seed: int = 0) -> np.ndarray:
    """Token counts (before any cut) of a seeded sample of ``LENGTH_SAMPLE`` questions at most."""
    texts = questions.astype(str)
    if len(texts) > LENGTH_SAMPLE:
        texts = texts.sample(n=LENGTH_SAMPLE, random_state=seed)
    return np.array([tokenizer.count(text) for text in texts], dtype=np.int64)


def auto_options(pairs: pd.DataFrame, device: str = "cpu", has_val_file: bool = False, seed: int = 0,
                 max_minutes: float | None = None) -> AutoRecipe:
    """The auto recipe for ``pairs`` (a share held out unless ``has_val_file``) on ``device`` ("cpu" or "cuda"),
    planned to fill ``max_minutes`` of training (the user's budget) or else ``TRAIN_MINUTES``."""
    from core.text.wordpiece_tokenizer import bert_wordpiece

    questions = pd.concat([pairs["question1"], pairs["question2"]], ignore_index=True)
    lengths = token_lengths(questions, bert_wordpiece(MAX_MAX_LENGTH), seed)
    median = int(np.median(lengths)) if lengths.size else 0
    quantile = int(np.ceil(np.quantile(lengths, LENGTH_QUANTILE))) if lengths.size else MIN_MAX_LENGTH
    max_length = int(min(MAX_MAX_LENGTH, max(MIN_MAX_LENGTH, 8 * math.ceil(quantile / 8))))

    low, high = VAL_FRACTION_BOUNDS
    val_fraction = 0.0 if has_val_file else round(min(high, max(low, TARGET_VALIDATION_PAIRS / max(len(pairs), 1))), 3)
    train_pairs = max(1, round(len(pairs) * (1 - val_fraction)))
    batch_size = 32 if train_pairs < 10_000 else 64
    lr = 3e-5 if train_pairs < 10_000 else 5e-5 if train_pairs < 100_000 else 1e-4
    kind = "cuda" if device == "cuda" else "cpu"
    scale = 40 / max(8.0, float(np.mean(np.minimum(lengths, max_length))) if lengths.size else max_length)
    speed = PAIRS_PER_SECOND[kind] * scale
    minutes = max_minutes / 1.25 if max_minutes else TRAIN_MINUTES[kind]
    budget_pairs = minutes * 60 * speed
    epochs = int(min(MAX_EPOCHS, max(1, budget_pairs // train_pairs)))
    steps_per_epoch = max(1, math.ceil(train_pairs / batch_size))
    max_steps = 0 if epochs > 1 else int(min(steps_per_epoch, max(1, budget_pairs // batch_size)))
    total_steps = max_steps or epochs * steps_per_epoch
    validate_every = max(1, min(steps_per_epoch, total_steps // MIN_VALIDATIONS))
    options = {**PRESETS[AUTO_PRESET].options, "epochs": epochs, "batch_size": batch_size, "lr": lr,
               "max_steps": max_steps,
               "validate_every": 0 if validate_every >= steps_per_epoch else validate_every,
               "patience": MIN_VALIDATIONS // 2, "max_val_pairs": TARGET_VALIDATION_PAIRS, "max_length": max_length,
               "max_minutes": max_minutes or TRAIN_MINUTES[kind] * 1.25}
    if not has_val_file:
        options["val_fraction"] = val_fraction
    held = "a validation file" if has_val_file else f"{val_fraction:.0%} held out for validation"
    length = (f"max_length {max_length} (the {LENGTH_QUANTILE:.0%} quantile of the questions' token counts is "
              f"{quantile})")
    steps = f"{max_steps} steps" if max_steps else f"{epochs} epoch(s) of {steps_per_epoch} steps"
    reason = (f"auto recipe for {train_pairs:,} training pairs: MiniLM fine-tuned with the contrastive loss, {steps} "
              f"(batch {batch_size}, lr {lr:g}, about {minutes:g} minutes at the expected speed), "
              f"validated every {validate_every} steps, {length}, {held}")
    val_pairs = 0 if has_val_file else len(pairs) - train_pairs
    validations = total_steps // validate_every + 2  # the starting weights' and the last one's included
    seconds = _estimated_seconds(kind, scale, total_steps * batch_size, validations, val_pairs, options["max_minutes"])
    summary = (
        f"Read off {len(pairs):,} pairs: {questions.nunique():,} distinct questions, token lengths median {median}, "
        f"{LENGTH_QUANTILE:.0%} quantile {quantile}: max_length {max_length}.",
        f"Trains MiniLM (contrastive loss) on {train_pairs:,} pairs: {steps}, batch size {batch_size}, "
        f"lr {lr:g}, validated every {validate_every} steps and on the starting weights.",
        "Validation: your validation file." if has_val_file else
        f"Validation: {val_fraction:.0%} of the pairs held out ({val_pairs:,}).",
        f"Expected time on this {'GPU' if kind == 'cuda' else 'CPU'}: about {math.ceil(seconds / 60):,} min from "
        f"Start to the saved model (training capped at {options['max_minutes']:g} min).",
    )
    return AutoRecipe(options, reason, summary, seconds)


def _estimated_seconds(kind: str, scale: float, trained_pairs: int, validations: int, val_pairs: int,
                       max_minutes: float) -> float:
    """From Start to the saved model: fixed costs, training with its validations (within the budget), then the final
    calibration and zero-shot MiniLM on the validation pairs (a validation file counted as the target)."""
    scored = val_pairs or TARGET_VALIDATION_PAIRS
    in_run = trained_pairs / (PAIRS_PER_SECOND[kind] * scale) + validations * min(scored, TARGET_VALIDATION_PAIRS) / (
        SCORE_PAIRS_PER_SECOND[kind] * scale)
    after = 2 * scored / (SCORE_PAIRS_PER_SECOND[kind] * scale)
    return FIXED_SECONDS[kind] + min(in_run, max_minutes * 60) + after
