"""Augmented SBERT on our models: train a cross-encoder teacher, then distil it into a bi-encoder.

1. ``fit_cross_encoder`` fine-tunes a ``CrossEncoder`` on the gold labelled pairs (binary
   cross-entropy on its logit);
2. ``core.training.mining.candidate_pairs`` mines unlabelled pairs of near questions (silver pairs);
3. the teacher scores gold and silver pairs (``CrossEncoder.score_pairs``), and the bi-encoder
   trains on those scores with ``ScoreRegressionObjective`` through the usual ``core.training.pipeline``.

Reference: Thakur et al. (2021), "Augmented SBERT: Data Augmentation Method for Improving
Bi-Encoders for Pairwise Sentence Scoring Tasks", NAACL.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from core.data.batching import labelled_batches
from core.losses import score_regression_loss
from core.models.cross_encoder import CrossEncoder
from core.training.trainer import warmup_then_linear_decay


@dataclass
class CrossEncoderTraining:
    epochs: int = 1  # passes over the labelled pairs
    batch_size: int = 32  # pairs per step
    lr: float = 2e-5  # AdamW peak learning rate
    warmup_ratio: float = 0.1  # share of the steps warming up linearly; then linear decay to 0
    grad_clip: float = 1.0  # max gradient norm; 0 disables clipping
    seed: int = 0  # head weights, batch order, dropout


@dataclass
class CrossEncoderFit:
    steps: int
    seconds: float  # time in training steps
    pairs_seen: int
    pairs_per_second: float
    losses: list[float]  # the loss of every step, in order


def fit_cross_encoder(model: CrossEncoder, pairs: pd.DataFrame, config: CrossEncoderTraining = CrossEncoderTraining(),
                      callbacks: Sequence[object] = (), stop_event: threading.Event | None = None) -> CrossEncoderFit:
    """Fine-tune ``model`` on ``pairs`` (question1, question2, is_duplicate) with binary cross-entropy.

    Batches hold pairs of similar length (``core.data.batching.labelled_batches``). After each step every
    callback's ``on_batch_end(state)`` is called with this function's ``CrossEncoderFit`` so far plus
    ``step`` and ``total_steps``; ``stop_event`` ends the run after the current step.
    """
    torch.manual_seed(config.seed)
    first, second = pairs["question1"].astype(str).tolist(), pairs["question2"].astype(str).tolist()
    labels = torch.tensor(pairs["is_duplicate"].to_numpy(dtype=np.float32))
    lengths = np.array([len(a) + len(b) for a, b in zip(first, second)])  # characters: a cheap stand-in for tokens
    epochs = [labelled_batches(pairs, config.batch_size, config.seed + epoch, lengths=lengths)
              for epoch in range(config.epochs)]
    total = sum(len(batches) for batches in epochs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    schedule = warmup_then_linear_decay(optimizer, total, config.warmup_ratio)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    fit = CrossEncoderFit(0, 0.0, 0, 0.0, [])
    model.train()
    for batches in epochs:
        for rows in batches:
            if stop_event is not None and stop_event.is_set():
                return fit
            started = time.perf_counter()
            logits = model(*model.tokenize([first[i] for i in rows], [second[i] for i in rows]))  # (b,)
            loss = loss_fn(logits, labels[rows].to(logits.device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            schedule.step()
            fit.steps += 1
            fit.seconds += time.perf_counter() - started
            fit.losses.append(float(loss.detach()))
            fit.pairs_seen += len(rows)
            fit.pairs_per_second = fit.pairs_seen / fit.seconds
            for callback in callbacks:
                hook = getattr(callback, "on_batch_end", None)
                if hook is not None:
                    hook({"step": fit.steps, "total_steps": total, "loss": fit.losses[-1]})
    model.eval()
    return fit


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
    scores = teacher.score_pairs(pairs["question1"].tolist(), pairs["question2"].tolist(), batch_size, progress)
    return pd.DataFrame({"question1": pairs["question1"].to_numpy(), "question2": pairs["question2"].to_numpy(),
                         "is_duplicate": scores.astype(np.float32)})
