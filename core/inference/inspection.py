"""Looking inside one training batch: the similarity matrix and the triplet loss, row by row, computed by the
very ``core.losses`` functions training uses.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from core.losses import closest_negative, mean_negative, similarity_matrix
from core.losses.softmax import in_batch_softmax_loss_from_scores
from core.losses.triplet import triplet_terms
from core.models.base import PairEncoder

# The worked example of the course: rows are v1 (question1), columns v2 (question2).
SEED_EXAMPLE = [
    [0.9, -0.8, 0.3, -0.5],
    [-0.8, 0.5, 0.1, -0.2],
    [0.3, 0.1, 0.7, -0.8],
    [-0.5, -0.2, -0.8, 1.0],
]


@dataclass
class BatchView:
    scores: np.ndarray  # (B, B) s(v1_i, v2_j)
    positives: np.ndarray  # (B,) the diagonal s(A, P)
    mean_negative: np.ndarray  # (B,)
    closest_negative: np.ndarray  # (B,) NaN where the row has none
    closest_column: np.ndarray  # (B,) -1 where the row has none
    l1: np.ndarray  # (B,)
    l2: np.ndarray  # (B,)
    margin: float
    triplet_loss: float  # mean over rows of L1 + L2
    triplet_cost: float  # the course's J: the sum over rows
    softmax_loss: float  # in-batch softmax cross-entropy at ``softmax_scale``
    softmax_scale: float
    question1: list[str] | None = None
    question2: list[str] | None = None

    def table(self) -> pd.DataFrame:
        """One row per anchor: the quantities of the triplet loss."""
        return pd.DataFrame({
            "question1": self.question1 or [f"v1_{i + 1}" for i in range(len(self.positives))],
            "s(A,P)": self.positives,
            "mean negative": self.mean_negative,
            "closest negative": self.closest_negative,
            "closest column": self.closest_column,
            "L1": self.l1,
            "L2": self.l2,
            "L_full": self.l1 + self.l2,
        })


def inspect_scores(scores, margin: float = 0.25, softmax_scale: float = 1.0,
                   question1=None, question2=None) -> BatchView:
    """Every per-row quantity of a square score matrix (an edited example or a real batch)."""
    s = torch.as_tensor(np.asarray(scores, dtype=np.float64))  # (B, B)
    if s.ndim != 2 or s.shape[0] != s.shape[1] or s.shape[0] < 2:
        raise ValueError(f"need a square matrix of at least 2x2, got shape {tuple(s.shape)}")
    closest, columns = closest_negative(s)
    l1, l2 = triplet_terms(s, margin)
    return BatchView(
        scores=s.numpy(),
        positives=torch.diagonal(s).numpy(),
        mean_negative=mean_negative(s).numpy(),
        closest_negative=closest.numpy(),
        closest_column=columns.numpy(),
        l1=l1.numpy(),
        l2=l2.numpy(),
        margin=margin,
        triplet_loss=float((l1 + l2).mean()),
        triplet_cost=float((l1 + l2).sum()),
        softmax_loss=float(in_batch_softmax_loss_from_scores(s, scale=softmax_scale)),
        softmax_scale=softmax_scale,
        question1=list(question1) if question1 is not None else None,
        question2=list(question2) if question2 is not None else None,
    )


def batch_scores(model: PairEncoder, question1, question2) -> np.ndarray:
    """The (B, B) similarity matrix of a batch of pairs under ``model``."""
    v1 = model.encode(list(question1), tower=0)  # (B, d)
    v2 = model.encode(list(question2), tower=1)  # (B, d)
    return similarity_matrix(v1, v2).double().numpy()


def seed_experiment(scores, rounds: int = 4, diagonal_step: float = 0.5, off_diagonal_step: float = 0.02,
                    margin: float = 0.25, softmax_scale: float = 1.0) -> pd.DataFrame:
    """The dual-encoder lesson's experiment: raise the diagonal, lower the rest (clipped to [-1, 1]), watch the
    losses fall; row 0 is the matrix as given."""
    s = np.asarray(scores, dtype=np.float64).copy()
    eye = np.eye(len(s), dtype=bool)
    rows = []
    for round_ in range(rounds + 1):
        view = inspect_scores(s, margin=margin, softmax_scale=softmax_scale)
        rows.append({"round": round_, "mean diagonal": float(s[eye].mean()),
                     "mean off-diagonal": float(s[~eye].mean()),
                     "triplet loss": view.triplet_loss, "softmax loss": view.softmax_loss})
        s = np.clip(np.where(eye, s + diagonal_step, s - off_diagonal_step), -1.0, 1.0)
    return pd.DataFrame(rows)


def pick_batch(pairs: pd.DataFrame, size: int, seed: int | None = None, start: int = 0) -> pd.DataFrame:
    """``size`` duplicate pairs, no question twice: at random with ``seed``, else in order from the ``start``-th."""
    from core.data.batching import duplicate_free_batches

    duplicates = pairs[pairs["is_duplicate"] == 1].iloc[start:].reset_index(drop=True)
    batches = duplicate_free_batches(duplicates, size, seed=seed)
    if not batches:
        raise ValueError("the dataset has too few distinct duplicate pairs for a batch")
    return duplicates.iloc[batches[0]].reset_index(drop=True)
