"""core.inference.honest_pairs: the pairs a comparison measures on, none that a compared model trained on (matched by
content, in either order): the test file, else the validation file, else what every compared run held out."""
import numpy as np
import pandas as pd
import pytest

from core.data import pair_key, pairs_fingerprint, split_pairs
from core.inference.honest_pairs import DATASET, HELD_OUT, TEST, VALIDATION, honest_pairs, training_of


def _pairs(*rows):
    return pd.DataFrame(rows, columns=["question1", "question2", "is_duplicate"])


def _dataset(n=40):
    return _pairs(*[(f"question {i} about cats", f"question {i} about dogs", i % 2) for i in range(n)])


def _config(pairs, name, val_fraction, seed, **data):
    """A config.json as core.training.pipeline writes it, for a model trained on ``pairs`` split by pair."""
    split = split_pairs(pairs, val_fraction=val_fraction, test_fraction=0.0, seed=seed)
    return {"name": name, "data": {"name": "upload.csv", "fingerprint": pairs_fingerprint(pairs),
                                   "validation_fingerprint": pairs_fingerprint(split.val),
                                   "train_pairs": len(split.train), "test_pairs": 0, **data},
            "run": {"val_fraction": val_fraction, "test_fraction": 0.0, "split_by_question": False},
            "train_config": {"seed": seed}}


def _keys(frame):
    return {pair_key(a, b) for a, b in zip(frame["question1"], frame["question2"])}


def _trained(config, pairs):
    split = split_pairs(pairs, val_fraction=config["run"]["val_fraction"], test_fraction=0.0,
                        seed=config["train_config"]["seed"])
    return _keys(split.train)


def test_one_run_gives_exactly_the_pairs_it_held_out():
    pairs = _dataset()
    config = _config(pairs, "a", 0.25, seed=1)
    common = honest_pairs([config], pairs)
    val = split_pairs(pairs, val_fraction=0.25, test_fraction=0.0, seed=1).val
    assert _keys(common.pairs) == _keys(val) and len(common.pairs) == 10
    assert common.source == HELD_OUT and common.constrained_by == ["a"]
    assert common.description.startswith("the 10 pairs of the active dataset that a held out of training")
    assert not _keys(common.pairs) & _trained(config, pairs)


def test_two_overlapping_runs_give_the_intersection_in_dataset_order():
    pairs = _dataset()
    first, second = _config(pairs, "a", 0.5, seed=1), _config(pairs, "b", 0.5, seed=2)
    common = honest_pairs([first, second], pairs)
    expected = [key for key in (pair_key(a, b) for a, b in zip(pairs["question1"], pairs["question2"]))
                if key not in _trained(first, pairs) and key not in _trained(second, pairs)]
    assert 0 < len(expected) < 20
    assert [pair_key(a, b) for a, b in zip(common.pairs["question1"], common.pairs["question2"])] == expected
    assert "both a and b held out" in common.description


def test_a_held_out_row_that_repeats_a_training_pair_swapped_is_left_out():
    pairs = _dataset()
    # row 40 is row 0 again, its questions swapped and spaced and cased differently: the same pair by content
    pairs = pd.concat([pairs, _pairs(("QUESTION 0 about  dogs", "question 0 about cats", 0))], ignore_index=True)
    key = pair_key("question 0 about cats", "question 0 about dogs")
    for seed in range(100):  # a split that trains on one copy and holds the other out
        split = split_pairs(pairs, val_fraction=0.25, test_fraction=0.0, seed=seed)
        if sum(pair_key(a, b) == key for a, b in zip(split.val["question1"], split.val["question2"])) == 1:
            break
    config = _config(pairs, "a", 0.25, seed=seed)
    assert key in _keys(split.val) and key in _keys(split.train)  # one copy held out by row, the other trained on
    common = honest_pairs([config], pairs)
    assert key not in _keys(common.pairs)
    assert len(common.pairs) == len(split.val) - 1 and not _keys(common.pairs) & _keys(split.train)


def test_runs_whose_held_out_pairs_do_not_overlap_leave_no_honest_set():
    pairs = _dataset()
    configs, held = [], _keys(pairs)
    for seed in range(50):  # runs that each hold out a random half, until no pair is held out by all of them
        configs.append(_config(pairs, f"r{seed}", 0.5, seed=seed))
        held -= _trained(configs[-1], pairs)
        if not held:
            break
    assert not held and len(configs) > 1
    common = honest_pairs(configs, pairs)
    assert common.pairs.empty and common.total == 0
    assert common.description.startswith("no pair of the active dataset was held out by every compared model")
    assert not honest_pairs(configs[:-1], pairs).pairs.empty  # one run fewer: some pairs again


def test_a_run_whose_split_cannot_be_found_again_leaves_no_pair_of_the_dataset():
    pairs = _dataset()
    doctored = _config(pairs, "b", 0.3, seed=5)
    doctored["data"]["validation_fingerprint"] = "0" * 16
    common = honest_pairs([_config(pairs, "a", 0.3, seed=0), doctored], pairs)
    assert common.pairs.empty and "b trained on the active dataset, but its folder does not say" in common.description
    assert training_of(doctored, pairs).train is None and training_of(doctored, pairs).on_dataset


def test_without_a_run_trained_here_every_pair_is_compared_and_others_are_named():
    pairs = _dataset()
    common = honest_pairs([], pairs)
    pd.testing.assert_frame_equal(common.pairs, pairs)
    assert common.source == DATASET and common.description.startswith("all 40 pairs of the active dataset")
    elsewhere = honest_pairs([{"name": "z", "data": {"name": "quora", "fingerprint": "0" * 16}}], pairs)
    assert len(elsewhere.pairs) == 40 and "z trained on other data" in elsewhere.description


def test_the_test_file_comes_first_less_the_pairs_a_run_trained_on_in_either_order():
    pairs = _dataset()
    config = _config(pairs, "a", 0.25, seed=1)
    train = split_pairs(pairs, val_fraction=0.25, test_fraction=0.0, seed=1).train
    seen = train.iloc[3]
    test = _pairs(("a new question?", "another new one?", 1), (seen["question2"], seen["question1"], 0),
                  ("yet another?", "and one more?", 0))
    val = _pairs(("from the validation file?", "indeed?", 1))
    common = honest_pairs([config], pairs, val=val, test=test, test_name="test.csv")
    assert common.source == TEST and common.pairs["question1"].tolist() == ["a new question?", "yet another?"]
    assert common.description.startswith("the 2 pairs of the test file test.csv, less 1 that a trained on or may have")
    on_val = honest_pairs([config], pairs, val=val)
    assert on_val.source == VALIDATION and on_val.pairs["question1"].tolist() == ["from the validation file?"]
    # a file's pairs, none unseen: no figure
    nothing = honest_pairs([config], pairs, test=test.iloc[[1]])
    assert nothing.pairs.empty and nothing.description.startswith("no pair of the test file is unseen")


def test_a_run_validated_on_a_file_trained_on_every_pair_of_the_dataset():
    pairs = _dataset()
    val = _pairs(("from the validation file?", "indeed?", 1), ("a second one?", "yes?", 0))
    config = {"name": "v", "data": {"name": "upload.csv", "val_name": "val.csv", "fingerprint": pairs_fingerprint(pairs),
                                    "validation_fingerprint": pairs_fingerprint(val), "train_pairs": 36,
                                    "test_pairs": 4, "implied_pairs": 0},
              "run": {"val_fraction": 0.1, "test_fraction": 0.1, "split_by_question": False},
              "train_config": {"seed": 0}}
    trained = training_of(config, pairs)
    test_split = split_pairs(pairs, val_fraction=0.0, test_fraction=0.1, seed=0).test
    assert len(trained.train) == 36 and not _keys(trained.train) & _keys(test_split)
    common = honest_pairs([config], pairs)  # the validation file is not loaded: the run's test split only
    assert _keys(common.pairs) == _keys(test_split)
    assert honest_pairs([config], pairs, val=val).pairs.equals(val)
    config["data"]["test_name"], config["data"]["train_pairs"] = "test.csv", 40  # trained on all of it
    assert honest_pairs([config], pairs).pairs.empty


def test_implied_pairs_count_as_trained_on():
    chain = _pairs(("alpha one?", "alpha two?", 1), ("alpha two?", "alpha three?", 1),
                   *[(f"filler {i}?", f"other {i}?", i % 2) for i in range(18)])
    config = _config(chain, "i", 0.2, seed=0)
    split = split_pairs(chain, val_fraction=0.2, test_fraction=0.0, seed=0)
    from core.data.splitting import implied_pairs

    implied = implied_pairs(split.train, seed=0)
    config["data"]["implied_pairs"] = len(implied)
    config["data"]["train_pairs"] = len(split.train) + len(implied)
    trained = training_of(config, chain)
    assert len(trained.train) == len(split.train) + len(implied)
    test = pd.concat([implied, _pairs(("unseen?", "also unseen?", 0))], ignore_index=True)
    assert honest_pairs([config], chain, test=test).pairs["question1"].tolist() == ["unseen?"]


def test_many_pairs_are_sampled_with_a_seed():
    pairs = _dataset(200)
    common = honest_pairs([], pairs, max_pairs=50, seed=4)
    again = honest_pairs([], pairs, max_pairs=50, seed=4)
    assert len(common.pairs) == 50 and common.total == 200
    pd.testing.assert_frame_equal(common.pairs, again.pairs)
    assert common.description.endswith("of which a seeded sample of 50 (seed 4)")
    assert common.label.startswith("50 of 200 pairs")


@pytest.mark.parametrize("config", [{}, {"name": "x", "data": "broken"}, {"name": "y", "data": {"fingerprint": None}}])
def test_a_config_without_a_dataset_trained_on_nothing_here(config):
    assert not training_of(config, _dataset()).on_dataset
