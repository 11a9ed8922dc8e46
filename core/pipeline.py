"""From a pairs file to a saved, calibrated model: the one recipe the CLI and the app both call.

``train_run(spec)`` loads and splits the data, builds the tokenizer and the model, trains with the
chosen loss, calibrates thresholds on the validation split, and saves the folder.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from core import distributed
from core.data import Splits, dataset_summary, split_pairs
from core.evaluation import pair_scores
from core.metrics import best_thresholds, evaluate_scores
from core.models import (
    DualEncoder, DualEncoderConfig, MiniLM, PairEncoder, SiameseLSTM, SiameseLSTMConfig, ZERO_SHOT_THRESHOLD,
)
from core.objectives import LossConfig, Objective
from core.pair_table import PairTable
from core.saving import load_model, new_run_name, save_model
from core.tokenizers import WordTokenizer, bert_wordpiece
from core.trainer import TrainConfig, Trainer, TrainOutcome

MODEL_NAMES = ("lstm", "dual-transformer", "minilm")
MODEL_LABELS = {"lstm": "Siamese LSTM", "dual-transformer": "Dual transformer encoder", "minilm": "MiniLM (fine-tune)"}

# Settings that work for each family on a CPU; every one can be overridden.
DEFAULT_TRAINING = {
    "lstm": dict(epochs=5, batch_size=128, lr=2e-3),
    "dual-transformer": dict(epochs=5, batch_size=32, lr=1e-4),
    "minilm": dict(epochs=1, batch_size=32, lr=2e-5),
}


@dataclass
class RunSpec:
    model: str = "lstm"  # lstm | dual-transformer | minilm
    loss: LossConfig = field(default_factory=LossConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    model_options: dict = field(default_factory=dict)  # fields of the model's config (e.g. hidden_size)
    max_length: int = 64  # tokens per question
    min_freq: int = 2  # LSTM vocabulary: words seen fewer times become <unk>
    max_vocab: int = 30000  # LSTM vocabulary size, <pad> and <unk> included
    val_fraction: float = 0.1  # share of pairs held out to pick the best epoch and calibrate thresholds
    test_fraction: float = 0.0  # share of pairs held out for a final test report (0 = none)
    split_by_question: bool = False  # keep every validation/test question out of training
    hard_negatives: bool = False  # triplet/softmax: add labelled non-duplicates as extra negatives
    data_name: str = ""  # shown in the runs list

    def __post_init__(self):
        if self.model not in MODEL_NAMES:
            raise ValueError(f"unknown model {self.model!r}; expected one of {', '.join(MODEL_NAMES)}")


def default_train_config(model: str, **overrides) -> TrainConfig:
    return TrainConfig(**{**DEFAULT_TRAINING[model], **overrides})


def build_model(spec: RunSpec, train_pairs: pd.DataFrame) -> PairEncoder:
    options = dict(spec.model_options)
    if spec.model == "lstm":
        texts = pd.concat([train_pairs["question1"], train_pairs["question2"]]).tolist()
        tokenizer = WordTokenizer.build(texts, min_freq=spec.min_freq, max_size=spec.max_vocab, max_length=spec.max_length)
        config = SiameseLSTMConfig(**{**options, "vocab_size": tokenizer.vocab_size, "pad_id": tokenizer.pad_id})
        return SiameseLSTM(config, tokenizer)
    if spec.model == "dual-transformer":
        tokenizer = bert_wordpiece(spec.max_length)
        config = DualEncoderConfig(**{**options, "vocab_size": tokenizer.vocab_size, "pad_id": tokenizer.pad_id,
                                      "max_length": spec.max_length})
        return DualEncoder(config, tokenizer)
    return MiniLM.pretrained(max_length=spec.max_length)


def load_any(model: str, device: str = "cpu") -> tuple[PairEncoder, dict]:
    """``"minilm"`` is zero-shot MiniLM; anything else is a saved model folder."""
    if model == "minilm":
        encoder = MiniLM.pretrained().to(device).eval()
        return encoder, {"model_type": "minilm", "name": "minilm (zero-shot)",
                         "thresholds": {"accuracy": ZERO_SHOT_THRESHOLD, "f1": ZERO_SHOT_THRESHOLD}}
    return load_model(model, device=device)


def _validation_subset(pairs: pd.DataFrame, limit: int, seed: int) -> pd.DataFrame:
    if len(pairs) <= limit:
        return pairs
    return pairs.sample(n=limit, random_state=seed).reset_index(drop=True)


@dataclass
class RunResult:
    folder: Path | None  # None when nothing was saved (a failure before any epoch)
    outcome: TrainOutcome
    thresholds: dict  # {"accuracy": t, "f1": t} calibrated on the validation split
    validation: dict  # metrics on the whole validation split at the best-accuracy threshold
    test: dict  # same on the test split (empty when test_fraction is 0)
    model: PairEncoder = field(repr=False, default=None)


def train_run(
    spec: RunSpec,
    pairs: pd.DataFrame,
    out_dir: str | Path | None = None,
    runs_root: str | Path = "runs",
    callbacks: Sequence[object] = (),
    stop_event: threading.Event | None = None,
    save: bool = True,
) -> RunResult:
    """Train, calibrate and save one model on ``pairs``; see the module docstring."""
    splits = split_pairs(pairs, val_fraction=spec.val_fraction, test_fraction=spec.test_fraction,
                         seed=spec.train.seed, by_question=spec.split_by_question)
    return train_on_splits(spec, splits, out_dir, runs_root, callbacks, stop_event, save, all_pairs=pairs)


def train_on_splits(
    spec: RunSpec,
    splits: Splits,
    out_dir: str | Path | None = None,
    runs_root: str | Path = "runs",
    callbacks: Sequence[object] = (),
    stop_event: threading.Event | None = None,
    save: bool = True,
    all_pairs: pd.DataFrame | None = None,
) -> RunResult:
    """``train_run`` on splits made elsewhere (the benchmarks fix their own held-out test set)."""
    pairs = all_pairs if all_pairs is not None else pd.concat([splits.train, splits.val, splits.test])
    torch.manual_seed(spec.train.seed)
    model = build_model(spec, splits.train)
    use_hard_negatives = spec.hard_negatives and spec.loss.batch_kind == "duplicates"
    if use_hard_negatives and distributed.current().enabled:
        raise ValueError("hard negatives are not supported in multi-process training yet; drop --hard-negatives")
    train_table = PairTable(splits.train, model.tokenizer, hard_negatives=use_hard_negatives)
    val_small = _validation_subset(splits.val, spec.train.max_val_pairs, spec.train.seed)
    val_table = PairTable(val_small, model.tokenizer) if len(val_small) else None
    trainer = Trainer(model, Objective(spec.loss), train_table, val_table, spec.train, callbacks, stop_event)
    outcome = trainer.run()

    thresholds, validation, test = {}, {}, {}
    if len(splits.val):
        val_full = PairTable(splits.val, model.tokenizer)
        scores = pair_scores(model, val_full)
        thresholds = best_thresholds(val_full.labels, scores)
        validation = _public(evaluate_scores(val_full.labels, scores, thresholds["accuracy"]))
    if len(splits.test):
        test_table = PairTable(splits.test, model.tokenizer)
        test = _public(evaluate_scores(test_table.labels, pair_scores(model, test_table),
                                       thresholds.get("accuracy", 0.5)))
    folder = None
    nothing_learned = outcome.status == "failed" and outcome.best_epoch == 0
    if save and not nothing_learned:
        folder = Path(out_dir) if out_dir else Path(runs_root) / new_run_name(runs_root, spec.model, spec.loss.name)
        save_model(model, folder, metadata={
            "name": folder.name,
            "loss": dataclasses.asdict(spec.loss),
            "train_config": dataclasses.asdict(spec.train),
            "run": {k: v for k, v in dataclasses.asdict(spec).items() if k not in ("loss", "train")},
            "thresholds": thresholds,
            "metrics": {"validation": validation, "test": test},
            "data": {"name": spec.data_name, **dataset_summary(pairs),
                     "train_pairs": len(splits.train), "val_pairs": len(splits.val), "test_pairs": len(splits.test)},
            "training": {"status": outcome.status, "message": outcome.message, "best_epoch": outcome.best_epoch,
                         "epochs_run": len(outcome.epochs), "seconds": round(outcome.seconds, 2),
                         "pairs_per_second": round(outcome.pairs_per_second, 1),
                         "epochs": [dataclasses.asdict(e) for e in outcome.epochs]},
        })
    return RunResult(folder, outcome, thresholds, validation, test, model)


def _public(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k != "scores"}
