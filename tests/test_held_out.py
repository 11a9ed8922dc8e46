"""A saved model is measured on the pairs its training held out, found again by fingerprint; on other
data, on all of it, and the caption says which."""
import json

import pandas as pd

from core.data import pairs_fingerprint, split_pairs
from core.inference.honest_pairs import held_out_pairs


def test_fingerprint_follows_content_and_order(sample_pairs):
    pairs, _ = sample_pairs
    assert pairs_fingerprint(pairs) == pairs_fingerprint(pairs.copy())
    assert pairs_fingerprint(pairs) != pairs_fingerprint(pairs.iloc[::-1])
    edited = pairs.copy()
    edited.loc[3, "is_duplicate"] = 1 - edited.loc[3, "is_duplicate"]
    assert pairs_fingerprint(pairs) != pairs_fingerprint(edited)


def test_the_training_dataset_gives_back_exactly_its_validation_split(tmp_path, sample_pairs, train_tiny_model):
    pairs, _ = sample_pairs
    folder = train_tiny_model("lstm", tmp_path, val_fraction=0.2, seed=5)
    config = json.loads((folder / "config.json").read_text())
    held = held_out_pairs(config, pairs)
    # The sample repeats questions across pairs, so the run split by question (the auto rule).
    assert config["run"]["split_by"] == "question"
    expected = split_pairs(pairs, val_fraction=0.2, test_fraction=0.0, seed=5, by_question=True).val
    assert held.is_validation and len(held.pairs) == config["data"]["val_pairs"] == len(expected)
    pd.testing.assert_frame_equal(held.pairs, expected)
    assert f"the {len(expected)} validation pairs" in held.description

    other = pairs.iloc[:300].reset_index(drop=True)
    elsewhere = held_out_pairs(config, other)
    assert not elsewhere.is_validation and len(elsewhere.pairs) == 300
    assert elsewhere.description.startswith("all 300 pairs of the active dataset")
    assert "bundled sample" in elsewhere.description  # the name of the data it trained on


def test_a_split_that_no_longer_matches_falls_back_to_all_pairs(sample_pairs):
    pairs, _ = sample_pairs
    config = {"data": {"fingerprint": pairs_fingerprint(pairs), "validation_fingerprint": "0" * 16, "name": "x"},
              "run": {"val_fraction": 0.1, "test_fraction": 0.0, "split_by_question": False},
              "train_config": {"seed": 0}}
    held = held_out_pairs(config, pairs)
    assert not held.is_validation and len(held.pairs) == len(pairs)
    assert not held_out_pairs({}, pairs).is_validation  # zero-shot MiniLM: no training data at all
