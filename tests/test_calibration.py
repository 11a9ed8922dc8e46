"""core.inference.calibration: the two operating points (pair verdict, clustering), against hand-computed values,
and the clustering threshold a training run records in config.json."""
from __future__ import annotations

import json

import numpy as np
import pytest

from core.data import load_pairs
from core.inference.calibration import (
    CLUSTER_PRECISION,
    MIN_CALIBRATION_PAIRS,
    ZERO_SHOT_CLUSTER_THRESHOLD,
    can_calibrate,
    clustering_threshold,
    pair_threshold,
    precision_threshold,
)
from core.inference.honest_pairs import run_split
from core.inference.metrics import pair_scores
from core.models import ZERO_SHOT_THRESHOLD, load_model
from core.models.registry import zero_shot_config
from core.text.pair_table import PairTable
from core.training.pipeline import train_run
from core.training.specs import spec_from_options
from lab.session import SAMPLE_PATH


# ---- precision_threshold ----------------------------------------------------------------------------
def test_the_lowest_threshold_that_keeps_the_precision():
    # above 0.75: 2 of 2 duplicates; above 0.65: 2 of 3 (0.67); above 0.55: 3 of 4 (0.75)
    assert precision_threshold([1, 1, 0, 1], [0.9, 0.8, 0.7, 0.6], 0.9) == pytest.approx(0.75)
    assert precision_threshold([1, 1, 0, 1], [0.9, 0.8, 0.7, 0.6], 0.75) == pytest.approx(0.6 - 1e-6)
    assert precision_threshold([1, 1, 0, 1], [0.9, 0.8, 0.7, 0.6], 0.6) == pytest.approx(0.6 - 1e-6)
    # the order of the input does not matter
    assert precision_threshold([1, 0, 1, 1], [0.6, 0.7, 0.9, 0.8], 0.9) == pytest.approx(0.75)


def test_tied_scores_are_above_or_below_together():
    # 0.8 is tied between a duplicate and not: above 0.85 1 of 1, above 0.65 2 of 3, above 0.5 - ε 2 of 4
    labels, scores = [1, 1, 0, 0], [0.9, 0.8, 0.8, 0.5]
    assert precision_threshold(labels, scores, 0.9) == pytest.approx(0.85)
    assert precision_threshold(labels, scores, 0.6) == pytest.approx(0.65)  # (0.8 + 0.5) / 2
    assert precision_threshold(labels, scores, 0.5) == pytest.approx(0.5 - 1e-6)  # every pair above


def test_none_when_the_precision_is_never_reached():
    assert precision_threshold([0, 1], [0.9, 0.8], 0.9) is None  # 0 of 1, then 1 of 2
    assert precision_threshold([0, 0, 0], [0.3, 0.2, 0.1], 0.1) is None  # no duplicate at all
    assert precision_threshold([1, 0], [0.5, 0.5], 0.9) is None  # tied: 1 of 2 at best
    assert precision_threshold([], [], 0.9) is None


def test_can_calibrate_needs_enough_pairs_of_both_classes():
    both = [0, 1] * (MIN_CALIBRATION_PAIRS // 2)
    assert can_calibrate(both) and not can_calibrate(both[:-1])
    assert not can_calibrate([1] * 100)


# ---- where a threshold comes from -----------------------------------------------------------------
def labelled() -> tuple[np.ndarray, np.ndarray]:
    """40 pairs, every other one a duplicate; the duplicates score 0.70, 0.72, ..., 1.08, the others 0.30, 0.32,
    ..., 0.68. Best accuracy: between the classes, 0.69. Precision 90%: above 0.65 the pairs are the 20 duplicates
    and the others at 0.68 and 0.66, 20 of 22 (0.91); above 0.63, 20 of 23 (0.87)."""
    labels = np.tile([1, 0], 20)
    scores = np.where(labels == 1, 0.7, 0.3) + 0.02 * (np.arange(40) // 2)
    return labels, scores


def test_pair_threshold_order_of_sources():
    labels, scores = labelled()
    lstm = {"model_type": "lstm", "thresholds": {"accuracy": 0.42, "f1": 0.3}}
    saved = pair_threshold(lstm, labels, scores)
    assert (saved.threshold, saved.pairs) == (0.42, 0) and "own validation split" in saved.source
    mine = pair_threshold({"model_type": "lstm"}, labels, scores)
    assert mine.threshold == pytest.approx(0.69) and mine.pairs == 40  # between 0.68 and 0.70
    assert mine.source == "best accuracy on 40 of your labelled pairs"
    # zero-shot MiniLM's config carries a fixed accuracy threshold, but the user's labels come first
    assert pair_threshold(zero_shot_config(), labels, scores).threshold == pytest.approx(0.69)
    assert pair_threshold(zero_shot_config()).threshold == ZERO_SHOT_THRESHOLD
    assert pair_threshold(zero_shot_config(), labels[:19], scores[:19]).threshold == ZERO_SHOT_THRESHOLD
    assert pair_threshold({"model_type": "lstm"}).threshold == 0.5


def test_clustering_threshold_order_of_sources():
    labels, scores = labelled()
    recorded = {"model_type": "lstm", "thresholds": {"accuracy": 0.42, "clusters": 0.61}}
    own = clustering_threshold(recorded, labels, scores)
    assert (own.threshold, own.pairs) == (0.61, 0)
    assert own.source == f"precision {CLUSTER_PRECISION:.0%} on the model's own validation split"
    # no recorded one: precision 90% on the user's labels
    mine = clustering_threshold({"model_type": "lstm", "thresholds": {"accuracy": 0.42}}, labels, scores)
    assert mine.threshold == pytest.approx(0.65) and mine.pairs == 40
    assert mine.source == "precision 90% on 40 of your labelled pairs"
    zero_shot = clustering_threshold(zero_shot_config(), labels, scores)
    assert zero_shot.threshold == pytest.approx(0.65) and zero_shot.pairs == 40
    # without labels (or too few, or a precision never reached), MiniLM's fixed one
    assert clustering_threshold(zero_shot_config()).threshold == ZERO_SHOT_CLUSTER_THRESHOLD
    assert clustering_threshold(zero_shot_config(), labels[:19], scores[:19]).threshold == ZERO_SHOT_CLUSTER_THRESHOLD
    inverted = clustering_threshold(zero_shot_config(), 1 - labels, scores)  # the duplicates score lowest
    assert inverted.threshold == ZERO_SHOT_CLUSTER_THRESHOLD and inverted.pairs == 0
    assert inverted.source.endswith("; your 40 labelled pairs reach precision 90% at no threshold")
    assert "reach" not in clustering_threshold(zero_shot_config()).source
    assert ZERO_SHOT_CLUSTER_THRESHOLD > ZERO_SHOT_THRESHOLD
    # last: the pair threshold, said to be one
    fallback = clustering_threshold({"model_type": "lstm", "thresholds": {"accuracy": 0.42}})
    assert fallback.threshold == 0.42 and "may chain" in fallback.source
    assert clustering_threshold({"model_type": "lstm"}).threshold == 0.5


def test_a_trained_run_records_its_clustering_threshold(sample_pairs, tmp_path):
    pairs = sample_pairs[0].copy()
    duplicate = pairs["is_duplicate"] == 1
    # A Siamese model scores a question against itself 1: even a tiny, barely trained one reaches the precision
    pairs.loc[duplicate, "question2"] = pairs.loc[duplicate, "question1"]
    tiny = {"embedding_dim": 12, "hidden_size": 10, "num_layers": 1}
    # Split by pair: split by question, the validation questions are all out of the tiny vocabulary, so every
    # one of them reads as the same unknown words and scores 1 against any other.
    spec = spec_from_options(model="lstm", loss="triplet", epochs=1, batch_size=32, device="cpu", max_length=16,
                             model_options=tiny, data_name="copies", split_by="pair")
    result = train_run(spec, pairs, out_dir=tmp_path / "run")
    config = json.loads((result.folder / "config.json").read_text(encoding="utf-8"))
    thresholds = config["thresholds"]
    assert set(thresholds) == {"accuracy", "f1", "clusters"} and thresholds == result.thresholds
    # the same number again from the run's validation split, scored by the saved model
    model, loaded = load_model(result.folder)
    table = PairTable(run_split(loaded, pairs).val, model.tokenizer)
    assert thresholds["clusters"] == pytest.approx(precision_threshold(table.labels, pair_scores(model, table)),
                                                   abs=1e-6)
    assert clustering_threshold(loaded).threshold == thresholds["clusters"]


def test_a_run_whose_validation_never_reaches_the_precision_records_none(tiny_models):
    model, config = load_model(tiny_models["lstm"])
    table = PairTable(run_split(config, load_pairs(SAMPLE_PATH)[0]).val, model.tokenizer)
    reached = precision_threshold(table.labels, pair_scores(model, table))
    assert ("clusters" in config["thresholds"]) == (reached is not None)
