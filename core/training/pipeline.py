"""From pairs to a saved, calibrated model: the one recipe the CLI, the app's jobs and the benchmarks call.

``train_run`` splits the pairs, builds the model (or starts from ``init_model`` / ``base_model``), tokenises each
split once, trains, calibrates the thresholds on the whole validation split, scores the baselines and the test
split, and saves the folder with its validation curve; a run worse than chance or a baseline is warned about.
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from core.data import (
    Splits,
    dataset_summary,
    pairs_fingerprint,
    resampling_groups,
    resolve_split_by,
    small_validation_note,
    split_problems,
    split_with_files,
)
from core.data.splitting import with_implied_pairs
from core.inference.calibration import precision_threshold
from core.inference.metrics import calibrate, evaluate_scores, metric_intervals, pair_scores
from core.inference.run_quality import RunQuality, finite_number, judge_run, validation_baselines
from core.models import MODEL_TYPES, PairEncoder, build_model, load_model
from core.notices import notice
from core.saving import OutputClaim, claim_new_run, claim_output, save_model
from core.status import CANCELLED, DONE, FAILED
from core.text.pair_table import PairTable
from core.training import distributed
from core.training.presets import TRUNCATION_NOTE_SHARE, token_lengths
from core.training.objectives import SINGLE_PROCESS_LOSSES
from core.training.specs import PRETRAINED_MODELS, RunSpec
from core.training.trainer import Trainer, TrainOutcome, Validation

MIN_USEFUL_VOCABULARY = 50  # tokens, <pad> and <unk> included: below this a run is warned it learns little


@dataclass
class RunResult:
    folder: Path | None  # None when nothing was saved (a run that ended before its first validation, unless kept)
    outcome: TrainOutcome
    thresholds: dict  # {"accuracy": t, "f1": t, "clusters": t (when reached)} calibrated on the validation split
    validation: dict  # metrics on the whole validation split at the best-accuracy threshold
    test: dict  # same on the test split (empty when test_fraction is 0)
    model: PairEncoder = field(repr=False, default=None)
    note: str = ""  # why nothing was saved although something was learned, if so
    # {"tfidf": {"roc_auc", "pairs", "verdict"}, "zero_shot": {...}} on the same validation pairs
    baselines: dict = field(default_factory=dict)
    has_val_file: bool = False  # validated on the user's own validation file (the advice then asks for no other)
    val_scores: np.ndarray | None = field(repr=False, default=None)  # (N,) the kept model's scores of the validation
    metadata: dict | None = field(repr=False, default=None)  # what config.json records, saved or not (None: discarded)

    def judged(self, bundled_sample: bool = False) -> RunQuality:
        """The validation ROC AUC against chance and the baselines (``core.inference.run_quality``), its advice for
        the data the run trained on."""
        return judge_run({"validation": self.validation, "baselines": self.baselines}, has_val_file=self.has_val_file,
                         bundled_sample=bundled_sample)


def train_run(
    spec: RunSpec,
    pairs: pd.DataFrame | Splits,
    out_dir: str | Path | None = None,
    runs_root: str | Path = "runs",
    callbacks: Sequence[object] = (),
    stop_event: threading.Event | None = None,
    save: bool = True,
    overwrite: bool = False,
    output: OutputClaim | None = None,
    val: pd.DataFrame | None = None,
    test: pd.DataFrame | None = None,
    zero_shot_scores: np.ndarray | None = None,
    silver: pd.DataFrame | None = None,
    record: dict | None = None,
) -> RunResult:
    """Train, calibrate and save one model from ``pairs`` (a frame to split, or ``Splits``) into ``out_dir`` or a new
    folder under ``runs_root``; ``silver`` pairs (labelled by a teacher) join the training split after the split;
    ``record`` joins config.json."""
    if output is None and save:
        output = claim_output(out_dir, overwrite) if out_dir else claim_new_run(runs_root, spec.model, spec.loss.name)
    with output or contextlib.nullcontext():  # released at the end, whatever happens
        return _train(spec, pairs, output if save else None, callbacks, stop_event, val, test,
                      zero_shot_scores, silver, record)


def _train(spec: RunSpec, pairs: pd.DataFrame | Splits, output: OutputClaim | None, callbacks, stop_event,
           val: pd.DataFrame | None, test: pd.DataFrame | None, zero_shot_scores: np.ndarray | None,
           silver: pd.DataFrame | None, record: dict | None) -> RunResult:
    announce(callbacks, "splitting the pairs")
    if isinstance(pairs, Splits):
        splits, all_pairs = pairs, pd.concat([pairs.train, pairs.val, pairs.test])
        spec = dataclasses.replace(spec, split_by=resolve_split_by(all_pairs, spec.split_by))
    else:
        spec, splits = split_run(spec, pairs, val, test)
        all_pairs = pairs
    if len(splits.val) or spec.val_fraction > 0:  # a run asked to validate must be able to
        problems = split_problems(splits.train["is_duplicate"], splits.val["is_duplicate"],
                                  pair_loss=spec.loss.batch_kind != "duplicates")
        if problems:
            raise ValueError(problems[0])
        small = small_validation_note(len(splits.val), from_file=val is not None)
        if small:
            notice(small)
    if spec.hard_negatives and distributed.current().enabled:
        raise ValueError("hard negatives are not supported in multi-process training yet")
    if spec.loss.name in SINGLE_PROCESS_LOSSES and distributed.current().enabled:
        raise ValueError(f"the {spec.loss.name} loss is not supported in multi-process training yet "
                         "(its batches are not gathered across processes): train it in one process")
    if spec.model == "minilm" or spec.init_model:  # a pretrained start: never kept worse than it began
        spec = dataclasses.replace(spec, train=dataclasses.replace(spec.train, validate_at_start=True))
    implied = 0
    if spec.implied_pairs:  # after the split, so no held-out label ever implies a training pair
        labelled = len(splits.train)
        splits = dataclasses.replace(splits, train=with_implied_pairs(splits.train, seed=spec.train.seed))
        implied = len(splits.train) - labelled
    if silver is not None:
        splits = dataclasses.replace(splits, train=pd.concat([splits.train, silver], ignore_index=True))
    torch.manual_seed(spec.train.seed)
    texts = pd.concat([splits.train["question1"], splits.train["question2"]]).tolist()
    pretrained = spec.model in PRETRAINED_MODELS or spec.init_model or spec.base_model
    announce(callbacks, "loading the pretrained encoder" if pretrained else "building the model")
    model, parent = start_model(spec, texts)
    if model.tokenizer.vocab_size < MIN_USEFUL_VOCABULARY:
        notice(f"the vocabulary has only {model.tokenizer.vocab_size} tokens: most words will be unknown "
               f"(min_freq {spec.min_freq}, max_vocab {spec.max_vocab}, {len(splits.train):,} training pairs)")
    announce(callbacks, f"tokenising {len(splits.train):,} training and {len(splits.val):,} validation pairs")
    _note_truncation(splits.train, model.tokenizer, spec.train.seed)
    mined = None
    if spec.mine_negatives:  # once, with the starting model: the questions it confuses before any training
        from core.device import resolve_device
        from core.training.mining import mine_hard_negatives

        announce(callbacks, "mining hard negatives among the training questions")
        mined = mine_hard_negatives(splits.train, model.to(resolve_device(spec.train.device)),
                                    progress=stage_progress(callbacks, "mining hard negatives"))
        record = {**(record or {}), "mined_negatives": len(mined)}
    train_table = PairTable(splits.train, model.tokenizer, hard_negatives=spec.hard_negatives, mined_negatives=mined)
    val_table = PairTable(splits.val, model.tokenizer) if len(splits.val) else None
    validate = None
    if val_table is not None:
        # Each validation is judged on one seeded subset at most max_val_pairs long: scoring stays cheap.
        limit = spec.train.max_val_pairs
        epoch_table = val_table if len(val_table) <= limit else val_table.subset(
            np.random.RandomState(spec.train.seed).permutation(len(val_table))[:limit])
        validate = lambda trained, progress: calibrate(trained, epoch_table, progress=progress).metrics  # noqa: E731
    trainer = Trainer(model, spec.loss, train_table, spec.train, validate=validate,
                      callbacks=callbacks, stop_event=stop_event)
    outcome = trainer.run()

    # A run that ends before its first validation is kept only when cancelled and the spec asks (keep_unvalidated).
    unvalidated = outcome.best_epoch == 0 and outcome.status != DONE
    discarded = unvalidated and (outcome.status == FAILED or not spec.keep_unvalidated)
    thresholds, validation, test, baselines, val_scores = {}, {}, {}, {}, None
    # A cancel stops the scoring after training; a cancelled run is judged only on validation (whether it is kept).
    stop = stop_event if outcome.status != CANCELLED else None
    try:
        if outcome.status == CANCELLED and outcome.best_metrics.get("best_thresholds"):
            # asked to stop: the best validation's calibration, not the whole split scored again
            thresholds, validation = outcome.best_metrics["best_thresholds"], outcome.best_metrics
        elif val_table is not None and not discarded:
            final = calibrate(model, val_table, progress=stage_progress(callbacks, "scoring validation", stop))
            thresholds, validation, val_scores = dict(final.thresholds), final.metrics, final.scores
            groups = resampling_groups(splits.val)  # pairs that share a question are one piece of evidence
            validation["intervals"] = metric_intervals(val_table.labels, final.scores, thresholds["accuracy"],
                                                       groups=groups, seed=spec.train.seed)
            # deduplication's operating point: none when no threshold reaches its precision
            clusters = precision_threshold(val_table.labels, final.scores)
            if clusters is not None:
                thresholds["clusters"] = clusters
            if outcome.status != CANCELLED:
                announce(callbacks, "finishing: scoring the baselines (TF-IDF, zero-shot MiniLM)")
                baselines = validation_baselines(splits.val, seed=spec.train.seed,
                                                 run_scores=final.scores, groups=groups, zero_shot=zero_shot_scores,
                                                 progress=stage_progress(callbacks, "scoring zero-shot MiniLM", stop))
        quality = judge_run({"validation": validation, "baselines": baselines}, has_val_file=val is not None)
        if quality.flagged:
            notice(quality.message)
        if len(splits.test) and not discarded and outcome.status != CANCELLED:
            test_table = PairTable(splits.test, model.tokenizer)
            test_scores = pair_scores(model, test_table, progress=stage_progress(callbacks, "scoring test", stop))
            test = held_out_figures(splits.test, test_scores, thresholds.get("accuracy", 0.5), spec.train.seed)
    except StageStopped:
        if outcome.status == DONE:  # cancelled while it was scored: it replaces no better model
            outcome = dataclasses.replace(outcome, status=CANCELLED,
                                          message=f"{outcome.message}, then cancelled while it was scored")
        test, baselines = {}, {}
        if not validation and outcome.best_metrics.get("best_thresholds"):  # stopped in the final calibration
            thresholds, validation = outcome.best_metrics["best_thresholds"], outcome.best_metrics
    folder, note, metadata = None, "", None
    if not discarded:
        metadata = {**_run_metadata(spec, output.target.name if output is not None else "", splits,
                                    all_pairs, outcome, thresholds, validation, test, implied, baselines, parent),
                    **(record or {})}
    if output is not None and discarded and outcome.status == CANCELLED:
        why = "this run was cancelled before its first validation (the keep-unvalidated option keeps such runs)"
        note = f"kept the model already in {output.target}: {why}" if output.existing else f"nothing saved: {why}"
    if output is not None and not discarded:
        kept = _kept_instead(output.existing, outcome.status, validation)
        if kept:
            note = f"kept the model already in {output.target}: {kept}"
        else:
            folder = output.target
            announce(callbacks, "finishing: saving the model")
            save_model(model, folder, metadata=metadata)
    return RunResult(folder, outcome, thresholds, validation, test, model, note, baselines, val is not None,
                     val_scores, metadata)


def split_run(spec: RunSpec, pairs: pd.DataFrame, val: pd.DataFrame | None = None,
              test: pd.DataFrame | None = None) -> tuple[RunSpec, Splits]:
    """(the spec as the run records its split, the splits) of ``pairs`` and the user's own ``val`` and ``test``:
    ``split_by`` resolved ("none" when nothing was held out), a given file's fraction 0."""
    spec = dataclasses.replace(spec, split_by=resolve_split_by(pairs, spec.split_by))
    splits = split_with_files(pairs, val, test, val_fraction=spec.val_fraction, test_fraction=spec.test_fraction,
                              seed=spec.train.seed, by_question=spec.split_by == "question")
    spec = dataclasses.replace(spec, val_fraction=0.0 if val is not None else spec.val_fraction,
                               test_fraction=0.0 if test is not None else spec.test_fraction)
    if not spec.val_fraction and not spec.test_fraction:
        spec = dataclasses.replace(spec, split_by="none")  # every pair of the data trained
    return spec, splits


def split_record(spec: RunSpec, splits: Splits, pairs: pd.DataFrame, implied: int = 0) -> dict:
    """config.json's ``run``, ``train_config`` and ``data``: enough to find the held-out pairs again in ``pairs``."""
    return {
        "train_config": dataclasses.asdict(spec.train),
        "run": {k: v for k, v in dataclasses.asdict(spec).items() if k not in ("loss", "train")},
        "data": {"name": spec.data_name, **dataset_summary(pairs),
                 **({"val_name": spec.val_data_name} if spec.val_data_name else {}),
                 **({"test_name": spec.test_data_name} if spec.test_data_name else {}),
                 "train_pairs": len(splits.train), "implied_pairs": implied, "val_pairs": len(splits.val),
                 "test_pairs": len(splits.test),
                 "fingerprint": pairs_fingerprint(pairs), "validation_fingerprint": pairs_fingerprint(splits.val)},
    }


def held_out_figures(pairs: pd.DataFrame, scores: np.ndarray, threshold: float, seed: int) -> dict:
    """The metrics of ``scores`` of labelled ``pairs`` at ``threshold``, with 95 % intervals that resample the pairs
    sharing a question together."""
    labels = pairs["is_duplicate"].to_numpy()
    figures = evaluate_scores(labels, scores, threshold)
    figures.pop("best_thresholds", None)  # picked on these very pairs: never a figure of them
    figures["intervals"] = metric_intervals(labels, scores, threshold, groups=resampling_groups(pairs), seed=seed)
    return figures


def _note_truncation(train: pd.DataFrame, tokenizer, seed: int) -> None:
    """One warning when max_length cuts more than TRUNCATION_NOTE_SHARE of (a sample of) the training questions."""
    lengths = token_lengths(pd.concat([train["question1"], train["question2"]], ignore_index=True), tokenizer, seed)
    share = float(np.mean(lengths > tokenizer.max_length)) if lengths.size else 0.0
    if share > TRUNCATION_NOTE_SHARE:
        notice(f"max_length {tokenizer.max_length} cuts {share:.0%} of the training questions short: raise it "
               "(or take the auto recipe, which reads it off the data) if their ends matter")


def announce(callbacks, stage: str) -> None:
    """Tell each callback with an ``on_stage(stage)`` what the run does now, outside the trainer's own events."""
    for callback in callbacks:
        if hasattr(callback, "on_stage"):
            callback.on_stage(stage)


class StageStopped(Exception):
    """Raised through a stage outside the trainer (scoring, mining) by its progress callback on a cancel."""


def stage_progress(callbacks, stage: str, stop_event: threading.Event | None = None):
    """``progress(done, total)`` for a stage outside the trainer, told to callbacks' ``on_stage_progress``; raises
    ``StageStopped`` once ``stop_event`` is set, so a cancel ends the stage within one batch."""
    listeners = [callback.on_stage_progress for callback in callbacks if hasattr(callback, "on_stage_progress")]
    if not listeners and stop_event is None:
        return None

    def progress(done: int, total: int) -> None:
        for listener in listeners:
            listener(stage, done, total)
        if stop_event is not None and stop_event.is_set():
            raise StageStopped

    return progress


def start_model(spec: RunSpec, texts: list[str]) -> tuple[PairEncoder, dict | None]:
    """The model to train and config.json's record of its parent (None for a new model): a fresh build, the BERT
    folder ``base_model``, or the saved model ``init_model`` with its own architecture and tokenizer."""
    if spec.base_model:
        from core.models.base_folder import base_minilm

        return base_minilm(spec.base_model, spec.max_length, MODEL_TYPES[spec.model]), None
    if not spec.init_model:
        return build_model(spec, texts), None
    model, config = load_model(spec.init_model)  # on the CPU, like a built model: the trainer moves it
    metrics = config.get("metrics") if isinstance(config.get("metrics"), dict) else {}
    validation = metrics.get("validation") if isinstance(metrics.get("validation"), dict) else {}
    parent = {"name": config.get("name") or Path(spec.init_model).name, "path": str(spec.init_model),
              "validation_roc_auc": finite_number(validation.get("roc_auc"))}
    return model.train(), parent


def _kept_instead(existing: dict | None, status: str, validation: dict) -> str:
    """Why a model about to be replaced stays (a run that did not finish and is not better), or ""."""
    if existing is None or status == DONE:
        return ""
    metrics = existing.get("metrics")
    old_metrics = metrics.get("validation") if isinstance(metrics, dict) else None
    old = finite_number(old_metrics.get("roc_auc") if isinstance(old_metrics, dict) else None)
    new = finite_number(validation.get("roc_auc"))
    if new is not None and (old is None or new > old):
        return ""
    shown = lambda value: "n/a" if value is None else f"{value:.4f}"  # noqa: E731
    return f"this run was {status} and is not better (validation ROC AUC {shown(new)} against {shown(old)})"


def validation_curve(validations: Sequence[Validation]) -> list[dict]:
    """``[{"step", "train_seconds", "roc_auc"}, ...]``: each finite validation ROC AUC against training time
    (validations left out, so runs that validate more or less often compare)."""
    return [{"step": v.step, "train_seconds": round(float(v.train_seconds), 3), "roc_auc": float(v.metrics["roc_auc"])}
            for v in validations if finite_number(v.metrics.get("roc_auc")) is not None]


def _run_metadata(spec: RunSpec, name: str, splits: Splits, pairs: pd.DataFrame, outcome: TrainOutcome,
                  thresholds: dict, validation: dict, test: dict, implied: int = 0, baselines: dict | None = None,
                  parent: dict | None = None) -> dict:
    """What config.json records of the run beside the model itself."""
    return {
        "name": name,  # the folder's; an unsaved run's (auto's fine-tune) is named when it is saved
        "loss": dataclasses.asdict(spec.loss),
        **split_record(spec, splits, pairs, implied),
        "thresholds": thresholds,
        # baselines: what core.inference.run_quality.judge_run compares the validation ROC AUC with.
        "metrics": {"validation": validation, "test": test, "baselines": baselines or {}},
        "training": {"status": outcome.status, "message": outcome.message, "best_epoch": outcome.best_epoch,
                     "best_step": outcome.best_step, "epochs_run": len(outcome.epochs),
                     "seconds": round(outcome.seconds, 2), "pairs_per_second": round(outcome.pairs_per_second, 1),
                     "epochs": [dataclasses.asdict(e) for e in outcome.epochs],
                     "validation_curve": validation_curve(outcome.validations)},
        **({"parent": parent} if parent else {}),
        **({"base_model": {"name": Path(spec.base_model).name, "path": spec.base_model}} if spec.base_model else {}),
    }
