"""core.inference.dedup_graph (community clusters on a k-NN graph), core.inference.dedup (texts in, table out),
core.data.load_questions and `python -m core dedup`."""
from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.cli.main import main
from core.data import DataError, corpus_questions, load_questions
from core.inference.calibration import clustering_threshold
from core.inference.dedup import (
    COLUMNS,
    OUTSIZED_MIN_SIZE,
    OUTSIZED_SHARE,
    clusters_frame,
    outsized_cluster_note,
    write_csv_chunks,
)
from core.inference.dedup_graph import DEFAULT_K, NeighbourGraph
from core.inference.search import corpus_vectors
from core.models import load_model
from core.saving.safe_csv import FORMULA_STARTS
from lab.session import SAMPLE_PATH
from tests.conftest import parquet_bytes



def cluster(vectors, threshold: float, min_size: int = 2, k: int = DEFAULT_K):
    """What dedup does with a corpus's unit vectors: a ``NeighbourGraph`` of them, clustered."""
    return NeighbourGraph(vectors, k=k).cluster(threshold, min_size)


def fresh_clusters(model, texts, threshold: float, min_size: int = 2) -> pd.DataFrame:
    """The Dedup page's table of ``texts`` under ``model``, from a fresh encoding: ``corpus_vectors``, a
    ``NeighbourGraph``, ``clusters_frame``."""
    texts = list(texts)
    vectors, queries = corpus_vectors(texts, model).for_clustering()
    return clusters_frame(NeighbourGraph(vectors, queries=queries).cluster(threshold, min_size), texts)


def unit(rows) -> np.ndarray:
    x = np.asarray(rows, dtype=np.float64)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def reference(vectors: np.ndarray, threshold: float, min_size: int) -> list[tuple[int, list[int]]]:
    """community_detection by brute force on the full cosine matrix (cosine strictly above the threshold):
    (representative, sorted members) per cluster, largest first."""
    sims = vectors @ vectors.T  # (N, N)
    n = len(vectors)
    near = [set(np.flatnonzero(sims[i] > np.float32(threshold)).tolist()) | {i} for i in range(n)]
    order = sorted(range(n), key=lambda i: (-len(near[i]), i))
    used, found = set(), []
    for centre in order:
        if len(near[centre]) < min_size or centre in used:
            continue
        members = near[centre] - used
        if len(members) >= min_size:
            found.append((centre, sorted(members)))
            used |= members
    return sorted(found, key=lambda c: -len(c[1]))


def as_sets(clusters) -> list[tuple[int, list[int]]]:
    return [(c.representative, sorted(c.members.tolist())) for c in clusters]


def blobs(seed: int, n: int = 300, d: int = 6, repeats: int = 0) -> np.ndarray:
    """Unit vectors around n/8 centres; ``repeats`` rows are exact copies of earlier or later rows."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(1, n // 8), d))
    x = unit(centres[rng.integers(0, len(centres), n)] + rng.normal(scale=0.35, size=(n, d)))
    x[rng.integers(0, n, repeats)] = x[rng.integers(0, n, repeats)]
    return x


# ---- the clustering rule --------------------------------------------------------------------------
def test_invariants_on_hand_made_vectors():
    angles = np.radians([0, 5, 9, 60, 64, 120, 200, 206, 212, 218])
    vectors = unit(np.stack([np.cos(angles), np.sin(angles)], axis=1))
    threshold = float(np.cos(np.radians(10)))
    clusters = cluster(vectors, threshold, min_size=2)
    sims = vectors @ vectors.T
    seen = set()
    for c in clusters:
        assert c.size >= 2 and c.members[0] == c.representative
        assert not seen & set(c.members.tolist())  # no question in two clusters
        seen |= set(c.members.tolist())
        for member, similarity in zip(c.members[1:], c.similarities[1:]):
            assert sims[c.representative, member] > threshold
            assert similarity == pytest.approx(sims[c.representative, member], abs=1e-6)
        assert list(c.similarities[1:]) == sorted(c.similarities[1:], reverse=True)
    assert [c.size for c in clusters] == sorted((c.size for c in clusters), reverse=True)
    # 0, 5, 9 and 206, 212 have 3 neighbours each (themselves included): the earliest first; 218 is
    # only close to 212, already taken, and 120 is alone.
    assert as_sets(clusters) == [(0, [0, 1, 2]), (7, [6, 7, 8]), (3, [3, 4])]
    assert 5 not in seen and 9 not in seen


def test_no_chaining_through_intermediate_questions():
    angles = np.radians([0, 8, 16, 24, 32])  # neighbours 8 degrees apart: a chain, not a clique
    vectors = unit(np.stack([np.cos(angles), np.sin(angles)], axis=1))
    clusters = cluster(vectors, float(np.cos(np.radians(10))), min_size=2)
    assert as_sets(clusters) == [(1, [0, 1, 2]), (3, [3, 4])]  # connected components would give one of 5


def test_the_threshold_is_strictly_above():
    vectors = np.array([[1, 0, 0, 0], [0.5, 0.5, 0.5, 0.5]], dtype=np.float32)  # cosine exactly 0.5
    assert cluster(vectors, 0.5, min_size=2) == []
    assert as_sets(cluster(vectors, 0.4999, min_size=2)) == [(0, [0, 1])]
    identical = np.ones((3, 4), dtype=np.float32) / 2
    assert as_sets(cluster(identical, 0.99, min_size=2)) == [(0, [0, 1, 2])]
    assert as_sets(cluster(identical, 0.99, min_size=4)) == []
    # identical rows are one question repeated: duplicates whatever the threshold, even at 1
    assert as_sets(cluster(np.vstack([identical, vectors[:1]]), 1.0, min_size=2)) == [(0, [0, 1, 2])]


@pytest.mark.parametrize("seed", range(8))
def test_equals_a_brute_force_community_detection(seed):
    vectors = blobs(seed, repeats=60 * (seed % 2))  # odd seeds: a fifth of the rows repeated
    rng = np.random.default_rng(100 + seed)
    for _ in range(3):
        threshold, min_size, k = float(rng.uniform(0.5, 0.95)), int(rng.integers(1, 6)), int(rng.integers(1, 60))
        assert as_sets(cluster(vectors, threshold, min_size, k=k)) == reference(vectors, threshold, min_size)


def test_adaptive_k_finds_big_neighbourhoods_with_a_small_first_search():
    vectors = blobs(3, n=400, d=3)  # few dimensions: large neighbourhoods
    graph = NeighbourGraph(vectors, k=2)
    exact = reference(vectors, 0.6, 2)
    assert max(len(members) for _, members in exact) > 20
    assert as_sets(graph.cluster(0.6, 2)) == exact
    assert as_sets(graph.cluster(0.9, 3)) == reference(vectors, 0.9, 3)  # the same graph, another threshold


def test_a_neighbourhood_deeper_than_the_cap_keeps_its_closest_and_is_counted():
    rng = np.random.default_rng(7)
    group = unit(np.array([1.0, 0, 0, 0, 0]) + rng.normal(scale=0.05, size=(30, 5)))  # 30 mutual neighbours
    others = unit(rng.normal(size=(40, 5)) * np.array([0.0, 1, 1, 1, 1]))  # orthogonal to the group's axis
    vectors = np.vstack([group, others])
    sims = vectors @ vectors.T
    assert (sims[:30, :30] > 0.9).all() and (sims[:30, 30:] < 0.5).all()

    whole = NeighbourGraph(vectors, k=4, max_neighbourhood=64)
    assert as_sets(whole.cluster(0.9, 2)) == reference(vectors, 0.9, 2) and whole.capped == 0
    assert [c.size for c in whole.cluster(0.9, 2)][0] == 30

    capped = NeighbourGraph(vectors, k=4, max_neighbourhood=8)
    clusters = capped.cluster(0.9, 2)
    assert capped.capped == 30  # every member of the group has 29 neighbours above 0.9, more than 8
    first = clusters[0]  # row 0's 8 closest: itself and the 7 group members nearest to it
    assert first.representative == 0 and first.size == 8
    assert sorted(first.members.tolist()) == sorted(np.argsort(-sims[0, :30], kind="stable")[:8].tolist())
    for c in clusters:  # the invariants hold under the cap
        assert c.size <= 8 and (sims[c.representative, c.members] > np.float32(0.9)).all()
    members = np.concatenate([c.members for c in clusters])
    assert len(set(members.tolist())) == len(members)
    assert all(set(c.members.tolist()) <= set(range(30)) for c in clusters if c.representative < 30)
    assert NeighbourGraph(vectors, k=8, max_neighbourhood=4).max_neighbourhood == 8  # never below k


def test_the_capped_note_names_the_count_the_cap_and_the_threshold():
    from core.inference.dedup_graph import capped_note

    assert capped_note(0, 1024, 0.9) is None
    note = capped_note(12_345, 1024, 0.925)
    assert note.startswith("12,345 questions have more than 1,024 neighbours above the threshold 0.925;")


def test_a_hash_collision_falls_back_to_comparing_the_bytes(monkeypatch):
    import core.inference.dedup_graph as dedup_rows

    vectors = blobs(11, n=120, repeats=30)
    honest = dedup_rows.distinct_rows(vectors, vectors)
    monkeypatch.setattr(dedup_rows, "_row_hashes", lambda rows: np.zeros(len(rows), dtype=np.uint64))  # all collide
    colliding = dedup_rows.distinct_rows(vectors, vectors)
    for a, b in zip(honest, colliding):
        assert np.array_equal(a, b)
    first, inverse, counts = honest
    assert len(first) == len(np.unique(vectors, axis=0)) and counts.sum() == 120
    assert (vectors[first[inverse]] == vectors).all()
    assert as_sets(cluster(vectors, 0.8, 2)) == reference(vectors, 0.8, 2)  # clusters under collisions too


def test_many_copies_of_one_question_cost_one_search():
    rng = np.random.default_rng(0)
    vectors = np.vstack([np.tile(unit(rng.normal(size=(1, 16))), (100_000, 1)), unit(rng.normal(size=(50, 16)))])
    graph = NeighbourGraph(vectors, k=4)
    assert graph.vectors.shape == (51, 16)  # the copies are indexed once
    clusters = graph.cluster(0.9, 2)
    assert clusters[0].size >= 100_000 and clusters[0].representative == 0
    assert np.array_equal(clusters[0].members[:100_000], np.arange(100_000))


def test_hnsw_graph_agrees_with_the_exact_one_on_small_data():
    vectors = blobs(5, n=500)
    exact = as_sets(cluster(vectors, 0.8, 2))
    approximate = NeighbourGraph(vectors, index_kind="hnsw")
    assert approximate.kind == "hnsw"
    assert as_sets(approximate.cluster(0.8, 2)) == exact


def test_equals_sentence_transformers_community_detection():
    util = pytest.importorskip("sentence_transformers.util")
    compared = 0
    for seed in range(4):
        vectors = blobs(seed, n=250, repeats=40 * (seed % 2))
        for threshold, min_size in ((0.7, 2), (0.85, 3), (0.6, 5)):
            sims = vectors @ vectors.T
            if np.abs(sims - threshold).min() < 1e-5:  # a cosine at the threshold itself: >= and > differ
                continue
            theirs = util.community_detection(vectors, threshold=threshold, min_community_size=min_size)
            ours = cluster(vectors, threshold, min_size)
            assert [(c[0], sorted(c)) for c in theirs] == as_sets(ours)
            assert [c[0] for c in theirs] == [c.representative for c in ours]
            compared += 1
    assert compared >= 8


def test_degenerate_inputs():
    assert cluster(np.zeros((0, 4), dtype=np.float32), 0.5) == []
    assert cluster(unit([[1.0, 2.0]]), 0.5) == []
    assert as_sets(cluster(unit([[1.0, 2.0]]), 0.5, min_size=1)) == [(0, [0])]
    with pytest.raises(ValueError):
        cluster(np.array([[np.nan, 1.0]], dtype=np.float32), 0.5)
    frame = clusters_frame([], [])
    assert list(frame.columns) == COLUMNS and frame.empty


# ---- reading questions ----------------------------------------------------------------------------
@pytest.mark.parametrize("header", ["question", "text", "sentence", "title", "q", "Question "])
def test_a_question_column_by_any_alias(header):
    data = f"id,{header},other\n1,How do I cook rice?,x\n2,,y\n3,\"Is it hot, really?\",z\n".encode()
    questions, report = load_questions(data)
    assert questions == ["How do I cook rice?", "Is it hot, really?"]
    assert report.shape == "column" and report.dropped == {"empty question": 1}
    assert report.examples == [(3, "empty question")]


def test_a_parquet_corpus_is_read_by_its_column_names(tmp_path):
    path = tmp_path / "corpus.parquet"
    path.write_bytes(parquet_bytes(pd.DataFrame({"id": [7, 8, 9, 10], "Text": ["  How do I cook rice? ", None, "",
                                                                          "Is it hot, really?"]})))
    questions, report = load_questions(path)
    assert questions == ["How do I cook rice?", "Is it hot, really?"]
    assert (report.shape, report.columns, report.source) == ("column", ["Text"], "corpus.parquet")
    assert report.rows_read == 4 and report.dropped == {"empty question": 2}
    assert report.examples == [(2, "empty question"), (3, "empty question")]  # row numbers, from 1
    pairs = parquet_bytes(pd.DataFrame({"question1": ["A", "B", "C"], "question2": ["B", "", "A"],
                                   "is_duplicate": [1, 0, 0]}))
    questions, report = load_questions(pairs)
    assert questions == ["A", "B", "C"] and report.shape == "pairs"  # distinct questions of both columns
    only = load_questions(parquet_bytes(pd.DataFrame({"body": ["one?", "two?"]})))  # one column, any name
    assert only[0] == ["one?", "two?"] and only[1].columns == ["body"]
    assert load_questions(parquet_bytes(pd.DataFrame({"q": [1, 22]})))[0] == ["1", "22"]  # read as text


def test_a_parquet_corpus_without_a_question_column_or_over_the_cap_is_refused(tmp_path):
    with pytest.raises(DataError, match="no question column among id, body"):
        load_questions(parquet_bytes(pd.DataFrame({"id": [1], "body": ["x?"]})))
    with pytest.raises(DataError, match="could not read <upload> as Parquet"):
        load_questions(b"PAR1" + b"not really parquet")
    nested = parquet_bytes(pd.DataFrame({"question": [{"text": "Why?"}], "tags": [["a"]]}))  # a struct column
    with pytest.raises(DataError, match=r"column\(s\) question of <upload> as text: they hold struct<text: string>"):
        load_questions(nested)
    data = parquet_bytes(pd.DataFrame({"question": ["Why?"] * 50}))
    with pytest.raises(DataError, match="the limit is"):
        load_questions(data, max_bytes=len(data) - 1)
    path = tmp_path / "big.parquet"
    path.write_bytes(data)
    with pytest.raises(DataError, match="big.parquet holds more than"):
        load_questions(path, max_bytes=100)


def test_one_column_plain_text_pairs_and_gzip(tmp_path, sample_pairs):
    questions, report = load_questions(b"question\nWhat is a, b?\n\n\"Quoted, yes\"\n")
    assert questions == ["What is a, b?", "Quoted, yes"] and report.dropped == {"empty question": 1}
    text = "How do I learn?\n\n  How can I learn?  \nHow do I learn?\n\n"
    questions, report = load_questions(text.encode())
    assert questions == ["How do I learn?", "How can I learn?", "How do I learn?"]  # repeats kept: duplicates
    assert report.shape == "lines" and report.dropped == {"empty question": 1}
    assert report.examples == [(2, "empty question")]
    questions, report = load_questions(SAMPLE_PATH)
    assert questions == corpus_questions(sample_pairs[0]) and report.shape == "pairs"
    path = tmp_path / "q.txt.gz"
    path.write_bytes(gzip.compress("¿Qué es?\nWhat is it?\n".encode("utf-8")))
    assert load_questions(path)[0] == ["¿Qué es?", "What is it?"]
    q1q2 = load_questions(b"q1\tq2\nA\tB\nB\t\nC\tA\n")
    assert q1q2[0] == ["A", "B", "C"] and q1q2[1].dropped == {"empty question": 1}  # labels are not needed


@pytest.mark.parametrize("data, message", [
    (b"", "empty"), (b"  \n\n", "empty"), (b"question\n", "no questions"), (b"text,label\n,1\n ,0\n", "no usable"),
    (b"\x00\x01\x02binary\x00", "binary"),
])
def test_unusable_questions_files(data, message):
    with pytest.raises(DataError, match=message):
        load_questions(data)


def test_a_100k_character_question_is_read_and_clustered(tiny_models):
    long = "why " * 25_000
    questions, _ = load_questions(f"question\n{long}\nshort one\n".encode())
    assert questions[0] == long.strip() and len(questions[0]) > 99_000
    model, _ = load_model(tiny_models["lstm"])
    frame = fresh_clusters(model, [long, long, "short one"], threshold=0.9999)
    assert frame["cluster_size"].tolist() == [2, 2]


# ---- texts -> table -------------------------------------------------------------------------------
def test_all_identical_questions_make_one_cluster(tiny_models):
    model, _ = load_model(tiny_models["lstm"])
    frame = fresh_clusters(model, ["What is love?"] * 7, threshold=0.9)
    assert list(frame.columns) == COLUMNS
    assert frame["cluster_id"].tolist() == [1] * 7 and frame["cluster_size"].tolist() == [7] * 7
    assert frame["similarity_to_representative"].min() == pytest.approx(1.0, abs=1e-5)
    assert fresh_clusters(model, ["Only one?"], threshold=0.5).empty


def test_a_two_tower_model_clusters_by_the_mean_of_both_pair_orders(tiny_models):
    model, _ = load_model(tiny_models["dual-transformer"])
    texts = corpus_questions(pd.read_csv(SAMPLE_PATH))[:60]
    vectors, queries = corpus_vectors(texts, model).for_clustering()
    assert queries is not None  # its towers differ
    first = np.arange(0, 60, 7)
    second = np.arange(3, 63, 7) % 60
    expected = (model.score_pairs([texts[i] for i in first], [texts[j] for j in second])
                + model.score_pairs([texts[j] for j in second], [texts[i] for i in first])) / 2
    np.testing.assert_allclose((queries[first] * vectors[second]).sum(1), expected, atol=1e-5)


def test_an_outsized_cluster_is_more_than_a_tenth_of_the_corpus_and_at_least_20_questions():
    assert (OUTSIZED_SHARE, OUTSIZED_MIN_SIZE) == (0.10, 20)
    assert outsized_cluster_note(21, 200, 0.493) is not None and outsized_cluster_note(20, 200, 0.493) is None
    assert outsized_cluster_note(19, 25, 0.5) is None  # 76% of a small corpus: below the floor
    assert outsized_cluster_note(0, 0, 0.5) is None
    note = outsized_cluster_note(550, 1000, 0.493)
    assert note.startswith("550 of the 1,000 questions (55%) are in one cluster at the threshold 0.493")
    assert "Raise the threshold" in note


# ---- the command ----------------------------------------------------------------------------------
@pytest.fixture
def lstm_folder(tiny_models, tmp_path):
    return shutil.copytree(tiny_models["lstm"], tmp_path / "lstm")


def read_out(path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False)


def check_table(frame: pd.DataFrame, threshold: float, min_size: int = 2) -> None:
    assert list(frame.columns) == COLUMNS
    assert frame["question"].is_unique  # no question in two clusters (the sample's questions are distinct)
    sizes = frame.groupby("cluster_id").size()
    assert (sizes >= min_size).all() and (sizes == frame.groupby("cluster_id")["cluster_size"].first()).all()
    assert list(sizes.index) == list(range(1, len(sizes) + 1)) and sizes.is_monotonic_decreasing
    assert frame["cluster_id"].is_monotonic_increasing
    firsts = frame.groupby("cluster_id").head(1)
    assert (firsts["question"] == firsts["representative"]).all()
    others = frame.drop(firsts.index)
    assert (others["similarity_to_representative"] > threshold).all()


def test_cli_on_the_bundled_sample(lstm_folder, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SIAMESE_LAB_CACHE", str(tmp_path / "cache"))  # no vectors cached by an earlier test: encoded
    out = tmp_path / "clusters.csv"
    assert main(["dedup", "--model", str(lstm_folder), "--questions", str(SAMPLE_PATH), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    _, config = load_model(lstm_folder)
    default = clustering_threshold(config)
    threshold = default.threshold
    assert summary["threshold"] == pytest.approx(threshold) and summary["search"] == "exact"
    assert summary["threshold_source"] == default.source
    assert f"threshold: {threshold:.4g} ({default.source})" in captured.err
    assert "encoding" in captured.err  # the progress bar
    frame = read_out(out)
    check_table(frame, threshold)
    assert summary["clusters"] == frame["cluster_id"].nunique() and summary["clustered_questions"] == len(frame)
    assert set(frame["question"]) <= set(load_questions(SAMPLE_PATH)[0])
    # the same clusters as the library gives, and the same at -k 1 (every neighbourhood searched deeper)
    model, _ = load_model(lstm_folder)
    expected = fresh_clusters(model, load_questions(SAMPLE_PATH)[0], threshold)
    pd.testing.assert_frame_equal(frame, expected, check_dtype=False, atol=1e-5)
    again = tmp_path / "again.csv"
    assert main(["dedup", "--model", str(lstm_folder), "--questions", str(SAMPLE_PATH), "--out", str(again),
                 "-k", "1", "--threshold", str(threshold)]) == 0
    pd.testing.assert_frame_equal(read_out(again), frame)
    assert summary["capped_questions"] == 0 and "neighbours above the threshold" not in captured.err
    # the tiny model, worse than chance, records no clustering threshold: at its pair threshold everything may
    # be one cluster, and the command says so
    note = outsized_cluster_note(summary["largest_cluster"], summary["questions"], threshold)
    assert (note is not None) == ("are in one cluster" in captured.err) and (note is None or note in captured.err)


def test_cli_defaults_to_the_recorded_clustering_threshold(lstm_folder, tmp_path, capsys):
    path = lstm_folder / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["thresholds"]["clusters"] = 0.975
    path.write_text(json.dumps(config), encoding="utf-8")
    out = tmp_path / "clusters.csv"
    assert main(["dedup", "--model", str(lstm_folder), "--questions", str(SAMPLE_PATH), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["threshold"] == 0.975
    assert summary["threshold_source"] == "precision 90% on the model's own validation split"
    assert "threshold: 0.975 (precision 90% on the model's own validation split)" in captured.err
    check_table(read_out(out), 0.975)
    assert main(["dedup", "--model", str(lstm_folder), "--questions", str(SAMPLE_PATH), "--out", str(out),
                 "--overwrite", "--threshold", "0.99"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["threshold_source"] == "given with --threshold"
    assert "threshold: 0.99 (given with --threshold)" in captured.err


def test_cli_warns_of_an_outsized_cluster(lstm_folder, tmp_path, capsys):
    out = tmp_path / "clusters.csv"
    assert main(["dedup", "--model", str(lstm_folder), "--questions", str(SAMPLE_PATH), "--out", str(out),
                 "--threshold", "-1"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    questions = summary["questions"]
    assert summary["largest_cluster"] == questions  # every question is above -1 to every other
    assert (f"warning: {questions:,} of the {questions:,} questions (100%) are in one cluster at the threshold -1"
            in captured.err)
    assert main(["dedup", "--model", str(lstm_folder), "--questions", str(SAMPLE_PATH), "--out", str(out),
                 "--overwrite", "--threshold", "0.999"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_cli_warns_when_the_threshold_makes_neighbourhoods_deeper_than_the_cap(lstm_folder, tmp_path, capsys):
    out = tmp_path / "clusters.csv"
    assert main(["dedup", "--model", str(lstm_folder), "--questions", str(SAMPLE_PATH), "--out", str(out),
                 "--threshold", "-1", "-k", "3", "--max-neighbourhood", "6"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    questions = summary["questions"]
    assert summary["capped_questions"] == questions  # everything is above -1: every neighbourhood is full
    assert f"warning: {questions:,} questions have more than 6 neighbours above the threshold -1;" in captured.err
    frame = read_out(out)
    model, _ = load_model(lstm_folder)
    vectors = model.encode(load_questions(SAMPLE_PATH)[0])
    copies = len(vectors) - len(np.unique(vectors, axis=0))  # questions whose vectors are word-for-word equal
    # cut at 6 distinct neighbours (copies of one vector travel together); a question whose 6 closest
    # are all taken stays out, where the uncapped rule would have put all of them in one cluster
    assert 6 <= frame["cluster_size"].max() <= 6 + copies and frame["cluster_id"].nunique() > questions // 7


def test_cli_with_a_text_file_min_size_and_a_formula_safe_csv(lstm_folder, tmp_path, capsys):
    lines = ["=HYPERLINK(\"http://x\")", "+1 what?", "-2 why?", "@home how?", "How do I learn?"]
    source = tmp_path / "questions.txt"
    source.write_text("\n".join(lines * 3 + ["", "", "Alone?"]) + "\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    assert main(["dedup", "--model", str(lstm_folder), "--questions", str(source), "--out", str(out),
                 "--threshold", "0.999", "--min-size", "3"]) == 0
    captured = capsys.readouterr()
    assert "dropped 2 empty question" in captured.err
    assert json.loads(captured.out)["questions"] == 16
    rows = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert rows[0] == COLUMNS and len(rows) == 1 + 15
    for row in rows[1:]:
        for cell in row[2:4]:
            assert not cell.startswith(FORMULA_STARTS)
    assert {row[3] for row in rows[1:]} == {("'" + line if line.startswith(FORMULA_STARTS) else line) for line in lines}
    assert {row[1] for row in rows[1:]} == {"3"}


@pytest.mark.parametrize("content, message", [(b"", "empty"), (b"question\n", "no questions")])
def test_cli_bad_questions_files_are_one_line_errors(lstm_folder, tmp_path, capsys, content, message):
    source = tmp_path / "bad.csv"
    source.write_bytes(content)
    assert main(["dedup", "--model", str(lstm_folder), "--questions", str(source), "--out",
                 str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and message in err[0]
    assert not (tmp_path / "o.csv").exists()


def test_cli_one_question_writes_an_empty_table(lstm_folder, tmp_path, capsys):
    source = tmp_path / "one.txt"
    source.write_text("Just one question?\n", encoding="utf-8")
    out = tmp_path / "o.csv"
    assert main(["dedup", "--model", str(lstm_folder), "--questions", str(source), "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["clusters"] == 0
    assert out.read_text().strip() == ",".join(COLUMNS)


@pytest.mark.parametrize("argv, message", [
    (["--questions", "missing.txt"], "file not found"),
    (["--min-size", "0"], "min-size"),
    (["--threshold", "1.5"], "threshold"),
    (["--out", "."], "folder"),
])
def test_cli_bad_options(lstm_folder, tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "q.txt").write_text("a?\nb?\n", encoding="utf-8")
    options = {"--model": str(lstm_folder), "--questions": "q.txt", "--out": "o.csv"}
    for flag, value in zip(argv[::2], argv[1::2]):
        options[flag] = value
    assert main(["dedup", *[part for pair in options.items() for part in pair]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and message in err[0]


def test_the_csv_is_written_in_chunks_formula_safe():
    frame = pd.DataFrame({"cluster_id": [1, 1, 2, 2, 2], "cluster_size": [2, 2, 3, 3, 3],
                          "representative": ["=a", "=a", "b", "b", "b"], "question": ["=a", "-x", "b", "@c", "d"],
                          "similarity_to_representative": [1.0, -0.5, 1.0, 0.9, 0.8]})
    handle = io.BytesIO()
    write_csv_chunks(handle, frame, chunk_rows=2)  # what dedup writes into its claimed --out
    back = pd.read_csv(io.BytesIO(handle.getvalue()), keep_default_na=False)
    assert back["question"].tolist() == ["'=a", "'-x", "b", "'@c", "d"]  # one header, every chunk escaped
    assert back["similarity_to_representative"].tolist() == [1.0, -0.5, 1.0, 0.9, 0.8]


@pytest.mark.slow
def test_the_command_runs_in_a_fresh_interpreter_without_training_modules(lstm_folder, tmp_path):
    root = Path(__file__).resolve().parents[1]
    script = (f"import sys, json; sys.path.insert(0, {str(root)!r}); from core.cli.main import main; "
              f"code = main(['dedup', '--model', {str(lstm_folder)!r}, '--questions', {str(SAMPLE_PATH)!r}, "
              f"'--out', {str(tmp_path / 'c.csv')!r}]); "
              "print(json.dumps([code, sorted(m for m in sys.modules if m.startswith('core'))]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=root, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    code, modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 0 and "core.inference.dedup" in modules and "core.data.questions" in modules
    training = ("core.training.trainer", "core.training.pipeline", "core.training.specs", "core.training.jobs")
    assert not [m for m in modules if m in training or m.startswith(tuple(t + "." for t in training))]
    assert (tmp_path / "c.csv").read_text(encoding="utf-8").startswith(",".join(COLUMNS))
