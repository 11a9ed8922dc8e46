"""The active-labelling loop's rounds (core.training.active_rounds): a fixed held-out share by pair text, the
labels as a run's splits, the learning curve beside the labels file, a model scored on the held-out labels, and
the loop's retrain recipe."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.data import Splits
from core.data.questions import pair_key
from core.training import active_rounds
from core.training.active_rounds import (
    add_point,
    curve_path,
    held_out_mask,
    labels_path,
    legacy_labels_path,
    read_curve,
    retrain_problem,
    retrain_spec,
    round_splits,
    score_point,
)
from core.training.specs import SpecError

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def pairs_frame(n: int, seed: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"question1": [f"How do I learn topic {i}?" for i in range(n)],
                         "question2": [f"What is the best way to study subject {i}?" for i in range(n)],
                         "is_duplicate": np.random.default_rng(seed).integers(0, 2, n)})


def test_the_held_out_share_is_a_fifth_fixed_by_the_pairs_text():
    pairs = pairs_frame(1000)
    mask = held_out_mask(pairs)
    assert mask.dtype == bool and len(mask) == 1000
    assert 0.17 < mask.mean() < 0.23  # a hash mod 100 below 20: about a fifth
    # Independent of the row order, of which question comes first, of the case and spacing, and of the labels.
    order = np.random.default_rng(1).permutation(1000)
    assert (held_out_mask(pairs.iloc[order]) == mask[order]).all()
    swapped = pairs.rename(columns={"question1": "question2", "question2": "question1"})
    assert (held_out_mask(swapped) == mask).all()
    shouted = pairs.assign(question1=pairs["question1"].str.upper() + "  ", is_duplicate=1 - pairs["is_duplicate"])
    assert (held_out_mask(shouted) == mask).all()
    # A label's side never changes as labels come: the first 100's mask is the same inside the 1,000.
    assert (held_out_mask(pairs.iloc[:100]) == mask[:100]).all()
    # The rule itself: sha1 of the pair key, first 8 bytes, mod 100, below 20.
    import hashlib

    from core.data.questions import pair_key
    a, b = pair_key(pairs["question1"][7], pairs["question2"][7])
    bucket = int.from_bytes(hashlib.sha1(f"{a}\x1f{b}".encode()).digest()[:8], "big") % 100
    assert mask[7] == (bucket < 20)


def test_round_splits_train_on_the_rest_and_validate_on_the_held_out_labels():
    labels = pairs_frame(200).assign(labelled_by="ann", labelled_at="2026-01-01T00:00:00+00:00")
    splits = round_splits(labels)
    mask = held_out_mask(labels)
    assert isinstance(splits, Splits)
    assert list(splits.train.columns) == list(splits.val.columns) == ["question1", "question2", "is_duplicate"]
    assert splits.val["question1"].tolist() == labels["question1"][mask].tolist()
    assert splits.train["question1"].tolist() == labels["question1"][~mask].tolist()
    assert splits.test.empty and len(splits.train) + len(splits.val) == 200


def test_retrain_needs_both_classes_on_both_sides():
    labels = pairs_frame(200)
    assert retrain_problem(labels) is None
    all_duplicates = labels.assign(is_duplicate=1)
    problem = retrain_problem(all_duplicates)
    assert problem.startswith("The training share of your labels needs duplicates")
    # What it needs, by class: 80 % of new labels train, so about 2 labels bring one non-duplicate there.
    assert "label about 2 more non-duplicates; 80% of labels land in it." in problem and " duplicates;" not in problem
    mask = held_out_mask(labels)
    held_one_class = labels.assign(is_duplicate=np.where(mask, 0, labels["is_duplicate"]))
    problem = retrain_problem(held_one_class)
    assert problem.startswith("The held-out share of your labels needs duplicates")
    assert f"(it has 0 duplicates of {int(mask.sum())})" in problem  # a fifth of new labels are held out: 5
    assert problem.endswith("label about 5 more duplicates; 20% of labels land in it.")


def test_the_labels_file_is_named_after_the_corpus_in_the_runs_folder(tmp_path):
    path = labels_path(tmp_path, "bundled sample (assets/sample_pairs.csv)", "pairs:abc")
    assert path.parent == tmp_path / "labels"
    assert path.name.startswith("bundled-sample-assets-sample-pairs-csv-") and path.suffix == ".sqlite3"
    assert legacy_labels_path(path) == path.with_suffix(".csv")  # the CSV file of before, imported once
    assert len(path.stem.rsplit("-", 1)[1]) == 8
    assert labels_path(tmp_path, "bundled sample (assets/sample_pairs.csv)", "pairs:abd") != path
    assert labels_path(tmp_path, "???", "x").name.startswith("corpus-")
    # The curve keeps the name it had beside the CSV labels file, so a curve drawn before the database still shows.
    assert curve_path(path).name == path.stem + ".csv.curve.jsonl"


def test_curve_points_are_appended_once_per_model_and_read_back(tmp_path):
    labels_file = tmp_path / "labels" / "c-12345678.csv"
    assert read_curve(labels_file) == []
    point = {"labels": 0, "held_out": 4, "roc_auc": 0.75, "accuracy": 0.5, "threshold": 0.8}
    assert add_point(labels_file, point, "minilm")
    assert not add_point(labels_file, {**point, "roc_auc": 0.1}, "minilm")  # one point per model
    assert add_point(labels_file, {**point, "labels": 20, "roc_auc": None}, "/runs/run-1")
    curve = read_curve(labels_file)
    assert [(p["model"], p["labels"], p["roc_auc"]) for p in curve] == [("minilm", 0, 0.75), ("/runs/run-1", 20, None)]
    assert all(p["at"].endswith("+00:00") for p in curve)
    # A line a crash cut short is skipped, and the next point still lands on a line of its own.
    with open(curve_path(labels_file), "ab") as handle:
        handle.write(b'{"labels": 30, "mod')
    assert len(read_curve(labels_file)) == 2
    assert add_point(labels_file, {**point, "labels": 40}, "/runs/run-2")
    assert [p["labels"] for p in read_curve(labels_file)] == [0, 20, 40]
    lines = curve_path(labels_file).read_text().splitlines()
    assert all(json.loads(line) for line in lines if not line.startswith('{"labels": 30, "mod'))


# Each writer is a fresh interpreter that imports only the curve's module (not this test module, torch and all).
ADD_POINTS = """
import sys
from core.training.active_rounds import add_point
labels_file, start = sys.argv[1], int(sys.argv[2])
for i in range(start, start + 25):
    add_point(labels_file, {"labels": i, "held_out": 1, "roc_auc": 0.5, "accuracy": 0.5}, f"run-{i}")
"""


def test_two_processes_appending_at_once_lose_and_mix_nothing(tmp_path):
    labels_file = str(tmp_path / "labels.csv")
    workers = [subprocess.Popen([sys.executable, "-c", ADD_POINTS, labels_file, str(start)], cwd=ROOT)
               for start in (0, 25)]
    for worker in workers:
        assert worker.wait(120) == 0
    curve = read_curve(labels_file)
    assert sorted(p["labels"] for p in curve) == list(range(50))
    assert len(curve_path(labels_file).read_text().splitlines()) == 50


class KnownScores:
    """A model whose similarity of a pair is the number at the end of its first question."""

    def score_pairs(self, first, second):
        return np.array([float(text.rsplit(" ", 1)[1]) for text in first])


def test_score_point_on_four_held_out_pairs_by_hand(monkeypatch):
    labels = pd.DataFrame({"question1": ["a 0.9", "b 0.7", "c 0.6", "d 0.2", "e 0.1"],
                           "question2": ["w", "x", "y", "z", "v"], "is_duplicate": [1, 1, 0, 1, 0]})
    monkeypatch.setattr(active_rounds, "held_out_mask", lambda frame: np.array([True, True, True, True, False]))
    point = score_point(KnownScores(), {"thresholds": {"accuracy": 0.65}}, labels)
    # Held out: scores 0.9, 0.7, 0.6, 0.2 with labels 1, 1, 0, 1. ROC AUC: of the 3 (positive, negative) pairs,
    # 0.9 > 0.6 and 0.7 > 0.6 are ranked right, 0.2 < 0.6 wrong: 2/3. At 0.65: 0.9 and 0.7 called duplicates
    # (right), 0.6 not (right), 0.2 not (wrong): accuracy 3/4. It trained on the one label not held out.
    intervals = {name: point.pop(f"{name}_interval") for name in ("roc_auc", "accuracy")}
    assert point == {"labels": 5, "trained_on": 1, "held_out": 4, "roc_auc": pytest.approx(2 / 3), "accuracy": 0.75,
                     "threshold": 0.65}
    # 95 % bootstrap intervals over 4 pairs: a resample of only the three right pairs (probability 0.32) gives
    # accuracy 1, so the upper end is 1; they are wide, as 4 labels deserve.
    assert intervals["accuracy"][1] == 1.0 and intervals["accuracy"][0] <= 0.5
    assert 0.0 <= intervals["roc_auc"][0] < 2 / 3 < intervals["roc_auc"][1] <= 1.0
    one_class = labels.assign(is_duplicate=1)
    scored = score_point(KnownScores(), {"thresholds": {"accuracy": 0.65}}, one_class)
    assert scored["roc_auc"] is None and scored["roc_auc_interval"] is None
    monkeypatch.setattr(active_rounds, "held_out_mask", lambda frame: np.zeros(len(frame), dtype=bool))
    with pytest.raises(ValueError, match="no label is held out"):
        score_point(KnownScores(), {}, labels)


def test_the_loops_recipe_is_minilm_contrastive_one_short_epoch():
    spec = retrain_spec("", {"data_name": "labels x.csv"})
    assert spec.model == "minilm" and spec.loss.name == "contrastive" and spec.loss.batch_kind == "labelled"
    assert (spec.train.epochs, spec.train.batch_size, spec.train.lr, spec.max_length) == (1, 16, 2e-5, 32)
    assert spec.data_name == "labels x.csv"
    assert retrain_spec("minilm").model == "minilm"  # ZERO_SHOT: also from the pretrained weights
    with pytest.raises(SpecError, match="init_model cannot be used"):
        retrain_spec("/no/such/folder")


def test_retraining_starts_from_the_current_models_folder(tiny_models):
    spec = retrain_spec(str(tiny_models["lstm"]))
    assert spec.init_model == str(tiny_models["lstm"])
    assert spec.model == "lstm" and spec.loss.name == "contrastive"  # a folder of another family: itself
    assert retrain_spec("").init_model in ("", None)



def test_the_labels_folder_is_not_listed_as_a_model_that_failed_to_load(tmp_path):
    from core.saving import list_runs
    from core.training.active_rounds import labels_path

    path = labels_path(tmp_path, "my corpus", "0123456789abcdef")
    path.parent.mkdir(parents=True)
    path.write_text("question1,question2,is_duplicate\nA?,B?,1\n")
    (tmp_path / "not_a_model").mkdir()
    runs, problems = list_runs(tmp_path)
    assert runs == [] and [problem.split(":")[0] for problem in problems] == ["not_a_model"]


def test_a_label_stores_share_counts_are_the_frames_and_say_the_same_problem(tmp_path):
    from core.saving.label_store import LabelStore

    store = LabelStore(tmp_path / "labels.sqlite3")
    labels = pairs_frame(300, seed=3)
    store.merge(labels)
    counts = active_rounds.share_counts(store)  # one query: the labels themselves are not read
    assert counts == active_rounds.share_counts(labels) and counts.training + counts.held_out == 300
    assert counts.held_out == held_out_mask(labels).sum()
    one_class = labels.assign(is_duplicate=1)
    store.merge(one_class)
    assert retrain_problem(active_rounds.share_counts(store)) == retrain_problem(one_class) is not None


class ListedCorpus:
    """A corpus that knows a similarity for some pairs (NaN for the others), as ``EmbeddedCorpus.similarity``."""

    def __init__(self, known: dict):
        self.known = {pair_key(a, b): score for (a, b), score in known.items()}
        self.questions = sorted({text for pair in known for text in pair})

    def similarity(self, questions1, questions2):
        return np.array([self.known.get(pair_key(a, b), np.nan) for a, b in zip(questions1, questions2)])


def test_a_threshold_calibrated_on_a_stores_corpus_pairs_is_the_one_on_the_whole_frame(tmp_path):
    from core.saving.label_store import LabelStore

    labels = pairs_frame(120, seed=5)
    rng = np.random.default_rng(2)
    known = {(a, b): float(y * 0.3 + rng.uniform(0.4, 0.7)) for a, b, y in labels.values[:100]}  # 20 not in the corpus
    corpus, zero_shot = ListedCorpus(known), {"model_type": "minilm", "zero_shot": True}
    store = LabelStore(tmp_path / "labels.sqlite3")
    store.merge(labels)
    whole = active_rounds.labelled_threshold(zero_shot, corpus, labels)
    assert active_rounds.labelled_threshold(zero_shot, corpus, store) == whole
    assert whole.pairs == 100 and "100 of your labelled pairs" in whole.source

    class NeverRead:
        def labels_between(self, texts):
            raise AssertionError("a model with its own threshold reads no label")

    own = {"model_type": "lstm", "thresholds": {"accuracy": 0.61}}
    assert active_rounds.labelled_threshold(own, corpus, NeverRead()).threshold == 0.61
