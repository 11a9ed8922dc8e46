"""Tokenised pairs and the batches the trainer consumes.

Texts are tokenised once per dataset into padded id tables, so building a batch is a numpy slice:
tokenisation never runs inside the training loop.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pandas as pd
import torch

from core.batching import duplicate_free_batches, labelled_batches
from core.tokenizers import TokenTable, Tokenizer


@dataclass
class Batch:
    first: tuple[torch.Tensor, torch.Tensor]  # question1 ids (B, T1) and mask (B, T1)
    second: tuple[torch.Tensor, torch.Tensor]  # question2 ids (B, T2) and mask (B, T2)
    labels: torch.Tensor  # (B,) float, 1 = duplicate

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def to(self, device: torch.device) -> "Batch":
        if device.type == "cpu":
            return self
        move = lambda pair: tuple(t.to(device, non_blocking=True) for t in pair)  # noqa: E731
        return Batch(move(self.first), move(self.second), self.labels.to(device, non_blocking=True))


class PairTable:
    """A pairs DataFrame tokenised once: both question columns and the labels."""

    def __init__(self, pairs: pd.DataFrame, tokenizer: Tokenizer):
        self.pairs = pairs.reset_index(drop=True)
        self.first: TokenTable = tokenizer.encode(self.pairs["question1"].tolist())
        self.second: TokenTable = tokenizer.encode(self.pairs["question2"].tolist())
        self.labels = self.pairs["is_duplicate"].to_numpy(dtype=np.float32)

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, rows: np.ndarray) -> Batch:
        return Batch(self.first.take(rows), self.second.take(rows), torch.from_numpy(self.labels[rows]))

    def index_batches(self, kind: str, batch_size: int, seed: int) -> list[np.ndarray]:
        """Row indices per batch: duplicate-free duplicate pairs, or labelled pairs of both classes."""
        if kind == "duplicates":
            return duplicate_free_batches(self.pairs, batch_size, seed)
        if kind == "labelled":
            return labelled_batches(self.pairs, batch_size, seed)
        raise ValueError(f"unknown batch kind {kind!r}")

    def batches(self, kind: str, batch_size: int, seed: int) -> Iterator[Batch]:
        for rows in self.index_batches(kind, batch_size, seed):
            yield self.batch(rows)
