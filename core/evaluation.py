"""Scoring a model on labelled pairs: cosine similarity of the two towers' vectors, then metrics.

``calibrate`` is the one owner of validation scoring and threshold calibration: the trainer calls
it once per epoch (through the hook the pipeline hands it) and the pipeline once more on the whole
validation split after training.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch.nn.functional as F

from core.metrics import best_thresholds, evaluate_scores
from core.models.base import PairEncoder
from core.pair_table import PairTable


def pair_scores(model: PairEncoder, table: PairTable, batch_size: int = 256, progress=None) -> np.ndarray:
    """Cosine similarity s(v1_i, v2_i) for every pair of an already tokenised table, (N,)."""
    v1 = model.encode_table(table.first, tower=0, batch_size=batch_size, progress=progress)
    v2 = model.encode_table(table.second, tower=1, batch_size=batch_size, progress=progress)
    return F.cosine_similarity(v1, v2, dim=-1).double().numpy()


@dataclass
class Calibration:
    thresholds: dict  # {"accuracy": t, "f1": t}: the best thresholds on these pairs
    metrics: dict  # ranking metrics, and threshold metrics at the best-accuracy threshold


def calibrate(model: PairEncoder, table: PairTable, batch_size: int = 256, progress=None) -> Calibration:
    """Score ``table`` and pick the thresholds that maximise accuracy and F1 on it."""
    scores = pair_scores(model, table, batch_size, progress)
    thresholds = best_thresholds(table.labels, scores)
    return Calibration(thresholds, evaluate_scores(table.labels, scores, thresholds["accuracy"]))


def evaluate_model(model: PairEncoder, pairs: pd.DataFrame, threshold: float | None = None, batch_size: int = 256) -> dict:
    """Metrics of ``model`` on ``pairs`` (see core.metrics.evaluate_scores), plus the raw scores."""
    table = PairTable(pairs, model.tokenizer)
    scores = pair_scores(model, table, batch_size)
    return {**evaluate_scores(table.labels, scores, threshold), "scores": scores}
