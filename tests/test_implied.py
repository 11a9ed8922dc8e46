"""Pairs implied by the labels (core.data.splitting), checked against hand-worked graphs."""
import itertools

import pandas as pd

from core.data import normalise_questions
from core.data.splitting import implied_pairs, with_implied_pairs


def _pairs(*rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["question1", "question2", "is_duplicate"])


def _as_set(frame: pd.DataFrame) -> set:
    return {(frozenset((a, b)), label) for a, b, label in frame.itertuples(index=False)}


def test_closure_and_swap_on_a_hand_worked_graph():
    # a ~ b ~ c form one group; d ~ e another; a !~ d, c !~ f (f alone).
    pairs = _pairs(("a", "b", 1), ("b", "c", 1), ("d", "e", 1), ("a", "d", 0), ("c", "f", 0))
    got = _as_set(implied_pairs(pairs))
    closure = {(frozenset("ac"), 1)}
    # (a, d) swapped: b, c for a; e for d. (c, f) swapped: a, b for c; f's group lends nothing.
    swap = {(frozenset(p), 0) for p in ("bd", "cd", "ae", "af", "bf")}
    assert got == closure | swap


def test_labelled_pairs_win_and_contradictions_imply_nothing():
    # a ~ b ~ c, but (a, c) is labelled a non-duplicate: the closure must not relabel it, and the
    # contradicting label implies no non-duplicates either.
    pairs = _pairs(("a", "b", 1), ("b", "c", 1), ("c", "a", 0))
    assert implied_pairs(pairs).empty


def test_a_pair_implied_twice_comes_once():
    # Groups {a, b} and {c, d}, with two labelled non-duplicates between them.
    pairs = _pairs(("a", "b", 1), ("c", "d", 1), ("a", "d", 0), ("b", "c", 0))
    got = implied_pairs(pairs)
    # (a, d) !~ swaps to (b, d) and (a, c); (b, c) !~ swaps to (a, c) and (b, d): the same two, once each.
    assert _as_set(got) == {(frozenset("bd"), 0), (frozenset("ac"), 0)}
    assert len(got) == 2


def test_nothing_is_implied_from_non_duplicates_alone_or_from_nothing():
    assert implied_pairs(_pairs(("a", "b", 0), ("c", "d", 0))).empty
    empty = implied_pairs(_pairs())
    assert empty.empty and list(empty.columns) == ["question1", "question2", "is_duplicate"]


def test_questions_match_after_normalising_and_keep_their_first_text():
    pairs = _pairs(("How do I learn?", "what is  Python?", 1), ("WHAT IS PYTHON?", "python basics", 1))
    got = implied_pairs(pairs)
    assert got.values.tolist() == [["How do I learn?", "python basics", 1]]


def test_a_large_group_lends_at_most_max_group_questions_with_a_seed():
    chain = _pairs(*[(f"q{i}", f"q{i + 1}", 1) for i in range(11)])  # one group of 12 questions
    labelled = 11
    full = implied_pairs(chain, max_group=12)
    assert len(full) == 12 * 11 // 2 - labelled
    capped = implied_pairs(chain, max_group=5, seed=3)
    lent = set(capped["question1"]) | set(capped["question2"])
    assert len(lent) <= 5
    # every pair of the 5 lent questions, less the chain links among them
    links = sum(1 for a, b in itertools.combinations(sorted(lent), 2) if abs(int(a[1:]) - int(b[1:])) == 1)
    assert len(capped) == 10 - links
    assert capped.equals(implied_pairs(chain, max_group=5, seed=3))  # seeded: the same every time


def test_with_implied_pairs_appends_what_the_labels_imply():
    train = _pairs(("a", "b", 1), ("b", "c", 1), ("a", "d", 0))
    grown = with_implied_pairs(train)
    assert grown.iloc[:3].values.tolist() == train.values.tolist()
    assert len(grown) == 3 + len(implied_pairs(train)) and grown.index.tolist() == list(range(len(grown)))
    implied = implied_pairs(train)
    # (a, c) and (b, d) are implied (in some order); (a, z) is not; (a, b) is labelled, not implied.
    found = {frozenset(pair) for pair in zip(normalise_questions(implied["question1"]),
                                             normalise_questions(implied["question2"]))}
    assert {frozenset("ac"), frozenset("bd")} <= found and not found & {frozenset("az"), frozenset("ab")}


def test_a_run_with_implied_pairs_trains_on_them_and_records_how_many(tmp_path):
    import json

    from core.data import Splits
    from core.training.jobs import run_label
    from core.training.pipeline import train_run
    from core.training.specs import spec_from_options
    from tests.conftest import synthetic_pairs

    # Chains of duplicates (t0 ~ t1 ~ t2 ...) give closure pairs; non-duplicates across chains give swaps.
    chains = [(f"topic{k} question {i}", f"topic{k} question {i + 1}", 1) for k in range(6) for i in range(3)]
    crossings = [(f"topic{k} question 0", f"topic{k + 1} question 3", 0) for k in range(5)]
    train = pd.concat([_pairs(*chains, *crossings), synthetic_pairs(40, 0)], ignore_index=True)
    val = synthetic_pairs(23, 1)
    spec = spec_from_options(model="lstm", loss="contrastive", epochs=1, batch_size=16, device="cpu", max_length=11,
                             implied_pairs=True, data_name="chains", model_options={"embedding_dim": 12, "hidden_size": 10})
    result = train_run(spec, Splits(train, val, val[:0]), out_dir=tmp_path / "model")
    extra = len(implied_pairs(train))
    assert extra == 6 * (6 - 3) + 5 * 6  # per chain of 4: 6 pairs less 3 links; per crossing: 3 + 3 swaps
    assert result.outcome.pairs_seen == len(train) + extra  # labelled batches hold every pair once
    data = json.loads((tmp_path / "model" / "config.json").read_text())["data"]
    assert data["implied_pairs"] == extra and data["train_pairs"] == len(train) + extra
    assert data["val_pairs"] == len(val)
    assert run_label(spec) == "Siamese LSTM · contrastive (squared_hinge, m=1) + implied pairs · chains"


def test_the_cli_switch_reaches_the_spec():
    from core.cli.main import build_parser
    from core.cli.train import spec_from_args

    on = build_parser().parse_args(["train", "--data", "pairs.tsv", "--model", "lstm", "--implied-pairs"])
    off = build_parser().parse_args(["train", "--data", "pairs.tsv", "--model", "lstm"])
    assert spec_from_args(on).implied_pairs and not spec_from_args(off).implied_pairs
