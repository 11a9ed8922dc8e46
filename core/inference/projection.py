"""A 2-D map of sentence vectors (scikit-learn, numpy): PCA coordinates, k-means clusters and cosine nearest
neighbours. Rows are scaled to unit length before clustering and neighbour search, as the models score by cosine.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

MAP_MAX_POINTS = 20_000  # above this many questions the map shows a seeded sample (WebGL stays responsive)
MAP_SEED = 0
DUPLICATE_LABEL, NOT_DUPLICATE_LABEL = "in a duplicate pair", "only in non-duplicate pairs"


def _matrix(vectors) -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float64)
    if v.ndim != 2:
        raise ValueError(f"expected an (N, d) matrix of vectors, got shape {v.shape}")
    return v


def unit_rows(vectors) -> np.ndarray:
    """(N, d) rows scaled to length 1; a zero row stays zero."""
    v = _matrix(vectors)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def _pca(vectors):
    from sklearn.decomposition import PCA

    v = _matrix(vectors)
    n, d = v.shape
    components = min(2, n, d)
    if components == 0 or n < 2:  # nothing to spread: every point at the origin
        return np.zeros((n, 2)), np.zeros(2)
    # the eigenvectors of the d x d covariance when rows far outnumber dimensions (much faster), else the exact
    # SVD; both deterministic
    pca = PCA(n_components=components, svd_solver="covariance_eigh" if n > 2 * d else "full")
    points = pca.fit_transform(v)  # (N, components)
    ratio = np.nan_to_num(pca.explained_variance_ratio_)
    if components < 2:  # one vector or one dimension: the missing axis is all zeros
        points = np.hstack([points, np.zeros((n, 2 - components))])
        ratio = np.concatenate([ratio, np.zeros(2 - components)])
    return points, ratio


def clusters(vectors, k: int, seed: int = MAP_SEED) -> np.ndarray:
    """(N,) k-means cluster ids of the unit-length rows (one seeded start); ``k`` at most the distinct rows."""
    from sklearn.cluster import KMeans

    v = unit_rows(vectors).astype(np.float32)
    if len(v) == 0:
        return np.zeros(0, dtype=int)
    k = max(1, min(int(k), len({row.tobytes() for row in v})))
    return KMeans(n_clusters=k, n_init=1, random_state=seed).fit_predict(v).astype(int)


def nearest(vectors, query, k: int, exclude: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(indices, cosines) of the ``k`` rows most cosine-similar to ``query`` ((d,)), best first (ties: lower index),
    ``exclude`` left out."""
    v = unit_rows(vectors)
    q = np.asarray(query, dtype=np.float64).ravel()
    if q.shape[0] != v.shape[1]:
        raise ValueError(f"the query has {q.shape[0]} dimensions, the vectors {v.shape[1]}")
    q = q / max(float(np.linalg.norm(q)), 1e-12)
    scores = v @ q  # (N,)
    order = np.argsort(-scores, kind="stable")
    if exclude is not None:
        order = order[order != exclude]
    top = order[: max(0, int(k))]
    return top, scores[top]


def neighbours(vectors, index: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest other rows of row ``index`` by cosine similarity, best first: (indices, cosines)."""
    v = _matrix(vectors)
    if not 0 <= index < len(v):
        raise IndexError(f"row {index} is outside 0..{len(v) - 1}")
    return nearest(v, v[index], k, exclude=index)


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
    """What the map draws: coordinates on the first two principal components, ``clusters`` and their variance."""
    points, ratio = _pca(vectors)
    return MapLayout(points, clusters(vectors, k, seed), ratio)
