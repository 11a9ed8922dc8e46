"""Is a pairs file enough to train on? The rule the Data page and ``python -m core train`` both apply at load time.

The minimums are those of the training run itself, so a file is questioned before training, not after:

* the in-batch losses (triplet, softmax) learn from batches of at least ``MIN_DUPLICATES`` duplicate pairs
  (``core.data.batching.duplicate_free_batches`` drops a one-row batch: it has no negative), so a file with
  fewer cannot train them at all;
* a model learns "not a duplicate" only from non-duplicates, and a validation ROC AUC needs both classes:
  a one-class file trains nothing useful and is never measured;
* the validation split is ``round(pairs * val_fraction)`` pairs (``core.data.splitting.split_pairs``) and
  needs ``MIN_VALIDATION_PAIRS`` (one of each class) for a ROC AUC, early stopping and the thresholds.

A batch size larger than the file is no problem: the one batch is smaller.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from core.data.splitting import DEFAULT_VAL_FRACTION

MIN_DUPLICATES = 2  # the smallest batch of an in-batch loss: one pair and one negative
MIN_VALIDATION_PAIRS = 2  # one duplicate and one non-duplicate: the least a ROC AUC is defined on
IN_BATCH_LOSSES = "triplet and softmax"  # the losses whose batches hold duplicate pairs only


@dataclass(frozen=True)
class TrainingProblem:
    message: str  # one line, naming the minimum that would work
    fatal: bool  # no run can train on this file with the chosen loss


def min_pairs_for_validation(val_fraction: float) -> int:
    """The fewest pairs whose validation split (``round(pairs * val_fraction)``) holds MIN_VALIDATION_PAIRS.

    Example: 15 at 10 % (round(1.5) == 2), 30 at 5 %.
    """
    pairs = max(1, math.floor((MIN_VALIDATION_PAIRS - 0.5) / val_fraction) - 1)
    while round(pairs * val_fraction) < MIN_VALIDATION_PAIRS:
        pairs += 1
    return pairs


def training_problems(summary: dict, val_fraction: float = DEFAULT_VAL_FRACTION,
                      in_batch_loss: bool | None = None) -> list[TrainingProblem]:
    """What keeps a dataset (its ``core.data.dataset_summary``) from training a useful model, worst first.

    ``val_fraction`` is the share held out for validation (0: none, and no validation rule);
    ``in_batch_loss`` says whether the run's loss batches duplicate pairs only: True makes too few
    duplicates fatal, False drops that rule, None (no loss chosen yet, as on the Data page) warns.
    """
    pairs, duplicates = int(summary["pairs"]), int(summary["duplicates"])
    others = pairs - duplicates
    problems = []
    if pairs == 0:
        return [TrainingProblem("no pair to train on", fatal=True)]
    if duplicates < MIN_DUPLICATES and in_batch_loss is not False:
        problems.append(TrainingProblem(
            f"only {duplicates} duplicate pair(s): the {IN_BATCH_LOSSES} losses need at least {MIN_DUPLICATES} "
            "duplicate pairs to form a batch (the contrastive, CoSENT and multitask losses train on both classes)",
            fatal=bool(in_batch_loss)))
    if duplicates == 0 or others == 0:
        have, need = ("duplicate", "non-duplicate") if others == 0 else ("non-duplicate", "duplicate")
        which = f"the one pair is a {have}" if pairs == 1 else f"all {pairs:,} pairs are {have}s"
        problems.append(TrainingProblem(
            f"{which}: a model learns to tell duplicates apart only from both classes, and "
            f"validation ROC AUC needs both; add at least 1 {need} pair (several, so the validation split holds "
            "one of each)", fatal=in_batch_loss is not None))  # a run on one class can never be measured
    if val_fraction > 0 and round(pairs * val_fraction) < MIN_VALIDATION_PAIRS:
        held = round(pairs * val_fraction)
        problems.append(TrainingProblem(
            f"only {pairs:,} pair(s): holding out {val_fraction:.0%} for validation leaves {held}, and a validation "
            f"ROC AUC (which picks the best epoch and the thresholds) needs at least {MIN_VALIDATION_PAIRS}, one of "
            f"each class: use at least {min_pairs_for_validation(val_fraction):,} pairs", fatal=False))
    return problems


# The fewest pairs of each class a split may hold: a ROC AUC, the best epoch and the thresholds need one of each.
# How little a few pairs say is the intervals' job (and small_validation_note's), not a refusal's.
MIN_PAIRS_PER_CLASS = 1
# Validation splits smaller than this are warned about: with half of them duplicates and a ROC AUC near 0.85,
# Hanley & McNeil's standard error puts the 95 % interval at about +-0.035 for 500 pairs (+-0.07 for 120),
# already as wide as the gap between two reasonable recipes.
MIN_TRUSTED_VALIDATION_PAIRS = 500


def split_problems(train_labels, val_labels, pair_loss: bool) -> list[str]:
    """Why the split training and validation pairs cannot make a run that is measured, as one-line messages
    (empty when they can): fewer than MIN_PAIRS_PER_CLASS of either class in validation, or in training for a
    loss that learns from both classes (``pair_loss``); the in-batch losses train on duplicates alone."""
    problems = []
    for name, labels, needed in (("training", train_labels, pair_loss), ("validation", val_labels, True)):
        if not needed:
            continue
        duplicates = int(sum(int(label) == 1 for label in labels))
        others = len(labels) - duplicates
        if min(duplicates, others) < MIN_PAIRS_PER_CLASS:
            problems.append(f"the {name} pairs hold {duplicates:,} duplicate(s) and {others:,} non-duplicate(s); "
                            f"a run needs at least {MIN_PAIRS_PER_CLASS} of each class there to be measured")
    return problems


def small_validation_note(pairs: int, from_file: bool = False) -> str | None:
    """One line when ``pairs`` validation pairs (split off, or ``from_file``: the user's validation file) are too
    few for figures to be trusted, saying what to do."""
    if pairs >= MIN_TRUSTED_VALIDATION_PAIRS:
        return None
    remedy = ("a larger validation file" if from_file else
              "a validation file (train --val, or the Data page) or a larger val_fraction")
    return (f"only {pairs:,} validation pairs: their figures are uncertain by several hundredths (see the "
            f"intervals); {remedy} would give at least {MIN_TRUSTED_VALIDATION_PAIRS:,}")
