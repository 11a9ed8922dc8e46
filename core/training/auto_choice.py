"""``auto``'s choice, within one time budget and on the same validation pairs, among zero-shot MiniLM calibrated (the
reference: a fine-tune on a few thousand pairs often re-learns what MiniLM knew), a stacked scorer over it, and the
spec's fine-tune in the time left. Another candidate wins only when its paired bootstrap interval of the ROC AUC
difference lies above zero; the chosen one is saved with every candidate's figures in config.json's ``auto``.
"""
from __future__ import annotations

import dataclasses
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from core.data import resampling_groups
from core.inference.calibration import calibrate_on, calibration_problem
from core.inference.honest_pairs import verdict_text
from core.inference.metrics import BETTER, PairedComparison, paired_verdict, ranking_metrics, scorer_scores
from core.inference.run_quality import zero_shot_model
from core.model_names import ZERO_SHOT, ZERO_SHOT_LABEL
from core.notices import notice
from core.saving import OutputClaim, save_model
from core.status import DONE
from core.training.pipeline import RunResult, announce, held_out_figures, split_record, split_run, train_run
from core.training.specs import RunSpec
from core.training.trainer import TrainOutcome

BUDGET_MINUTES = 10.0  # the whole choice, from the first candidate to the saved model, on any device
FINISHING_SECONDS = 90.0  # kept from the fine-tune's cap for its scoring, baselines and saving
MIN_FINE_TUNE_SECONDS = 60.0  # less than this left: the fine-tune is not started (it could not validate twice)
STACK_FIT_MAX_PAIRS = 4_000  # the stacked scorer is fitted on a seeded sample of at most this many training pairs
AUTO_KEY = "auto"  # config.json's record of the candidates

ZERO_SHOT_NAME = "zero-shot MiniLM, calibrated"
STACKED_NAME = "stacked scorer on zero-shot MiniLM"
FINE_TUNE_NAME = "MiniLM fine-tuned (auto recipe)"


@dataclass
class Candidate:
    name: str
    roc_auc: float | None  # on the validation pairs
    seconds: float  # its own time: fitting or training, and scoring the validation pairs
    verdict: dict | None = None  # against zero-shot MiniLM on the same pairs (PairedComparison.as_dict()); None: itself
    note: str = ""  # why it was not measured, if so

    def as_dict(self) -> dict:
        return {"name": self.name, "roc_auc": self.roc_auc, "seconds": round(self.seconds, 1),
                "verdict": self.verdict, **({"note": self.note} if self.note else {})}


@dataclass
class AutoOutcome:
    candidates: list[Candidate]
    chosen: Candidate
    folder: Path | None  # where the chosen model was saved (None: nothing saved)
    result: RunResult | None = field(default=None, repr=False)  # the fine-tune's, when it ran
    thresholds: dict = field(default_factory=dict)  # the chosen model's
    validation: dict = field(default_factory=dict)  # the chosen model's metrics on the validation pairs
    test: dict = field(default_factory=dict)  # the chosen model's on the test pairs, if any
    seconds: float = 0.0  # from the first candidate to the saved model

    def as_dict(self) -> dict:
        return {"chosen": self.chosen.name, "candidates": [c.as_dict() for c in self.candidates]}

    def rows(self) -> list[dict]:
        """One row per candidate, as the Train page lists them."""
        return [{"candidate": c.name + (" (chosen, saved)" if c is self.chosen else ""),
                 "validation ROC AUC": c.roc_auc,
                 "vs zero-shot MiniLM": verdict_text(PairedComparison(**c.verdict)) if c.verdict else "",
                 "seconds": round(c.seconds), "note": c.note} for c in self.candidates]

    def run_result(self) -> RunResult:
        """The chosen model as a run's result, for the Train page."""
        tuned, chosen = self.result, self.chosen
        message = f"auto chose {chosen.name} of {len(self.candidates)} candidates"
        outcome = (dataclasses.replace(tuned.outcome, message=f"{tuned.outcome.message}; {message}") if tuned
                   else TrainOutcome(DONE, message, 0, {}, seconds=self.seconds))
        if tuned is not None and chosen.name == FINE_TUNE_NAME:
            baselines = tuned.baselines
        else:
            baselines = {"zero_shot": {"roc_auc": self.candidates[0].roc_auc, "pairs": (chosen.verdict or {}).get(
                "pairs"), "verdict": chosen.verdict}} if chosen.verdict else {}
        return RunResult(self.folder, outcome, self.thresholds, self.validation, self.test, None,
                         tuned.note if tuned else "", baselines, bool(tuned and tuned.has_val_file))


def choose(candidates: Sequence[Candidate]) -> Candidate:
    """The first candidate (the reference) unless another is better beyond resampling; of those, the highest."""
    better = [c for c in candidates[1:] if (c.verdict or {}).get("verdict") == BETTER and c.roc_auc is not None]
    return max(better, key=lambda c: c.roc_auc) if better else candidates[0]


def run_auto(spec: RunSpec, pairs: pd.DataFrame, output: OutputClaim, val: pd.DataFrame | None = None,
             test: pd.DataFrame | None = None, callbacks: Sequence[object] = (),
             stop_event: threading.Event | None = None, budget_minutes: float | None = None) -> AutoOutcome:
    """Measure the candidates on the validation pairs of ``spec``'s split of ``pairs`` (or ``val``) and save the
    chosen one in ``output``'s folder."""
    budget = 60.0 * (budget_minutes or BUDGET_MINUTES)
    started = time.monotonic()
    # The fine-tune's own split, made the same way (the same seed and fractions): every candidate meets its pairs.
    recorded, splits = split_run(spec, pairs, val, test)
    labels = splits.val["is_duplicate"].to_numpy()
    where = f"{spec.val_data_name} (--val)" if val is not None else f"{spec.data_name or 'the data'}'s validation split"
    problem = calibration_problem(labels, where)
    encoder = None if problem else zero_shot_model()
    if problem or encoder is None:
        # Too few validation pairs to judge a candidate on (or no MiniLM to judge against): the fine-tune alone.
        notice(f"auto trains the fine-tune alone, choosing nothing: {problem or 'zero-shot MiniLM is not installed'}")
        since = time.monotonic()
        result = train_run(spec, pairs, output=output, val=val, test=test, callbacks=callbacks, stop_event=stop_event)
        alone = Candidate(FINE_TUNE_NAME, (result.validation or {}).get("roc_auc"), time.monotonic() - since,
                          note="the only candidate: " + (problem or "zero-shot MiniLM is not installed"))
        return AutoOutcome([alone], alone, result.folder, result, result.thresholds, result.validation, result.test,
                           time.monotonic() - since)
    groups = resampling_groups(splits.val)
    seed = spec.train.seed

    def judged(name: str, scores: np.ndarray, since: float) -> Candidate:
        """The candidate's validation ROC AUC and its paired verdict against zero-shot MiniLM's scores."""
        verdict = paired_verdict(labels, scores, zero_scores, groups=groups, seed=seed)
        return Candidate(name, float(ranking_metrics(labels, scores)["roc_auc"]), time.monotonic() - since,
                         None if verdict is None else verdict.as_dict())

    announce(callbacks, f"scoring {len(splits.val):,} validation pairs with {ZERO_SHOT_LABEL}")
    since = time.monotonic()
    zero_scores = scorer_scores(encoder, splits.val)
    # the reference: judged against nothing
    candidates = [Candidate(ZERO_SHOT_NAME, float(ranking_metrics(labels, zero_scores)["roc_auc"]),
                            time.monotonic() - since)]
    scorers = {ZERO_SHOT_NAME: (encoder, zero_scores)}

    announce(callbacks, "fitting a stacked scorer on the training pairs")
    since = time.monotonic()
    fit = splits.train.sample(n=min(len(splits.train), STACK_FIT_MAX_PAIRS), random_state=seed).sort_index()
    why_not = calibration_problem(fit["is_duplicate"].to_numpy(), "the training pairs")
    if why_not:
        candidates.append(Candidate(STACKED_NAME, None, 0.0, note=why_not))
    else:
        from core.inference.stacked_scorer import fit_stacked

        stacked = fit_stacked(encoder, fit, scorer_scores(encoder, fit))
        first, second = splits.val["question1"].astype(str).tolist(), splits.val["question2"].astype(str).tolist()
        stacked_scores = stacked.probabilities(stacked.features(first, second, encoder_cosine=zero_scores))
        candidates.append(judged(STACKED_NAME, stacked_scores, since))
        scorers[STACKED_NAME] = (stacked, stacked_scores)

    result = None
    left = budget - (time.monotonic() - started) - FINISHING_SECONDS
    if stop_event is not None and stop_event.is_set():
        candidates.append(Candidate(FINE_TUNE_NAME, None, 0.0, note="not started: cancelled"))
    elif left < MIN_FINE_TUNE_SECONDS:
        candidates.append(Candidate(FINE_TUNE_NAME, None, 0.0, note=f"not started: {max(left, 0):.0f} s of the budget "
                                                                    "left"))
    else:
        cap = min(spec.train.max_minutes or math.inf, left / 60)
        tuned = dataclasses.replace(spec, train=dataclasses.replace(spec.train, max_minutes=round(cap, 2)))
        since = time.monotonic()
        result = train_run(tuned, pairs, save=False, val=val, test=test, callbacks=callbacks, stop_event=stop_event,
                           zero_shot_scores=zero_scores)  # the baseline scored once
        if result.val_scores is None or len(result.val_scores) != len(labels):
            candidates.append(Candidate(FINE_TUNE_NAME, None, time.monotonic() - since,
                                        note=f"not measured: {result.outcome.status} ({result.outcome.message})"))
        else:
            candidates.append(judged(FINE_TUNE_NAME, result.val_scores, since))

    chosen = choose(candidates)
    announce(callbacks, f"finishing: saving {chosen.name}")
    outcome = AutoOutcome(candidates, chosen, output.target, result)
    outcome.seconds = time.monotonic() - started
    record = {AUTO_KEY: {**outcome.as_dict(), "budget_minutes": round(budget / 60, 2),
                         "seconds": round(outcome.seconds, 1)}}
    if chosen.name == FINE_TUNE_NAME:
        outcome.thresholds, outcome.validation, outcome.test = result.thresholds, result.validation, result.test
        save_model(result.model, output.target, metadata={**result.metadata, "name": output.target.name, **record})
        return outcome
    scorer, scores = scorers[chosen.name]
    calibrated = calibrate_on(labels, scores, where)
    outcome.thresholds = dict(calibrated.thresholds)
    outcome.validation = held_out_figures(splits.val, scores, calibrated.thresholds["accuracy"], seed)
    if len(splits.test):
        outcome.test = held_out_figures(splits.test, scorer_scores(scorer, splits.test),
                                        calibrated.thresholds["accuracy"], seed)
    # The copy records the split as a run does, so Compare and Verdict find the pairs it never saw.
    record = {**split_record(recorded, splits, pairs), "metrics": {"validation": outcome.validation,
                                                                   "test": outcome.test}, **record}
    # The chosen scorer over the packaged MiniLM as a calibrated copy (a stacked scorer's TF-IDF fit beside it).
    from core.inference.stacked_scorer import stacked_config
    from core.models.registry import parent_record, zero_shot_config
    from core.saving.model_folder import save_calibrated

    base, tfidf = zero_shot_config(), None
    if chosen.name == STACKED_NAME:
        fitted_on = {"data": spec.data_name or "data", "pairs": len(fit), "thresholds_on": where}
        base, tfidf = {**base, **stacked_config(scorer, fitted_on, ZERO_SHOT_LABEL)}, scorer.tfidf.to_dict()
    save_calibrated(output.target, base, parent_record(ZERO_SHOT, ZERO_SHOT_LABEL), calibrated, tfidf, record)
    if chosen.name == ZERO_SHOT_NAME:
        notice(f"no candidate was better than {ZERO_SHOT_LABEL} beyond resampling on {len(labels):,} validation pairs: "
               f"{ZERO_SHOT_LABEL} itself, calibrated on them, is the model to use (saved as a calibrated copy)")
    return outcome
