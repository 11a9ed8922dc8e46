"""core.inference.candidates: candidate pairs from known vectors, and choose_pairs on hand-made candidates."""
from __future__ import annotations

import doctest
import math

import numpy as np
import pandas as pd
import pytest
import torch

from core.data import pair_key, pair_keys
from core.inference import candidates as candidates_module
from core.inference.candidates import (
    EmbeddedCorpus,
    candidate_pairs,
    choose_pairs,
    embed_corpus,
)


def at(degrees: float) -> list[float]:
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


# Three pairs of close questions on the unit circle: 10, 20 and 30 degrees apart, far from the others.
QUESTIONS = ["How do I learn Python?", "What is the best way to learn Python?", "How tall is Everest?",
             "What is the height of Mount Everest?", "Why is the sky blue?", "What makes the sky look blue?"]
ANGLES = [0, 10, 90, 110, 200, 230]


class TableModel:
    """A fake model: each text's vector per tower from a table (scaled, so normalising is exercised)."""

    def __init__(self, table: dict[str, list[float]], other_tower: dict[str, list[float]] | None = None):
        self.towers = [table, other_tower or table]
        self.calls = 0

    def encode(self, texts, tower=0, batch_size=256, progress=None):
        self.calls += 1
        return torch.tensor([[3 * x for x in self.towers[tower][text]] for text in texts], dtype=torch.float32)


def circle_model() -> TableModel:
    return TableModel({q: at(a) for q, a in zip(QUESTIONS, ANGLES)})


def cos(degrees: float) -> float:
    return math.cos(math.radians(degrees))


def test_pair_key_ignores_order_case_and_spaces():
    assert pair_key("B  x?", "a") == pair_key("a", "b x?") == ("a", "b x?")
    assert pair_keys(["a", "D"], ["c", "b"]) == [("a", "c"), ("b", "d")]


def test_each_question_with_its_nearest_neighbour():
    corpus = embed_corpus(circle_model(), QUESTIONS)
    frame = candidate_pairs(corpus, k=1)
    assert list(frame.columns) == ["question1", "question2", "similarity"]
    assert frame[["question1", "question2"]].values.tolist() == [QUESTIONS[0:2], QUESTIONS[2:4], QUESTIONS[4:6]]
    np.testing.assert_allclose(frame["similarity"], [cos(10), cos(20), cos(30)], atol=1e-6)


def test_k2_pairs_once_no_self_pair_sorted():
    frame = candidate_pairs(embed_corpus(circle_model(), QUESTIONS), k=2)
    pairs = [tuple(row) for row in frame[["question1", "question2"]].values]
    # second neighbours: 0->2 (90), 1->2 (80), 2->1 (80), 3->4 (90), 4->3 (90), 5->3 (120)
    expected = {(0, 1): 10, (2, 3): 20, (4, 5): 30, (1, 2): 80, (0, 2): 90, (3, 4): 90, (3, 5): 120}
    assert len(pairs) == len(set(pairs)) == len(expected)
    assert all(q1 != q2 for q1, q2 in pairs)
    by_pair = {(QUESTIONS.index(q1), QUESTIONS.index(q2)): s for q1, q2, s in frame.values}
    assert set(by_pair) == set(expected)
    for pair, degrees in expected.items():
        assert by_pair[pair] == pytest.approx(cos(degrees), abs=1e-6)
    assert frame["similarity"].is_monotonic_decreasing


def test_spellings_of_one_question_are_one_question_and_labelled_pairs_are_left_out():
    model = circle_model()
    model.towers[0]["how do i learn  PYTHON?"] = at(0)
    corpus = embed_corpus(model, QUESTIONS + ["how do i learn  PYTHON?", ""])
    assert corpus.questions == QUESTIONS  # the first spelling kept, the empty text dropped
    labelled = {pair_key("what makes the sky look blue?", "why is the sky blue?")}
    frame = candidate_pairs(corpus, k=1, labelled=labelled)
    assert frame[["question1", "question2"]].values.tolist() == [QUESTIONS[0:2], QUESTIONS[2:4]]


def test_two_towers_score_the_mean_of_both_orders():
    first = {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [-1.0, 0.0]}
    second = {"a": [1.0, 0.0], "b": [1.0, 0.0], "c": [0.0, -1.0]}
    corpus = embed_corpus(TableModel(first, second), ["a", "b", "c"])
    # s(x, y) = tower0(x) . tower1(y): s(a,b)=1, s(b,a)=0 -> 0.5; s(a,c)=0, s(c,a)=-1 -> -0.5; s(b,c)=-1, s(c,b)=-1
    np.testing.assert_allclose(corpus.similarity(["a", "a", "b", "a"], ["b", "c", "c", "zzz"]),
                               [0.5, -0.5, -1.0, np.nan], atol=1e-6)
    frame = candidate_pairs(corpus, k=2)
    assert frame.values.tolist() == [["a", "b", pytest.approx(0.5)], ["a", "c", pytest.approx(-0.5)],
                                     ["b", "c", pytest.approx(-1.0)]]


def test_neighbours_are_searched_once_per_corpus():
    corpus = EmbeddedCorpus(QUESTIONS, np.array([at(a) for a in ANGLES]))
    ids, _ = corpus.neighbours(3)
    searched = corpus._neighbours
    fewer, _ = corpus.neighbours(1)
    assert corpus._neighbours is searched and (fewer[:, 0] == ids[:, 0]).all()
    assert corpus.neighbours(99)[0].shape == (6, 5)  # at most every other question


def test_tiny_corpora():
    assert candidate_pairs(EmbeddedCorpus(["a"], np.ones((1, 2)))).empty
    assert candidate_pairs(EmbeddedCorpus([], np.zeros((0, 2)))).empty


# ---- choose_pairs ----------------------------------------------------------------------------------
CANDIDATES = pd.DataFrame({
    "question1": ["a", "a", "c", "e", "g", "i", "k"],
    "question2": ["b", "c", "d", "f", "h", "j", "l"],
    "similarity": [0.95, 0.81, 0.78, 0.70, 0.60, 0.50, 0.40],
})


def chosen(frame: pd.DataFrame) -> list[tuple[str, str, str]]:
    return [tuple(row) for row in frame[["question1", "question2", "reason"]].values]


def test_uncertainty_takes_the_closest_to_the_threshold_without_repeating_a_question():
    picked = choose_pairs(CANDIDATES, 4, threshold=0.8, random_share=0)
    # distances 0.15 .01 .02 .10 .20 .30 .40: a-c, then c-d (c taken), e-f, a-b (a taken), g-h
    assert chosen(picked) == [("a", "c", "uncertain"), ("e", "f", "uncertain"), ("g", "h", "uncertain"),
                              ("i", "j", "uncertain")]
    assert picked["similarity"].tolist() == [0.81, 0.70, 0.60, 0.50]


def test_the_random_share_is_drawn_from_the_rest_seeded_and_diverse():
    picked = choose_pairs(CANDIDATES, 5, threshold=0.8, random_share=0.4, seed=3)  # round(2.0) = 2 random
    assert [r for *_, r in chosen(picked)] == ["uncertain"] * 3 + ["random"] * 2
    assert chosen(picked)[:3] == [("a", "c", "uncertain"), ("e", "f", "uncertain"), ("g", "h", "uncertain")]
    randoms = {(q1, q2) for q1, q2, r in chosen(picked) if r == "random"}
    assert randoms <= {("i", "j"), ("k", "l")} and len(randoms) == 2  # a-b and c-d reuse a or c
    again = choose_pairs(CANDIDATES, 5, threshold=0.8, random_share=0.4, seed=3)
    pd.testing.assert_frame_equal(picked, again)
    assert CANDIDATES.shape == (7, 3)  # pure: the input is untouched


def test_random_strategy_is_all_random_diverse_and_seeded():
    draws = {tuple(map(tuple, choose_pairs(CANDIDATES, 3, 0.8, "random", seed=s)[["question1", "question2"]].values))
             for s in range(20)}
    assert len(draws) > 1  # the seed matters
    for seed in range(20):
        picked = choose_pairs(CANDIDATES, 10, 0.8, "random", seed=seed)
        assert set(picked["reason"]) == {"random"}
        texts = picked["question1"].tolist() + picked["question2"].tolist()
        assert len(texts) == len(set(texts))
        assert len(picked) in (5, 6)  # a-b or a-c, never both; and c-d only without a-c


def test_fewer_when_the_candidates_run_out_and_nothing_for_none():
    assert len(choose_pairs(CANDIDATES.iloc[:2], 5, 0.8)) == 1  # a-b and a-c share a
    empty = choose_pairs(CANDIDATES.iloc[:0], 5, 0.8)
    assert empty.empty and list(empty.columns) == ["question1", "question2", "similarity", "reason"]


def test_the_docstring_examples_hold():
    assert doctest.testmod(candidates_module).failed == 0


def test_a_large_corpus_is_searched_with_hnsw_and_finds_almost_every_exact_candidate(monkeypatch):
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(300, 24)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    questions = [f"question number {i}" for i in range(300)]
    exact = candidate_pairs(EmbeddedCorpus(questions, vectors), k=5)
    monkeypatch.setattr(candidates_module, "EXACT_LIMIT", 10)
    approximate = candidate_pairs(EmbeddedCorpus(questions, vectors), k=5)
    exact_pairs = set(zip(exact["question1"], exact["question2"]))
    approximate_pairs = set(zip(approximate["question1"], approximate["question2"]))
    assert len(exact_pairs & approximate_pairs) >= 0.95 * len(exact_pairs)
    assert approximate["similarity"].is_monotonic_decreasing and np.isfinite(approximate["similarity"]).all()
