"""The padded id table every tokenizer encodes to, so that batching is a numpy slice."""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch


@dataclass
class TokenTable:
    """Token ids for N texts, right-padded to a common width, so batching is a numpy slice."""

    ids: np.ndarray  # (N, L) int32, pad_id beyond each text's length
    lengths: np.ndarray  # (N,) int32, at least 1

    @classmethod
    def padded(cls, sequences: Sequence[Sequence[int]], max_length: int, pad_id: int) -> "TokenTable":
        """``sequences`` cut to ``max_length`` and right-padded with ``pad_id`` to the longest of them; an
        empty sequence keeps one ``pad_id`` position (a text still needs a position to pool over)."""
        width = max(1, min(max_length, max((len(s) for s in sequences), default=1)))
        ids = np.full((len(sequences), width), pad_id, dtype=np.int32)
        lengths = np.empty(len(sequences), dtype=np.int32)
        for row, seq in enumerate(sequences):
            seq = seq[:width] or [pad_id]
            ids[row, : len(seq)] = seq
            lengths[row] = len(seq)
        return cls(ids, lengths)

    def __len__(self) -> int:
        return len(self.lengths)

    def take(self, rows: np.ndarray | Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Ids and attention mask for ``rows``, trimmed to the longest text among them."""
        rows = np.asarray(rows)
        width = int(self.lengths[rows].max())
        ids = torch.from_numpy(self.ids[rows, :width].astype(np.int64))  # (B, T)
        mask = torch.arange(width)[None, :] < torch.from_numpy(self.lengths[rows].astype(np.int64))[:, None]
        return ids, mask  # (B, T), (B, T) bool


def check_max_length(max_length) -> int:
    """``max_length`` as an int, or ValueError unless it is a positive integer."""
    try:
        value = operator.index(max_length)
    except TypeError:
        value = 0
    if value < 1:
        raise ValueError(f"max_length must be a positive integer, got {max_length!r}")
    return value
