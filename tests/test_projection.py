"""core.inference.analysis: PCA coordinates, k-means clusters and cosine neighbours against numpy / sklearn references."""
import numpy as np
import pandas as pd
import pytest
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score
from sklearn.metrics.pairwise import cosine_similarity
from sklearn.preprocessing import normalize

from core.data import seeded_sample
from core.inference.analysis import (
    DUPLICATE_LABEL,
    NOT_DUPLICATE_LABEL,
    clusters,
    map_layout,
    nearest,
    question_labels,
)


def map_points(vectors) -> np.ndarray:
    """(N, 2) the map's coordinates of ``vectors`` (``map_layout``'s PCA points)."""
    return map_layout(vectors, k=1).points


def _same_up_to_sign(actual, expected):
    for column in range(expected.shape[1]):
        a, e = actual[:, column], expected[:, column]
        assert np.allclose(a, e, atol=1e-9) or np.allclose(a, -e, atol=1e-9), column


def test_map_points_equals_the_numpy_svd_projection():
    vectors = np.random.default_rng(0).normal(size=(40, 6)) * np.array([5, 3, 1, 0.5, 0.2, 0.1])
    points = map_points(vectors)
    centred = vectors - vectors.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    assert points.shape == (40, 2)
    _same_up_to_sign(points, centred @ vt[:2].T)
    np.testing.assert_array_equal(points, map_points(vectors))  # deterministic


def test_map_points_of_points_on_a_line():
    t = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    vectors = np.outer(t, [1 / 3, 2 / 3, 2 / 3]) + np.array([1.0, -1.0, 0.5])  # a line of unit direction in 3-D
    points = map_points(vectors)
    _same_up_to_sign(points[:, :1], (t - t.mean())[:, None])  # distances along the line, centred
    np.testing.assert_allclose(points[:, 1], 0.0, atol=1e-9)  # nothing off the line
    layout = map_layout(vectors, k=2)
    assert layout.variance[0] == pytest.approx(1.0) and layout.variance[1] == pytest.approx(0.0, abs=1e-12)


def test_map_points_of_tiny_inputs():
    np.testing.assert_array_equal(map_points(np.ones((1, 4))), [[0.0, 0.0]])
    assert map_points(np.arange(3.0).reshape(3, 1)).shape == (3, 2)
    with pytest.raises(ValueError):
        map_points(np.ones(3))


def test_clusters_find_well_separated_groups_and_match_sklearn_kmeans():
    rng = np.random.default_rng(1)
    centres = np.eye(4)[:3] * 10  # three directions
    vectors = np.concatenate([centre + rng.normal(scale=0.3, size=(20, 4)) for centre in centres])
    truth = np.repeat([0, 1, 2], 20)
    found = clusters(vectors, 3)
    assert adjusted_rand_score(truth, found) == 1.0
    reference = KMeans(n_clusters=3, n_init=1, random_state=0).fit_predict(normalize(vectors).astype(np.float32))
    np.testing.assert_array_equal(found, reference)


def test_clusters_never_ask_for_more_clusters_than_distinct_points():
    vectors = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]])  # two directions only
    found = clusters(vectors, 8)
    assert found[0] == found[1] != found[2]
    assert clusters(np.zeros((0, 3)), 4).shape == (0,)


def test_neighbours_equal_a_numpy_cosine_top_k():
    vectors = np.random.default_rng(2).normal(size=(50, 8))
    similarity = cosine_similarity(vectors)
    for index, k in ((7, 5), (0, 1), (49, 49)):
        row = similarity[index].copy()
        row[index] = -np.inf
        expected = np.argsort(-row, kind="stable")[:k]
        found, scores = nearest(vectors, vectors[index], k, exclude=index)
        np.testing.assert_array_equal(found, expected)
        np.testing.assert_allclose(scores, similarity[index, expected], atol=1e-12)
        assert index not in found


def test_neighbours_by_hand():
    vectors = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [-1.0, 0.0], [2.0, 0.0]])
    found, scores = nearest(vectors, vectors[0], 3, exclude=0)
    np.testing.assert_array_equal(found, [4, 1, 2])  # same direction (cosine 1) first, then 0.994, then 0
    np.testing.assert_allclose(scores, [1.0, 0.9 / np.hypot(0.9, 0.1), 0.0])


def test_nearest_to_a_query_vector():
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    found, scores = nearest(vectors, [0.0, 3.0], 2)
    np.testing.assert_array_equal(found, [1, 2])
    np.testing.assert_allclose(scores, [1.0, np.sqrt(0.5)])


def test_seeded_sample_caps_with_a_seed():
    np.testing.assert_array_equal(seeded_sample(5, 10), np.arange(5))
    sample = seeded_sample(1000, 100, seed=3)
    assert len(sample) == 100 == len(set(sample.tolist())) and (np.diff(sample) > 0).all()
    assert sample.min() >= 0 and sample.max() < 1000
    np.testing.assert_array_equal(sample, seeded_sample(1000, 100, seed=3))
    assert not np.array_equal(sample, seeded_sample(1000, 100, seed=4))


def test_question_labels_say_whether_a_question_is_in_a_duplicate_pair():
    pairs = pd.DataFrame({"question1": ["a?", " b?", "c?"], "question2": ["b?", "d?", "a?"], "is_duplicate": [0, 1, 0]})
    labels = question_labels(pairs, ["a?", "b?", "c?", "d?"])
    assert labels == [NOT_DUPLICATE_LABEL, DUPLICATE_LABEL, NOT_DUPLICATE_LABEL, DUPLICATE_LABEL]
