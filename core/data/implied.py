"""Pairs the labels imply but nobody labelled: more training pairs from the same labelling work.

Duplicate labels join questions into groups (chains of duplicate pairs). **Closure**: two questions of one group
are duplicates (A ~ B and B ~ C give A ~ C). **Swap**: a labelled non-duplicate stays one when a side is replaced
by a question of its group (A ~ B and A !~ C give B !~ C). A long chain drifts in meaning, so each group lends at
most ``max_group`` questions (seeded), and a labelled pair is never implied again. Only the pairs given are read,
so implying pairs from a training split never looks at held-out labels.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from core.data.reading import normalise_questions
from core.data.splitting import connected_components

MAX_GROUP = 10  # questions a duplicate group lends to implied pairs (a cap against drift, not tuned)


def implied_pairs(pairs: pd.DataFrame, max_group: int = MAX_GROUP, seed: int = 0) -> pd.DataFrame:
    """The new pairs (question1, question2, is_duplicate) that ``pairs``' labels imply, none of them
    already in ``pairs`` in either order; see the module docstring for the two rules.

    Example: (a, b, 1), (b, c, 1), (a, d, 0) imply (a, c, 1) by closure, and (b, d, 0) and (c, d, 0)
    by swapping a for a question of its group.
    """
    if max_group < 2:
        raise ValueError(f"max_group must be at least 2, got {max_group}")
    keys = np.concatenate([normalise_questions(pairs["question1"]), normalise_questions(pairs["question2"])])
    texts = np.concatenate([pairs["question1"].to_numpy(object), pairs["question2"].to_numpy(object)])
    codes = pd.factorize(keys)[0]
    text_of = texts[np.unique(codes, return_index=True)[1]]  # each question's first row gives its shown text
    n = len(pairs)
    left, right = codes[:n], codes[n:]
    duplicate = pairs["is_duplicate"].to_numpy() == 1
    group = connected_components(left[duplicate], right[duplicate], len(text_of))

    rng = np.random.default_rng(seed)
    lenders = _lenders(group, max_group, rng)  # group -> its lending questions (groups of 2 or more)
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
    kept = [(a, b, label) for (a, b), label in implied.items() if (a, b) not in labelled]
    kept.sort()  # a stable order, whatever the dictionary's
    a, b, label = np.array(kept, dtype=np.int64).reshape(-1, 3).T  # (3, K)
    return pd.DataFrame({"question1": text_of[a], "question2": text_of[b], "is_duplicate": label})


def with_implied_pairs(pairs: pd.DataFrame, max_group: int = MAX_GROUP, seed: int = 0) -> pd.DataFrame:
    """``pairs`` followed by the pairs its labels imply (``implied_pairs``), with a fresh index."""
    extra = implied_pairs(pairs, max_group, seed)
    return pd.concat([pairs[["question1", "question2", "is_duplicate"]], extra], ignore_index=True)


def _lenders(group: np.ndarray, max_group: int, rng: np.random.Generator) -> dict[int, list[int]]:
    """Group label -> at most ``max_group`` of its questions (seeded choice), for groups of 2 or more."""
    order = np.argsort(group, kind="stable")
    sizes = np.bincount(group)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    lenders = {}
    for g in np.flatnonzero(sizes >= 2).tolist():
        members = order[starts[g]: starts[g] + sizes[g]]
        if len(members) > max_group:
            members = np.sort(rng.choice(members, max_group, replace=False))
        lenders[g] = members.tolist()
    return lenders
