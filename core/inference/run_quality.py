"""Is a trained run any good? Its validation ROC AUC judged against chance and two baselines.

One judgement for every face: the pipeline records the baseline beside the run's metrics
(``validation_baselines``), warns when the run is worse, and the CLI's summary, the Train page and the
model picker's default all read ``judge_run`` on the same metrics, so they say the same thing.

A ROC AUC is the chance that a random duplicate pair scores above a random non-duplicate: 0.5 is a
coin flip, below it the model ranks pairs backwards. TF-IDF cosine (word overlap) is the cheapest
model of "same question": a trained run below it has learned less than counting shared words. Zero-shot
MiniLM is what the lab serves without any training: a run below it is worse than using no run at all.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

CHANCE_ROC_AUC = 0.5
# The baselines a run is compared with, by their key in metrics.
BASELINE_LABELS = {"tfidf": "TF-IDF cosine", "zero_shot": "zero-shot MiniLM"}
# What each baseline is, in words, for "so ... ranks these pairs better than this model".
BASELINE_MEANING = {"tfidf": "counting shared words", "zero_shot": "the pretrained MiniLM with no training at all"}
TFIDF_FIT_MAX_PAIRS = 50_000  # TF-IDF is fitted on at most this many training pairs (seeded): seconds at most
# Zero-shot MiniLM scores at most this many validation pairs (seeded): about 15 s on 2 CPU threads.
ZERO_SHOT_MAX_PAIRS = 2_000
WHAT_TO_TRY = ("Try more epochs or steps, another loss, the sample-demo preset or more training pairs; "
               "meanwhile zero-shot MiniLM may serve better.")


@dataclass(frozen=True)
class RunQuality:
    """How a run's validation ROC AUC compares with chance and the baselines on the same pairs."""

    roc_auc: float | None  # the run's validation ROC AUC; None when there is none (no validation, one class)
    worse_than_chance: bool  # roc_auc < 0.5
    baselines: dict = field(default_factory=dict)  # {"tfidf": its ROC AUC on the same validation pairs}
    below: tuple = ()  # the keys of the baselines the run scores below
    message: str = ""  # one plain paragraph saying so and what to try; "" for a run that is neither

    @property
    def flagged(self) -> bool:
        """Worse than chance or below a baseline: never anyone's model by default."""
        return self.worse_than_chance or bool(self.below)

    @property
    def short(self) -> str:
        """A few words for a label: "worse than chance", "below TF-IDF cosine" or ""."""
        if self.worse_than_chance:
            return "worse than chance"
        return "below " + " and ".join(BASELINE_LABELS[key] for key in self.below) if self.below else ""

    @property
    def comparison(self) -> str:
        """One sentence setting the run beside its baselines, e.g. "ROC AUC 0.918 against TF-IDF cosine 0.285
        and zero-shot MiniLM 0.896 on the same validation pairs."; "" without a ROC AUC or a baseline."""
        if self.roc_auc is None or not self.baselines:
            return ""
        than = " and ".join(f"{BASELINE_LABELS[key]} {value:.3f}" for key, value in self.baselines.items())
        return f"ROC AUC {self.roc_auc:.3f} against {than} on the same validation pairs."

    def as_dict(self) -> dict:
        """The CLI summary's ``quality`` field."""
        return {"worse_than_chance": self.worse_than_chance, "below_baselines": list(self.below),
                "baselines": dict(self.baselines), "message": self.message}


def finite_number(value) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else None: how the lab reads a metric or a
    threshold from a config.json that may be old, damaged or someone else's."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def judge_run(metrics) -> RunQuality:
    """The quality of a run from its metrics (config.json's ``metrics``: ``validation.roc_auc`` and
    ``baselines.<key>.roc_auc``). Anything missing or malformed counts as absent (a folder from someone
    else, or saved before baselines were recorded): such a run is judged against chance only.

    Example: ``{"validation": {"roc_auc": 0.23}, "baselines": {"tfidf": {"roc_auc": 0.29}}}`` is worse
    than chance and below TF-IDF.
    """
    metrics = metrics if isinstance(metrics, Mapping) else {}
    validation = metrics.get("validation")
    auc = finite_number(validation.get("roc_auc")) if isinstance(validation, Mapping) else None
    recorded = metrics.get("baselines")
    baselines = {}
    for key in BASELINE_LABELS:
        entry = recorded.get(key) if isinstance(recorded, Mapping) else None
        value = finite_number(entry.get("roc_auc")) if isinstance(entry, Mapping) else None
        if value is not None:
            baselines[key] = value
    if auc is None:
        return RunQuality(None, False, baselines)
    worse = auc < CHANCE_ROC_AUC
    below = tuple(key for key, value in baselines.items() if auc < value)
    return RunQuality(auc, worse, baselines, below, _message(auc, worse, baselines, below))


def _message(auc: float, worse: bool, baselines: dict, below: tuple) -> str:
    if not worse and not below:
        return ""
    than = " and ".join(f"{BASELINE_LABELS[key]} ({baselines[key]:.3f})" for key in below)
    if worse:
        found = (f"Worse than chance: validation ROC AUC {auc:.3f} is below 0.5, so this model ranks a duplicate "
                 "pair below a non-duplicate more often than not (a coin flip scores 0.5)")
        found += f", and below {than} on the same validation pairs." if below else "."
    else:
        found = (f"Below the baseline: validation ROC AUC {auc:.3f} is below {than} on the same validation pairs, "
                 f"so {' and '.join(BASELINE_MEANING[key] for key in below)} ranks these pairs better than this model.")
    return f"{found} {WHAT_TO_TRY}"


def validation_baselines(train: pd.DataFrame, val: pd.DataFrame, seed: int = 0) -> dict:
    """``{"tfidf": {"roc_auc", "pairs"}, "zero_shot": {"roc_auc", "pairs"}}`` on the validation pairs ``val``.

    TF-IDF's vectorizer is fitted on the training pairs' questions (as on the Compare page; a seeded sample of
    ``TFIDF_FIT_MAX_PAIRS`` at most). Zero-shot MiniLM scores a seeded sample of ``ZERO_SHOT_MAX_PAIRS`` of
    them at most, and is left out when the pretrained encoder is not installed. Empty when the validation
    pairs hold one class (no ROC AUC) or none."""
    # Imported here: judging a saved run (the model picker) needs neither scikit-learn nor the models.
    from core.inference.baselines import tfidf_scores
    from core.inference.metrics import ranking_metrics

    labels = val["is_duplicate"].to_numpy()
    if len(set(labels.tolist())) < 2:
        return {}
    fit = train.sample(n=TFIDF_FIT_MAX_PAIRS, random_state=seed) if len(train) > TFIDF_FIT_MAX_PAIRS else train
    fit_texts = fit["question1"].astype(str).tolist() + fit["question2"].astype(str).tolist()
    scores = tfidf_scores(val["question1"], val["question2"], fit_texts=fit_texts or None)
    auc = finite_number(ranking_metrics(labels, scores).get("roc_auc"))
    baselines = {} if auc is None else {"tfidf": {"roc_auc": auc, "pairs": len(val)}}
    zero_shot = zero_shot_baseline(val, seed)
    return {**baselines, **zero_shot}


def zero_shot_baseline(val: pd.DataFrame, seed: int = 0) -> dict:
    """``{"zero_shot": {"roc_auc", "pairs"}}``: the pretrained MiniLM's ROC AUC on ``val`` (a seeded sample
    of ``ZERO_SHOT_MAX_PAIRS`` at most), or ``{}`` when it has no ROC AUC or MiniLM is not installed."""
    from core.inference.evaluation import pair_scores
    from core.inference.metrics import ranking_metrics
    from core.text.pair_table import PairTable

    chosen = val.sample(n=ZERO_SHOT_MAX_PAIRS, random_state=seed) if len(val) > ZERO_SHOT_MAX_PAIRS else val
    labels = chosen["is_duplicate"].to_numpy()
    if len(set(labels.tolist())) < 2:
        return {}
    model = _zero_shot_model()
    if model is None:
        return {}
    scores = pair_scores(model, PairTable(chosen, model.tokenizer))
    auc = finite_number(ranking_metrics(labels, scores).get("roc_auc"))
    return {} if auc is None else {"zero_shot": {"roc_auc": auc, "pairs": len(chosen)}}


@functools.lru_cache(maxsize=1)
def _zero_shot_model():
    """The pretrained MiniLM on the CPU, loaded once per process (every run of a server compares with it),
    or None when its package is not installed."""
    from core.models import MiniLM

    try:
        return MiniLM.pretrained().eval()
    except (OSError, ImportError):
        return None
