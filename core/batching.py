"""Batches of row positions for training; the trainer tokenises and pads elsewhere.

In-batch-negative losses treat every other row of a batch as a negative, so a batch must never
hold the same question text twice: if question A is question1 of one pair and question2 of
another, the "negative" off the diagonal is really a duplicate. `duplicate_free_batches` enforces
that; `labelled_batches` is the plain shuffled chunking used by losses that read the labels.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pandas as pd

from core.data import normalise_questions


def duplicate_free_batches(
    pairs: pd.DataFrame, batch_size: int, seed: int | None, drop_last_below: int = 2
) -> list[np.ndarray]:
    """Shuffled batches of the duplicate rows (is_duplicate == 1) with no normalised text twice.

    Rows are taken in a seeded order; a row whose text is already in the open batch waits in a
    queue, and every new batch is seeded from that queue first, so colliding rows are delayed, not
    lost. Rows that still collide at the end (e.g. a question shared by more rows than there are
    batches) end up in batches below `drop_last_below` rows, which are dropped: a 1-row batch has
    no negatives.

    Args:
        pairs: frame with question1, question2, is_duplicate.
        batch_size: rows per batch (the last batches may be smaller).
        seed: shuffling seed; same seed, same batches. None keeps the file order.
        drop_last_below: batches with fewer rows than this are dropped.

    Returns:
        list of int64 arrays of row positions into `pairs` (use with .iloc), each (<= batch_size,).

    Example: rows ("a","b"), ("b","c"), ("d","e") with batch_size=2 never put the first two
    together, because "b" would then appear twice.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    positions = np.flatnonzero(pairs["is_duplicate"].to_numpy() == 1)
    first_codes, second_codes = _text_codes(pairs.iloc[positions])
    order = (np.arange(positions.size) if seed is None
             else np.random.default_rng(seed).permutation(positions.size)).tolist()

    batches: list[list[int]] = []
    batch: list[int] = []
    texts_in_batch: set[int] = set()
    waiting: deque[int] = deque()

    def try_add(row: int) -> bool:
        first, second = first_codes[row], second_codes[row]
        if first in texts_in_batch or second in texts_in_batch:
            return False
        texts_in_batch.add(first)
        texts_in_batch.add(second)
        batch.append(row)
        return True

    def open_batch_from_waiting() -> None:
        nonlocal batch, waiting
        batches.append(batch)
        batch = []
        texts_in_batch.clear()
        still_waiting: deque[int] = deque()
        while waiting and len(batch) < batch_size:
            row = waiting.popleft()
            if not try_add(row):
                still_waiting.append(row)  # keeps its place ahead of rows queued after it
        still_waiting.extend(waiting)
        waiting = still_waiting

    for row in order:
        while len(batch) == batch_size:
            open_batch_from_waiting()
        if not try_add(row):
            waiting.append(row)
    while waiting:  # an empty batch takes any row, so each round places at least one
        open_batch_from_waiting()
    batches.append(batch)

    return [positions[np.array(rows, dtype=np.int64)] for rows in batches if len(rows) >= max(drop_last_below, 1)]


def labelled_batches(pairs: pd.DataFrame, batch_size: int, seed: int) -> list[np.ndarray]:
    """All rows, both classes, in a seeded order, cut into batches (the last may be smaller)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    order = np.random.default_rng(seed).permutation(pairs.shape[0])
    return [order[start : start + batch_size] for start in range(0, order.size, batch_size)]


def _text_codes(pairs: pd.DataFrame) -> tuple[list[int], list[int]]:
    """Integer id per normalised question text, shared by both columns. Two (n,) lists."""
    count = pairs.shape[0]
    texts = np.concatenate([normalise_questions(pairs["question1"]), normalise_questions(pairs["question2"])])
    codes = pd.factorize(texts)[0]
    return codes[:count].tolist(), codes[count:].tolist()
