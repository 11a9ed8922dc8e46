"""``--preset auto``: a recipe read off the user's training pairs instead of Quora's.

The named presets were measured on hundreds of thousands of short Quora questions; on a few thousand
paragraphs from another forum they run a few dozen steps, validate once and cut most questions short.
``auto_options`` looks at the data it is given and picks, for the pretrained MiniLM fine-tuned with the
contrastive loss (the recipe that learns from both classes, starting from the strongest encoder the lab
has), how long to train, in what batches, at what learning rate, how often to validate, how much to hold
out, and how many tokens of each question to keep, and says so in one line. Explicit options still win.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

AUTO_PRESET = "auto"
# Each question is cut at this quantile of the data's token counts (special tokens included), within bounds:
# the rare longest questions are not worth the quadratic attention cost of padding everything to them.
LENGTH_QUANTILE = 0.95
MIN_MAX_LENGTH, MAX_MAX_LENGTH = 16, 256
LENGTH_SAMPLE = 2_000  # questions tokenised to measure lengths: seconds, not minutes, on any corpus
TRUNCATION_NOTE_SHARE = 0.10  # a run that cuts more than this share of its questions says so
# Pairs a validation split should hold: about +-0.03 of ROC AUC at 95 % (core.data.splitting's floor is 500).
TARGET_VALIDATION_PAIRS = 2_000
VAL_FRACTION_BOUNDS = (0.02, 0.2)  # never more than a fifth of a small file, never under 2 % of a big one
# Pairs MiniLM trains per second on 2 CPU threads at 40 tokens, and on a GPU: the time budget becomes epochs.
# Scaled by 40 / the questions' mean token count (cut at max_length): batches of similar lengths are cut to their
# longest question, so a step pays for the tokens the data has, not for max_length (docs/BENCHMARKS.md).
PAIRS_PER_SECOND = {"cpu": 25.0, "cuda": 1_000.0}
# Pairs MiniLM scores per second (a forward pass of both questions, no gradients) at 40 tokens, likewise scaled.
SCORE_PAIRS_PER_SECOND = {"cpu": 120.0, "cuda": 5_000.0}
# Seconds before the first step and after the last validation: tokenising, loading the encoder, loading
# zero-shot MiniLM for the baseline, saving the folder.
FIXED_SECONDS = {"cpu": 15.0, "cuda": 20.0}
# The planned training time (validations included); max_minutes (a quarter more) stops a slow run, so a run on
# 500-2,000 pairs ends, baselines and saving included, within 10 minutes on 2 CPU threads (docs/BENCHMARKS.md).
TRAIN_MINUTES = {"cpu": 6.0, "cuda": 5.0}
MAX_EPOCHS = 10
MIN_VALIDATIONS = 8  # a run draws a curve and early stopping has something to compare


@dataclass(frozen=True)
class AutoRecipe:
    options: dict  # run options, as core.training.specs.spec_from_options takes them
    reason: str  # one line: what was picked and why
    summary: tuple = field(default=())  # a few lines for the Train page: what was read off the data, what it costs
    estimated_seconds: float = 0.0  # from Start to the saved model, at the expected speeds of ``device``


def token_lengths(questions: pd.Series, tokenizer, seed: int = 0) -> np.ndarray:
    """Token counts (before any cut) of a seeded sample of ``LENGTH_SAMPLE`` questions at most."""
    texts = questions.astype(str)
    if len(texts) > LENGTH_SAMPLE:
        texts = texts.sample(n=LENGTH_SAMPLE, random_state=seed)
    return np.array([tokenizer.count(text) for text in texts], dtype=np.int64)


def truncated_share(questions: pd.Series, tokenizer, max_length: int, seed: int = 0) -> float:
    """The share of (a sample of) ``questions`` longer than ``max_length`` tokens."""
    lengths = token_lengths(questions, tokenizer, seed)
    return float(np.mean(lengths > max_length)) if lengths.size else 0.0


def auto_options(pairs: pd.DataFrame, device: str = "cpu", has_val_file: bool = False, seed: int = 0,
                 max_minutes: float | None = None) -> AutoRecipe:
    """The auto recipe for ``pairs`` (the whole training file; a share is held out unless ``has_val_file``),
    training on ``device`` ("cpu" or "cuda"), planned to fill ``max_minutes`` of training (the user's budget)
    or else ``TRAIN_MINUTES``.

    Example: 2,453 pairs of long questions on the CPU -> 20 % held out, 1,962 to train on, batches of 32,
    epochs to fill about 6 minutes at the measured speed, validated at least 8 times.
    """
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
    # The planned time leaves the cap a quarter of slack, as the default plan does.
    minutes = max_minutes / 1.25 if max_minutes else TRAIN_MINUTES[kind]
    budget_pairs = minutes * 60 * speed
    epochs = int(min(MAX_EPOCHS, max(1, budget_pairs // train_pairs)))
    steps_per_epoch = max(1, math.ceil(train_pairs / batch_size))
    max_steps = 0 if epochs > 1 else int(min(steps_per_epoch, max(1, budget_pairs // batch_size)))
    total_steps = max_steps or epochs * steps_per_epoch
    validate_every = max(1, min(steps_per_epoch, total_steps // MIN_VALIDATIONS))
    options = {"model": "minilm", "loss": "contrastive", "form": "squared_hinge", "margin": 1.0,
               "epochs": epochs, "batch_size": batch_size, "lr": lr, "max_steps": max_steps,
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
    """From Start to the saved model: fixed costs, training with its validations (up to the time budget), then the
    final calibration and zero-shot MiniLM on the validation pairs (a validation file's size is not known here:
    counted as the target). ``scale``: the speeds' factor for this data's question lengths."""
    scored = val_pairs or TARGET_VALIDATION_PAIRS
    in_run = trained_pairs / (PAIRS_PER_SECOND[kind] * scale) + validations * min(scored, TARGET_VALIDATION_PAIRS) / (
        SCORE_PAIRS_PER_SECOND[kind] * scale)
    after = 2 * scored / (SCORE_PAIRS_PER_SECOND[kind] * scale)
    return FIXED_SECONDS[kind] + min(in_run, max_minutes * 60) + after
