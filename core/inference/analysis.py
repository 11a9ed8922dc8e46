"""Looking at a model's work: error analysis of its scores on labelled pairs (the errors at a threshold, scores by
question length, which pairs' questions training saw), a 2-D map of sentence vectors (PCA, k-means, cosine
neighbours, rows scaled to unit length), and one training batch's similarity matrix and losses, computed by the
very ``core.losses`` functions training uses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from core.data import normalise_questions
from core.inference.metrics import predict
from core.losses import closest_negative, mean_negative, similarity_matrix
from core.losses.softmax import in_batch_softmax_loss_from_scores
from core.losses.triplet import triplet_terms
from core.models.base import PairEncoder

FALSE_POSITIVE, FALSE_NEGATIVE = "false positive", "false negative"
ERROR_KINDS = (FALSE_POSITIVE, FALSE_NEGATIVE)
ERROR_COLUMNS = ["question1", "question2", "score", "label"]
# Bucket edges in words of the longer question: (0, 5], (5, 10], ..., (30, inf).
LENGTH_EDGES = (5, 10, 15, 20, 30)
SEEN_BOTH, SEEN_ONE, SEEN_NEITHER = "both", "one", "neither"
SEEN_ORDER = (SEEN_BOTH, SEEN_ONE, SEEN_NEITHER)
SEEN_COLUMN = "seen in training"


def error_table(pairs: pd.DataFrame, scores, threshold: float, kind: str) -> pd.DataFrame:
    """The pairs of one error kind at ``threshold`` (non-duplicates above it, or duplicates at or below), worst first:
    question1, question2, score, label, then ``pairs``' other columns, indexed by row."""
    scores = np.asarray(scores, dtype=np.float64).ravel()
    labels = pairs["is_duplicate"].to_numpy().astype(int)
    said = kind == FALSE_POSITIVE  # what the model said of the pairs it got wrong: the worst score first
    rows = np.flatnonzero((predict(scores, threshold) == said) & (labels != said))
    rows = rows[np.argsort(-scores[rows] if said else scores[rows], kind="stable")]
    table = pairs.iloc[rows].rename(columns={"is_duplicate": "label"})
    table.insert(0, "score", scores[rows])
    table.index = pd.Index(rows, name="pair")
    extra = [column for column in table.columns if column not in ERROR_COLUMNS]
    return table[ERROR_COLUMNS + extra]


def all_errors(pairs: pd.DataFrame, scores, threshold: float) -> pd.DataFrame:
    """Every error at ``threshold``, false positives first, with ``error`` (its kind) and ``pair`` (its row)."""
    parts = []
    for kind in ERROR_KINDS:
        table = error_table(pairs, scores, threshold, kind)
        table.insert(0, "error", kind)
        table.insert(0, "pair", table.index.to_numpy())
        parts.append(table)
    return pd.concat(parts, ignore_index=True)


def longer_question_words(pairs: pd.DataFrame) -> np.ndarray:
    """Words (whitespace-separated) in the longer question of each pair, (N,)."""
    first = pairs["question1"].astype(str).str.split().str.len().to_numpy()
    second = pairs["question2"].astype(str).str.split().str.len().to_numpy()
    return np.maximum(first, second).astype(int)


def length_bucket_names() -> list[str]:
    """"1–5", "6–10", ..., "31+": the buckets of ``LENGTH_EDGES`` in order."""
    lows = [1, *(edge + 1 for edge in LENGTH_EDGES)]
    return [f"{low}–{edge}" for low, edge in zip(lows, LENGTH_EDGES)] + [f"{lows[-1]}+"]


def length_buckets(lengths) -> list[str]:
    """The bucket name of each length (a length equal to an edge falls in the bucket it closes)."""
    names = length_bucket_names()
    return [names[i] for i in np.searchsorted(LENGTH_EDGES, np.asarray(lengths), side="left")]


def scores_by_length(pairs: pd.DataFrame, scores) -> pd.DataFrame:
    """Score distribution (pairs, min, q1, median, q3, max, mean) per length bucket of the longer question and label."""
    frame = pd.DataFrame({
        "bucket": pd.Categorical(length_buckets(longer_question_words(pairs)), categories=length_bucket_names(),
                                 ordered=True),
        "label": pairs["is_duplicate"].to_numpy().astype(int),
        "score": np.asarray(scores, dtype=np.float64).ravel(),
    })
    columns = ["bucket", "label", "pairs", "min", "q1", "median", "q3", "max", "mean"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    table = frame.groupby(["bucket", "label"], observed=True, sort=True)["score"].describe().reset_index()
    table = table.rename(columns={"count": "pairs", "25%": "q1", "50%": "median", "75%": "q3"})
    return table.astype({"bucket": str, "pairs": int})[columns]


def seen_in_training(train: pd.DataFrame, pairs: pd.DataFrame) -> pd.Series:
    """For each pair: how many of its two questions occur (normalised) in ``train``: "both", "one" or "neither"."""
    seen = set(normalise_questions(train["question1"])) | set(normalise_questions(train["question2"]))
    count = [(first in seen) + (second in seen) for first, second in
             zip(normalise_questions(pairs["question1"]), normalise_questions(pairs["question2"]))]
    names = np.array([SEEN_NEITHER, SEEN_ONE, SEEN_BOTH], dtype=object)
    return pd.Series(names[np.asarray(count, dtype=int)], index=pairs.index, name=SEEN_COLUMN)


def accuracy_by_group(labels, scores, threshold: float, groups, order=None) -> pd.DataFrame:
    """Pairs, errors and accuracy at ``threshold`` per group, in ``order`` (else first appearance)."""
    wrong = predict(np.asarray(scores, dtype=np.float64).ravel(), threshold) != np.asarray(labels).astype(int).ravel()
    table = pd.DataFrame({"group": np.asarray(groups, dtype=object), "errors": wrong}).groupby("group", sort=False)
    table = table["errors"].agg(pairs="size", errors="sum")
    if order is not None:
        table = table.reindex([group for group in order if group in table.index])
    return table.assign(accuracy=1 - table["errors"] / table["pairs"]).reset_index()


# ---- a 2-D map of sentence vectors ----------------------------------------------------------
MAP_MAX_POINTS = 20_000  # above this many questions the map shows a seeded sample (WebGL stays responsive)
MAP_SEED = 0
DUPLICATE_LABEL, NOT_DUPLICATE_LABEL = "in a duplicate pair", "only in non-duplicate pairs"


def clusters(vectors, k: int, seed: int = MAP_SEED) -> np.ndarray:
    """(N,) k-means cluster ids of the unit-length rows (one seeded start); ``k`` at most the distinct rows."""
    from sklearn.cluster import KMeans
    from sklearn.preprocessing import normalize

    if len(vectors) == 0:
        return np.zeros(0, dtype=int)
    v = normalize(np.asarray(vectors, dtype=np.float64)).astype(np.float32)
    k = max(1, min(int(k), len(np.unique(v, axis=0))))
    return KMeans(n_clusters=k, n_init=1, random_state=seed).fit_predict(v).astype(int)


def nearest(vectors, query, k: int, exclude: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(indices, cosines) of the ``k`` rows most cosine-similar to ``query`` ((d,)), best first (ties: lower index),
    ``exclude`` (the row a query came from) left out."""
    from sklearn.preprocessing import normalize

    query = np.asarray(query, dtype=np.float64).reshape(1, -1)
    scores = normalize(np.asarray(vectors, dtype=np.float64)) @ normalize(query)[0]  # (N,)
    order = np.argsort(-scores, kind="stable")
    top = order[order != exclude][: max(0, int(k))]
    return top, scores[top]


def question_labels(pairs: pd.DataFrame, texts: Sequence[str]) -> list[str]:
    """For each (stripped) text, ``DUPLICATE_LABEL`` when it is in a duplicate pair, else ``NOT_DUPLICATE_LABEL``."""
    duplicates = pairs[pairs["is_duplicate"] == 1]
    in_duplicate = set(duplicates["question1"].astype(str).str.strip()) | set(
        duplicates["question2"].astype(str).str.strip())
    return [DUPLICATE_LABEL if text in in_duplicate else NOT_DUPLICATE_LABEL for text in texts]


@dataclass
class MapLayout:
    points: np.ndarray  # (N, 2) PCA coordinates
    clusters: np.ndarray  # (N,) k-means cluster ids
    variance: np.ndarray  # (2,) share of the variance each axis keeps


def map_layout(vectors, k: int, seed: int = MAP_SEED) -> MapLayout:
    """What the map draws: coordinates on the first two principal components (zero on an axis the vectors lack),
    ``clusters`` and the share of the variance each axis keeps."""
    from sklearn.decomposition import PCA

    v = np.asarray(vectors, dtype=np.float64)
    (n, d), points, ratio = v.shape, np.zeros((len(v), 2)), np.zeros(2)  # (N, d), (N, 2), (2,)
    components = min(2, n, d)
    if n >= 2 and components:
        # the eigenvectors of the d x d covariance when rows far outnumber dimensions (much faster), else the exact
        # SVD; both deterministic
        pca = PCA(n_components=components, svd_solver="covariance_eigh" if n > 2 * d else "full")
        points[:, :components] = pca.fit_transform(v)
        ratio[:components] = np.nan_to_num(pca.explained_variance_ratio_)
    return MapLayout(points, clusters(vectors, k, seed), ratio)


# ---- one training batch, looked inside -----------------------------------------------------
# The worked example of the course: rows are v1 (question1), columns v2 (question2).
SEED_EXAMPLE = [
    [0.9, -0.8, 0.3, -0.5],
    [-0.8, 0.5, 0.1, -0.2],
    [0.3, 0.1, 0.7, -0.8],
    [-0.5, -0.2, -0.8, 1.0],
]


@dataclass
class BatchView:
    scores: np.ndarray  # (B, B) s(v1_i, v2_j)
    positives: np.ndarray  # (B,) the diagonal s(A, P)
    mean_negative: np.ndarray  # (B,)
    closest_negative: np.ndarray  # (B,) NaN where the row has none
    closest_column: np.ndarray  # (B,) -1 where the row has none
    l1: np.ndarray  # (B,)
    l2: np.ndarray  # (B,)
    margin: float
    triplet_loss: float  # mean over rows of L1 + L2
    triplet_cost: float  # the course's J: the sum over rows
    softmax_loss: float  # in-batch softmax cross-entropy at inspect_scores' ``softmax_scale``
    question1: list[str] | None = None
    question2: list[str] | None = None

    def table(self) -> pd.DataFrame:
        """One row per anchor: the quantities of the triplet loss."""
        return pd.DataFrame({
            "question1": self.question1 or [f"v1_{i + 1}" for i in range(len(self.positives))],
            "s(A,P)": self.positives,
            "mean negative": self.mean_negative,
            "closest negative": self.closest_negative,
            "closest column": self.closest_column,
            "L1": self.l1,
            "L2": self.l2,
            "L_full": self.l1 + self.l2,
        })


def inspect_scores(scores, margin: float = 0.25, softmax_scale: float = 1.0,
                   question1=None, question2=None) -> BatchView:
    """Every per-row quantity of a square score matrix (an edited example or a real batch)."""
    s = torch.as_tensor(np.asarray(scores, dtype=np.float64))  # (B, B)
    if s.ndim != 2 or s.shape[0] != s.shape[1] or s.shape[0] < 2:
        raise ValueError(f"need a square matrix of at least 2x2, got shape {tuple(s.shape)}")
    closest, columns = closest_negative(s)
    l1, l2 = triplet_terms(s, margin)
    return BatchView(
        scores=s.numpy(),
        positives=torch.diagonal(s).numpy(),
        mean_negative=mean_negative(s).numpy(),
        closest_negative=closest.numpy(),
        closest_column=columns.numpy(),
        l1=l1.numpy(),
        l2=l2.numpy(),
        margin=margin,
        triplet_loss=float((l1 + l2).mean()),
        triplet_cost=float((l1 + l2).sum()),
        softmax_loss=float(in_batch_softmax_loss_from_scores(s, scale=softmax_scale)),
        question1=list(question1) if question1 is not None else None,
        question2=list(question2) if question2 is not None else None,
    )


def batch_scores(model: PairEncoder, question1, question2) -> np.ndarray:
    """The (B, B) similarity matrix of a batch of pairs under ``model``."""
    v1 = model.encode(list(question1), tower=0)  # (B, d)
    v2 = model.encode(list(question2), tower=1)  # (B, d)
    return similarity_matrix(v1, v2).double().numpy()


def seed_experiment(scores, rounds: int = 4, margin: float = 0.25, softmax_scale: float = 1.0) -> pd.DataFrame:
    """The dual-encoder lesson's experiment: raise the diagonal by 0.5, lower the rest by 0.02 (clipped to [-1, 1]),
    watch the losses fall; row 0 is the matrix as given."""
    s = np.asarray(scores, dtype=np.float64).copy()
    eye = np.eye(len(s), dtype=bool)
    rows = []
    for round_ in range(rounds + 1):
        view = inspect_scores(s, margin=margin, softmax_scale=softmax_scale)
        rows.append({"round": round_, "mean diagonal": float(s[eye].mean()),
                     "mean off-diagonal": float(s[~eye].mean()),
                     "triplet loss": view.triplet_loss, "softmax loss": view.softmax_loss})
        s = np.clip(np.where(eye, s + 0.5, s - 0.02), -1.0, 1.0)
    return pd.DataFrame(rows)


def pick_batch(pairs: pd.DataFrame, size: int, seed: int | None = None, start: int = 0) -> pd.DataFrame:
    """``size`` duplicate pairs, no question twice: at random with ``seed``, else in order from the ``start``-th."""
    from core.data.batching import duplicate_free_batches

    duplicates = pairs[pairs["is_duplicate"] == 1].iloc[start:].reset_index(drop=True)
    batches = duplicate_free_batches(duplicates, size, seed=seed)
    if not batches:
        raise ValueError("the dataset has too few distinct duplicate pairs for a batch")
    return duplicates.iloc[batches[0]].reset_index(drop=True)
