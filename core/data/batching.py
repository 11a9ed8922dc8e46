"""Batches of row positions for training. In-batch-negative losses take every other row of a batch as a negative,
so their batches never hold one question text twice (``duplicate_free_batches``); ``labelled_batches`` is the
plain shuffled chunking of the losses that read the labels.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pandas as pd

from core.data.reading import question_codes

# Rows are grouped by length inside windows of this many batches: wide enough that most batches
# have little padding, narrow enough that each batch still holds a random slice of the data.
BUCKET_WINDOW_BATCHES = 32


def duplicate_free_batches(
    pairs: pd.DataFrame, batch_size: int, seed: int | None, drop_last_below: int = 2,
    lengths: np.ndarray | None = None, both_classes: bool = False,
) -> list[np.ndarray]:
    """Shuffled batches of row positions (duplicates, or every row with ``both_classes``), no normalised text twice
    in one: in-batch negatives must not be the anchor's own text. A clashing row waits for the next batch, never lost;
    batches under ``drop_last_below`` rows are dropped; with ``lengths``, similar lengths share a batch."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    positions = np.arange(len(pairs)) if both_classes else np.flatnonzero(pairs["is_duplicate"].to_numpy() == 1)
    codes = question_codes(pairs.iloc[positions])[0].tolist()
    first_codes, second_codes = codes[:positions.size], codes[positions.size:]
    rng = np.random.default_rng(seed)
    order = np.arange(positions.size) if seed is None else rng.permutation(positions.size)
    if lengths is not None:
        order = length_grouped(order, np.asarray(lengths)[positions], batch_size)
    order = order.tolist()

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

    kept = [positions[np.array(rows, dtype=np.int64)] for rows in batches if len(rows) >= max(drop_last_below, 1)]
    return _shuffled(kept, rng) if lengths is not None and seed is not None else kept


def labelled_distinct_batches(pairs: pd.DataFrame, batch_size: int, seed: int | None,
                              lengths: np.ndarray | None = None) -> list[np.ndarray]:
    """Every row, both classes, in ``duplicate_free_batches`` with 1-row batches kept (their label still teaches):
    the multitask loss, whose in-batch term also takes the non-duplicates' questions as negatives."""
    return duplicate_free_batches(pairs, batch_size, seed, drop_last_below=1, lengths=lengths, both_classes=True)


def labelled_batches(pairs: pd.DataFrame, batch_size: int, seed: int,
                     lengths: np.ndarray | None = None) -> list[np.ndarray]:
    """All rows, both classes, in a seeded order, cut into batches (the last may be smaller); ``lengths`` groups
    rows of similar length as in ``duplicate_free_batches``."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(pairs.shape[0])
    if lengths is not None:
        order = length_grouped(order, np.asarray(lengths), batch_size)
    batches = [order[start : start + batch_size] for start in range(0, order.size, batch_size)]
    return _shuffled(batches, rng) if lengths is not None else batches


def length_grouped(order: np.ndarray, lengths: np.ndarray, batch_size: int) -> np.ndarray:
    """``order`` with each window of BUCKET_WINDOW_BATCHES batches sorted by ``lengths[row]``: random at a coarse
    scale, and a batch (padded to its longest row) holds questions of about one length."""
    window = max(batch_size, 1) * BUCKET_WINDOW_BATCHES
    grouped = [chunk[np.argsort(lengths[chunk], kind="stable")]
               for chunk in (order[start : start + window] for start in range(0, order.size, window))]
    return np.concatenate(grouped) if grouped else order


def _shuffled(batches: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
    return [batches[i] for i in rng.permutation(len(batches))]
