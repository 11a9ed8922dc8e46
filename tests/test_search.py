"""core.inference.search against brute force: exact FlatIP, HNSW recall, the fingerprint, and the index kept in a
cache (read back, or built again when torn or stale)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from core.data import corpus_questions
from core.inference import search
from core.inference.search import fingerprint, load_or_build


class TableEncoder:
    """A fake model: each text is looked up in a fixed table of vectors (not unit length, so the
    index's own normalisation is exercised). Records every encode call."""

    def __init__(self, texts: list[str], vectors: np.ndarray):
        self.table = {t: v for t, v in zip(texts, vectors)}
        self.calls: list[tuple[int, int]] = []  # (number of texts, tower)
        self._weights = torch.from_numpy(np.asarray(vectors, dtype=np.float32).copy())

    def state_dict(self):  # what search.model_identity hashes
        return {"table": self._weights}

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


def test_corpus_questions_count_what_the_data_page_counts(sample_pairs):
    from core.data import dataset_summary

    pairs = pd.DataFrame({"question1": ["How old are you?", "how  OLD are you?", "Why?"],
                          "question2": ["What is your age?", "why?", "What is your age? "], "is_duplicate": [1, 0, 0]})
    assert corpus_questions(pairs) == ["How old are you?", "What is your age?", "why?"]  # first spellings
    assert len(corpus_questions(pairs)) == dataset_summary(pairs)["unique_questions"] == 3
    sample, _ = sample_pairs
    assert len(corpus_questions(sample)) == dataset_summary(sample)["unique_questions"]


def test_fingerprint_is_sha1_of_texts_and_order_sensitive():
    assert len(fingerprint(["a"])) == 40
    assert fingerprint(["a", "b"]) == fingerprint(["a", "b"])
    assert fingerprint(["a", "b"]) != fingerprint(["b", "a"])
    assert fingerprint(["ab", "c"]) != fingerprint(["a", "bc"])


def test_flat_top_k_equals_brute_force():
    texts, vectors = random_corpus(400, 24, seed=1)
    model = TableEncoder(texts, vectors)
    seen = []
    index = load_or_build(model, texts, None, progress=lambda done, total: seen.append((done, total)))
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
    index = load_or_build(TableEncoder(texts, vectors), texts, None)
    (result,) = index.search(texts[3], k=50)
    assert len(result) == 6 and result[0][0] == texts[3]
    assert index.search(texts[3], k=0) == [[]]


def test_hnsw_recall_at_10_against_brute_force():
    texts, vectors = random_corpus(3000, 32, seed=3)
    model = TableEncoder(texts, vectors)
    index = load_or_build(model, texts, None, kind="hnsw")
    assert index.kind == "hnsw"
    queries = texts[::30]  # 100 queries
    results = index.search(queries, k=10)
    top, _ = brute_force(vectors, np.stack([model.table[q] for q in queries]), 10)
    found = sum(len({t for t, _ in result} & {texts[i] for i in truth}) for result, truth in zip(results, top))
    assert found / (10 * len(queries)) >= 0.95


def _corpus_encodes(model, texts) -> int:
    return sum(1 for n, tower in model.calls if tower == 1 and n == len(texts))


@pytest.mark.parametrize("kind", [None, "hnsw", "ivfpq"])
def test_load_or_build_keeps_the_index_and_reads_it_back_with_the_same_answers(tmp_path, kind):
    texts, vectors = random_corpus(500, 16, seed=4)
    model = TableEncoder(texts, vectors)
    built = load_or_build(model, texts, tmp_path, kind=kind)
    [folder] = tmp_path.glob("search-*")
    assert (folder / search.INDEX_FILE).is_file() and built.kind == (kind or "flat")
    again = load_or_build(model, texts, tmp_path, kind=kind)
    assert _corpus_encodes(model, texts) == 1  # read back, not encoded again
    assert again.kind == built.kind and again.search(texts[:20], 10) == built.search(texts[:20], 10)


def test_another_corpus_kind_or_model_gets_its_own_index(tmp_path):
    texts, vectors = random_corpus(300, 8, seed=5)
    model = TableEncoder(texts, vectors)
    load_or_build(model, texts, tmp_path)
    fewer = load_or_build(model, texts[:250], tmp_path)
    hnsw = load_or_build(model, texts, tmp_path, kind="hnsw")
    retrained = TableEncoder(texts, random_corpus(len(texts), 8, seed=42)[1])  # same texts, other weights
    other = load_or_build(retrained, texts, tmp_path)
    assert fewer.texts == texts[:250] and hnsw.kind == "hnsw" and _corpus_encodes(retrained, texts) == 1
    assert len(list(tmp_path.glob("search-*"))) == 4
    np.testing.assert_allclose(other.index.reconstruct(7), search.unit_rows(retrained.table[texts[7]][None])[0],
                               atol=1e-6)
    load_or_build(model, texts, tmp_path)
    assert _corpus_encodes(model, texts) == 2  # the first index was kept beside the others (hnsw encoded once)


def test_a_torn_or_stale_index_is_built_again_and_a_users_file_is_never_replaced(tmp_path):
    texts, vectors = random_corpus(200, 8, seed=6)
    model = TableEncoder(texts, vectors)
    fresh = load_or_build(model, texts, tmp_path)
    [folder] = tmp_path.glob("search-*")
    data = (folder / search.INDEX_FILE).read_bytes()
    (folder / search.INDEX_FILE).write_bytes(data[: len(data) // 2])  # torn
    assert load_or_build(model, texts, tmp_path).search(texts[:5], 5) == fresh.search(texts[:5], 5)
    meta = json.loads((folder / search.META_FILE).read_text())
    meta["stamp"]["count"] = 7  # another stamp: a stale entry
    (folder / search.META_FILE).write_text(json.dumps(meta))
    assert load_or_build(model, texts, tmp_path).search(texts[:5], 5) == fresh.search(texts[:5], 5)
    assert _corpus_encodes(model, texts) == 3
    (folder / "NOTES.md").write_text("mine", encoding="utf-8")
    (folder / search.META_FILE).unlink()
    again = load_or_build(model, texts, tmp_path)  # the cache cannot be written: the index still works
    assert again.search(texts[:5], 5) == fresh.search(texts[:5], 5)
    assert (folder / "NOTES.md").read_text(encoding="utf-8") == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder.name]  # no temporary left
    with pytest.raises(ValueError):
        load_or_build(model, [], None)


def test_no_cache_dir_builds_in_memory(tmp_path):
    texts, vectors = random_corpus(20, 4, seed=7)
    index = load_or_build(TableEncoder(texts, vectors), texts, None)
    assert index.search(texts[5], 1)[0][0][0] == texts[5]
    assert list(tmp_path.iterdir()) == []
