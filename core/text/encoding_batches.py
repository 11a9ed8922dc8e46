"""How inference cuts texts into batches: longest first, each under a token budget. On a CPU a transformer
encodes short questions fastest in batches of about 1,024 padded tokens (activations that fit the caches;
``bench/encode_speed.py``); an LSTM's steps are sequential over the tokens, so it wants wide batches and no budget.
"""
from __future__ import annotations

import numpy as np

# Padded tokens per inference batch, per model family; a family not named here is cut by rows only.
TOKEN_BUDGETS = {"minilm": 1024, "dual-transformer": 1024}


def encoding_batches(lengths: np.ndarray, batch_size: int, max_tokens: int | None = None) -> list[np.ndarray]:
    """Row positions in batches, longest texts first, each of at most ``batch_size`` rows and, with
    ``max_tokens``, at most that many padded tokens (rows x its longest text), but at least one row.

    >>> [b.tolist() for b in encoding_batches(np.array([3, 9, 5, 1]), batch_size=3, max_tokens=10)]
    [[1], [2, 0], [3]]
    """
    lengths = np.asarray(lengths)
    order = np.argsort(-lengths, kind="stable")
    step = max(1, int(batch_size))
    batches, start = [], 0
    while start < len(order):
        rows = step
        if max_tokens:
            # The first row is the batch's widest, so it sets the padded width.
            rows = min(step, max(1, int(max_tokens) // max(1, int(lengths[order[start]]))))
        batches.append(order[start : start + rows])
        start += rows
    return batches
