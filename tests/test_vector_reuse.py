"""A corpus's vectors kept in the lab's cache (core.inference.search): a second `dedup` at another threshold
encodes nothing and loads no model, a damaged cached file is encoded again, `search` and `suggest` reuse the
vectors `dedup` kept; `dedup --vectors` takes `embed`'s file or refuses it in one line; `dedup --sweep` equals
one run per threshold; `score` shows its progress per step."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.cli.main import main
from core.data import load_questions
from core.inference.dedup import threshold_range
from test_dedup import fresh_clusters
from core.inference.search import META_FILE, fingerprint
from core.inference.search import FIRST, SECOND, VectorCache, corpus_vectors
from core.models import load_model
from core.models.base import PairEncoder
from lab.session import SAMPLE_PATH

# Hand-made: four groups of rewordings (each group's questions share their words) and three loners.
CORPUS = [
    "How do I learn Python fast?", "How can I learn Python fast?", "How do I learn Python quickly?",
    "What is the best way to learn Python fast?",
    "Why is the sky blue?", "Why is the sky so blue?", "Why is the sky blue during the day?",
    "How do I bake bread at home?", "How can I bake bread at home?",
    "What is the capital of France?", "What is the capital city of France?", "Which city is the capital of France?",
    "How far away is the moon?", "Who wrote Hamlet?", "What does a cat eat?",
]


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """A lab cache of this test's own: what an earlier test cached (the tiny models on the sample) is not here."""
    monkeypatch.setenv("SIAMESE_LAB_CACHE", str(tmp_path / "lab-cache"))
    return tmp_path / "lab-cache"


@pytest.fixture
def lstm(tiny_models, tmp_path):
    return shutil.copytree(tiny_models["lstm"], tmp_path / "lstm")


@pytest.fixture
def corpus_file(tmp_path):
    path = tmp_path / "questions.txt"
    path.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def encoded(monkeypatch):
    """The texts every model's ``encode`` is asked for, in calls, as the run goes."""
    calls: list[int] = []
    original = PairEncoder.encode

    def counting(self, texts, *args, **kwargs):
        calls.append(len(texts))
        return original(self, texts, *args, **kwargs)

    monkeypatch.setattr(PairEncoder, "encode", counting)
    return calls


def run(capsys, *argv) -> tuple[int, list[str], str]:
    code = main([str(part) for part in argv])
    captured = capsys.readouterr()
    return code, captured.out.strip().splitlines(), captured.err


def dedup(capsys, model, questions, out, *extra) -> dict:
    code, lines, err = run(capsys, "dedup", "--model", model, "--questions", questions, "--out", out, *extra)
    assert code == 0, err
    return json.loads(lines[-1])


def frame(path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False)


# ---- dedup reuses its vectors ----------------------------------------------------------------------
def test_a_second_dedup_at_another_threshold_loads_no_model_and_encodes_nothing(lstm, tmp_path, capsys, encoded,
                                                                                monkeypatch):
    first = dedup(capsys, lstm, SAMPLE_PATH, tmp_path / "first.csv", "--threshold", "0.95")
    assert first["vectors"]["reused"] is False and first["vectors"]["source"] == "encoded"
    assert sum(encoded) >= first["questions"]  # the whole corpus went through the encoder once
    encoded.clear()

    def no_model(args):
        raise AssertionError("the model was loaded although its vectors are cached")

    monkeypatch.setattr("core.cli.dedup.load_backend", no_model)
    second = dedup(capsys, lstm, SAMPLE_PATH, tmp_path / "second.csv", "--threshold", "0.9")
    assert encoded == []  # not one text encoded
    assert second["vectors"] == {**first["vectors"], "reused": True, "source": "cache"}
    assert second["index"]["reused"] is True and second["threshold"] == 0.9
    # the clusters are the ones a fresh encoding gives at that threshold
    model, _ = load_model(lstm)
    expected = fresh_clusters(model, load_questions(SAMPLE_PATH)[0], 0.9)
    pd.testing.assert_frame_equal(frame(tmp_path / "second.csv"), expected, check_dtype=False, atol=1e-5)
    assert second["clusters"] == expected["cluster_id"].nunique() > 0


def test_changed_weights_or_corpus_encode_again(lstm, corpus_file, tmp_path, capsys, encoded):
    first = dedup(capsys, lstm, corpus_file, tmp_path / "a.csv", "--threshold", "0.9")
    weights = lstm / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one bit of one weight: another model
    weights.write_bytes(bytes(data))
    other_model = dedup(capsys, lstm, corpus_file, tmp_path / "b.csv", "--threshold", "0.9")
    corpus_file.write_text("\n".join(CORPUS[:-1]) + "\n", encoding="utf-8")
    other_corpus = dedup(capsys, lstm, corpus_file, tmp_path / "c.csv", "--threshold", "0.9")
    assert [s["vectors"]["reused"] for s in (first, other_model, other_corpus)] == [False, False, False]
    assert len({s["vectors"]["folder"] for s in (first, other_model, other_corpus)}) == 3


def rewrite_rows(folder, change) -> None:
    """Rewrite ``second.npy`` with ``change`` applied to its rows."""
    rows = np.load(folder / SECOND)
    change(rows)
    np.save(folder / SECOND, rows)


CORRUPTIONS = {
    "a truncated file": lambda folder: (folder / SECOND).write_bytes((folder / SECOND).read_bytes()[:-4]),
    "float64 rows": lambda folder: np.save(folder / SECOND, np.load(folder / SECOND).astype(np.float64)),
    "a NaN": lambda folder: rewrite_rows(folder, lambda rows: rows.__setitem__((3, 0), np.nan)),
    "a row not unit": lambda folder: rewrite_rows(folder, lambda rows: rows.__setitem__(5, rows[5] * 2)),
    "no meta.json": lambda folder: (folder / META_FILE).unlink(),
}


@pytest.mark.parametrize("damage", CORRUPTIONS)
def test_a_damaged_cached_vector_file_is_encoded_again_and_rewritten(lstm, corpus_file, tmp_path, capsys, encoded,
                                                                     damage):
    first = dedup(capsys, lstm, corpus_file, tmp_path / "first.csv", "--threshold", "0.9")
    folder = Path(first["vectors"]["folder"])
    good = np.load(folder / SECOND)
    CORRUPTIONS[damage](folder)
    encoded.clear()
    second = dedup(capsys, lstm, corpus_file, tmp_path / "second.csv", "--threshold", "0.9")
    assert second["vectors"]["reused"] is False and sum(encoded) >= len(CORPUS)
    np.testing.assert_array_equal(np.load(folder / SECOND), good)  # written again, whole
    pd.testing.assert_frame_equal(frame(tmp_path / "second.csv"), frame(tmp_path / "first.csv"))
    encoded.clear()
    third = dedup(capsys, lstm, corpus_file, tmp_path / "third.csv", "--threshold", "0.8")
    assert third["vectors"]["reused"] is True and encoded == []


class CountingEncoder:
    """A model of two towers (tower 0 the mirror image of tower 1) that counts the texts it encodes."""

    def __init__(self, dim: int = 6):
        self.dim, self.texts = dim, 0

    def encode(self, texts, tower=0, batch_size=256, progress=None):
        import torch

        self.texts += len(texts)
        rows = np.array([[hash((text, i)) % 97 + 1 for i in range(self.dim)] for text in texts], dtype=np.float32)
        return torch.from_numpy(rows[:, ::-1].copy() if tower == 0 else rows)


def test_the_library_keeps_both_towers_of_a_two_tower_model(tmp_path):
    cache, model = VectorCache(tmp_path), CountingEncoder()
    built = corpus_vectors(CORPUS, model, cache, model_key="m" * 64)
    assert not built.reused and built.first is not None and model.texts >= 2 * len(CORPUS)
    model.texts = 0
    again = corpus_vectors(CORPUS, model, cache, model_key="m" * 64)
    assert again.reused and model.texts == 0
    np.testing.assert_array_equal(again.second, built.second)
    np.testing.assert_array_equal(again.first, built.first)
    for mine, theirs in zip(again.for_clustering(), built.for_clustering()):
        np.testing.assert_array_equal(mine, theirs)
    assert (cache.folder("m" * 64, fingerprint(CORPUS)) / FIRST).is_file()
    assert corpus_vectors(CORPUS, model, cache, model_key="n" * 64).reused is False  # another model's key
    assert cache.load("m" * 64, CORPUS[:-1], fingerprint(CORPUS[:-1])) is None  # another corpus


def test_an_unwritable_cache_still_gives_the_vectors(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    vectors = corpus_vectors(CORPUS, CountingEncoder(), VectorCache(blocked / "vectors"), model_key="m" * 64)
    assert vectors.second.shape == (len(CORPUS), 6) and not vectors.reused


def test_search_and_suggest_reuse_the_vectors_dedup_kept(lstm, tmp_path, capsys, encoded):
    dedup(capsys, lstm, SAMPLE_PATH, tmp_path / "c.csv", "--threshold", "0.95")
    encoded.clear()
    code, lines, err = run(capsys, "search", "--model", lstm, "--corpus", SAMPLE_PATH, "Why is the sky blue?",
                           "-k", "3")
    assert code == 0 and len(lines) == 3, err
    assert sum(encoded) <= 1 + 20  # the query, and the saved index's spot check: never the 722 questions
    encoded.clear()
    code, lines, err = run(capsys, "suggest", "--model", lstm, "--questions", SAMPLE_PATH, "--n", "5",
                           "--out", tmp_path / "ask.csv")
    assert code == 0, err
    assert json.loads(lines[-1])["vectors"] == {"reused": True} and sum(encoded) == 0


# ---- dedup --vectors ------------------------------------------------------------------------------
@pytest.fixture
def embedded(lstm, tmp_path, capsys):
    code, lines, err = run(capsys, "embed", "--model", lstm, "--data", SAMPLE_PATH, "--out", tmp_path / "emb" / "v")
    assert code == 0, err
    return json.loads(lines[-1])


def test_dedup_takes_embeds_vector_file(lstm, embedded, tmp_path, capsys, encoded):
    summary = dedup(capsys, lstm, SAMPLE_PATH, tmp_path / "from_file.csv", "--threshold", "0.9",
                    "--vectors", embedded["vectors"])
    assert summary["vectors"] == {"reused": True, "source": "file", "file": embedded["vectors"]}
    assert sum(encoded) < 50  # the towers' probe and the spot check, not the corpus
    encoded_itself = dedup(capsys, lstm, SAMPLE_PATH, tmp_path / "encoded.csv", "--threshold", "0.9")
    assert encoded_itself["vectors"]["source"] == "encoded"
    pd.testing.assert_frame_equal(frame(tmp_path / "from_file.csv"), frame(tmp_path / "encoded.csv"),
                                  check_exact=False, atol=1e-5)


def with_sha256(vectors) -> Path:
    """Write ``vectors``' sha256 beside it as embed does (what a user who made their own file would run:
    ``sha256sum v.npy > v.npy.sha256``)."""
    vectors = Path(vectors)
    digest = hashlib.sha256(vectors.read_bytes()).hexdigest()
    vectors.with_name(vectors.name + ".sha256").write_text(f"{digest}  {vectors.name}\n")
    return vectors


def refused(capsys, lstm, questions, vectors, tmp_path) -> str:
    code, lines, err = run(capsys, "dedup", "--model", lstm, "--questions", questions, "--out", tmp_path / "o.csv",
                           "--vectors", vectors)
    errors = [line for line in err.strip().splitlines() if not line.startswith("data: note:")]  # the pairs' note
    assert code == 2 and len(errors) == 1 and errors[0].startswith("error: --vectors"), err
    assert not (tmp_path / "o.csv").exists()
    return errors[0]


def test_dedup_refuses_a_vector_file_of_another_count_width_order_or_model(lstm, embedded, corpus_file, tmp_path,
                                                                          capsys, tiny_models):
    vectors = np.load(embedded["vectors"])
    questions = Path(embedded["questions"])
    n, dim = vectors.shape
    assert f"holds {n:,} vectors; the corpus has {len(CORPUS)} questions" in refused(
        capsys, lstm, corpus_file, embedded["vectors"], tmp_path)
    wide = tmp_path / "wide.npy"
    np.save(wide, np.ones((n, dim + 1), dtype=np.float32))
    with_sha256(wide)
    assert f"vectors of width {dim + 1}; this model's are {dim} wide" in refused(capsys, lstm, SAMPLE_PATH, wide,
                                                                                tmp_path)
    lines = questions.read_text(encoding="utf-8").splitlines()
    questions.write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n", encoding="utf-8")
    assert "other questions than the corpus's" in refused(capsys, lstm, SAMPLE_PATH, embedded["vectors"], tmp_path)
    questions.unlink()  # no questions file: the rows themselves must be the model's
    np.save(embedded["vectors"], np.random.default_rng(0).normal(size=(n, dim)).astype(np.float32))
    with_sha256(embedded["vectors"])
    assert "was not written by this model" in refused(capsys, lstm, SAMPLE_PATH, embedded["vectors"], tmp_path)
    text = tmp_path / "text.npy"
    text.write_bytes(b"not a vector file")
    with_sha256(text)
    assert "is not a .npy vector file" in refused(capsys, lstm, SAMPLE_PATH, text, tmp_path)
    dual = tiny_models["dual-transformer"]
    dual_dim = load_model(dual)[0].embedding_dim
    one_tower = tmp_path / "dual.npy"
    np.save(one_tower, np.ones((n, dual_dim), dtype=np.float32))
    with_sha256(one_tower)
    assert "two towers differ" in refused(capsys, dual, SAMPLE_PATH, one_tower, tmp_path)



def test_dedup_reads_a_fortran_ordered_vector_file_as_its_rows(lstm, embedded, tmp_path, capsys):
    """``np.save`` of a transposed array (or ``np.asfortranarray``) writes the columns first: the same vectors."""
    vectors = np.load(embedded["vectors"])
    fortran = tmp_path / "emb" / "f.npy"
    np.save(fortran, np.asfortranarray(vectors))
    with_sha256(fortran)
    shutil.copy(embedded["questions"], tmp_path / "emb" / "f.questions.jsonl")
    assert np.load(fortran).flags.f_contiguous and not np.load(fortran).flags.c_contiguous
    from_c = dedup(capsys, lstm, SAMPLE_PATH, tmp_path / "c.csv", "--threshold", "0.9",
                   "--vectors", embedded["vectors"])
    from_f = dedup(capsys, lstm, SAMPLE_PATH, tmp_path / "f.csv", "--threshold", "0.9", "--vectors", fortran)
    assert from_f["vectors"]["source"] == "file" and from_f["clusters"] == from_c["clusters"]
    pd.testing.assert_frame_equal(frame(tmp_path / "f.csv"), frame(tmp_path / "c.csv"))


def test_dedup_takes_a_vector_file_only_with_the_sha256_embed_wrote(lstm, embedded, tmp_path, capsys):
    vectors = Path(embedded["vectors"])
    assert embedded["sha256"] == str(vectors) + ".sha256"
    rows = np.load(vectors)
    rows[[100, 200]] = rows[[200, 100]]  # two rows swapped: the model's own unit vectors, of other questions
    np.save(vectors, rows)
    assert "changed since embed wrote it" in refused(capsys, lstm, SAMPLE_PATH, vectors, tmp_path)
    Path(embedded["sha256"]).unlink()
    assert "has no v.npy.sha256 beside it" in refused(capsys, lstm, SAMPLE_PATH, vectors, tmp_path)


@pytest.mark.parametrize("version,header_bytes", [(1, 20_000), (2, 1 << 20)])
def test_dedup_refuses_a_vector_file_with_a_huge_header_in_the_labs_words(lstm, embedded, tmp_path, capsys, version,
                                                                          header_bytes):
    """numpy's own refusal says to trust the file with ``allow_pickle=True``, which the lab never sets."""
    vectors = np.load(embedded["vectors"])
    text = repr({"descr": "<f4", "fortran_order": False, "shape": vectors.shape}).encode("latin1")
    text = text[:-1] + b" " * header_bytes + b"}"
    text += b" " * (-(len(text) + 1 + (10 if version == 1 else 12)) % 64) + b"\n"
    length = len(text).to_bytes(2 if version == 1 else 4, "little")
    huge = tmp_path / "emb" / "huge.npy"
    huge.write_bytes(b"\x93NUMPY" + bytes([version, 0]) + length + text + vectors.astype("<f4").tobytes())
    with_sha256(huge)
    shutil.copy(embedded["questions"], tmp_path / "emb" / "huge.questions.jsonl")
    error = refused(capsys, lstm, SAMPLE_PATH, huge, tmp_path)
    assert "is not a .npy vector file" in error, error
    assert "allow_pickle" not in error and "max_header_size" not in error and len(error) < 300

# ---- dedup --sweep --------------------------------------------------------------------------------
def test_the_sweep_equals_dedup_one_threshold_at_a_time(lstm, corpus_file, tmp_path, capsys, encoded):
    code, lines, err = run(capsys, "dedup", "--model", lstm, "--questions", corpus_file, "--sweep", "0.5:0.98:0.06")
    assert code == 0, err
    *rows, summary = [json.loads(line) for line in lines]
    thresholds = threshold_range(0.5, 0.98, 0.06)
    assert [row["threshold"] for row in rows] == thresholds == [0.5, 0.56, 0.62, 0.68, 0.74, 0.8, 0.86, 0.92, 0.98]
    assert summary["thresholds"] == len(rows) and summary["vectors"]["reused"] is False
    assert sum(encoded) <= 2 * len(CORPUS) + 8  # one encoding for every threshold
    model, _ = load_model(lstm)
    for row in rows:
        one = dedup(capsys, lstm, corpus_file, tmp_path / f"{row['threshold']}.csv", "--threshold", row["threshold"])
        clusters = fresh_clusters(model, CORPUS, row["threshold"])  # a fresh encoding, no cache at all
        sizes = clusters.groupby("cluster_id").size()
        expected = (len(sizes), int(sizes.max()) if len(sizes) else 0, len(clusters))
        assert (row["clusters"], row["largest_cluster"], row["clustered_questions"]) == expected
        assert (one["clusters"], one["largest_cluster"], one["clustered_questions"]) == expected
    assert len({row["clustered_questions"] for row in rows}) >= 3  # the range spans different clusterings


def test_the_default_sweep_and_its_refusals(lstm, corpus_file, tmp_path, capsys):
    code, lines, err = run(capsys, "dedup", "--model", lstm, "--questions", corpus_file, "--sweep")
    assert code == 0, err
    assert [json.loads(line)["threshold"] for line in lines[:-1]] == [0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
    for extra, message in ((["--sweep", "0.9:0.5:0.1"], "START <= STOP"), (["--sweep", "0.5"], "START:STOP:STEP"),
                           (["--sweep", "--out", tmp_path / "o.csv"], "drop --out"),
                           (["--sweep", "0.5:0.9:0.1", "--threshold", "0.8"], "drop --threshold"), ([], "--out")):
        code, _, err = run(capsys, "dedup", "--model", lstm, "--questions", corpus_file, *extra)
        errors = err.strip().splitlines()
        assert code == 2 and len(errors) == 1 and message in errors[0], err


# ---- score's progress -----------------------------------------------------------------------------
def test_score_shows_reading_encoding_and_writing_on_stderr(lstm, tmp_path, capsys, monkeypatch):
    code, _, err = run(capsys, "score", "--model", lstm, "--pairs", SAMPLE_PATH, "--out", tmp_path / "quick.csv")
    assert code == 0 and "pair/s" not in err  # done within the bars' delay: no bar at all
    monkeypatch.setattr("core.cli.score.PROGRESS_DELAY", 0)  # as if every step took longer than the delay
    code, _, err = run(capsys, "score", "--model", lstm, "--pairs", SAMPLE_PATH, "--out", tmp_path / "s.csv")
    assert code == 0
    for step in ("reading", "encoding", "writing"):
        assert f"{step}: 479pair" in err, err  # each bar ends at the sample's 479 pairs


def test_a_slow_first_pass_shows_the_reading_bar_ticking(lstm, tmp_path, capsys, monkeypatch):
    import time

    from core.data import reading

    original = reading.PairReader.__init__

    def slow(self, *args, **kwargs):  # the first pass over a big file: no row read yet for a while
        time.sleep(3.0)  # many ticks past the bar's first second, however late a loaded machine wakes the ticker
        original(self, *args, **kwargs)

    monkeypatch.setattr(reading.PairReader, "__init__", slow)
    monkeypatch.setattr("core.cli.score.PROGRESS_DELAY", 0.5)
    monkeypatch.setattr("core.cli.score.TICK_SECONDS", 0.25)
    code, _, err = run(capsys, "score", "--model", lstm, "--pairs", SAMPLE_PATH, "--out", tmp_path / "s.csv")
    assert code == 0
    assert re.search(r"reading: 0pair \[00:0[1-9]", err), err  # redrawn while nothing was read, its clock moving


def test_score_file_reports_each_step_and_the_encoding_within_a_chunk(lstm, tmp_path, monkeypatch):
    from core.inference import scoring

    model, _ = load_model(lstm)
    seen = {step: [] for step in ("reading", "encoding", "writing")}
    steps = scoring.ScoreSteps(*(lambda done, total, step=step: seen[step].append(done) for step in seen))
    monkeypatch.setattr(scoring, "SCORE_STEP", 100)
    report = scoring.score_file(model, SAMPLE_PATH, tmp_path / "s.csv", 0.5, chunk_rows=300, steps=steps)
    assert report.rows == 479
    # before the first pass, then per chunk (the first chunk's 300 records hold the header, so 299 rows)
    assert seen["reading"] == [0, 299, 479]
    assert seen["encoding"] == [100, 200, 299, 399, 479]  # 100 at a time within each chunk
    assert seen["writing"] == [299, 479]
    plain = scoring.score_file(model, SAMPLE_PATH, tmp_path / "plain.csv", 0.5)
    assert plain.rows == 479
    pd.testing.assert_frame_equal(frame(tmp_path / "s.csv"), frame(tmp_path / "plain.csv"), atol=1e-6)
