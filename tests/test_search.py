"""core.search against brute force: exact FlatIP, HNSW recall, save/load and the fingerprint cache."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from core import search
from core.search import SearchIndex, corpus_questions, fingerprint, load_or_build


class TableEncoder:
    """A fake model: each text is looked up in a fixed table of vectors (not unit length, so the
    index's own normalisation is exercised). Records every encode call."""

    def __init__(self, texts: list[str], vectors: np.ndarray):
        self.table = {t: v for t, v in zip(texts, vectors)}
        self.calls: list[tuple[int, int]] = []  # (number of texts, tower)

    def encode(self, texts, tower=0, batch_size=256, progress=None):
        self.calls.append((len(texts), tower))
        out = np.stack([self.table[t] for t in texts]).astype(np.float32)
        if progress is not None:
            progress(len(texts), len(texts))
        return torch.from_numpy(out)


def random_corpus(n: int, dim: int, seed: int) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, dim)) * rng.uniform(0.5, 3.0, size=(n, 1))  # (n, dim), varied lengths
    return [f"question {i}" for i in range(n)], vectors


def brute_force(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    scores = q @ unit.T  # (Q, N)
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return top, np.take_along_axis(scores, top, axis=1)


def test_corpus_questions_unique_stripped_first_seen_order():
    pairs = pd.DataFrame({"question1": [" b ", "a", "c", ""], "question2": ["a", "b", " a", "d"],
                          "is_duplicate": [1, 0, 0, 1]})
    assert corpus_questions(pairs) == ["b", "a", "c", "d"]


def test_fingerprint_is_sha1_of_texts_and_order_sensitive():
    assert len(fingerprint(["a"])) == 40
    assert fingerprint(["a", "b"]) == fingerprint(["a", "b"])
    assert fingerprint(["a", "b"]) != fingerprint(["b", "a"])
    assert fingerprint(["ab", "c"]) != fingerprint(["a", "bc"])


def test_flat_top_k_equals_brute_force():
    texts, vectors = random_corpus(400, 24, seed=1)
    model = TableEncoder(texts, vectors)
    seen = []
    index = SearchIndex.build(model, texts, progress=lambda done, total: seen.append((done, total)))
    assert index.kind == "flat" and len(index) == 400
    assert seen[-1] == (400, 400)
    assert model.calls[0][1] == 1  # the corpus goes through tower 1

    queries = texts[:5] + texts[200:205]
    results = index.search(queries, k=7)
    assert model.calls[-1] == (10, 0)  # queries through tower 0
    top, top_scores = brute_force(vectors, np.stack([model.table[q] for q in queries]), 7)
    for row, result in enumerate(results):
        assert [t for t, _ in result] == [texts[i] for i in top[row]]
        np.testing.assert_allclose([s for _, s in result], top_scores[row], atol=1e-5)
    # A corpus question finds itself first, at cosine 1.
    assert results[0][0][0] == texts[0] and results[0][0][1] == pytest.approx(1.0, abs=1e-5)


def test_single_query_and_k_beyond_the_corpus():
    texts, vectors = random_corpus(6, 4, seed=2)
    index = SearchIndex.build(TableEncoder(texts, vectors), texts)
    (result,) = index.search(texts[3], k=50)
    assert len(result) == 6 and result[0][0] == texts[3]
    assert index.search(texts[3], k=0) == [[]]


def test_hnsw_recall_at_10_against_brute_force():
    texts, vectors = random_corpus(3000, 32, seed=3)
    model = TableEncoder(texts, vectors)
    index = SearchIndex.build(model, texts, flat_limit=1000)
    assert index.kind == "hnsw"
    queries = texts[::30]  # 100 queries
    results = index.search(queries, k=10)
    top, _ = brute_force(vectors, np.stack([model.table[q] for q in queries]), 10)
    found = sum(len({t for t, _ in result} & {texts[i] for i in truth}) for result, truth in zip(results, top))
    assert found / (10 * len(queries)) >= 0.95


@pytest.mark.parametrize("flat_limit", [10_000, 100])
def test_save_load_round_trip_gives_identical_results(tmp_path, flat_limit):
    texts, vectors = random_corpus(500, 16, seed=4)
    model = TableEncoder(texts, vectors)
    built = SearchIndex.build(model, texts, flat_limit=flat_limit)
    built.save(tmp_path / "idx")
    loaded = SearchIndex.load(tmp_path / "idx", model)
    assert loaded.kind == built.kind and loaded.texts == texts and loaded.fingerprint == fingerprint(texts)
    queries = texts[:20]
    assert loaded.search(queries, 10) == built.search(queries, 10)


def test_load_or_build_reuses_a_matching_index_and_rebuilds_on_mismatch(tmp_path):
    texts, vectors = random_corpus(300, 8, seed=5)
    model = TableEncoder(texts, vectors)
    first = load_or_build(model, texts, tmp_path)
    folder = search.cache_folder(tmp_path, fingerprint(texts))
    assert (folder / search.INDEX_FILE).is_file()
    corpus_encodes = lambda: sum(1 for _, tower in model.calls if tower == 1)  # noqa: E731
    assert corpus_encodes() == 1

    again = load_or_build(model, texts, tmp_path)
    assert corpus_encodes() == 1  # read back, not encoded again
    assert again.search(texts[:3], 5) == first.search(texts[:3], 5)

    fewer = texts[:250]
    other = load_or_build(model, fewer, tmp_path)
    assert corpus_encodes() == 2 and other.texts == fewer
    assert search.cache_folder(tmp_path, fingerprint(fewer)).is_dir()


def test_a_tampered_index_folder_is_rebuilt(tmp_path):
    texts, vectors = random_corpus(50, 8, seed=6)
    model = TableEncoder(texts, vectors)
    load_or_build(model, texts, tmp_path)
    folder = search.cache_folder(tmp_path, fingerprint(texts))
    (folder / search.TEXTS_FILE).write_text('["something else"]', encoding="utf-8")
    rebuilt = load_or_build(model, texts, tmp_path)
    assert rebuilt.texts == texts
    assert sum(1 for _, tower in model.calls if tower == 1) == 2
    with pytest.raises(ValueError):
        SearchIndex.build(model, [])


def test_no_cache_dir_builds_in_memory(tmp_path):
    texts, vectors = random_corpus(20, 4, seed=7)
    index = load_or_build(TableEncoder(texts, vectors), texts, None)
    assert index.search(texts[5], 1)[0][0][0] == texts[5]
    assert list(tmp_path.iterdir()) == []
