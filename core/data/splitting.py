"""Loaded pairs summarised, split (by pair, or by question so that no held-out text is seen in training, and by the
groups a user named in the frame's ``GROUP`` column too), checked against the training run's own minimums, and the
pairs their labels imply. Texts compare by ``normalise_questions``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.data.questions import pair_keys
from core.data.reading import GROUP, normalise_questions, question_codes


DEFAULT_VAL_FRACTION = 0.1  # the share of pairs held out for validation unless a run says otherwise
# How a run holds pairs out: "auto" is "question" when some question occurs in more than one pair (pairs that
# share a question would otherwise sit on both sides and flatter the validation), else "pair". A frame with a
# ``GROUP`` column is split by "group": its named groups and its questions, each kept on one side.
SPLIT_BY = ("auto", "pair", "question")
BY_GROUP = "group"


@dataclass
class Splits:
    train: pd.DataFrame  # pairs to fit on
    val: pd.DataFrame  # pairs for model selection / early stopping
    test: pd.DataFrame  # pairs touched once, for the final numbers


def pairs_fingerprint(pairs: pd.DataFrame) -> str:
    """A short content hash of a pairs frame (texts, labels and order): "the same dataset" means equal."""
    rows = pd.util.hash_pandas_object(pairs[["question1", "question2", "is_duplicate"]], index=False)
    return hashlib.sha1(rows.values.tobytes()).hexdigest()[:16]


def seeded_sample(count: int, cap: int, seed: int = 0) -> np.ndarray:
    """All of 0..count-1 when ``count <= cap``, else a seeded sample of ``cap`` of them, in increasing order."""
    if count <= cap:
        return np.arange(count)
    return np.sort(np.random.default_rng(seed).choice(count, size=cap, replace=False))


def dataset_summary(pairs: pd.DataFrame) -> dict:
    """Counts for display; unique_questions compares normalised text across both columns."""
    count, duplicates = int(pairs.shape[0]), int(pairs["is_duplicate"].sum())
    return {"pairs": count, "duplicates": duplicates, "duplicate_rate": duplicates / count if count else 0.0,
            "unique_questions": question_codes(pairs)[1]}


def split_pairs(
    pairs: pd.DataFrame,
    val_fraction: float = DEFAULT_VAL_FRACTION,
    test_fraction: float = 0.1,
    seed: int = 0,
    by_question: bool = False,
) -> Splits:
    """Seeded train/val/test split; fractions are of pairs. ``by_question`` keeps each connected group of pairs
    sharing a question in one split, dealt in a seeded order (groups too big to fit land in train); a ``GROUP``
    column keeps each of its groups in one split too, with the pairs sharing their questions."""
    count = pairs.shape[0]
    test_target, val_target = round(count * test_fraction), round(count * val_fraction)
    rng = np.random.default_rng(seed)
    if by_question or GROUP in pairs:
        assignment = _assign_groups(with_named_groups(pairs, question_groups(pairs)), test_target, val_target, rng)
    else:
        assignment = np.zeros(count, dtype=np.int8)  # 0 train, 1 val, 2 test
        order = rng.permutation(count)
        assignment[order[:test_target]] = 2
        assignment[order[test_target : test_target + val_target]] = 1
    return Splits(
        train=pairs.iloc[np.flatnonzero(assignment == 0)].reset_index(drop=True),
        val=pairs.iloc[np.flatnonzero(assignment == 1)].reset_index(drop=True),
        test=pairs.iloc[np.flatnonzero(assignment == 2)].reset_index(drop=True),
    )


def split_with_files(pairs: pd.DataFrame, val: pd.DataFrame | None, test: pd.DataFrame | None,
                     val_fraction: float, test_fraction: float, seed: int, by_question: bool) -> Splits:
    """``split_pairs`` where the user brought their own validation or test pairs: a given file is that split,
    and ``pairs`` are split only into what is still missing."""
    rest = split_pairs(pairs, val_fraction=0.0 if val is not None else val_fraction,
                       test_fraction=0.0 if test is not None else test_fraction, seed=seed, by_question=by_question)
    return Splits(train=rest.train,
                  val=rest.val if val is None else val.reset_index(drop=True),
                  test=rest.test if test is None else test.reset_index(drop=True))


def resolve_split_by(pairs: pd.DataFrame, split_by: str) -> str:
    """"pair" or "question": ``split_by`` itself, or for "auto" whether any question links two pairs; "group" for a
    frame with a ``GROUP`` column."""
    if GROUP in pairs:
        return BY_GROUP
    if split_by != "auto":
        return split_by
    return "question" if len(pairs) and question_groups(pairs).max() + 1 < len(pairs) else "pair"


# Resampling groups larger than this share of the pairs say the questions chain (a related question answering
# several anchors links them all): whole groups that big cannot vary, so pairs are grouped by their first question.
MAX_GROUP_SHARE = 0.25


def resampling_groups(pairs: pd.DataFrame) -> np.ndarray | None:
    """A group id per pair for a bootstrap that treats pairs sharing a question as one piece of evidence (None when
    no question occurs in two pairs): ``question_groups``, or by first question where those chain too far; joined
    with the ``GROUP`` column's groups when there is one, unless that makes a group as big."""
    if len(pairs) < 2:
        return None
    groups = question_groups(pairs)
    if groups.max() + 1 < len(pairs) and np.bincount(groups).max() > MAX_GROUP_SHARE * len(pairs):
        groups = pd.factorize(normalise_questions(pairs["question1"]))[0]
    named = with_named_groups(pairs, groups)
    groups = groups if np.bincount(named).max() > MAX_GROUP_SHARE * len(pairs) else named
    return None if groups.max() + 1 == len(pairs) else groups


def with_named_groups(pairs: pd.DataFrame, groups: np.ndarray) -> np.ndarray:
    """``groups`` (an id per pair) joined with the ``GROUP`` column's, when ``pairs`` has one: pairs of one named
    group or one of ``groups`` share an id. A pair without a named group keeps its own."""
    if GROUP not in pairs:
        return groups
    named = pd.factorize(pairs[GROUP].to_numpy(dtype=object, na_value=None), use_na_sentinel=True)[0]
    unnamed = named < 0
    named[unnamed] = named.max(initial=-1) + 1 + np.arange(int(unnamed.sum()))
    offset = int(groups.max(initial=-1)) + 1
    components = connected_components(groups, named + offset, offset + int(named.max(initial=-1)) + 1)
    return pd.factorize(components[groups])[0]


def recorded_by_question(run: dict) -> bool:
    """Whether a saved run split by question: its resolved ``split_by``, or the switch older folders carry."""
    return run.get("split_by") == "question" if "split_by" in run else bool(run.get("split_by_question"))


def question_groups(pairs: pd.DataFrame) -> np.ndarray:
    """Connected-component id per pair, pairs linked by shared normalised question text. (n,)"""
    count = pairs.shape[0]
    codes, distinct = question_codes(pairs)
    components = connected_components(codes[:count], codes[count:], distinct)
    return pd.factorize(components[codes[:count]])[0]  # numbered in order of first appearance


def connected_components(left: np.ndarray, right: np.ndarray, count: int) -> np.ndarray:
    """(count,) component label per node of the undirected graph on 0..count-1 with edges (left[i], right[i])."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components as components

    left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    graph = coo_matrix((np.ones(left.size, dtype=np.int8), (left, right)), shape=(count, count))
    return components(graph, directed=False)[1].astype(np.int64)


def _assign_groups(groups: np.ndarray, test_target: int, val_target: int, rng: np.random.Generator) -> np.ndarray:
    """Split id per pair (0 train, 1 val, 2 test), dealing whole groups in a seeded order."""
    sizes = np.bincount(groups)
    split_of_group = np.zeros(sizes.size, dtype=np.int8)
    test_size = val_size = 0
    for group in rng.permutation(sizes.size).tolist():
        size = int(sizes[group])
        if test_size + size <= test_target:
            split_of_group[group], test_size = 2, test_size + size
        elif val_size + size <= val_target:
            split_of_group[group], val_size = 1, val_size + size
        if test_size == test_target and val_size == val_target:
            break
    return split_of_group[groups]


def seen_pair_mask(seen: pd.DataFrame, other: pd.DataFrame) -> pd.Series:
    """True for rows of ``other`` whose pair (``pair_keys``: normalised, in either order) is a pair of ``seen``."""
    keys = set(pair_keys(seen["question1"].astype(str), seen["question2"].astype(str)))
    found = [key in keys for key in pair_keys(other["question1"].astype(str), other["question2"].astype(str))]
    return pd.Series(np.array(found, dtype=bool), index=other.index, name="seen")


# ---- is a pairs file enough to train on? The training run's own minimums, applied at load time ----------------
MIN_DUPLICATES = 2  # the smallest batch of an in-batch loss: one pair and one negative
MIN_VALIDATION_PAIRS = 2  # one duplicate and one non-duplicate: the least a ROC AUC is defined on
IN_BATCH_LOSSES = "triplet and softmax"  # the losses whose batches hold duplicate pairs only


@dataclass(frozen=True)
class TrainingProblem:
    message: str  # one line, naming the minimum that would work
    fatal: bool  # no run can train on this file with the chosen loss


def min_pairs_for_validation(val_fraction: float) -> int:
    """The fewest pairs whose validation split (``round(pairs * val_fraction)``) holds MIN_VALIDATION_PAIRS."""
    pairs = 1
    while round(pairs * val_fraction) < MIN_VALIDATION_PAIRS:
        pairs += 1
    return pairs


def training_problems(summary: dict, val_fraction: float = DEFAULT_VAL_FRACTION,
                      in_batch_loss: bool | None = None) -> list[TrainingProblem]:
    """What keeps a dataset (its ``dataset_summary``) from training a useful model, worst first. ``val_fraction``:
    the share held out (0: no validation rule); ``in_batch_loss``: True makes too few duplicates fatal, False drops
    that rule, None (no loss chosen yet, as on the Data page) warns."""
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


# The fewest pairs of each class a split may hold; how little a few pairs say is the intervals' job, not a refusal's.
MIN_PAIRS_PER_CLASS = 1
# Validation splits smaller than this are warned about: Hanley & McNeil's standard error of a ROC AUC near 0.85
# puts its 95 % interval at a few hundredths, as wide as the gap between two reasonable recipes.
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


# ---- pairs the labels imply --------------------------------------------------------------------------------
# Closure: two questions of one duplicate group are duplicates (A ~ B, B ~ C give A ~ C). Swap: a labelled
# non-duplicate stays one when a side is replaced by a question of its group (A ~ B, A !~ C give B !~ C). A long
# chain drifts in meaning, so a group lends at most MAX_GROUP questions (seeded). Only the pairs given are read, so
# implying from a training split never looks at held-out labels.
MAX_GROUP = 10  # a cap against drift, not tuned


def implied_pairs(pairs: pd.DataFrame, max_group: int = MAX_GROUP, seed: int = 0) -> pd.DataFrame:
    """The new pairs that ``pairs``' labels imply, none already in ``pairs`` in either order: (a, b, 1), (b, c, 1),
    (a, d, 0) imply (a, c, 1) by closure, and (b, d, 0) and (c, d, 0) by swap."""
    texts = np.concatenate([pairs["question1"].to_numpy(object), pairs["question2"].to_numpy(object)])
    codes = question_codes(pairs)[0]
    text_of = texts[np.unique(codes, return_index=True)[1]]  # each question's first row gives its shown text
    n = len(pairs)
    left, right = codes[:n], codes[n:]
    duplicate = pairs["is_duplicate"].to_numpy() == 1
    group = connected_components(left[duplicate], right[duplicate], len(text_of))
    # group -> at most max_group of its questions (seeded), for groups of 2 or more
    rng = np.random.default_rng(seed)
    order, sizes = np.argsort(group, kind="stable"), np.bincount(group)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    lenders = {}
    for g in np.flatnonzero(sizes >= 2).tolist():
        members = order[starts[g]: starts[g] + sizes[g]]
        if len(members) > max_group:
            members = np.sort(rng.choice(members, max_group, replace=False))
        lenders[g] = members.tolist()
    implied: dict[tuple[int, int], int] = {}

    def add(a: int, b: int, label: int) -> None:
        implied[(a, b) if a < b else (b, a)] = label

    for members in lenders.values():  # closure
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                add(a, b, 1)
    for a, c in zip(left[~duplicate].tolist(), right[~duplicate].tolist()):  # swap
        if group[a] == group[c]:
            continue  # the labels contradict each other here: imply nothing from it
        for b in lenders.get(group[a], ()):
            add(b, c, 0)
        for d in lenders.get(group[c], ()):
            add(a, d, 0)

    labelled = {(a, b) if a < b else (b, a) for a, b in zip(left.tolist(), right.tolist())}
    kept = sorted((a, b, label) for (a, b), label in implied.items() if (a, b) not in labelled)
    a, b, label = np.array(kept, dtype=np.int64).reshape(-1, 3).T  # (3, K)
    return pd.DataFrame({"question1": text_of[a], "question2": text_of[b], "is_duplicate": label})


def with_implied_pairs(pairs: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """``pairs`` followed by the pairs its labels imply, with a fresh index."""
    return pd.concat([pairs[["question1", "question2", "is_duplicate"]], implied_pairs(pairs, seed=seed)],
                     ignore_index=True)
