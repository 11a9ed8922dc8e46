"""Augmented SBERT as a recipe (``--preset augmented``; Thakur et al., 2021, NAACL): a cross-encoder teacher, trained
on the gold training pairs, labels silver pairs of the user's own questions (each with its nearest neighbours under
the starting bi-encoder, plus one random pair: the clear non-duplicates neighbours never show) at its calibrated
threshold; the bi-encoder then trains on gold + silver with the run's own loss. One time budget covers the three
stages, as ``auto``'s covers its candidates, and a cancel stops any of them.
"""
from __future__ import annotations

import dataclasses
import math
import threading
import time
from typing import Sequence

import numpy as np
import pandas as pd

from core.data.questions import corpus_questions, pair_keys
from core.data.splitting import seen_pair_mask
from core.device import resolve_device
from core.inference.candidates import candidate_pairs, distinct_questions, embed_corpus
from core.models.cross_encoder import CrossEncoder
from core.saving import OutputClaim
from core.status import CANCELLED, FAILED
from core.training.auto_choice import BUDGET_MINUTES, FINISHING_SECONDS, MIN_FINE_TUNE_SECONDS
from core.training.pipeline import (
    RunResult, StageStopped, announce, split_run, stage_progress, start_model, train_run,
)
from core.training.presets import SCORE_PAIRS_PER_SECOND
from core.training.specs import RunSpec, spec_from_options

AUGMENTED_KEY = "augmented"  # config.json's record of the recipe
NEIGHBOURS = 3  # nearest questions paired with each question
TEACHER_SHARE = 0.4  # of the training time: the teacher's; the bi-encoder, on more pairs, gets the rest
LABELLING_SHARE = 0.15  # of the budget: the teacher's scoring of silver pairs, which sizes how many there are
SILVER_MAX_PAIRS = 20_000
LABEL_CHUNK = 256  # silver pairs the teacher scores between two looks at the labelling deadline


def silver_pairs(questions: list[str], model, gold: pd.DataFrame, limit: int, seed: int = 0,
                 progress=None) -> pd.DataFrame:
    """Unlabelled pairs of ``questions`` for the teacher (question1, question2, source "neighbour" or "random"): each
    question with its ``NEIGHBOURS`` nearest under ``model`` and one random other, each unordered pair once, none a
    pair of ``gold``; a seeded sample of ``limit`` at most."""
    if len(questions) < 2:
        return pd.DataFrame({"question1": [], "question2": [], "source": []})
    near = candidate_pairs(embed_corpus(model, questions, progress), NEIGHBOURS)[["question1", "question2"]]
    rng = np.random.default_rng(seed)
    first = np.arange(len(questions))
    second = (first + rng.integers(1, len(questions), size=len(questions))) % len(questions)  # never itself
    drawn = pd.DataFrame({"question1": [questions[i] for i in first], "question2": [questions[j] for j in second]})
    frame = pd.concat([near.assign(source="neighbour"), drawn.assign(source="random")], ignore_index=True)
    frame = frame[~pd.Series(pair_keys(frame["question1"], frame["question2"])).duplicated().to_numpy()]
    frame = frame[~seen_pair_mask(gold, frame).to_numpy()]
    # A seeded random order: labelling under a deadline keeps a prefix, neighbour and random pairs alike.
    return frame.sample(n=min(limit, len(frame)), random_state=seed).reset_index(drop=True)


def silver_labels(teacher: CrossEncoder, silver: pd.DataFrame, threshold: float, progress=None,
                  deadline: float = math.inf) -> np.ndarray:
    """(n,) 1 where the teacher's score of each of the first n silver pairs reaches ``threshold`` (its calibrated
    one), else 0. Pairs are scored a chunk at a time until all are or ``deadline`` (``time.monotonic()``) has
    passed, so labelling keeps its share of the budget however fast the machine is; the pairs are in a random
    order, so the labelled ones are a fair sample of them."""
    labels = []
    for start in range(0, len(silver), LABEL_CHUNK):
        if labels and time.monotonic() >= deadline:
            break
        chunk = silver.iloc[start:start + LABEL_CHUNK]
        scores = teacher.score_pairs(chunk["question1"].astype(str), chunk["question2"].astype(str), batch_size=128)
        labels.append(scores >= threshold)
        if progress is not None:
            progress(start + len(chunk), len(silver))
    return np.concatenate(labels).astype(np.int64) if labels else np.zeros(0, dtype=np.int64)


def run_augmented(spec: RunSpec, pairs: pd.DataFrame, output: OutputClaim, val: pd.DataFrame | None = None,
                  test: pd.DataFrame | None = None, callbacks: Sequence[object] = (),
                  stop_event: threading.Event | None = None, budget_minutes: float | None = None,
                  questions: Sequence[str] | None = None, questions_name: str = "") -> RunResult:
    """The teacher, the silver pairs and ``spec``'s bi-encoder on gold + silver, saved in ``output``'s folder;
    ``questions`` (default: the training split's) are the unlabelled questions silver pairs are drawn from."""
    budget = 60.0 * (budget_minutes or BUDGET_MINUTES)
    started = time.monotonic()
    _, splits = split_run(spec, pairs, val, test)  # the split train_run makes again for the bi-encoder
    if splits.val["is_duplicate"].nunique() < 2:
        raise ValueError("the augmented recipe calibrates its teacher on validation pairs of both labels: give a "
                         "validation file or hold out a share of the pairs")
    from core.inference.metrics import scorer_scores
    from core.inference.run_quality import zero_shot_model

    baseline = zero_shot_model()  # the baseline of both runs, scored once
    zero = None if baseline is None else scorer_scores(baseline, splits.val)
    labelling = LABELLING_SHARE * budget
    training = budget - labelling - FINISHING_SECONDS - (time.monotonic() - started)
    announce(callbacks, "training the cross-encoder teacher on the gold pairs")
    teacher = train_run(_teacher_spec(spec, TEACHER_SHARE * max(training, MIN_FINE_TUNE_SECONDS)),
                        dataclasses.replace(splits, test=splits.test[:0]), save=False, callbacks=callbacks,
                        stop_event=stop_event, zero_shot_scores=zero)
    if teacher.outcome.status in (CANCELLED, FAILED) or teacher.model is None:
        return _stopped(teacher, "while the cross-encoder teacher trained")
    threshold = float(teacher.thresholds.get("accuracy", 0.5))
    since = time.monotonic()
    try:
        texts = pd.concat([splits.train["question1"], splits.train["question2"]]).tolist()
        drawn_from = distinct_questions(questions) if questions is not None else corpus_questions(splits.train)
        announce(callbacks, f"pairing {len(drawn_from):,} questions with their neighbours")
        device = resolve_device(spec.train.device)
        limit = int(min(SILVER_MAX_PAIRS, labelling * SCORE_PAIRS_PER_SECOND[device.type]))
        encoder = start_model(spec, texts)[0].to(device)  # the bi-encoder as it starts
        silver = silver_pairs(drawn_from, encoder, pd.concat([splits.train, splits.val, splits.test]), limit,
                              spec.train.seed, stage_progress(callbacks, "encoding the questions", stop_event))
        announce(callbacks, f"the teacher labels {len(silver):,} silver pairs")
        labels = silver_labels(teacher.model, silver, threshold,
                               stage_progress(callbacks, "the teacher labels the silver pairs", stop_event),
                               deadline=since + labelling)
    except StageStopped:
        return _stopped(teacher, "while the silver pairs were labelled")
    drawn, silver = len(silver), silver.iloc[:len(labels)].assign(is_duplicate=labels)
    record = {AUGMENTED_KEY: {
        "teacher": {"model": "cross-encoder", "validation_roc_auc": teacher.validation.get("roc_auc"),
                    "threshold": threshold, "seconds": round(teacher.outcome.seconds, 1),
                    "status": teacher.outcome.status},
        "questions": len(drawn_from), "questions_from": questions_name or "the training pairs",
        "silver_pairs": len(silver), "silver_pairs_drawn": drawn,
        "silver_duplicates": int(silver["is_duplicate"].sum()),
        "neighbour_pairs": int((silver["source"] == "neighbour").sum()),
        "random_pairs": int((silver["source"] == "random").sum()),
        "labelling_seconds": round(time.monotonic() - since, 1), "budget_minutes": round(budget / 60, 2)}}
    left = budget - FINISHING_SECONDS - (time.monotonic() - started)
    cap = min(spec.train.max_minutes or math.inf, max(left, MIN_FINE_TUNE_SECONDS) / 60)
    student = dataclasses.replace(spec, train=dataclasses.replace(spec.train, max_minutes=round(cap, 2)))
    announce(callbacks, f"training the bi-encoder on {len(splits.train):,} gold and {len(silver):,} silver pairs")
    return train_run(student, pairs, output=output, val=val, test=test, callbacks=callbacks, stop_event=stop_event,
                     zero_shot_scores=zero, silver=silver.drop(columns="source"), record=record)


def _teacher_spec(spec: RunSpec, seconds: float) -> RunSpec:
    """The cross-encoder on ``spec``'s split, start (the bundled MiniLM or its base folder), device and token cut."""
    train = spec.train
    return spec_from_options(model="cross-encoder", max_length=spec.max_length, val_fraction=spec.val_fraction,
                             test_fraction=spec.test_fraction, seed=train.seed, device=train.device,
                             precision=train.precision, max_val_pairs=train.max_val_pairs, data_name=spec.data_name,
                             base_model=spec.base_model or None,
                             max_minutes=round(min(train.max_minutes or math.inf, seconds / 60), 2))


def _stopped(teacher: RunResult, when: str) -> RunResult:
    """The run's result when it ends before the bi-encoder trains: nothing saved, the teacher's outcome said."""
    outcome = teacher.outcome
    status = outcome.status if outcome.status == FAILED else CANCELLED
    message = f"{'failed' if status == FAILED else 'cancelled'} {when} ({outcome.message}): the bi-encoder never trained"
    return RunResult(None, dataclasses.replace(outcome, status=status, message=message), {}, {}, {},
                     note="nothing saved: " + message)
