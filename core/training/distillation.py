"""Augmented SBERT on our models: train a cross-encoder teacher, then distil it into a bi-encoder.

1. a cross-encoder trains on the gold labelled pairs as any run does (``core.training.pipeline``, model
   ``cross-encoder``: binary cross-entropy on its logit);
2. ``core.training.mining.candidate_pairs`` mines unlabelled pairs of near questions (silver pairs);
3. the teacher scores gold and silver pairs (``CrossEncoder.score_pairs``), and the bi-encoder
   trains on those scores with ``ScoreRegressionObjective`` through the usual ``core.training.pipeline``.

Reference: Thakur et al. (2021), "Augmented SBERT: Data Augmentation Method for Improving
Bi-Encoders for Pairwise Sentence Scoring Tasks", NAACL.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from core.losses import score_regression_loss
from core.models.cross_encoder import CrossEncoder


class ScoreRegressionObjective:
    """The trainer's objective for distillation: the pairs' labels are the teacher's scores, and each
    pair's cosine regresses on its own (``core.losses.score_regression_loss``); batches of both
    classes, no in-batch negatives."""

    batch_kind = "labelled"

    def __call__(self, v1: torch.Tensor, v2: torch.Tensor, labels: torch.Tensor,
                 negatives: torch.Tensor | None = None) -> torch.Tensor:
        return score_regression_loss(v1, v2, labels)


def teacher_labelled(teacher: CrossEncoder, pairs: pd.DataFrame, batch_size: int = 128, progress=None) -> pd.DataFrame:
    """``pairs`` (question1, question2; any labels are replaced) with ``is_duplicate`` set to the
    teacher's duplicate probability: the targets of ``ScoreRegressionObjective``."""
    table = lambda column: teacher.tokenizer.encode(pairs[column].astype(str).tolist())  # noqa: E731
    scores = teacher.score_tables(table("question1"), table("question2"), batch_size, progress)
    return pd.DataFrame({"question1": pairs["question1"].to_numpy(), "question2": pairs["question2"].to_numpy(),
                         "is_duplicate": scores.astype(np.float32)})
