"""The Augmented SBERT pieces: corpus mining, silver pairs and the augmented recipe (the cross-encoder: test_cross_encoder.py).

Hand-placed vectors, so every expected value below is worked out by hand.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import synthetic_pairs

from core.data.splitting import connected_components
from core.training.mining import mine_hard_negatives, select_hard_negatives


def test_connected_components_follow_chains_of_edges():
    labels = connected_components(np.array([0, 1, 5]), np.array([1, 2, 6]), 7)
    assert labels.shape == (7,)
    assert labels[0] == labels[1] == labels[2] and labels[5] == labels[6]
    assert len({labels[0], labels[3], labels[4], labels[5]}) == 4  # 3 and 4 have no edge


def test_topk_percpos_skips_neighbours_scored_near_the_positive():
    groups = np.arange(8)
    chosen = select_hard_negatives(np.array([0]), np.array([0.9]), np.array([[0, 5, 7, 6]]),
                                   np.array([[1.0, 0.88, 0.80, 0.7]]), groups, k=1, max_share=0.95)
    assert chosen == [(0, 7)]  # 0 is the anchor itself; 0.88 >= 0.95 * 0.9 = 0.855
    chosen = select_hard_negatives(np.array([0]), np.array([0.9]), np.array([[0, 5, 7, 6]]),
                                   np.array([[1.0, 0.88, 0.80, 0.7]]), groups, k=2, max_share=1.0)
    assert chosen == [(0, 5), (0, 7)]


def test_a_labelled_duplicate_or_a_missing_neighbour_is_never_a_negative():
    groups = np.array([0, 1, 0, 3])  # question 2 is a labelled duplicate of 0 (through a chain)
    chosen = select_hard_negatives(np.array([0, 1]), np.array([0.9, 0.9]), np.array([[2, 3], [-1, 3]]),
                                   np.array([[0.5, 0.4], [0.0, 0.3]]), groups, k=1)
    assert chosen == [(0, 3), (1, 3)]


class VectorModel:
    """A stand-in encoder with hand-placed vectors: ``encode`` looks each text up."""

    def __init__(self, vectors: dict[str, list[float]]):
        self.vectors = {text: np.asarray(v, dtype=np.float32) for text, v in vectors.items()}

    def encode(self, texts, tower=0, batch_size=256, progress=None):
        return torch.tensor(np.stack([self.vectors[t] for t in texts]))


def _unit(degrees: float) -> list[float]:
    return [float(np.cos(np.radians(degrees))), float(np.sin(np.radians(degrees))), 0.0]


def test_mining_finds_the_closest_unlabelled_non_duplicate_of_each_duplicate_pair():
    # a~b is labelled duplicate (cos 20 deg = 0.940); c sits 5 deg from a (0.996 >= 0.95 * 0.940: a
    # likely unlabelled duplicate, skipped); d at 30 deg (0.866) is the hard negative; e at 80 deg is
    # far; a-e is already labelled a non-duplicate and must not come back. Only the duplicate pair
    # (a, b) is an anchor.
    model = VectorModel({"a": _unit(0), "b": _unit(20), "c": _unit(-5), "d": _unit(30), "e": _unit(80)})
    pairs = pd.DataFrame({"question1": ["a", "c", "a", "d"], "question2": ["b", "e", "e", "c"],
                          "is_duplicate": [1, 0, 0, 0]})
    mined = mine_hard_negatives(pairs, model, k=1)
    assert mined.to_dict("list") == {"question1": ["a"], "question2": ["d"], "is_duplicate": [0]}
    mined = mine_hard_negatives(pairs, model, k=3)  # d, then e is labelled already, so d alone
    assert mined["question2"].tolist() == ["d"]


# ---- distillation through the pipeline -----------------------------------------------------------
# ---- mined hard negatives in the in-batch losses -------------------------------------------------
def _negative_words(table, tokenizer, rows) -> list[str]:
    """The words of a batch's extra negatives (each a one-word question here), sorted; [] when it has none."""
    batch = table.batch(np.asarray(rows))
    return [] if batch.negatives is None else sorted(tokenizer.vocab[int(ids[0])] for ids in batch.negatives[0])


def test_mined_negatives_join_the_batches_through_the_labelled_path():
    from core.text.pair_table import PairTable
    from core.text.word_tokenizer import WordTokenizer

    pairs = pd.DataFrame({"question1": ["a", "c", "c", "f"], "question2": ["b", "d", "e", "g"],
                          "is_duplicate": [1, 1, 0, 1]})
    mined = pd.DataFrame({"question1": ["a"], "question2": ["g"], "is_duplicate": [0]})
    tokenizer = WordTokenizer.build(list("abcdefg"), min_freq=1, max_length=4)
    table = PairTable(pairs, tokenizer, hard_negatives=True, mined_negatives=mined)
    assert _negative_words(table, tokenizer, [0]) == ["g"]  # a's mined negative (no labelled one)
    assert _negative_words(table, tokenizer, [1]) == ["e"]  # c's labelled one
    assert _negative_words(table, tokenizer, [0, 1]) == ["e", "g"]
    assert _negative_words(table, tokenizer, [0, 3]) == []  # g is a question of this batch: some row's positive
    labelled_only = PairTable(pairs, tokenizer, hard_negatives=True)
    assert _negative_words(labelled_only, tokenizer, [0]) == [] and _negative_words(labelled_only, tokenizer, [1]) == ["e"]


def test_mined_negatives_are_never_a_pairs_own_duplicate_nor_a_labelled_pair(tiny_lstm, sample_pairs):
    from core.models import load_model

    pairs = sample_pairs[0].head(200)  # the words the tiny LSTM knows
    model, _ = load_model(tiny_lstm)
    mined = mine_hard_negatives(pairs, model, k=3, max_share=1.0)
    assert len(mined) and (mined["is_duplicate"] == 0).all()
    texts = pd.Index(pd.unique(pd.concat([pairs["question1"], pairs["question2"]])))
    duplicates = pairs[pairs["is_duplicate"] == 1]
    groups = connected_components(texts.get_indexer(duplicates["question1"]), texts.get_indexer(duplicates["question2"]),
                                  len(texts))
    assert not (groups[texts.get_indexer(mined["question1"])] == groups[texts.get_indexer(mined["question2"])]).any()
    labelled = set(zip(pairs["question1"], pairs["question2"])) | set(zip(pairs["question2"], pairs["question1"]))
    assert not labelled & set(zip(mined["question1"], mined["question2"]))


def test_a_run_with_mined_negatives_records_how_many_it_mined(tiny_lstm):
    from core.training.pipeline import train_run
    from core.training.specs import spec_from_options

    spec = spec_from_options(model="lstm", loss="triplet", mine_negatives=True, epochs=1, batch_size=16, device="cpu",
                             max_length=11, model_options={"embedding_dim": 12, "hidden_size": 10})
    assert spec.hard_negatives and spec.mine_negatives
    assert not spec_from_options(loss="contrastive", mine_negatives=True).mine_negatives  # labelled batches take none
    result = train_run(spec, synthetic_pairs(200, seed=0, topics=60), save=False)
    assert result.metadata["mined_negatives"] > 0
    assert result.metadata["run"]["mine_negatives"] is True
    from core.export.manifest import config_summary
    from core.export.model_card import loss_line

    assert loss_line(config_summary(result.metadata)).endswith(
        f", plus labelled hard negatives and {result.metadata['mined_negatives']:,} mined among the training questions "
        "with the starting model")


# ---- the augmented recipe ------------------------------------------------------------------------
def test_silver_pairs_are_each_questions_neighbours_and_a_random_one_never_a_gold_pair():
    from core.training.distillation import NEIGHBOURS, silver_pairs

    assert NEIGHBOURS == 3
    angles = {"a": 0, "b": 10, "c": 20, "d": 90, "e": 100, "f": 180}
    model = VectorModel({text: _unit(angle) for text, angle in angles.items()})
    gold = pd.DataFrame({"question1": ["B"], "question2": ["a "], "is_duplicate": [1]})  # a-b, spelt otherwise
    silver = silver_pairs(list(angles), model, gold, limit=100, seed=0)
    keys = [tuple(sorted(pair)) for pair in zip(silver["question1"], silver["question2"])]
    assert len(keys) == len(set(keys)) and ("a", "b") not in keys and all(a != b for a, b in keys)
    near = {key for key, source in zip(keys, silver["source"]) if source == "neighbour"}
    # each question's 3 nearest: a: b c d · b: a c d · c: b a d · d: e c b · e: d c f · f: e d c; a-b is gold
    assert near == {("a", "c"), ("a", "d"), ("b", "c"), ("b", "d"), ("c", "d"), ("d", "e"), ("c", "e"), ("e", "f"),
                    ("d", "f"), ("c", "f")}
    assert (silver["source"] == "random").sum() >= 1
    assert len(silver_pairs(list(angles), model, gold, limit=4, seed=0)) == 4


class ScriptedTeacher:
    """A stand-in cross-encoder whose score of a pair is written down beforehand."""

    def __init__(self, scores: dict[tuple[str, str], float]):
        self.scores = scores

    def score_pairs(self, first, second, batch_size=128):
        return np.array([self.scores[pair] for pair in zip(first, second)])


def test_silver_labels_are_the_teachers_scores_at_its_threshold():
    from core.training.distillation import silver_labels

    teacher = ScriptedTeacher({("a", "b"): 0.9, ("a", "c"): 0.2, ("b", "c"): 0.6, ("c", "d"): 0.59})
    silver = pd.DataFrame({"question1": ["a", "a", "b", "c"], "question2": ["b", "c", "c", "d"]})
    assert silver_labels(teacher, silver, threshold=0.6).tolist() == [1, 0, 1, 0]
    assert silver_labels(teacher, silver, threshold=0.1).tolist() == [1, 1, 1, 1]


def test_silver_labelling_stops_at_its_deadline_after_a_whole_chunk(monkeypatch):
    """A deadline already passed still labels one chunk (the recipe always has silver pairs), then stops: the run
    keeps its budget on a slow machine."""
    from core.training import distillation

    monkeypatch.setattr(distillation, "LABEL_CHUNK", 3)
    teacher = ScriptedTeacher({("a", "b"): 0.9, ("a", "c"): 0.2, ("b", "c"): 0.6, ("c", "d"): 0.59, ("d", "e"): 0.7})
    silver = pd.DataFrame({"question1": ["a", "a", "b", "c", "d"], "question2": ["b", "c", "c", "d", "e"]})
    seen = []
    labels = distillation.silver_labels(teacher, silver, 0.6, lambda done, total: seen.append((done, total)),
                                        deadline=0.0)
    assert labels.tolist() == [1, 0, 1] and seen == [(3, 5)]
    assert distillation.silver_labels(teacher, silver, 0.6).tolist() == [1, 0, 1, 0, 1]


def test_the_card_says_when_labelling_stopped_before_every_drawn_pair():
    from core.export.model_card import augmented_line

    record = {"teacher": {"validation_roc_auc": 0.745, "threshold": 0.56}, "silver_pairs": 2304, "questions": 7063,
              "questions_from": "the training pairs", "neighbour_pairs": 1387, "random_pairs": 917,
              "silver_duplicates": 1096}
    assert "labelled 2,304 silver pairs of 7,063 questions" in augmented_line({"augmented": record})
    stopped = augmented_line({"augmented": {**record, "silver_pairs_drawn": 10800}})
    assert "labelled 2,304 silver pairs (of 10,800 drawn: as many as its share of the time budget allowed)" in stopped


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory, sample_pairs):
    from tests.test_base_model import write_tiny_bert

    pairs, _ = sample_pairs
    return write_tiny_bert(tmp_path_factory.mktemp("base") / "tiny-bert",
                           pairs["question1"].tolist() + pairs["question2"].tolist())


def test_the_augmented_recipe_trains_a_teacher_labels_silver_pairs_and_saves_the_bi_encoder(
        bert_folder, sample_pairs, tmp_path, monkeypatch, capsys):
    import json

    import core.training.distillation as distillation
    from core.cli.main import main
    from core.models import load_model

    runs = []  # (spec, silver, result) of each train_run: the teacher's, then the bi-encoder's

    def recorded(spec, *args, **kwargs):
        result = train_run(spec, *args, **kwargs)
        runs.append((spec, kwargs.get("silver"), result))
        return result

    train_run = distillation.train_run
    monkeypatch.setattr(distillation, "train_run", recorded)
    pairs, _ = sample_pairs
    data, unlabelled = tmp_path / "pairs.csv", tmp_path / "questions.txt"
    pairs.head(120).to_csv(data, index=False)
    unlabelled.write_text("\n".join(pairs["question1"].iloc[120:170]) + "\n", encoding="utf-8")
    assert main(["train", "--preset", "augmented", "--base-model", str(bert_folder), "--data", str(data),
                 "--unlabelled-questions", str(unlabelled), "--out", str(tmp_path / "run"), "--epochs", "1",
                 "--batch-size", "8", "--max-length", "24", "--device", "cpu", "--budget-minutes", "3"]) == 0

    (teacher_spec, _, teacher), (student_spec, silver, student) = runs
    assert teacher_spec.model == "cross-encoder" and teacher_spec.train.max_minutes <= 3 * distillation.TEACHER_SHARE
    assert student_spec.model == "minilm" and student_spec.train.max_minutes <= 3
    expected = distillation.silver_labels(teacher.model, silver, teacher.thresholds["accuracy"])
    assert len(silver) and silver["is_duplicate"].tolist() == expected.tolist()  # the teacher's labels
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    record = config["augmented"]
    assert record["teacher"]["model"] == "cross-encoder"
    assert record["teacher"]["validation_roc_auc"] == pytest.approx(teacher.validation["roc_auc"])
    assert record["silver_pairs"] == len(silver) == record["neighbour_pairs"] + record["random_pairs"]
    assert record["silver_duplicates"] == int(expected.sum())
    assert record["questions_from"] == "questions.txt" and record["budget_minutes"] == 3
    assert config["data"]["train_pairs"] == teacher.metadata["data"]["train_pairs"] + len(silver)  # gold + silver
    assert student.folder == tmp_path / "run"
    model, _ = load_model(tmp_path / "run")
    assert model.model_type == "minilm"
    from core.export.manifest import config_summary
    from core.export.model_card import augmented_line

    assert augmented_line(config_summary(config)).startswith(
        f"Augmented SBERT (Thakur et al., 2021): a cross-encoder teacher trained on the gold pairs (validation ROC AUC "
        f"{teacher.validation['roc_auc']:.3f}) labelled {len(silver):,} silver pairs of {record['questions']:,} "
        "questions from `questions.txt`")
    printed = capsys.readouterr()
    assert json.loads(printed.out)["augmented"] == record
    print(printed.err)


def test_a_cancelled_augmented_run_saves_nothing_and_releases_its_folder(bert_folder, sample_pairs, tmp_path):
    import threading

    from core.saving import claim_output
    from core.status import CANCELLED
    from core.training.jobs import run_recipe
    from core.training.specs import spec_from_options

    spec = spec_from_options("augmented", base_model=str(bert_folder), epochs=1, batch_size=8, max_length=24,
                             device="cpu", val_fraction=0.2, split_by="pair")
    stop = threading.Event()
    stop.set()
    result, _ = run_recipe(spec, sample_pairs[0].head(120), "augmented", None, claim_output(tmp_path / "run"),
                           stop_event=stop)
    assert result.outcome.status == CANCELLED and result.folder is None and "bi-encoder never trained" in result.note
    claim_output(tmp_path / "run").release()  # free again


def test_unlabelled_questions_belong_to_the_augmented_recipe(tmp_path, capsys, sample_pairs):
    from conftest import one_error_line, run_cli

    data = tmp_path / "pairs.csv"
    sample_pairs[0].head(40).to_csv(data, index=False)
    one_error_line(run_cli(capsys, "train", "--data", data, "--unlabelled-questions", data, "--out", tmp_path / "run"),
                   "--unlabelled-questions is the augmented recipe's: add --preset augmented")
    missing = tmp_path / "questions.txt"  # read as any corpus: a missing file is one line before any training
    one_error_line(run_cli(capsys, "train", "--data", data, "--preset", "augmented", "--unlabelled-questions", missing,
                           "--out", tmp_path / "run"), f"file not found: {missing}")
    assert not (tmp_path / "run" / "config.json").exists()
