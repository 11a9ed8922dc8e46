"""A stacked scorer (``calibrate --stacked``): a logistic regression on an encoder's cosine and three lexical features
(``FEATURES``: TF-IDF cosine, word-set Jaccard, length ratio), standardised on the fit pairs. Its folder is a
calibrated copy of the encoder with the TF-IDF fit and the regression in JSON; it scores pairs and has no vectors.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Sequence

import numpy as np

from core.inference.tfidf_scorer import TfidfScorer, folder_of_type, saved_fit
from core.model_names import STACKED, TFIDF

FEATURES = ("encoder_cosine", "tfidf_cosine", "word_jaccard", "length_ratio")
STACKED_KEY = "stacked"  # config.json's record of the fit
MIN_SCALE = 1e-4  # a feature's spread over the fit pairs below this is rounding, not signal
HELD_OUT_SHARE = 0.2  # of the training pairs, kept from the fit to pick thresholds on when no --val is given
_WORD = re.compile(r"\w+")


def lexical_features(first: Sequence[str], second: Sequence[str]) -> np.ndarray:
    """(N, 2): each pair's word-set Jaccard (|shared| / |either|) and the shorter question's length over the longer
    one's, both 1 for two questions without words; words are runs of letters, digits and underscores, lower-cased."""
    rows = []
    for a, b in zip(first, second):
        a, b = _WORD.findall(str(a).lower()), _WORD.findall(str(b).lower())
        either, shorter, longer = set(a) | set(b), min(len(a), len(b)), max(len(a), len(b))
        rows.append((len(set(a) & set(b)) / len(either) if either else 1.0, shorter / longer if longer else 1.0))
    return np.array(rows, dtype=np.float64).reshape(-1, 2)


class StackedScorer:
    """Scores pairs by the logistic probability of ``FEATURES`` (standardised by ``mean`` and ``scale``)."""

    model_type = STACKED

    def __init__(self, encoder, tfidf: TfidfScorer, mean, scale, coefficients, intercept: float):
        self.encoder = encoder  # anything with score_pairs: its cosine is the first feature
        self.tfidf = tfidf
        self.mean, self.scale = np.asarray(mean, dtype=np.float64), np.asarray(scale, dtype=np.float64)
        self.coefficients = np.asarray(coefficients, dtype=np.float64)
        self.intercept = float(intercept)

    def features(self, first: Sequence[str], second: Sequence[str], batch_size: int = 256,
                 encoder_cosine=None) -> np.ndarray:
        """(N, 4) raw ``FEATURES`` of each (first[i], second[i]); ``encoder_cosine`` when already computed."""
        first, second = [str(t) for t in first], [str(t) for t in second]
        if encoder_cosine is None:
            encoder_cosine = self.encoder.score_pairs(first, second, batch_size=batch_size)
        return np.column_stack([np.asarray(encoder_cosine, dtype=np.float64),
                                self.tfidf.score_pairs(first, second), lexical_features(first, second)])

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """The logistic probability of each row of raw ``features``."""
        logits = ((np.asarray(features, dtype=np.float64) - self.mean) / self.scale) @ self.coefficients
        return 1.0 / (1.0 + np.exp(-(logits + self.intercept)))

    def score_pairs(self, first: Sequence[str], second: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """The probability that each (first[i], second[i]) is a duplicate, (N,) float64."""
        return self.probabilities(self.features(first, second, batch_size))

    def record(self) -> dict:
        """What config.json's ``stacked`` holds of the fit (the TF-IDF fit goes to its own file)."""
        return {"features": list(FEATURES), "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                "coefficients": self.coefficients.tolist(), "intercept": self.intercept}


def fit_stacked(encoder, pairs, encoder_cosine) -> StackedScorer:
    """A ``StackedScorer`` over ``encoder`` fitted on the labelled ``pairs`` (``encoder_cosine``: their cosines)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    first, second = pairs["question1"].astype(str).tolist(), pairs["question2"].astype(str).tolist()
    tfidf = TfidfScorer.fit(first + second)
    features = StackedScorer(encoder, tfidf, np.zeros(4), np.ones(4), np.zeros(4), 0.0).features(
        first, second, encoder_cosine=encoder_cosine)
    scaler = StandardScaler().fit(features)
    # A feature that barely varies over the fit pairs (an encoder whose cosines are all 1 but for float32 rounding)
    # is taken as constant, as StandardScaler takes one of no variance: scaled up, the rounding would decide scores.
    scaler.scale_ = np.where(scaler.scale_ < MIN_SCALE, 1.0, scaler.scale_)
    logistic = LogisticRegression().fit(scaler.transform(features), pairs["is_duplicate"].astype(int).to_numpy())
    return StackedScorer(encoder, tfidf, scaler.mean_, scaler.scale_, logistic.coef_[0], logistic.intercept_[0])


def split_for_thresholds(pairs):
    """(fit, held-out) of ``pairs``: a seeded ``HELD_OUT_SHARE`` of the rows held out, the rest to fit on."""
    order = np.random.default_rng(0).permutation(len(pairs))
    held = max(1, round(len(pairs) * HELD_OUT_SHARE))
    return (pairs.iloc[np.sort(order[held:])].reset_index(drop=True),
            pairs.iloc[np.sort(order[:held])].reset_index(drop=True))


def is_stacked(source: str | Path) -> bool:
    """Whether a ``--model`` value is a folder holding a stacked scorer."""
    return folder_of_type(source, STACKED)


def _numbers(record: Mapping, key: str, size: int, where: str) -> list[float]:
    values = record.get(key)
    if not (isinstance(values, list) and len(values) == size and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)):
        raise ValueError(f"{where}.{key} must be {size} finite numbers, got {values!r:.80}")
    return [float(v) for v in values]


def load_stacked(source: str | Path, device: str = "cpu") -> tuple[StackedScorer, dict]:
    """(scorer, config) of the stacked folder ``source``, its encoder loaded on ``device`` once its files are checked
    to be those it was fitted over; ModelLoadError, one line, else."""
    from core.models.registry import load_model, parent_of
    from core.saving import ModelLoadError, read_config
    from core.saving.model_folder import CALIBRATED_FROM

    folder = Path(source)
    config = read_config(folder)
    if config.get("model_type") != STACKED or CALIBRATED_FROM not in config:
        raise ModelLoadError(f"{folder} is not a stacked scorer")
    where = f"{folder}/config.json: {STACKED_KEY}"
    record = config.get(STACKED_KEY)
    try:
        if not isinstance(record, Mapping) or record.get("features") != list(FEATURES):
            raise ValueError(f"{where} must name the features {', '.join(FEATURES)}")
        mean, scale, coefficients = (_numbers(record, key, len(FEATURES), where)
                                     for key in ("mean", "scale", "coefficients"))
        intercept = _numbers({"intercept": [record.get("intercept")]}, "intercept", 1, where)[0]
        if min(scale) <= 0:
            raise ValueError(f"{where}.scale must be positive")
    except ValueError as error:
        raise ModelLoadError(str(error)) from None
    tfidf = saved_fit(folder, "calibrate --stacked again")
    parent = parent_of(folder, config)
    if parent == TFIDF:
        raise ModelLoadError(f"{folder}: a stacked scorer stands over an encoder, not the TF-IDF baseline")
    encoder = load_model(parent, device)[0]
    return StackedScorer(encoder, tfidf, mean, scale, coefficients, intercept), config


def stack_and_calibrate(encoder, train, data: str, val=None, val_data: str = "", progress=None):
    """(scorer, ``FileCalibration``, fit record) of a ``StackedScorer`` over ``encoder`` fitted on ``train`` (the file
    named ``data``), its thresholds picked on ``val`` when given, else on the seeded share of ``train`` the fit did
    not see (``stacking_problem`` says first whether the pairs can do it)."""
    from core.inference.calibration import calibrate_on
    from core.inference.metrics import scorer_scores

    fit, held = (train, val) if val is not None else split_for_thresholds(train)
    scorer = fit_stacked(encoder, fit, scorer_scores(encoder, fit, progress=progress))
    where = val_data if val is not None else f"{data} (held out)"
    calibrated = calibrate_on(held["is_duplicate"].to_numpy(), scorer_scores(scorer, held), where)
    thresholds_on = (f"{val_data} (--val, {len(held):,} pairs)" if val is not None else
                     f"a seeded {HELD_OUT_SHARE:.0%} of {data} ({len(held):,} pairs, seed 0) that the fit did not see")
    return scorer, calibrated, {"data": data, "pairs": len(fit), "thresholds_on": thresholds_on}


def stacking_problem(train, data: str, val=None, val_data: str = "") -> str:
    """Why these pairs cannot fit a stacked scorer and pick its thresholds (``calibration_problem`` of each), or ""."""
    from core.inference.calibration import calibration_problem

    fit, held = (train, val) if val is not None else split_for_thresholds(train)
    problem = calibration_problem(fit["is_duplicate"].to_numpy(), data)
    if problem or val is not None:
        return problem or calibration_problem(held["is_duplicate"].to_numpy(), val_data)
    problem = calibration_problem(held["is_duplicate"].to_numpy(), f"{data}'s held-out {HELD_OUT_SHARE:.0%}")
    return problem and problem + "; give more pairs or --val FILE"


def stacked_config(scorer: StackedScorer, fit: dict, parent_name: str) -> dict:
    """The fields of a stacked folder's config.json beyond a calibrated copy's (``save_calibrated``'s base)."""
    card = {"what": f"logistic regression on {parent_name}'s cosine, TF-IDF cosine, word overlap and length ratio, "
                    f"fitted on {fit['pairs']:,} pairs of {fit['data']}",
            "cost_per_pair": f"{parent_name}'s encoding of both questions plus microseconds (TF-IDF, two word sets, "
                             "four multiplications)"}
    return {"model_type": STACKED, STACKED_KEY: {**scorer.record(), "fit": fit}, "model_card": card}
