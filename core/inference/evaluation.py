"""Scoring a model on labelled pairs, then metrics; ``calibrate`` owns validation scoring and thresholds."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from core.data import pairs_fingerprint
from core.inference.metrics import best_thresholds, evaluate_scores
from core.models.base import PairEncoder
from core.text.pair_table import PairTable


def pair_scores(model: PairEncoder, table: PairTable, batch_size: int = 256, progress=None) -> np.ndarray:
    """(N,) the model's score of every pair of a tokenised table; ``progress(pairs_done, pairs)``."""
    return model.score_tables(table.first, table.second, batch_size, progress)


@dataclass
class Calibration:
    thresholds: dict  # {"accuracy": t, "f1": t}: the best thresholds on these pairs
    metrics: dict  # ranking metrics, and threshold metrics at the best-accuracy threshold
    scores: np.ndarray | None = field(default=None, repr=False)  # (N,) the scores they were measured on


def calibrate(model: PairEncoder, table: PairTable, batch_size: int = 256, progress=None) -> Calibration:
    """Score ``table`` and pick the thresholds that maximise accuracy and F1 on it."""
    scores = pair_scores(model, table, batch_size, progress)
    thresholds = best_thresholds(table.labels, scores)
    return Calibration(thresholds, evaluate_scores(table.labels, scores, thresholds["accuracy"]), scores)


def scorer_scores(model, pairs: pd.DataFrame, batch_size: int = 256, progress=None) -> np.ndarray:
    """(N,) scores of ``pairs`` under any scorer: a ``PairEncoder``'s, else a vectorless scorer's ``score_pairs``."""
    if isinstance(model, PairEncoder):
        return pair_scores(model, PairTable(pairs, model.tokenizer), batch_size, progress)
    first, second = pairs["question1"].astype(str).tolist(), pairs["question2"].astype(str).tolist()
    scores = np.asarray(model.score_pairs(first, second), dtype=np.float64)
    if progress is not None:
        progress(len(scores), len(scores))
    return scores


@dataclass
class HeldOut:
    pairs: pd.DataFrame  # what to measure the model on
    description: str  # which pairs those are, and how many, for the figures' captions
    is_validation: bool  # True: exactly the pairs the model's training held out


def held_out_pairs(config: dict, pairs: pd.DataFrame) -> HeldOut:
    """The pairs to measure a model on without flattering it: its validation split made again when ``pairs`` is its
    training dataset, else all of them, said so."""
    from core.inference.honest_pairs import run_split

    split = run_split(config, pairs)
    if split is not None and len(split.val):
        return HeldOut(split.val, f"the {len(split.val):,} validation pairs this model's training held out of this "
                       "dataset", True)
    data = config.get("data") if isinstance(config.get("data"), dict) else {}
    trained_on = data.get("name")
    why = (f"it trained on {trained_on!r}, not on this dataset" if trained_on
           else "it was not trained on this dataset")
    if data.get("val_name") and data.get("fingerprint") == pairs_fingerprint(pairs):
        why = f"it trained on all of them and was validated on {data['val_name']!r}"
    return HeldOut(pairs.reset_index(drop=True), f"all {len(pairs):,} pairs of the active dataset ({why})", False)
