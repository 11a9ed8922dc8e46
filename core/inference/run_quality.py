"""Is a trained run any good? Its validation ROC AUC judged against chance, TF-IDF cosine and zero-shot MiniLM,
recorded by the pipeline (``validation_baselines``) and read by the CLI, the Train page and the model picker
(``judge_run``), so they say the same thing.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from core.inference.metrics import BETTER, NO_DIFFERENCE, WORSE, paired_verdict, scorer_scores

CHANCE_ROC_AUC = 0.5
# The baselines a run is compared with, by their key in metrics.
BASELINE_LABELS = {"tfidf": "TF-IDF cosine", "zero_shot": "zero-shot MiniLM"}
# What each baseline is, in words, for "so ... ranks these pairs better than this model".
BASELINE_MEANING = {"tfidf": "counting shared words (TF-IDF fitted on these pairs' own questions)", "zero_shot": "the pretrained MiniLM with no training at all"}
# Zero-shot MiniLM scores at most this many validation pairs (seeded), so a run on a CPU waits little for it.
ZERO_SHOT_MAX_PAIRS = 2_000


def _with_interval(verdict: dict) -> str:
    """"difference +0.012, 95 % interval +0.003 to +0.021": how a paired verdict is always shown."""
    low, high = verdict["interval"]
    return f"difference {verdict['difference']:+.3f}, 95 % interval {low:+.3f} to {high:+.3f}"


@dataclass(frozen=True)
class RunQuality:
    """How a run's validation ROC AUC compares with chance and the baselines on the same pairs."""

    roc_auc: float | None  # the run's validation ROC AUC; None when there is none (no validation, one class)
    worse_than_chance: bool  # roc_auc < 0.5
    baselines: dict = field(default_factory=dict)  # {"tfidf": its ROC AUC on the same validation pairs}
    below: tuple = ()  # the keys of the baselines the run is worse than (measurably, where a verdict is recorded)
    message: str = ""  # one plain paragraph saying so and what to try; "" for a run better than every baseline
    # The keys of the baselines the run cannot be told apart from: a paired bootstrap's interval of the difference
    # holds zero. Such a run is no one's default model: nothing shows it beats what the lab has without it.
    not_better: tuple = ()
    verdicts: dict = field(default_factory=dict)  # {"zero_shot": PairedComparison.as_dict(), ...} where recorded

    @property
    def flagged(self) -> bool:
        """Worse than chance, or not measurably better than a baseline: never the default model."""
        return self.worse_than_chance or bool(self.below) or bool(self.not_better)

    @property
    def short(self) -> str:
        """A few words for a label: "worse than chance", "below TF-IDF cosine", ... or ""."""
        if self.worse_than_chance:
            return "worse than chance"
        if self.below:
            return "below " + " and ".join(BASELINE_LABELS[key] for key in self.below)
        if self.not_better:
            return "no measurable difference from " + " and ".join(BASELINE_LABELS[key] for key in self.not_better)
        return ""

    @property
    def comparison(self) -> str:
        """One sentence setting the run beside its baselines; "" without a ROC AUC or a baseline."""
        if self.roc_auc is None or not self.baselines:
            return ""
        than = " and ".join(f"{BASELINE_LABELS[key]} {value:.3f}" for key, value in self.baselines.items())
        better = [key for key, verdict in self.verdicts.items() if verdict["verdict"] == BETTER]
        each = " and ".join(f"{BASELINE_LABELS[key]} ({_with_interval(self.verdicts[key])})" for key in better)
        measured = (f" Better than {each} at 95 % (paired bootstrap over {self.verdicts[better[0]]['pairs']:,} "
                    "pairs).") if better and not self.flagged else ""
        return f"ROC AUC {self.roc_auc:.3f} against {than} on the same validation pairs.{measured}"

    def as_dict(self) -> dict:
        """The CLI summary's ``quality`` field."""
        return {"worse_than_chance": self.worse_than_chance, "below_baselines": list(self.below),
                "no_measurable_difference": list(self.not_better), "baselines": dict(self.baselines),
                "verdicts": dict(self.verdicts), "message": self.message}


def finite_number(value) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else None: a config.json's figure, read."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _recorded_verdict(entry: Mapping) -> dict | None:
    """A baseline entry's paired verdict when it is well formed, else None."""
    verdict = entry.get("verdict")
    if not isinstance(verdict, Mapping) or verdict.get("verdict") not in (BETTER, NO_DIFFERENCE, WORSE):
        return None
    interval = verdict.get("interval")
    bounds = [finite_number(v) for v in interval] if isinstance(interval, (list, tuple)) and len(interval) == 2 else []
    difference, pairs = finite_number(verdict.get("difference")), finite_number(verdict.get("pairs"))
    if len(bounds) != 2 or None in bounds or difference is None or pairs is None:
        return None
    return {"verdict": verdict["verdict"], "difference": difference, "interval": bounds, "pairs": int(pairs)}


def judge_run(metrics, *, has_val_file: bool = False, bundled_sample: bool = False) -> RunQuality:
    """The quality of a run from config.json's ``metrics`` (``validation.roc_auc``, ``baselines.<key>.roc_auc`` and
    its paired ``verdict``); anything missing or malformed counts as absent, a baseline without a verdict is judged
    by the two ROC AUCs alone. ``has_val_file`` and ``bundled_sample`` choose the advice."""
    metrics = metrics if isinstance(metrics, Mapping) else {}
    validation = metrics.get("validation")
    auc = finite_number(validation.get("roc_auc")) if isinstance(validation, Mapping) else None
    recorded = metrics.get("baselines")
    baselines, verdicts = {}, {}
    for key in BASELINE_LABELS:
        entry = recorded.get(key) if isinstance(recorded, Mapping) else None
        value = finite_number(entry.get("roc_auc")) if isinstance(entry, Mapping) else None
        if value is not None:
            baselines[key] = value
            verdict = _recorded_verdict(entry)
            if verdict is not None:
                verdicts[key] = verdict
    if auc is None:
        return RunQuality(None, False, baselines, verdicts=verdicts)
    worse = auc < CHANCE_ROC_AUC
    below = tuple(key for key, value in baselines.items()
                  if (verdicts[key]["verdict"] == WORSE if key in verdicts else auc < value))
    not_better = tuple(key for key in verdicts if verdicts[key]["verdict"] == NO_DIFFERENCE)
    message = _message(auc, worse, baselines, below, not_better, verdicts, has_val_file, bundled_sample)
    return RunQuality(auc, worse, baselines, below, message, not_better, verdicts)


def _message(auc: float, worse: bool, baselines: dict, below: tuple, not_better: tuple, verdicts: dict,
             has_val_file: bool = False, bundled_sample: bool = False) -> str:
    if not worse and not below and not not_better:
        return ""
    than = " and ".join(f"{BASELINE_LABELS[key]} ({baselines[key]:.3f}"
                        + (f"; {_with_interval(verdicts[key])})" if key in verdicts else ")") for key in below)
    if worse:
        found = (f"Worse than chance: validation ROC AUC {auc:.3f} is below 0.5, so this model ranks a duplicate "
                 "pair below a non-duplicate more often than not (a coin flip scores 0.5)")
        found += f", and below {than} on the same validation pairs." if below else "."
    elif below:
        found = (f"Below the baseline: validation ROC AUC {auc:.3f} is below {than} on the same validation pairs, "
                 f"so {' and '.join(BASELINE_MEANING[key] for key in below)} ranks these pairs better than this model.")
    else:
        parts = [f"{BASELINE_LABELS[key]} ({baselines[key]:.3f}; {_with_interval(verdicts[key])})" for key in not_better]
        pairs = verdicts[not_better[0]]["pairs"]
        found = (f"No measurable difference from {' and '.join(parts)} on {pairs:,} validation pairs: validation "
                 f"ROC AUC {auc:.3f}, but resampling these pairs cannot tell the two apart, so this run is not made "
                 "the default model. More validation pairs" + ("" if has_val_file else " (a validation file)")
                 + " would tell them apart.")
    tries = ["the auto preset (its settings read off your data)",
             *([] if has_val_file else ["a validation file (more held-out pairs to judge by)"]), "more labelled pairs"]
    advice = ("the sample-demo preset (made for this sample), more epochs or steps, or more training pairs"
              if bundled_sample else f"{', '.join(tries[:-1])} or {tries[-1]}")
    return f"{found} Try {advice}; meanwhile zero-shot MiniLM may serve better."


def validation_baselines(val: pd.DataFrame, seed: int = 0, run_scores=None, groups=None, progress=None,
                         zero_shot=None) -> dict:
    """``{"tfidf": {"roc_auc", "pairs", "verdict"}, "zero_shot": {...}}`` on ``val`` (zero-shot MiniLM on a seeded
    sample unless its ``zero_shot`` scores are given; left out when not installed); ``verdict`` only with
    ``run_scores``. Empty for one class or none."""
    # Imported here: judging a saved run (the model picker) needs neither scikit-learn nor the models.
    from core.data import seeded_sample
    from core.inference.metrics import ranking_metrics
    from core.inference.tfidf_scorer import TfidfScorer

    labels = val["is_duplicate"].to_numpy()
    if len(set(labels.tolist())) < 2:
        return {}
    rows = seeded_sample(len(val), ZERO_SHOT_MAX_PAIRS, seed)
    scored = {"tfidf": (np.arange(len(val)), TfidfScorer().score_pairs(val["question1"], val["question2"])),
              "zero_shot": (rows, _zero_shot_scores(val.iloc[rows], progress) if zero_shot is None
                            else np.asarray(zero_shot)[rows])}
    baselines = {}
    for key, (picked, scores) in scored.items():
        auc = None if scores is None else finite_number(ranking_metrics(labels[picked], scores)["roc_auc"])
        if auc is None:
            continue
        baselines[key] = {"roc_auc": auc, "pairs": len(picked)}
        if run_scores is not None:
            comparison = paired_verdict(labels[picked], np.asarray(run_scores)[picked], scores,
                                        groups=None if groups is None else np.asarray(groups)[picked], seed=seed)
            if comparison is not None:
                baselines[key]["verdict"] = comparison.as_dict()
    return baselines


def _zero_shot_scores(val: pd.DataFrame, progress=None):
    """(N,) zero-shot MiniLM's scores of ``val``, or None when ``val`` holds one class or MiniLM is not installed."""
    model = zero_shot_model() if val["is_duplicate"].nunique() == 2 else None
    return None if model is None else scorer_scores(model, val, progress=progress)


@functools.lru_cache(maxsize=1)
def zero_shot_model():
    """The pretrained MiniLM on the CPU, loaded once per process, or None when it is not installed."""
    from core.models import MiniLM

    try:
        return MiniLM.pretrained().eval()
    except (OSError, ImportError):
        return None
