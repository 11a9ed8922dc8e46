"""The rounds of the active-labelling loop: which labels are held out, what a retrain is, and the learning curve.
A share of the labels chosen by a hash of each pair's text never trains (``held_out_mask``), so the held-out set only
grows and every round's model is scored on labels no round trained on; the curve is one JSON line per scored model.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from core.data import Splits
from core.data.questions import pair_keys
from core.inference.candidates import EmbeddedCorpus, candidate_pairs, choose_pairs
from core.inference.metrics import metric_intervals
from core.inference.run_quality import finite_number
from core.model_names import ZERO_SHOT
from core.saving.label_store import pair_bucket
from core.saving.model_folder import LABELS_FOLDER
from core.saving.output import lock_path_for, take_lock

# scikit-learn and PyTorch are imported by the functions that use them: the Label page draws before they load.

HELD_OUT_SHARE = 0.2  # of the labels: scored on, calibrated on, never trained on
HELD_OUT_BUCKETS = round(HELD_OUT_SHARE * 100)  # a pair is held out when its ``pair_bucket`` is below this
ROUND_SIZE = 10  # pairs asked per round
MIN_TRUSTED_HELD_OUT = 30  # below this many held-out labels the page says the figures swing
CURVE_SUFFIX = ".curve.jsonl"
PAIR_COLUMNS = ["question1", "question2", "is_duplicate"]
# MiniLM fine-tuned with the contrastive loss (it learns from both classes), one short epoch per round.
RETRAIN_OPTIONS = {"model": "minilm", "loss": "contrastive", "form": "squared_hinge", "epochs": 1, "batch_size": 16,
                   "lr": 2e-5, "max_length": 32, "patience": 0}


# ---- which labels are held out ---------------------------------------------------------------------------------
def held_out_mask(pairs: pd.DataFrame) -> np.ndarray:
    """(N,) bool: the pairs whose ``pair_bucket`` is below ``HELD_OUT_BUCKETS``: it depends on the two texts only,
    not on the order of rows or questions, other labels, or the round."""
    keys = pair_keys(pairs["question1"], pairs["question2"])
    return np.asarray([pair_bucket(a, b) for a, b in keys], dtype=np.int64) < HELD_OUT_BUCKETS


class ShareCounts(NamedTuple):
    training: int
    training_duplicates: int
    held_out: int
    held_out_duplicates: int


def share_counts(labels) -> ShareCounts:
    """The shares' counts of a pairs frame, or of a ``LabelStore`` (one indexed query: the labels are not read)."""
    if isinstance(labels, pd.DataFrame):
        held, duplicate = held_out_mask(labels), labels["is_duplicate"].to_numpy().astype(bool)
        return ShareCounts(int((~held).sum()), int((duplicate & ~held).sum()), int(held.sum()),
                           int((duplicate & held).sum()))
    counts = labels.bucket_counts()

    def total(held: bool, duplicates: bool = False) -> int:
        return sum(n for (bucket, label), n in counts.items()
                   if (bucket < HELD_OUT_BUCKETS) == held and (label == 1 or not duplicates))

    return ShareCounts(total(False), total(False, True), total(True), total(True, True))


def round_splits(labels: pd.DataFrame) -> Splits:
    """The labels as a run's ``Splits``: train = not held out, val = held out, test empty."""
    frame = labels[PAIR_COLUMNS].reset_index(drop=True)
    held = held_out_mask(frame)
    return Splits(train=frame[~held].reset_index(drop=True), val=frame[held].reset_index(drop=True),
                  test=frame.iloc[:0].reset_index(drop=True))


def retrain_problem(labels: pd.DataFrame | ShareCounts) -> str | None:
    """Why these labels cannot make a round's run yet (both shares need both classes), and about how many more of
    which class would mend it (a share takes its fraction of new labels), or None."""
    counts = labels if isinstance(labels, ShareCounts) else share_counts(labels)
    for name, size, duplicates, fraction in (
            ("training", counts.training, counts.training_duplicates, 1 - HELD_OUT_SHARE),
            ("held-out", counts.held_out, counts.held_out_duplicates, HELD_OUT_SHARE)):
        missing = [word for word, have in (("duplicates", duplicates), ("non-duplicates", size - duplicates))
                   if have == 0]
        if missing:
            more = " and ".join(f"about {math.ceil(1 / fraction)} more {word}" for word in missing)
            return (f"The {name} share of your labels needs duplicates and non-duplicates (it has {duplicates:,} "
                    f"duplicates of {size:,}): label {more}; {fraction:.0%} of labels land in it.")
    return None


# ---- a round -----------------------------------------------------------------------------------------------------
def labelled_threshold(config: dict, corpus: EmbeddedCorpus, labels):
    """The model's pair threshold, else one calibrated on the labels between corpus questions (scored from the
    corpus's vectors). ``labels``: a pairs frame or a ``LabelStore``."""
    from core.data.questions import normalise_questions
    from core.inference.calibration import pair_threshold

    saved = finite_number((config.get("thresholds") or {}).get("accuracy"))
    if saved is not None and not config.get("zero_shot"):  # pair_threshold's first rule: the labels change nothing
        return pair_threshold(config)
    if not isinstance(labels, pd.DataFrame):
        labels = labels.labels_between(normalise_questions(corpus.questions))
    scores = corpus.similarity(labels["question1"], labels["question2"])
    known = ~np.isnan(scores)
    return pair_threshold(config, labels["is_duplicate"].to_numpy()[known], scores[known])


def next_round(corpus: EmbeddedCorpus, threshold: float, done: set, n: int = ROUND_SIZE, seed: int = 0,
               labels=None) -> pd.DataFrame:
    """The next ``n`` pairs to ask, by uncertainty, none in ``done`` nor labelled in ``labels``."""
    return choose_pairs(unlabelled_candidates(corpus, done, labels), n, threshold, seed=seed)


def unlabelled_candidates(corpus: EmbeddedCorpus, done: set, labels=None, k: int | None = None) -> pd.DataFrame:
    """``candidate_pairs`` of the corpus, less those in ``done`` and those labelled in ``labels``."""
    candidates = candidate_pairs(corpus, labelled=done) if k is None else candidate_pairs(corpus, k, done)
    if labels is None or candidates.empty:
        return candidates
    keys = pair_keys(candidates["question1"], candidates["question2"])
    labelled = labels.labelled_among(keys)
    return candidates[[key not in labelled for key in keys]].reset_index(drop=True)


# ---- retraining --------------------------------------------------------------------------------------------------
def retrain_spec(init_model: str = "", options: dict | None = None):
    """The loop's run: ``RETRAIN_OPTIONS`` from ``init_model`` ("" or ``ZERO_SHOT``: zero-shot MiniLM), ``options``
    on top. A folder of another family is retrained as itself, at that family's default learning rate."""
    from core.training.specs import init_model_family, spec_from_options

    recipe = dict(RETRAIN_OPTIONS)
    if init_model and init_model != ZERO_SHOT:
        family = init_model_family(init_model)
        if family != recipe["model"]:  # its architecture and tokenizer come from the folder
            recipe.update(model=family, lr=None)
        recipe["init_model"] = str(init_model)
    return spec_from_options(**{**recipe, **(options or {})})


# ---- scoring -----------------------------------------------------------------------------------------------------
def score_point(model, config: dict, labels: pd.DataFrame) -> dict:
    """A model on the held-out share of ``labels``: {"labels", "trained_on" (the curve's x), "held_out", "roc_auc",
    "accuracy" (at its ``pair_threshold``), "threshold", and 95 % bootstrap intervals}; ROC AUC None with one class.
    ValueError when nothing is held out."""
    from core.inference.calibration import pair_threshold
    from core.inference.metrics import ranking_metrics, threshold_metrics

    held = labels[held_out_mask(labels)]
    if held.empty:
        raise ValueError("no label is held out yet: nothing to score the model on")
    y = held["is_duplicate"].to_numpy().astype(int)
    scores = np.asarray(model.score_pairs(held["question1"].tolist(), held["question2"].tolist()), dtype=np.float64)
    threshold = pair_threshold(config, y, scores).threshold
    intervals = {name: [float(end) for end in interval]
                 for name, interval in metric_intervals(y, scores, threshold).items()}
    return {"labels": len(labels), "trained_on": len(labels) - len(held), "held_out": len(held),
            "roc_auc": finite_number(ranking_metrics(y, scores)["roc_auc"]),
            "accuracy": finite_number(threshold_metrics(y, scores, threshold)["accuracy"]),
            "threshold": float(threshold), "roc_auc_interval": intervals.get("roc_auc"),
            "accuracy_interval": intervals.get("accuracy")}


# ---- where the labels and the curve live -------------------------------------------------------------------------
def labels_path(runs_root: str | Path, corpus_name: str, corpus_fingerprint: str) -> Path:
    """``<runs_root>/labels/<slug>-<8 hex of its fingerprint's sha1>.sqlite3``: two corpora of one name keep apart."""
    slug = re.sub(r"[^a-z0-9]+", "-", corpus_name.lower()).strip("-")[:40].strip("-") or "corpus"
    digest = hashlib.sha1(corpus_fingerprint.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return Path(runs_root) / LABELS_FOLDER / f"{slug}-{digest}.sqlite3"


def legacy_labels_path(labels_file: str | Path) -> Path:
    """The CSV labels file the lab kept for this corpus before the database, beside it: imported once."""
    return Path(labels_file).with_suffix(".csv")


def curve_path(labels_file: str | Path) -> Path:
    """``<labels name>.csv.curve.jsonl``: the name it had beside the CSV labels file, so an older curve still shows."""
    return legacy_labels_path(labels_file).with_name(legacy_labels_path(labels_file).name + CURVE_SUFFIX)


def read_curve(labels_file: str | Path) -> list[dict]:
    """The learning curve of a labels file: its points in the order they were added. Read without the lock: a line
    being written is no JSON until its end, so it is skipped as a line a crash cut short is."""
    try:
        lines = curve_path(labels_file).read_bytes().split(b"\n")
    except FileNotFoundError:
        return []
    points = []
    for line in lines:
        try:
            points.append(json.loads(line))
        except ValueError:  # blank, being written, or cut short by a crash: never acknowledged
            continue
    return points


def add_point(labels_file: str | Path, point: dict, model: str) -> bool:
    """Append ``point`` for ``model`` with the time unless the curve has one of that model: True when added. One
    fsynced line under the lock; a line a crash cut short is ended first (and skipped when read)."""
    row = {**point, "model": str(model), "at": datetime.now(UTC).isoformat(timespec="seconds")}
    curve = curve_path(labels_file)
    curve.parent.mkdir(parents=True, exist_ok=True)
    with take_lock(lock_path_for(curve)):
        if any(existing.get("model") == row["model"] for existing in read_curve(labels_file)):
            return False
        with open(curve, "a+b") as handle:  # a write appends, wherever the last read left the position
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - 1))
            ended = not size or handle.read(1) == b"\n"
            handle.write((b"" if ended else b"\n") + (json.dumps(row, allow_nan=False) + "\n").encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
    return True
