"""The Compare page's maths: the pairs a comparison may measure models on (none a compared model trained on,
matched by ``core.data.pair_key``), and the table's rows with two references (zero-shot MiniLM, TF-IDF cosine).
The set is the workspace's test file, else its validation file, else the active dataset's pairs every compared model
held out; a model trained on other data is said to be unchecked.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from core.data import Splits, pair_keys, pairs_fingerprint, seeded_sample, split_pairs
from core.data.splitting import implied_pairs
from core.data.splitting import recorded_by_question
from core.inference.metrics import best_thresholds, metric_intervals, paired_verdict, ranking_metrics, threshold_metrics

COMPARE_MAX_PAIRS = 2000  # a seeded sample of this size at most: zero-shot MiniLM on a CPU stays under a minute
COMPARE_SEED = 0
TEST, VALIDATION, HELD_OUT, DATASET = "test file", "validation file", "held out", "active dataset"


@dataclass
class CommonPairs:
    pairs: pd.DataFrame  # the pairs every row is scored on (a seeded sample when there are many); empty: none
    description: str  # which pairs and how many, for captions; or why there are none
    label: str  # the same, short, for figure titles
    total: int  # how many pairs qualified before sampling
    constrained_by: list[str] = field(default_factory=list)  # names of the models trained on the active dataset
    source: str = DATASET  # TEST, VALIDATION, HELD_OUT or DATASET: where the pairs come from
    training: dict = field(default_factory=dict)  # model name -> the pairs of the active dataset it trained on

    @property
    def duplicates(self) -> int:
        return int((self.pairs["is_duplicate"] == 1).sum())

    @property
    def key(self) -> str:
        """Fingerprint of the pairs scored: part of every cache key of their scores."""
        return pairs_fingerprint(self.pairs)


@dataclass(frozen=True)
class Training:
    """What the lab knows of the pairs of the active dataset one saved model trained on."""

    name: str
    on_dataset: bool  # its recorded dataset is the active one (same fingerprint)
    train: pd.DataFrame | None  # its training pairs, implied ones included; None when on_dataset but not found again


def _keys(pairs: pd.DataFrame) -> list[tuple[str, str]]:
    return pair_keys(pairs["question1"].astype(str), pairs["question2"].astype(str))


def _part(config: dict, key: str = "data") -> dict:
    """``config[key]`` when it is a mapping, else {}: a config.json's section, read."""
    return config.get(key) if isinstance(config.get(key), dict) else {}


def _on_dataset(config: dict, dataset: pd.DataFrame) -> bool:
    fingerprint = _part(config).get("fingerprint")
    return bool(fingerprint) and fingerprint == pairs_fingerprint(dataset)


def run_split(config: dict, dataset: pd.DataFrame) -> Splits | None:
    """The split a saved model (its config.json) made of ``dataset`` (a given validation or test file is that split),
    made again from its settings and checked against what it recorded (the validation fingerprint, else the sizes);
    None when ``dataset`` is not the one it trained on or the split cannot be found again."""
    return _split_again(config, dataset) if _on_dataset(config, dataset) else None


def _split_again(config: dict, dataset: pd.DataFrame) -> Splits | None:
    """``run_split`` of a ``dataset`` known to be the run's own."""
    data = _part(config)
    run, settings = _part(config, "run"), _part(config, "train_config")
    val_file, test_file = bool(data.get("val_name")), bool(data.get("test_name"))
    try:
        split = split_pairs(dataset, val_fraction=0.0 if val_file else run["val_fraction"],
                            test_fraction=0.0 if test_file else run["test_fraction"], seed=settings["seed"],
                            by_question=recorded_by_question(run))
        if val_file:  # the validation fingerprint is the file's: the sizes check the dataset's part
            found = (len(split.train) + int(data.get("implied_pairs") or 0) == data["train_pairs"]
                     and (test_file or len(split.test) == data["test_pairs"]))
        else:
            found = len(split.val) > 0 and pairs_fingerprint(split.val) == data.get("validation_fingerprint")
    except (KeyError, TypeError, ValueError):
        return None
    return split if found else None


def training_of(config: dict, dataset: pd.DataFrame) -> Training:
    """The pairs of ``dataset`` that a saved model trained on: its split's train part found again, with its implied
    pairs (``core.data.splitting``) when the run trained on those."""
    name, data, on = str(config.get("name", "?")), _part(config), _on_dataset(config, dataset)
    split = _split_again(config, dataset) if on else None  # the dataset fingerprinted once
    if split is None:
        return Training(name, on, None)
    train = split.train[["question1", "question2", "is_duplicate"]]
    if isinstance(data.get("implied_pairs"), int) and data["implied_pairs"] > 0:
        train = pd.concat([train, implied_pairs(train, seed=config["train_config"]["seed"])], ignore_index=True)
    return Training(name, True, train.reset_index(drop=True))


def _names(names: Sequence[str]) -> str:
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


def _none(why: str, trainings: dict, constrained_by: list[str], source: str) -> CommonPairs:
    empty = pd.DataFrame({"question1": pd.Series(dtype=str), "question2": pd.Series(dtype=str),
                          "is_duplicate": pd.Series(dtype=np.int64)})
    return CommonPairs(empty, why, "no pairs", 0, constrained_by, source, trainings)


def honest_pairs(configs: Sequence[dict], dataset: pd.DataFrame, val: pd.DataFrame | None = None,
                 test: pd.DataFrame | None = None, max_pairs: int = COMPARE_MAX_PAIRS, seed: int = COMPARE_SEED,
                 val_name: str | None = None, test_name: str | None = None) -> CommonPairs:
    """The pairs to measure the models of ``configs`` (config.json contents) on: ``test``, else ``val``, else
    ``dataset``, less every pair a compared model is known or may have trained on; sampled down to ``max_pairs``
    with ``seed``. Empty, with ``description`` saying why, when no pair qualifies."""
    trainings = [training_of(config, dataset) for config in configs]
    here = [t for t in trainings if t.on_dataset]
    unknown = [t.name for t in here if t.train is None]
    known = [t for t in here if t.train is not None]
    constrained_by = [t.name for t in here]
    training = {t.name: t.train for t in known}
    trained = set().union(*(_keys(t.train) for t in known))
    elsewhere = [t.name for t in trainings if not t.on_dataset]
    if unknown:  # its training pairs are somewhere in the dataset: none of it is unseen
        trained |= set(_keys(dataset))
    source, candidates, file_name = ((TEST, test, test_name) if test is not None else (VALIDATION, val, val_name)
                                     if val is not None else (HELD_OUT if constrained_by else DATASET, dataset, None))
    keep = np.array([key not in trained for key in _keys(candidates)], dtype=bool)
    total = int(keep.sum())
    if candidates is dataset and unknown:
        return _none(f"no honest set: {_names(unknown)} trained on the active dataset, but its folder does not say "
                     "which pairs it held out, so any pair of the dataset may be one it trained on. Load a test or "
                     "validation file on the Data page, or leave it out", training, constrained_by, source)
    if candidates is not dataset:
        what = f"the {source}" + (f" {file_name}" if file_name else "")
        if not total:
            return _none(f"no pair of {what} is unseen: {_names(constrained_by)} trained on, or may have trained on, "
                         f"every one of its {len(candidates):,} pairs", training, constrained_by, source)
        description = f"the {total:,} pairs of {what}"
        if total < len(candidates):
            description += f", less {len(candidates) - total:,} that {_names(constrained_by)} trained on or may have"
        label = f"{total:,} pairs of the {source}"
    elif not constrained_by:
        description = f"all {total:,} pairs of the active dataset (no model measured on them trained on this dataset)"
        label = f"{total:,} pairs (all of the active dataset)"
    elif not total:
        return _none(f"no pair of the active dataset was held out by every compared model that trained on it "
                     f"({_names(constrained_by)}): leave some out, or load a test or validation file on the "
                     "Data page", training, constrained_by, source)
    else:
        every = ("" if len(constrained_by) == 1 else "both " if len(constrained_by) == 2
                 else f"all {len(constrained_by)} ")
        description = (f"the {total:,} pairs of the active dataset that {every}{_names(constrained_by)} held out "
                       "of training (matched by their questions, in either order)")
        label = f"{total:,} held-out pairs"
    if elsewhere:
        description += (f"; {_names(elsewhere)} trained on other data, which the lab cannot check against these "
                        "pairs")
    chosen = candidates.loc[keep, ["question1", "question2", "is_duplicate"]].reset_index(drop=True)
    if total > max_pairs:
        chosen = chosen.iloc[seeded_sample(total, max_pairs, seed)].reset_index(drop=True)
        description += f", of which a seeded sample of {max_pairs:,} (seed {seed})"
        label = f"{max_pairs:,} of " + label
    return CommonPairs(chosen, description, label, total, constrained_by, source, training)


# ---- the comparison table ------------------------------------------------------------------------------
TFIDF_LABEL = "TF-IDF cosine (scikit-learn)"
TFIDF_FIT = "the questions of the pairs it scores"  # what every TF-IDF baseline is fitted on, said beside its figure
METRICS = {"roc_auc": "ROC AUC", "average_precision": "avg precision", "accuracy": "accuracy", "f1": "F1"}
ROC_AUC_INTERVAL, VERSUS_ZERO_SHOT = "ROC AUC 95 %", "vs zero-shot"  # a row's uncertainty and its paired verdict
COMPARE_COLUMNS = ["model", "kind", *METRICS.values(), ROC_AUC_INTERVAL, VERSUS_ZERO_SHOT, "threshold",
                   "threshold from"]
REFERENCE = "reference"  # the kind of the zero-shot and TF-IDF rows


def comparison_row(name: str, kind: str, labels, scores, threshold: float | None, threshold_from: str,
                   zero_shot_scores=None, groups=None) -> dict:
    """One row of the comparison table: ranking metrics, accuracy / F1 at ``threshold`` (None: the best-accuracy one
    on these scores), the ROC AUC's bootstrap interval and, given zero-shot MiniLM's scores, the paired verdict."""
    if threshold is None or not math.isfinite(float(threshold)):
        threshold = best_thresholds(labels, scores)["accuracy"]
    at = threshold_metrics(labels, scores, float(threshold))
    values = {**ranking_metrics(labels, scores), "accuracy": at["accuracy"], "f1": at["f1"]}
    interval = metric_intervals(labels, scores, float(threshold), groups=groups).get("roc_auc")
    verdict = (paired_verdict(labels, scores, zero_shot_scores, groups=groups) if zero_shot_scores is not None
               else None)
    return {"model": name, "kind": kind, **{column: values[key] for key, column in METRICS.items()},
            ROC_AUC_INTERVAL: f"{interval[0]:.3f}–{interval[1]:.3f}" if interval else "",
            VERSUS_ZERO_SHOT: verdict_text(verdict) if verdict else "",
            "threshold": float(threshold), "threshold from": threshold_from}


def verdict_text(verdict) -> str:
    """A paired verdict with its ROC AUC difference and 95 % interval: "better (+0.007, +0.001 to +0.012)"."""
    low, high = verdict.interval
    return f"{verdict.verdict} ({verdict.difference:+.3f}, {low:+.3f} to {high:+.3f})"


def comparison_table(rows: Sequence[dict]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=COMPARE_COLUMNS)


def sort_table(table: pd.DataFrame, column: str, ascending: bool = False) -> pd.DataFrame:
    """``table`` sorted by ``column`` (ties keep their order; NaN always last), index 0..n-1."""
    return table.sort_values(column, ascending=ascending, kind="stable", na_position="last").reset_index(drop=True)
