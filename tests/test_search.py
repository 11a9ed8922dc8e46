"""core.inference.search against brute force: exact FlatIP, HNSW recall, save/load, the fingerprint cache, and a
cache someone tampered with (rebuilt, never trusted)."""
from __future__ import annotations

import hashlib
import json
import os
import resource
from pathlib import Path

import faiss
import numpy as np
import pandas as pd
import pytest
import torch

from core.data import corpus_questions
from core.inference import search
from core.inference.search import (
    SearchIndex,
    fingerprint,
    load_or_build,
    model_fingerprint,
)


class TableEncoder:
    """A fake model: each text is looked up in a fixed table of vectors (not unit length, so the
    index's own normalisation is exercised). Records every encode call."""

    def __init__(self, texts: list[str], vectors: np.ndarray):
        self.table = {t: v for t, v in zip(texts, vectors)}
        self.calls: list[tuple[int, int]] = []  # (number of texts, tower)
        self._weights = torch.from_numpy(np.asarray(vectors, dtype=np.float32).copy())

    def state_dict(self):  # what search.model_fingerprint hashes
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


def test_saving_again_replaces_the_index_whole_and_never_a_folder_holding_a_users_file(tmp_path):
    texts, vectors = random_corpus(200, 8, seed=6)
    model = TableEncoder(texts, vectors)
    folder = tmp_path / "idx"
    SearchIndex.build(model, texts[:100]).save(folder)
    SearchIndex.build(model, texts).save(folder)
    assert SearchIndex.load(folder, model).texts == texts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # no temporary or previous folder left
    (folder / "NOTES.md").write_text("mine", encoding="utf-8")
    with pytest.raises(OSError, match=r"holds NOTES\.md, which Siamese Lab did not write"):  # a cache not written
        SearchIndex.build(model, texts[:50]).save(folder)
    assert (folder / "NOTES.md").read_text(encoding="utf-8") == "mine"
    assert SearchIndex.load(folder, model).texts == texts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_load_or_build_reuses_a_matching_index_and_rebuilds_on_mismatch(tmp_path):
    texts, vectors = random_corpus(300, 8, seed=5)
    model = TableEncoder(texts, vectors)
    first = load_or_build(model, texts, tmp_path)
    folder = search.cache_folder(tmp_path, fingerprint(texts))
    assert (folder / search.INDEX_FILE).is_file()
    # Whole-corpus encodes (a load re-encodes only a few sampled texts to check the stored vectors).
    corpus_encodes = lambda: sum(1 for n, tower in model.calls if tower == 1 and n > search.SPOT_CHECKS + 2)  # noqa: E731
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
    assert sum(1 for n, tower in model.calls if tower == 1 and n == len(texts)) == 2
    with pytest.raises(ValueError):
        SearchIndex.build(model, [])


def test_no_cache_dir_builds_in_memory(tmp_path):
    texts, vectors = random_corpus(20, 4, seed=7)
    index = load_or_build(TableEncoder(texts, vectors), texts, None)
    assert index.search(texts[5], 1)[0][0][0] == texts[5]
    assert list(tmp_path.iterdir()) == []


# ---- a cache someone tampered with -----------------------------------------------------------------
def _cached(tmp_path, n=300, dim=8, seed=11):
    texts, vectors = random_corpus(n, dim, seed=seed)
    model = TableEncoder(texts, vectors)
    fresh = load_or_build(model, texts, tmp_path)
    return texts, model, fresh, search.cache_folder(tmp_path, fingerprint(texts))


def _full_encodes(model, texts) -> int:
    return sum(1 for n, tower in model.calls if tower == 1 and n == len(texts))


def _flat(vectors) -> bytes:
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(search.unit_rows(vectors))
    return faiss.serialize_index(index).tobytes()


def test_meta_records_what_the_index_was_built_from(tmp_path):
    texts, model, _, folder = _cached(tmp_path)
    meta = json.loads((folder / search.META_FILE).read_text())
    assert meta["count"] == len(texts) and meta["dim"] == 8 and meta["fingerprint"] == fingerprint(texts)
    assert meta["model"] == model_fingerprint(model)
    assert meta["index_sha256"] == hashlib.sha256((folder / search.INDEX_FILE).read_bytes()).hexdigest()


@pytest.mark.parametrize("rewrite_meta", [False, True])
def test_a_swapped_index_of_the_same_width_is_rebuilt(tmp_path, rewrite_meta):
    texts, model, fresh, folder = _cached(tmp_path)
    other = random_corpus(len(texts), 8, seed=99)[1]  # same count, same width, other vectors
    data = _flat(other)
    (folder / search.INDEX_FILE).write_bytes(data)
    if rewrite_meta:  # the hash updated too: the sampled vectors still give it away
        meta = json.loads((folder / search.META_FILE).read_text())
        meta["index_sha256"] = hashlib.sha256(data).hexdigest()
        (folder / search.META_FILE).write_text(json.dumps(meta))
    again = load_or_build(model, texts, tmp_path)
    assert _full_encodes(model, texts) == 2  # rebuilt
    queries = texts[:10]
    assert again.search(queries, 5) == fresh.search(queries, 5)


@pytest.mark.parametrize("rewrite_meta", [False, True])
def test_an_index_of_another_width_is_rebuilt_without_assertion_error(tmp_path, rewrite_meta):
    texts, model, fresh, folder = _cached(tmp_path)
    data = _flat(random_corpus(len(texts), 5, seed=3)[1])  # width 5, not 8
    (folder / search.INDEX_FILE).write_bytes(data)
    if rewrite_meta:
        meta = json.loads((folder / search.META_FILE).read_text())
        meta.update(index_sha256=hashlib.sha256(data).hexdigest(), dim=5)
        (folder / search.META_FILE).write_text(json.dumps(meta))
    with pytest.raises(ValueError):
        SearchIndex.load(folder, model)
    again = load_or_build(model, texts, tmp_path)
    assert again.index.d == 8 and _full_encodes(model, texts) == 2
    assert again.search(texts[:10], 5) == fresh.search(texts[:10], 5)


def test_an_index_built_by_another_model_is_rebuilt(tmp_path):
    texts, model, fresh, _ = _cached(tmp_path)
    retrained = TableEncoder(texts, random_corpus(len(texts), 8, seed=42)[1])  # same texts, other weights
    again = load_or_build(retrained, texts, tmp_path)
    assert _full_encodes(retrained, texts) == 1  # encoded afresh, not read back
    np.testing.assert_allclose(again.index.reconstruct(7), search.unit_rows(retrained.table[texts[7]][None])[0],
                               atol=1e-6)


@pytest.mark.timeout(120)  # it ran for minutes before; a hang fails here
@pytest.mark.parametrize("tamper", ["fifo", "dev-zero", "garbage", "other-type", "too-big", "bad-meta"])
def test_unusable_cache_files_are_rebuilt_quickly(tmp_path, tamper):
    texts, model, fresh, folder = _cached(tmp_path)
    index_path = folder / search.INDEX_FILE
    index_path.unlink()
    if tamper == "fifo":
        os.mkfifo(index_path)
    elif tamper == "dev-zero":
        index_path.symlink_to("/dev/zero")
    elif tamper == "garbage":
        index_path.write_bytes(b"IxFI" + os.urandom(200))
    elif tamper == "other-type":
        index_path.write_bytes(faiss.serialize_index(faiss.IndexFlatL2(8)).tobytes())
    elif tamper == "too-big":
        with open(index_path, "wb") as handle:
            handle.truncate(search._index_max_bytes(len(texts), 8) + 1)  # sparse: costs no disk
    elif tamper == "bad-meta":
        index_path.write_bytes(_flat(np.ones((len(texts), 8))))
        (folder / search.META_FILE).write_text("[" * 100_000)
    again = load_or_build(model, texts, tmp_path)
    assert _full_encodes(model, texts) == 2
    assert again.search(texts[:5], 3) == fresh.search(texts[:5], 3)


def _rewrite_meta(folder, data: bytes, **changes) -> None:
    """What a careful forger does: make meta.json describe the swapped index."""
    meta = json.loads((folder / search.META_FILE).read_text())
    meta.update(index_sha256=hashlib.sha256(data).hexdigest(), **changes)
    (folder / search.META_FILE).write_text(json.dumps(meta))


@pytest.mark.parametrize("forgery", ["garbage", "other-type", "huge-vector-size", "ntotal-lies"])
def test_forged_index_files_are_refused_by_the_parser_checks(tmp_path, forgery):
    texts, model, fresh, folder = _cached(tmp_path)
    data = bytearray((folder / search.INDEX_FILE).read_bytes())
    if forgery == "garbage":
        data = bytearray(b"IxFI" + bytes(range(256)) * 4)
    elif forgery == "other-type":
        l2 = faiss.IndexFlatL2(8)
        l2.add(np.ones((len(texts), 8), dtype=np.float32))
        data = bytearray(faiss.serialize_index(l2).tobytes())
    elif forgery == "huge-vector-size":
        data[37:45] = (2**38).to_bytes(8, "little")  # the stored vectors' byte count: 256 GiB
    elif forgery == "ntotal-lies":
        data[8:16] = (10**9).to_bytes(8, "little")
    (folder / search.INDEX_FILE).write_bytes(bytes(data))
    _rewrite_meta(folder, bytes(data))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError):
        SearchIndex.load(folder, model)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB: nothing big allocated
    again = load_or_build(model, texts, tmp_path)
    assert _full_encodes(model, texts) == 2
    assert again.search(texts[:5], 3) == fresh.search(texts[:5], 3)


def test_cli_search_over_a_tampered_cache_prints_the_true_neighbours(tmp_path, capsys, sample_pairs):
    from core.cli.main import main
    from core.models import SiameseLSTM, SiameseLSTMConfig
    from core.saving import save_model
    from core.text.word_tokenizer import WordTokenizer

    pairs, _ = sample_pairs
    texts = corpus_questions(pairs)
    tokenizer = WordTokenizer.build(texts, min_freq=1, max_length=24)
    torch.manual_seed(0)
    config = SiameseLSTMConfig(vocab_size=tokenizer.vocab_size, embedding_dim=12, hidden_size=10)
    folder = save_model(SiameseLSTM(config, tokenizer), tmp_path / "lstm")
    corpus = str(Path(__file__).resolve().parents[1] / "assets" / "sample_pairs.csv")
    argv = ["search", "--model", str(folder), "--corpus", corpus, "-k", "5", texts[3]]

    def run() -> list[str]:
        assert main(argv) == 0
        return capsys.readouterr().out.strip().splitlines()

    truth = run()
    [cache] = list(folder.glob("search-*"))
    for width, forge in ((10, False), (10, True), (7, False), (7, True)):
        data = _flat(random_corpus(len(texts), width, seed=width)[1])
        (cache / search.INDEX_FILE).write_bytes(data)
        if forge:
            _rewrite_meta(cache, data, dim=width)
        assert run() == truth, (width, forge)


def test_an_hnsw_graph_pointing_outside_the_vectors_is_refused(tmp_path):
    texts, vectors = random_corpus(300, 8, seed=12)
    model = TableEncoder(texts, vectors)
    built = SearchIndex.build(model, texts, flat_limit=100)
    assert built.kind == "hnsw"
    neighbours = faiss.vector_to_array(built.index.hnsw.neighbors)
    neighbours[neighbours >= 0] = 10**6  # ids of vectors that do not exist
    faiss.copy_array_to_vector(neighbours, built.index.hnsw.neighbors)
    built.save(tmp_path / "idx")
    with pytest.raises(ValueError, match="graph"):
        SearchIndex.load(tmp_path / "idx", model)
