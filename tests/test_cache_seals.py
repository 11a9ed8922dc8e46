"""The search index and the corpus vectors are reused only when they are byte for byte what the lab wrote: one
forged row of a saved search index, or of a cached vector file, with its sha256 written in again, is rebuilt (its
``meta.json`` no longer carries the seal of the cache's key, ``core.saving.cache_seal``); so is an entry from
before seals or one whose key was lost; and the key sealing a model folder's index is the lab's, not the folder's."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import faiss
import numpy as np
import pytest
import torch
from test_search import TableEncoder, random_corpus

from core.cli.main import main
from core.data import corpus_questions
from core.export.onnx_cache import search_root
from core.inference import search
from core.inference.search import fingerprint, load_or_build
from core.inference.vector_cache import META_FILE, SECOND, VectorCache, corpus_vectors
from core.inference.vector_index import load_or_build_kind
from core.saving.cache_seal import KEY_FILE, SEAL, cache_key, seal

QUERY = "a question outside the corpus"


def _forge_row(folder: Path, row: int, vector: np.ndarray, key: bytes | None = None) -> None:
    """What a careful forger does: one stored vector replaced, the index file's sha256 written into
    ``meta.json`` (and the meta sealed again when they hold a key)."""
    index = faiss.deserialize_index(np.frombuffer((folder / search.INDEX_FILE).read_bytes(), dtype=np.uint8))
    rows = index.reconstruct_n(0, index.ntotal)  # (N, d)
    rows[row] = search.unit_rows(vector[None])[0]
    forged = faiss.IndexFlatIP(index.d)
    forged.add(rows)
    data = faiss.serialize_index(forged).tobytes()
    (folder / search.INDEX_FILE).write_bytes(data)
    meta = json.loads((folder / search.META_FILE).read_text(encoding="utf-8"))
    meta["index_sha256"] = hashlib.sha256(data).hexdigest()
    if key is not None:
        meta[SEAL] = seal(meta, key)
    (folder / search.META_FILE).write_text(json.dumps(meta), encoding="utf-8")


def _corpus_and_query(n: int = 2000, seed: int = 21):
    """A corpus of ``n`` texts and a model that also knows ``QUERY`` (not in the corpus)."""
    texts, vectors = random_corpus(n, 8, seed=seed)
    query = np.random.default_rng(seed + 1).normal(size=8)
    return texts, query, TableEncoder(texts + [QUERY], np.vstack([vectors, query]))


@pytest.mark.parametrize("kind", ["auto", "flat"])  # load_or_build, and the --index kind's load_or_build_kind
def test_one_forged_row_with_its_hash_recomputed_is_rebuilt(tmp_path, kind):
    texts, query, model = _corpus_and_query()
    if kind == "auto":
        build, folder = lambda: load_or_build(model, texts, tmp_path), search.cache_folder(tmp_path, fingerprint(texts))
    else:
        build = lambda: load_or_build_kind(model, texts, kind, tmp_path)  # noqa: E731
        folder = tmp_path / f"index-{kind}-{fingerprint(texts)[:12]}"
    truth = build().search(QUERY, 3)[0]
    assert json.loads((folder / search.META_FILE).read_text())[SEAL] and (tmp_path / KEY_FILE).is_file()
    shown = {text for text, _ in truth}
    victims = [i for i in range(1, len(texts) - 1) if texts[i] not in shown][:3]  # never the always-checked ends
    for victim in victims:  # the spot check samples 18 of 2,000 rows: each forgery would pass it almost surely
        _forge_row(folder, victim, query)  # the victim now scores 1.0 against the query
        assert build().search(QUERY, 3)[0] == truth
    assert sum(1 for n, tower in model.calls if tower == 1 and n == len(texts)) == 1 + len(victims)  # rebuilt


def test_an_index_without_the_seal_or_the_key_is_rebuilt_and_sealed_again(tmp_path):
    texts, _, model = _corpus_and_query(n=100)
    fresh = load_or_build(model, texts, tmp_path)
    folder = search.cache_folder(tmp_path, fingerprint(texts))
    meta = json.loads((folder / search.META_FILE).read_text())
    del meta[SEAL]  # an index from before seals
    (folder / search.META_FILE).write_text(json.dumps(meta))
    load_or_build(model, texts, tmp_path)
    (tmp_path / KEY_FILE).unlink()  # a cache copied without its key, or its key lost
    again = load_or_build(model, texts, tmp_path)
    assert sum(1 for n, tower in model.calls if tower == 1 and n == len(texts)) == 3
    assert again.search(texts[:5], 3) == fresh.search(texts[:5], 3)
    load_or_build(model, texts, tmp_path)  # sealed again under the new key: reused
    assert sum(1 for n, tower in model.calls if tower == 1 and n == len(texts)) == 3


def test_a_model_folders_own_key_seals_nothing(tmp_path):
    texts, query, model = _corpus_and_query(n=500)
    models, lab = tmp_path / "model", tmp_path / "lab"
    truth = load_or_build(model, texts, models, key_root=lab).search(QUERY, 3)[0]
    assert (lab / KEY_FILE).is_file() and not (models / KEY_FILE).exists()
    # A folder handed over with a key of its own, its index forged and sealed under that key.
    folder = search.cache_folder(models, fingerprint(texts))
    _forge_row(folder, 250, query, key=cache_key(models, create=True))
    assert load_or_build(model, texts, models, key_root=lab).search(QUERY, 3)[0] == truth


# ---- the CLI ---------------------------------------------------------------------------------------
SAMPLE = str(Path(__file__).resolve().parents[1] / "assets" / "sample_pairs.csv")


def _untrained_lstm(folder: Path, texts: list[str]) -> Path:
    from core.models import SiameseLSTM, SiameseLSTMConfig
    from core.saving import save_model
    from core.text.word_tokenizer import WordTokenizer

    tokenizer = WordTokenizer.build(texts, min_freq=1, max_length=24)
    torch.manual_seed(0)
    config = SiameseLSTMConfig(vocab_size=tokenizer.vocab_size, embedding_dim=12, hidden_size=10)
    return save_model(SiameseLSTM(config, tokenizer), folder)


def _search(capsys, argv: list[str]) -> list[str]:
    assert main(argv) == 0
    return [json.loads(line)["question"] for line in capsys.readouterr().out.strip().splitlines()]


def test_cli_search_over_one_forged_row_prints_the_true_neighbours(tmp_path, capsys, sample_pairs):
    texts = corpus_questions(sample_pairs[0])
    folder = _untrained_lstm(tmp_path / "lstm", texts)
    argv = ["search", "--model", str(folder), "--corpus", SAMPLE, "-k", "5", texts[3]]

    def run() -> list[str]:
        return _search(capsys, argv)

    truth = run()
    [cache] = list(folder.glob("search-*"))
    assert (search_root() / KEY_FILE).is_file() and not (folder / KEY_FILE).exists()  # the lab's key, not the folder's
    top = faiss.deserialize_index(np.fromfile(cache / search.INDEX_FILE, dtype=np.uint8)).reconstruct(texts.index(truth[0]))
    for victim in [i for i in range(1, len(texts) - 1) if texts[i] not in truth][:2]:
        _forge_row(cache, victim, top)  # the victim now looks exactly like the best answer
        assert run() == truth


# ---- the corpus vectors ----------------------------------------------------------------------------
class UnitEncoder:
    """A two-tower model with fixed unit vectors per text that counts what it encodes."""

    def __init__(self, texts, dim: int = 6):
        rows = np.random.default_rng(3).normal(size=(len(texts), dim))
        self.table = dict(zip(texts, (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)))
        self.texts = 0

    def encode(self, texts, tower=0, batch_size=256, progress=None):
        self.texts += len(texts)
        return torch.from_numpy(np.stack([self.table[t] for t in texts]))


def _forge_vectors(folder: Path, change) -> None:
    """``second.npy`` with ``change`` applied to its rows (still unit rows), its sha256 written into ``meta.json``."""
    rows = np.load(folder / SECOND)
    change(rows)
    np.save(folder / SECOND, rows)
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    meta["sha256"][SECOND] = hashlib.sha256((folder / SECOND).read_bytes()).hexdigest()
    (folder / META_FILE).write_text(json.dumps(meta, sort_keys=True), encoding="utf-8")


def test_an_edited_vector_file_with_its_hash_recomputed_is_not_used(tmp_path):
    texts = [f"question {i}" for i in range(50)]
    cache, model = VectorCache(tmp_path / "vectors"), UnitEncoder(texts)
    built = corpus_vectors(texts, model, cache, model_key="m" * 64)
    folder = cache.folder("m" * 64, fingerprint(texts))
    assert json.loads((folder / META_FILE).read_text())[SEAL] and (cache.root / KEY_FILE).is_file()
    _forge_vectors(folder, lambda rows: rows.__setitem__(7, rows[0]))  # one question's row copied over another's
    model.texts = 0
    again = corpus_vectors(texts, model, cache, model_key="m" * 64)
    assert not again.reused and model.texts >= len(texts)  # encoded again
    np.testing.assert_array_equal(again.second, built.second)
    np.testing.assert_array_equal(np.load(folder / SECOND), built.second)  # and written over, sealed
    assert corpus_vectors(texts, model, cache, model_key="m" * 64).reused
    meta = json.loads((folder / META_FILE).read_text())
    del meta[SEAL]  # an entry from before seals
    (folder / META_FILE).write_text(json.dumps(meta))
    assert not corpus_vectors(texts, model, cache, model_key="m" * 64).reused
    (cache.root / KEY_FILE).unlink()  # the key lost
    assert not corpus_vectors(texts, model, cache, model_key="m" * 64).reused
    assert corpus_vectors(texts, model, cache, model_key="m" * 64).reused


def test_cli_search_builds_no_index_from_an_edited_vector_cache(tmp_path, capsys, monkeypatch, sample_pairs):
    monkeypatch.setenv("SIAMESE_LAB_CACHE", str(tmp_path / "lab-cache"))  # a vector cache of this test's own
    texts = corpus_questions(sample_pairs[0])
    lstm = _untrained_lstm(tmp_path / "lstm", texts)
    argv = ["search", "--model", str(lstm), "--corpus", SAMPLE, "-k", "5", "How do I learn python?"]

    def run() -> list[str]:
        for index in lstm.glob("search-*"):  # no saved index: built from the cached vectors
            shutil.rmtree(index)
        return _search(capsys, argv)

    truth = run()
    [folder] = [path for path in (tmp_path / "lab-cache" / "vectors").iterdir() if path.is_dir()]
    victim = next(i for i in range(len(texts)) if texts[i] not in truth)
    _forge_vectors(folder, lambda rows: rows.__setitem__(victim, rows[texts.index(truth[0])]))
    assert run() == truth
