"""Every model and two reference baselines scored on one common set of pairs, as one comparable table.

Which pairs: ``common_pairs`` keeps the pairs of the active dataset that *no* compared model trained on.
For each saved model, ``core.inference.evaluation.held_out_pairs`` gives the validation pairs its training held
out when the active dataset is its training data (else all the pairs); the common set is the
intersection of those, so every row of the table is measured on pairs that every model saw for the
first time. Above ``COMPARE_MAX_PAIRS`` a seeded sample keeps scoring on a CPU short.

The references: zero-shot MiniLM (scored like any model) and ``tfidf_scores``, the cosine of the two
questions' TF-IDF vectors (scikit-learn's ``TfidfVectorizer`` fitted on the training side of the data
when a compared model trained on it, else on the compared pairs themselves).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from core.data import pairs_fingerprint
from core.inference.evaluation import held_out_pairs
from core.inference.metrics import best_thresholds, ranking_metrics, threshold_metrics
from core.inference.uncertainty import metric_intervals, paired_verdict

COMPARE_MAX_PAIRS = 2000  # a seeded sample of this size at most: zero-shot MiniLM on a CPU stays under a minute
COMPARE_SEED = 0
TFIDF_LABEL = "TF-IDF cosine (scikit-learn)"
METRICS = {"roc_auc": "ROC AUC", "average_precision": "avg precision", "accuracy": "accuracy", "f1": "F1"}
ROC_AUC_INTERVAL, VERSUS_ZERO_SHOT = "ROC AUC 95 %", "vs zero-shot"  # a row's uncertainty and its paired verdict
COMPARE_COLUMNS = ["model", "kind", *METRICS.values(), ROC_AUC_INTERVAL, VERSUS_ZERO_SHOT, "threshold",
                   "threshold from"]
REFERENCE, TRAINED = "reference", "trained"
_PAIR_COLUMNS = ["question1", "question2", "is_duplicate"]


@dataclass
class CommonPairs:
    pairs: pd.DataFrame  # the pairs every row is scored on (a seeded sample when there are many)
    description: str  # which pairs and how many, for captions
    label: str  # the same, short, for figure titles
    fit_rows: np.ndarray | None  # rows of the dataset whose questions TF-IDF is fitted on; None: ``pairs``
    fit_description: str  # which texts those are
    total: int  # how many pairs qualified before sampling
    constrained_by: list[str] = field(default_factory=list)  # names of the models trained on the active dataset

    def fit_texts(self, dataset: pd.DataFrame) -> list[str]:
        """The questions the TF-IDF vectorizer is fitted on; ``dataset`` is the frame given to ``common_pairs``."""
        return _texts(self.pairs if self.fit_rows is None else dataset.iloc[self.fit_rows])

    @property
    def duplicates(self) -> int:
        return int((self.pairs["is_duplicate"] == 1).sum())

    @property
    def key(self) -> str:
        """Fingerprint of the pairs scored: part of every cache key of their scores."""
        return pairs_fingerprint(self.pairs)


def _row_hashes(pairs: pd.DataFrame) -> np.ndarray:
    return pd.util.hash_pandas_object(pairs[_PAIR_COLUMNS], index=False).to_numpy()


def _texts(pairs: pd.DataFrame) -> list[str]:
    return pairs["question1"].astype(str).tolist() + pairs["question2"].astype(str).tolist()


def common_pairs(configs: Sequence[dict], pairs: pd.DataFrame, max_pairs: int = COMPARE_MAX_PAIRS,
                 seed: int = COMPARE_SEED) -> CommonPairs:
    """The pairs of ``pairs`` that no model of ``configs`` (config.json contents) trained on.

    A model trained on this very dataset contributes its validation pairs (``held_out_pairs``); a
    model trained on other data contributes every pair. The result is the intersection, in dataset
    order, sampled down to ``max_pairs`` with ``seed``. Rows are matched by content (both questions
    and the label), so a repeated identical row counts as held out where any copy of it is.
    """
    hashes = _row_hashes(pairs)
    keep = np.ones(len(pairs), dtype=bool)
    constrained_by = []
    for config in configs:
        held = held_out_pairs(config, pairs)
        if held.is_validation:
            keep &= np.isin(hashes, _row_hashes(held.pairs))
            constrained_by.append(str(config.get("name", "?")))
    chosen = pairs.loc[keep].reset_index(drop=True)
    total = len(chosen)
    if not constrained_by:
        description = f"all {total:,} pairs of the active dataset (no compared model trained on this dataset)"
        label = f"{total:,} pairs (all of the active dataset)"
    elif len(constrained_by) == 1:
        description = (f"the {total:,} validation pairs that {constrained_by[0]} held out of its training "
                       "(the other compared models did not train on this dataset)")
        label = f"{total:,} held-out validation pairs"
    else:
        every = "both" if len(constrained_by) == 2 else f"all {len(constrained_by)}"
        description = (f"the {total:,} pairs that {every} models trained on this dataset held out "
                       "of their training (the intersection of their validation splits)")
        label = f"{total:,} pairs held out by every model"
    if total > max_pairs:
        rows = np.sort(np.random.default_rng(seed).choice(total, size=max_pairs, replace=False))
        chosen = chosen.iloc[rows].reset_index(drop=True)
        description += f", of which a seeded sample of {max_pairs:,} (seed {seed})"
        label = f"{max_pairs:,} of " + label
    if constrained_by:
        fit_rows = np.flatnonzero(~keep)
        fit_description = (f"the questions of the other {len(fit_rows):,} pairs of the active dataset "
                           "(the side the models trained on)")
    else:
        fit_rows = None
        fit_description = "the compared pairs' own questions (no training data of this dataset is known)"
    return CommonPairs(chosen, description, label, fit_rows, fit_description, total, constrained_by)


def tfidf_scores(first: Sequence[str], second: Sequence[str], fit_texts: Sequence[str] | None = None,
                 **vectorizer_options) -> np.ndarray:
    """Cosine similarity of the TF-IDF vectors of ``first[i]`` and ``second[i]``, (N,) float64.

    The vectorizer (scikit-learn defaults unless ``vectorizer_options`` say otherwise) is fitted on
    ``fit_texts``, or on the questions themselves when none are given. A question with no known word
    has a zero vector and scores 0.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    first, second = [str(t) for t in first], [str(t) for t in second]
    if len(first) != len(second):
        raise ValueError(f"{len(first)} first questions but {len(second)} second ones")
    texts = list(fit_texts) if fit_texts else first + second
    vectorizer = TfidfVectorizer(**vectorizer_options)
    try:
        vectorizer.fit(texts)
    except ValueError:  # empty vocabulary: no text holds a word
        return np.zeros(len(first))
    a, b = vectorizer.transform(first), vectorizer.transform(second)  # (N, V) sparse, rows of unit length
    if vectorizer.norm != "l2":
        a, b = _unit_sparse_rows(a), _unit_sparse_rows(b)
    return np.asarray(a.multiply(b).sum(axis=1), dtype=np.float64).ravel()


def _unit_sparse_rows(matrix):
    from sklearn.preprocessing import normalize

    return normalize(matrix, norm="l2")


def model_scores(model, pairs: pd.DataFrame, progress: Callable[[int, int], None] | None = None,
                 batch_size: int = 256) -> np.ndarray:
    """Cosine s(v1_i, v2_i) of every pair under a ``PairEncoder``, (N,) float64, as
    ``core.inference.evaluation.pair_scores``; ``progress(done, total)`` counts texts over both towers (total 2N)."""
    import torch.nn.functional as F

    from core.text.pair_table import PairTable

    table = PairTable(pairs, model.tokenizer)
    n = len(table.labels)

    def report(offset: int):
        if progress is None:
            return None
        return lambda done, _total: progress(offset + done, 2 * n)

    v1 = model.encode_table(table.first, tower=0, batch_size=batch_size, progress=report(0))  # (N, d)
    v2 = model.encode_table(table.second, tower=1, batch_size=batch_size, progress=report(n))  # (N, d)
    return F.cosine_similarity(v1, v2, dim=-1).double().numpy()


def comparison_row(name: str, kind: str, labels, scores, threshold: float | None, threshold_from: str,
                   zero_shot_scores=None, groups=None) -> dict:
    """One row of the comparison table: ranking metrics of ``scores`` and accuracy / F1 at ``threshold``, the
    95 % bootstrap interval of the ROC AUC and, given zero-shot MiniLM's scores of the same pairs, the paired
    verdict against it ("" for zero-shot itself or without its scores).

    ``threshold=None`` calibrates it on these very scores (best accuracy), and ``threshold_from`` should
    then say so: such a row is measured on the pairs it was calibrated on. ``groups``
    (``core.data.resampling_groups``): pairs resampled together.
    """
    if threshold is None or not math.isfinite(float(threshold)):
        threshold = best_thresholds(labels, scores)["accuracy"]
    at = threshold_metrics(labels, scores, float(threshold))
    values = {**ranking_metrics(labels, scores), "accuracy": at["accuracy"], "f1": at["f1"]}
    interval = metric_intervals(labels, scores, float(threshold), groups=groups).get("roc_auc")
    verdict = (paired_verdict(labels, scores, zero_shot_scores, groups=groups) if zero_shot_scores is not None
               else None)
    return {"model": name, "kind": kind, **{column: values[key] for key, column in METRICS.items()},
            ROC_AUC_INTERVAL: f"{interval[0]:.3f}–{interval[1]:.3f}" if interval else "",
            VERSUS_ZERO_SHOT: f"{verdict.verdict} ({verdict.difference:+.3f})" if verdict else "",
            "threshold": float(threshold), "threshold from": threshold_from}


def comparison_table(rows: Sequence[dict]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=COMPARE_COLUMNS)


def sort_table(table: pd.DataFrame, column: str, ascending: bool = False) -> pd.DataFrame:
    """``table`` sorted by ``column`` (ties keep their order; NaN always last), index 0..n-1."""
    if column not in table.columns:
        raise ValueError(f"no column {column!r} to sort by")
    return table.sort_values(column, ascending=ascending, kind="stable", na_position="last").reset_index(drop=True)
