"""duplicate_free_batches and labelled_batches on hand-made frames with known collisions."""

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from core.data.batching import (
    duplicate_free_batches,
    labelled_batches,
    labelled_distinct_batches,
)


def pairs_frame(rows, index=None) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["question1", "question2", "is_duplicate"], index=index)


def normalised(text: str) -> str:
    return " ".join(text.lower().split())


# Texts repeat across columns: "B" is question2 of row 0 and question1 of row 1, "a " equals "A"
# after normalising, and row 5 is the same text on both sides.
CROSSING = pairs_frame(
    [
        ("A", "B", 1),  # 0
        ("B", "C", 1),  # 1
        ("C", "D", 1),  # 2
        ("D", "A", 1),  # 3
        ("E", "F", 1),  # 4
        ("G", "g ", 1),  # 5 same text twice in one row: fine on its own
        ("X", "Y", 0),  # 6 not a duplicate: never batched
        ("a ", "H", 1),  # 7 collides with rows 0 and 3
        ("I", "J", 1),  # 8
        ("K", "L", 1),  # 9
        ("M", "  n", 1),  # 10
        ("O", "P", 1),  # 11
        ("N", "Q", 1),  # 12 collides with row 10
    ]
)
DUPLICATE_ROWS = [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12]


def assert_no_text_twice(pairs: pd.DataFrame, batches: list[np.ndarray]) -> None:
    for batch in batches:
        seen: set[str] = set()
        for position in batch:
            texts = {normalised(pairs.iloc[position]["question1"]), normalised(pairs.iloc[position]["question2"])}
            assert seen.isdisjoint(texts), f"text repeated in batch {batch.tolist()}"
            seen |= texts


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("batch_size", [2, 3, 4, 16])
def test_no_normalised_text_twice_in_a_batch_and_every_pair_once(seed, batch_size):
    batches = duplicate_free_batches(CROSSING, batch_size, seed=seed, drop_last_below=1)
    assert_no_text_twice(CROSSING, batches)
    assert sorted(np.concatenate(batches).tolist()) == DUPLICATE_ROWS
    assert all(1 <= len(batch) <= batch_size for batch in batches)


@pytest.mark.parametrize("seed", range(10))
def test_default_drops_only_batches_without_negatives(seed):
    batches = duplicate_free_batches(CROSSING, 4, seed=seed)
    assert_no_text_twice(CROSSING, batches)
    assert all(2 <= len(batch) <= 4 for batch in batches)
    positions = np.concatenate(batches).tolist()
    assert len(positions) == len(set(positions))
    assert set(positions) <= set(DUPLICATE_ROWS)


def test_distinct_texts_fill_full_batches():
    pairs = pairs_frame([(f"Q{i} left", f"Q{i} right", 1) for i in range(10)])
    batches = duplicate_free_batches(pairs, 4, seed=0)
    assert [len(batch) for batch in batches] == [4, 4, 2]
    assert sorted(np.concatenate(batches).tolist()) == list(range(10))


def test_one_shared_text_per_batch_means_singletons_are_dropped():
    hub = pairs_frame([("Hub?", f"Spoke {k}?", 1) for k in range(5)])
    assert duplicate_free_batches(hub, 2, seed=0) == []
    singles = duplicate_free_batches(hub, 2, seed=0, drop_last_below=1)
    assert [len(batch) for batch in singles] == [1] * 5
    assert sorted(np.concatenate(singles).tolist()) == [0, 1, 2, 3, 4]


def test_colliding_rows_are_deferred_not_lost():
    # Three rows share "hub"; three fillers are free. Each batch of 2 can take one hub row.
    pairs = pairs_frame(
        [("hub", "x1", 1), ("hub", "x2", 1), ("x3", "HUB", 1), ("f1", "g1", 1), ("f2", "g2", 1), ("f3", "g3", 1)]
    )
    for seed in range(20):
        batches = duplicate_free_batches(pairs, 2, seed=seed, drop_last_below=1)
        assert_no_text_twice(pairs, batches)
        assert sorted(np.concatenate(batches).tolist()) == [0, 1, 2, 3, 4, 5]
        hub_rows_per_batch = [len(set(batch.tolist()) & {0, 1, 2}) for batch in batches]
        assert max(hub_rows_per_batch) == 1


def test_positions_not_labels_and_only_duplicates():
    pairs = pairs_frame(
        [("A", "B", 0), ("C", "D", 1), ("E", "F", 0), ("G", "H", 1), ("I", "J", 1)], index=[100, 200, 300, 400, 500]
    )
    batches = duplicate_free_batches(pairs, 8, seed=0)
    assert len(batches) == 1
    assert sorted(batches[0].tolist()) == [1, 3, 4]
    assert batches[0].dtype == np.int64


def test_duplicate_free_batches_deterministic_per_seed():
    pairs = pairs_frame([(f"Q{i % 37}", f"R{i % 53}", 1) for i in range(300)])
    first = duplicate_free_batches(pairs, 16, seed=4)
    again = duplicate_free_batches(pairs, 16, seed=4)
    other = duplicate_free_batches(pairs, 16, seed=5)
    assert [batch.tolist() for batch in first] == [batch.tolist() for batch in again]
    assert [batch.tolist() for batch in first] != [batch.tolist() for batch in other]
    assert_no_text_twice(pairs, first)


def test_no_duplicates_gives_no_batches():
    assert duplicate_free_batches(pairs_frame([("A", "B", 0), ("C", "D", 0)]), 4, seed=0) == []


def test_rejects_non_positive_batch_size():
    with pytest.raises(ValueError):
        duplicate_free_batches(CROSSING, 0, seed=0)
    with pytest.raises(ValueError):
        labelled_batches(CROSSING, 0, seed=0)


def test_labelled_batches_cover_all_rows_once_in_chunks():
    batches = labelled_batches(CROSSING, 5, seed=1)
    assert [len(batch) for batch in batches] == [5, 5, 3]
    positions = np.concatenate(batches).tolist()
    assert Counter(positions) == Counter(range(len(CROSSING)))
    assert positions != list(range(len(CROSSING)))  # shuffled


def test_labelled_batches_deterministic_per_seed():
    pairs = pairs_frame([(f"Q{i}", f"R{i}", i % 2) for i in range(50)])
    first, again, other = (labelled_batches(pairs, 8, seed=seed) for seed in (3, 3, 4))
    assert [batch.tolist() for batch in first] == [batch.tolist() for batch in again]
    assert [batch.tolist() for batch in first] != [batch.tolist() for batch in other]


# ---- length buckets ------------------------------------------------------------------------------
def test_length_grouped_sorts_each_window_by_length():
    from core.data.batching import BUCKET_WINDOW_BATCHES, length_grouped

    assert length_grouped(np.array([0, 1, 2, 3]), np.array([9, 2, 8, 3]), batch_size=2).tolist() == [1, 3, 2, 0]
    # Two windows of 1 * BUCKET_WINDOW_BATCHES rows: each sorted on its own, never merged.
    w = BUCKET_WINDOW_BATCHES
    lengths = np.concatenate([np.arange(w, 0, -1), np.arange(2 * w, w, -1)])  # two descending runs
    grouped = length_grouped(np.arange(2 * w), lengths, batch_size=1)
    assert grouped[:w].tolist() == list(range(w - 1, -1, -1))
    assert grouped[w:].tolist() == list(range(2 * w - 1, w - 1, -1))


def test_length_bucketed_labelled_batches_pad_less_and_keep_every_row():
    rng = np.random.default_rng(0)
    n, batch_size = 4000, 16
    pairs = pairs_frame([(f"Q{i}", f"R{i}", i % 2) for i in range(n)])
    lengths = rng.integers(3, 40, size=n)
    plain = labelled_batches(pairs, batch_size, seed=5)
    bucketed = labelled_batches(pairs, batch_size, seed=5, lengths=lengths)
    assert Counter(np.concatenate(bucketed).tolist()) == Counter(range(n))
    padded = lambda batches: sum(len(b) * lengths[b].max() for b in batches)  # noqa: E731
    assert padded(bucketed) < 0.75 * padded(plain)  # uniform 3..39: plain batches pad to ~37 each
    # Batch order is shuffled, not shortest-first: the first batches are not the shortest ones.
    first_maxima = [lengths[b].max() for b in bucketed[:20]]
    assert max(first_maxima) - min(first_maxima) > 10


def test_length_bucketed_duplicate_free_batches_keep_the_guarantee():
    lengths = np.array([5, 1, 9, 2, 7, 3, 4, 8, 6, 2, 5, 3, 1])  # one per CROSSING row
    for seed in range(10):
        batches = duplicate_free_batches(CROSSING, 3, seed=seed, drop_last_below=1, lengths=lengths)
        assert_no_text_twice(CROSSING, batches)
        assert sorted(np.concatenate(batches).tolist()) == DUPLICATE_ROWS


def test_length_bucketed_duplicate_free_batches_without_seed_are_reproducible():
    lengths = np.array([5, 1, 9, 2, 7, 3, 4, 8, 6, 2, 5, 3, 1])
    runs = [duplicate_free_batches(CROSSING, 3, seed=None, lengths=lengths) for _ in range(3)]
    assert all([b.tolist() for b in run] == [b.tolist() for b in runs[0]] for run in runs)
    # One window: the batches are cut from the rows sorted by length, shortest first.
    maxima = [lengths[b].max() for b in runs[0]]
    assert maxima == sorted(maxima)


# ---- labelled pairs without a text twice (the multitask loss) -----------------------------------------
@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("batch_size", [2, 3, 4, 16])
def test_labelled_distinct_batches_use_every_row_of_both_classes_once_and_no_text_twice(seed, batch_size):
    batches = labelled_distinct_batches(CROSSING, batch_size, seed=seed)
    assert_no_text_twice(CROSSING, batches)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(CROSSING)))  # row 6, a non-duplicate, too
    assert all(1 <= len(batch) <= batch_size for batch in batches)
    assert all(batch.dtype == np.int64 for batch in batches)


def test_a_non_duplicate_sharing_a_text_is_deferred_like_a_duplicate():
    # Row 1 is labelled non-duplicate, but its "b" is row 0's question: in one batch the multitask
    # loss's in-batch term would take row 0's own question as a negative of row 0.
    pairs = pairs_frame([("a", "b", 1), ("B ", "c", 0), ("d", "e", 0), ("f", "g", 1)])
    for seed in range(20):
        batches = labelled_distinct_batches(pairs, 2, seed=seed)
        assert_no_text_twice(pairs, batches)
        assert not any({0, 1} <= set(batch.tolist()) for batch in batches)
        assert sorted(np.concatenate(batches).tolist()) == [0, 1, 2, 3]


def test_labelled_distinct_batches_of_distinct_texts_are_plain_chunks():
    pairs = pairs_frame([(f"Q{i}", f"R{i}", i % 2) for i in range(10)])
    batches = labelled_distinct_batches(pairs, 4, seed=0)
    assert [len(batch) for batch in batches] == [4, 4, 2]
    assert sorted(np.concatenate(batches).tolist()) == list(range(10))
    assert np.concatenate(batches).tolist() != list(range(10))  # shuffled


def test_a_shared_question_keeps_its_rows_as_one_row_batches():
    # Every row shares "Hub?", so no two fit together; unlike duplicate batches, none is dropped.
    hub = pairs_frame([("Hub?", f"Spoke {k}?", k % 2) for k in range(5)])
    batches = labelled_distinct_batches(hub, 2, seed=0)
    assert [len(batch) for batch in batches] == [1] * 5
    assert sorted(np.concatenate(batches).tolist()) == [0, 1, 2, 3, 4]


def test_labelled_distinct_batches_deterministic_per_seed():
    pairs = pairs_frame([(f"Q{i % 37}", f"R{i % 53}", i % 2) for i in range(300)])
    first, again, other = (labelled_distinct_batches(pairs, 16, seed=seed) for seed in (4, 4, 5))
    assert [batch.tolist() for batch in first] == [batch.tolist() for batch in again]
    assert [batch.tolist() for batch in first] != [batch.tolist() for batch in other]
    assert_no_text_twice(pairs, first)
    assert sorted(np.concatenate(first).tolist()) == list(range(300))


def test_length_bucketed_labelled_distinct_batches_keep_the_guarantee_and_pad_less():
    lengths = np.array([5, 1, 9, 2, 7, 3, 4, 8, 6, 2, 5, 3, 1])  # one per CROSSING row
    for seed in range(10):
        batches = labelled_distinct_batches(CROSSING, 3, seed=seed, lengths=lengths)
        assert_no_text_twice(CROSSING, batches)
        assert sorted(np.concatenate(batches).tolist()) == list(range(len(CROSSING)))
    rng = np.random.default_rng(0)
    n, batch_size = 4000, 16
    pairs = pairs_frame([(f"Q{i}", f"R{i}", i % 2) for i in range(n)])
    lengths = rng.integers(3, 40, size=n)
    plain = labelled_distinct_batches(pairs, batch_size, seed=5)
    bucketed = labelled_distinct_batches(pairs, batch_size, seed=5, lengths=lengths)
    assert Counter(np.concatenate(bucketed).tolist()) == Counter(range(n))
    padded = lambda batches: sum(len(b) * lengths[b].max() for b in batches)  # noqa: E731
    assert padded(bucketed) < 0.75 * padded(plain)


def test_the_pair_table_maps_each_batch_kind_to_its_builder():
    from core.text.pair_table import PairTable
    from core.text.word_tokenizer import WordTokenizer

    table = PairTable(CROSSING, WordTokenizer.build(pd.concat([CROSSING.question1, CROSSING.question2]), min_freq=1))
    for kind, builder in (("duplicates", duplicate_free_batches), ("labelled", labelled_batches),
                          ("labelled_distinct", labelled_distinct_batches)):
        assert [b.tolist() for b in table.index_batches(kind, 4, seed=3)] == \
            [b.tolist() for b in builder(CROSSING, 4, seed=3)]
