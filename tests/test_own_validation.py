"""Validation a user can trust: splits that do not leak, the user's own validation and test files, runs that
cannot be measured refused, and the auto recipe read off the data."""
import argparse
import json
import math

import numpy as np
import pandas as pd
import pytest

from core.cli.main import main
from core.cli.train import wants_auto_recipe
from core.data import (
    GROUP,
    MIN_PAIRS_PER_CLASS,
    question_groups,
    recorded_by_question,
    resampling_groups,
    resolve_split_by,
    split_pairs,
)
from core.inference.analysis import SEEN_NEITHER, seen_in_training
from core.training.presets import LENGTH_QUANTILE, MIN_VALIDATIONS, auto_options
from core.text.wordpiece_tokenizer import bert_wordpiece

TINY = ["--model", "lstm", "--loss", "contrastive", "--epochs", "1", "--device", "cpu", "--max-length", "12",
        "--model-options", json.dumps({"hidden_size": 10, "embedding_dim": 12})]


def hub_pairs(hubs: int = 40, spokes: int = 4) -> pd.DataFrame:
    """Each hub question paired with ``spokes`` others, duplicates and not in turn: every hub links pairs."""
    rows = [(f"hub question number {h} about topic {h}?", f"spoke {s} of hub {h}: is it topic {h}?", int(s % 2 == 0))
            for h in range(hubs) for s in range(spokes)]
    return pd.DataFrame(rows, columns=["question1", "question2", "is_duplicate"])


def write(frame: pd.DataFrame, path) -> str:
    frame.to_csv(path, index=False)
    return str(path)


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_pair_split_leaks_shared_questions_and_the_group_split_does_not():
    pairs = hub_pairs()
    by_pair = split_pairs(pairs, val_fraction=0.2, test_fraction=0.0, seed=0, by_question=False)
    leaked = seen_in_training(by_pair.train, by_pair.val) != SEEN_NEITHER
    assert leaked.sum() > len(by_pair.val) // 2  # most validation pairs leak
    by_group = split_pairs(pairs, val_fraction=0.2, test_fraction=0.0, seed=0, by_question=True)
    unseen = seen_in_training(by_group.train, by_group.val) == SEEN_NEITHER
    assert len(by_group.val) == 32 and unseen.all()  # 8 whole hubs, no leak
    assert resolve_split_by(pairs, "auto") == "question"
    assert resolve_split_by(pairs.drop_duplicates("question1"), "auto") == "pair"  # one pair per hub: no link
    assert resolve_split_by(pairs, "pair") == "pair"


def test_question_groups_number_connected_pairs_alike():
    pairs = pd.DataFrame({"question1": ["a", "B ", "c", "x"], "question2": ["b", "c", "d", "y"], "is_duplicate": 1})
    groups = question_groups(pairs)
    assert groups[0] == groups[1] == groups[2] != groups[3]  # "b" and "B " are one question once normalised


def sited_pairs() -> pd.DataFrame:
    """Pairs of distinct questions on 12 sites, 10 a site; one question also asked on the next site."""
    rows = [(f"question {i} asked on site {i % 12}?", f"another question {i}?", i // 12 % 2, f"https://site{i % 12}.org")
            for i in range(120)]
    rows[5] = (rows[6][0], "a question that links sites 5 and 6?", 1, rows[5][3])
    return pd.DataFrame(rows, columns=["question1", "question2", "is_duplicate", "url"])


def test_a_named_group_column_keeps_each_group_and_each_question_on_one_side(tmp_path):
    from core.data import load_pairs

    path = tmp_path / "sited.csv"
    sited = sited_pairs()
    sited.to_csv(path, index=False)
    pairs, _ = load_pairs(path, group_column="URL")  # found ignoring case
    assert pairs[GROUP].tolist() == sited["url"].tolist() and resolve_split_by(pairs, "pair") == "group"
    assert split_pairs(pairs.drop(columns=GROUP), val_fraction=0.2, test_fraction=0.0, seed=0).val["question1"].map(
        lambda text: text.split("site ")[1]).nunique() > 3  # without the column: pairs of many sites
    for seed in range(5):
        split = split_pairs(pairs, val_fraction=0.2, test_fraction=0.1, seed=seed)
        sites = [set(part[GROUP]) for part in (split.train, split.val, split.test)]
        assert not (sites[0] & sites[1] or sites[0] & sites[2] or sites[1] & sites[2])
        assert len(split.val) in (10, 20, 30) and len(split.train) + len(split.val) + len(split.test) == 120
        # sites 5 and 6 share a question: both on one side
        assert (("https://site5.org" in sites[0]) == ("https://site6.org" in sites[0]))
    groups = resampling_groups(pairs)  # the intervals resample whole sites
    assert len(set(groups)) == 11 and len(set(groups[sited["url"] == "https://site3.org"])) == 1
    three_sites = pairs[pairs[GROUP].isin([f"https://site{site}.org" for site in range(3)])]
    assert resampling_groups(three_sites) is None  # a third of the pairs a site: too few sites to resample


def test_train_splits_by_the_group_column_and_records_it(capsys, tmp_path):
    data = write(sited_pairs(), tmp_path / "sited.csv")
    code, out, err = run_cli(capsys, "train", "--data", data, "--group-column", "url", "--out", tmp_path / "model",
                             *TINY)
    assert code == 0, err
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert (config["run"]["split_by"], config["run"]["group_column"]) == ("group", "url")
    assert config["data"]["val_pairs"] == 10  # one whole site: 10 % of 120 pairs holds no more
    code, out, err = run_cli(capsys, "train", "--data", data, "--group-column", "topic", *TINY)
    assert code == 2 and out == "" and err.strip() == (
        'error: sited.csv: no column "topic" to group the pairs by; its columns are: question1, question2, '
        "is_duplicate, url")


def test_recorded_split_reads_new_and_old_folders():
    assert recorded_by_question({"split_by": "question"}) and not recorded_by_question({"split_by": "pair"})
    assert recorded_by_question({"split_by_question": True}) and not recorded_by_question({})


def test_train_uses_the_users_validation_and_test_files_as_they_are(capsys, tmp_path):
    pairs = hub_pairs()
    train = write(pairs.iloc[:100], tmp_path / "train.csv")
    val = write(pairs.iloc[100:140], tmp_path / "dev.csv")
    test = write(pairs.iloc[140:], tmp_path / "test.csv")
    code, out, err = run_cli(capsys, "train", "--data", train, "--val", val, "--test", test, "--out",
                             tmp_path / "model", *TINY)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["validation"]["n"] == 40 and summary["test"]["n"] == 20
    for split in ("validation", "test"):
        low, high = summary[split]["intervals"]["roc_auc"]
        assert low <= summary[split]["roc_auc"] <= high
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    data = config["data"]
    assert (data["train_pairs"], data["val_pairs"], data["test_pairs"]) == (100, 40, 20)
    assert (data["val_name"], data["test_name"]) == ("dev.csv", "test.csv")
    # the split it really made: both files given, nothing of the data was held out
    assert (config["run"]["val_fraction"], config["run"]["test_fraction"], config["run"]["split_by"]) == (0, 0, "none")
    assert "only 40 validation pairs" in err  # below the floor: one warning line saying what to do
    assert set(config["metrics"]["baselines"]["tfidf"]["verdict"]) == {"verdict", "difference", "interval", "pairs"}


def test_split_by_pair_is_recorded(capsys, tmp_path):
    code, out, err = run_cli(capsys, "train", "--data", write(hub_pairs(), tmp_path / "d.csv"), "--split-by", "pair",
                             "--out", tmp_path / "model", *TINY)
    assert code == 0, err
    assert json.loads((tmp_path / "model" / "config.json").read_text())["run"]["split_by"] == "pair"


def test_a_one_class_file_is_refused_in_one_line(capsys, tmp_path):
    pairs = hub_pairs().assign(is_duplicate=1)
    code, out, err = run_cli(capsys, "train", "--data", write(pairs, tmp_path / "ones.csv"), "--out",
                             tmp_path / "model", *TINY)
    assert code == 2 and out == ""
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: ones.csv: all 160 pairs are duplicates") and "Traceback" not in err
    assert not (tmp_path / "model").exists()


def test_a_validation_file_without_both_classes_is_refused_in_one_line(capsys, tmp_path):
    pairs = hub_pairs()
    one_duplicate = pairs.iloc[100:140].assign(is_duplicate=0)
    code, out, err = run_cli(capsys, "train", "--data", write(pairs.iloc[:100], tmp_path / "train.csv"), "--val",
                             write(one_duplicate, tmp_path / "dev.csv"), "--out", tmp_path / "model", *TINY)
    assert code == 2 and out == ""
    line = err.strip().splitlines()[-1]
    assert line == (f"error: the validation pairs hold 0 duplicate(s) and 40 non-duplicate(s); a run needs at least "
                    f"{MIN_PAIRS_PER_CLASS} of each class there to be measured")
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize("held_out", [["--val", "train"], ["--test", "train"], ["--val", "dev", "--test", "dev"]])
def test_a_held_out_file_that_is_the_training_file_or_the_other_held_out_file_is_refused(capsys, tmp_path, held_out):
    pairs = hub_pairs()
    files = {"train": write(pairs.iloc[:100], tmp_path / "train.csv"),
             "dev": write(pairs.iloc[100:], tmp_path / "dev.csv")}
    argv = [files.get(value, value) for value in held_out]
    code, out, err = run_cli(capsys, "train", "--data", files["train"], *argv, "--out", tmp_path / "model", *TINY)
    assert code == 2 and out == ""
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: --") and "all its" in line, err
    assert not (tmp_path / "model").exists()


def swapped(frame: pd.DataFrame) -> pd.DataFrame:
    """The same pairs with their questions in the other order and other spacing and case."""
    return frame.assign(question1=frame["question2"].str.upper() + "  ", question2=frame["question1"])


@pytest.mark.parametrize("flag", ["--val", "--test"])
def test_a_held_out_file_of_the_training_pairs_is_refused_by_content(capsys, tmp_path, flag):
    pairs = hub_pairs()
    train = write(pairs.iloc[:100], tmp_path / "train.csv")
    for name, frame in (("copy.csv", pairs.iloc[:100]), ("swapped.csv", swapped(pairs.iloc[20:60]))):
        code, out, err = run_cli(capsys, "train", "--data", train, flag, write(frame, tmp_path / name), "--out",
                                 tmp_path / "model", *TINY)
        assert code == 2 and out == "", err
        line = err.strip().splitlines()[-1]
        assert line.startswith(f"error: {flag} {name}: all its") and "in the training file" in line, line
        assert not (tmp_path / "model").exists()


def test_held_out_pairs_also_in_training_are_left_out_and_said(capsys, tmp_path):
    pairs = hub_pairs()
    train = write(pairs.iloc[:100], tmp_path / "train.csv")
    val = write(pd.concat([pairs.iloc[100:140], swapped(pairs.iloc[:5])]), tmp_path / "dev.csv")
    test = write(pd.concat([pairs.iloc[140:], pairs.iloc[100:103], swapped(pairs.iloc[10:12])]), tmp_path / "test.csv")
    code, out, err = run_cli(capsys, "train", "--data", train, "--val", val, "--test", test, "--out",
                             tmp_path / "model", *TINY)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["validation"]["n"] == 40 and summary["test"]["n"] == 20
    assert "--val dev.csv: 5 of its 45 pairs are also in the training file" in err
    assert "--test test.csv: 5 of its 25 pairs are also in the training or validation file" in err


def long_pairs(count: int) -> pd.DataFrame:
    words = "the forum post asks how to configure the network interface after an upgrade of the system".split()
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, size=rng.integers(10, 90))) for _ in range(2 * count)]
    return pd.DataFrame({"question1": texts[:count], "question2": texts[count:],
                         "is_duplicate": np.arange(count) % 2})


def test_the_auto_recipe_reads_lengths_size_and_validations_off_the_data():
    pairs = long_pairs(600)
    recipe = auto_options(pairs, "cpu")
    options = recipe.options
    tokenizer = bert_wordpiece(256)
    counts = [tokenizer.count(text) for text in pd.concat([pairs["question1"], pairs["question2"]])]
    quantile = math.ceil(np.quantile(counts, LENGTH_QUANTILE))
    assert options["max_length"] == 8 * math.ceil(quantile / 8)
    assert options["val_fraction"] == 0.2  # 600 pairs: a fifth, the most it holds out
    train_pairs = 480
    steps_per_epoch = math.ceil(train_pairs / options["batch_size"])
    total = options["max_steps"] or options["epochs"] * steps_per_epoch
    every = options["validate_every"] or steps_per_epoch
    assert total // every >= MIN_VALIDATIONS and every <= steps_per_epoch
    assert f"max_length {options['max_length']}" in recipe.reason and "480 training pairs" in recipe.reason
    with_file = auto_options(pairs, "cpu", has_val_file=True).options
    assert "val_fraction" not in with_file and "a validation file" in auto_options(pairs, "cpu", True).reason


def test_the_auto_recipe_plans_a_first_run_of_at_most_10_minutes_on_the_cpu():
    for count in (500, 2_000):
        recipe = auto_options(long_pairs(count), "cpu")
        # training (validations included) stops at max_minutes; the rest (encoder, baselines, saving) is seconds
        assert recipe.options["max_minutes"] * 60 + 60 <= 600
        assert 0 < recipe.estimated_seconds <= recipe.options["max_minutes"] * 60 + 60
        assert recipe.summary[-1] == (f"Expected time on this CPU: about {math.ceil(recipe.estimated_seconds / 60)} "
                                      f"min from Start to the saved model (training capped at "
                                      f"{recipe.options['max_minutes']:g} min).")


def test_the_auto_recipe_is_the_default_only_without_recipe_options():
    def parsed(**given):
        names = ("preset", "model", "loss", "form", "margin", "scale", "weight", "epochs", "batch_size", "lr",
                 "patience", "max_steps", "max_minutes", "max_length", "min_freq", "max_vocab", "model_options",
                 "init_model", "hard_negatives", "implied_pairs")
        return argparse.Namespace(**{name: None for name in names} | given)

    assert wants_auto_recipe(parsed()) and wants_auto_recipe(parsed(preset="auto", epochs=3))
    assert not wants_auto_recipe(parsed(epochs=3)) and not wants_auto_recipe(parsed(preset="lstm-quora"))
    # a budget is not a recipe: the auto recipe plans within it
    assert wants_auto_recipe(parsed(max_minutes=3.0)) and wants_auto_recipe(parsed(max_steps=40))


def test_the_auto_recipe_plans_within_the_users_time_budget():
    pairs = long_pairs(2_000)
    default, budget = auto_options(pairs, "cpu").options, auto_options(pairs, "cpu", max_minutes=2.5).options
    assert budget["max_minutes"] == 2.5 and default["max_minutes"] == 7.5
    # a third of the default time (planned at 2 minutes of the 2.5): a third of the training pairs, within a step
    planned = lambda options: options["max_steps"] or options["epochs"] * math.ceil(1_600 / options["batch_size"])
    assert planned(budget) == pytest.approx(planned(default) / 3, abs=1)
    assert "about 2 minutes at the expected speed" in auto_options(pairs, "cpu", max_minutes=2.5).reason


@pytest.mark.slow
def test_preset_auto_trains_minilm_and_says_what_it_picked(capsys, tmp_path):
    pairs = hub_pairs(12, 4)
    code, out, err = run_cli(capsys, "train", "--data", write(pairs, tmp_path / "forum.csv"), "--preset", "auto",
                             "--max-steps", "2", "--out", tmp_path / "model")
    assert code == 0, err
    assert "note: auto recipe for 38 training pairs: MiniLM fine-tuned with the contrastive loss" in err
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["model_type"] == "minilm" and config["train_config"]["max_steps"] == 2  # explicit wins
    assert config["run"]["val_fraction"] == 0.2


def test_a_run_that_cuts_most_questions_short_says_so(capsys, tmp_path):
    data = write(hub_pairs(), tmp_path / "d.csv")
    code, out, err = run_cli(capsys, "train", "--data", data, "--out", tmp_path / "cut", *TINY, "--max-length", "4")
    assert code == 0, err
    assert "warning: max_length 4 cuts 100% of the training questions short" in err
    code, out, err = run_cli(capsys, "train", "--data", data, "--out", tmp_path / "whole", *TINY, "--max-length", "32")
    assert code == 0, err
    assert "cuts" not in err
