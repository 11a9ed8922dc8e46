"""The cross-encoder (``train --model cross-encoder``): the joined pair, its score, its loss and spec, a run saved
and served by the commands that score pairs, refused by those that need vectors, and ``--rerank`` (dedup,
suggest) confirming a bi-encoder's candidate pairs (``core.inference.dedup``).

The model is a tiny random BERT (``write_tiny_bert``, width 24, 2 layers) trained on 80 pairs of the sample."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import SAMPLE, one_error_line, run_cli

from core.inference.dedup_graph import NeighbourGraph
from core.inference.dedup import candidate_scores, confirmed_clusters, rescored
from core.models.cross_encoder import CrossEncoder, joined
from core.training.objectives import LossConfig
from core.training.specs import SpecError, spec_from_options
from tests.test_base_model import write_tiny_bert


# ---- the model -----------------------------------------------------------------------------------
def test_joined_puts_both_questions_in_one_sequence_padded_at_its_end():
    # [CLS] 2, [SEP] 3, [PAD] 0: "[CLS] 5 6 [SEP]" + "[CLS] 8 9 [SEP]", and "[CLS] 12 [SEP]" + "[CLS] 13 14 15 [SEP]"
    first = (torch.tensor([[2, 5, 6, 3], [2, 12, 3, 0]]), torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]).bool())
    second = (torch.tensor([[2, 8, 9, 3, 0], [2, 13, 14, 15, 3]]), torch.tensor([[1, 1, 1, 1, 0], [1] * 5]).bool())
    ids, mask, types = joined(first, second)
    assert ids.tolist() == [[2, 5, 6, 3, 8, 9, 3], [2, 12, 3, 13, 14, 15, 3]]  # q2's own [CLS] dropped
    assert types.tolist() == [[0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1]]
    assert mask.all()
    ids, mask, types = joined((first[0][1:], first[1][1:]), (first[0][1:], first[1][1:]))  # "[CLS] 12 [SEP]" twice
    assert ids.tolist() == [[2, 12, 3, 12, 3]] and types.tolist() == [[0, 0, 0, 1, 1]] and mask.all()


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory, sample_pairs):
    pairs, _ = sample_pairs
    return write_tiny_bert(tmp_path_factory.mktemp("base") / "tiny-bert",
                           pairs["question1"].tolist() + pairs["question2"].tolist())


def test_a_pair_scores_the_sigmoid_of_its_logit_alone_and_in_its_place(bert_folder):
    from core.models.base_folder import base_minilm

    torch.manual_seed(0)
    model = base_minilm(bert_folder, 16, CrossEncoder).eval()
    first = ["How do I learn Python?", "Why is the sky blue?", "What is a black hole?", "Is tea healthy?", "Hi"]
    second = ["How can I learn Python fast?", "Why is the sky blue during the day?", "Hi", "Is coffee healthy?",
              "What is a black hole in space?"]
    scores = model.score_tables(model.tokenizer.encode(first), model.tokenizer.encode(second), batch_size=2)
    with torch.no_grad():
        alone = [torch.sigmoid(model(model.tokenizer.encode([a]).take([0]), model.tokenizer.encode([b]).take([0]))[0])
                 .item() for a, b in zip(first, second)]
    np.testing.assert_allclose(scores, alone, atol=1e-5)
    np.testing.assert_allclose(model.score_pairs(first, second), scores)
    assert ((scores > 0) & (scores < 1)).all() and len(set(np.round(scores, 6))) == 5
    with pytest.raises(TypeError, match="no vectors"):
        model.encode(first)


# ---- the loss and the spec -----------------------------------------------------------------------
def test_the_bce_objective_is_binary_cross_entropy_on_the_logits():
    objective = LossConfig("bce")
    assert objective.batch_kind == "labelled"  # both labels: a cross-encoder needs its negatives
    loss = objective(torch.tensor([0.0, 2.0]), None, torch.tensor([1.0, 0.0]))
    assert loss.item() == pytest.approx((math.log(2) + math.log(1 + math.exp(2))) / 2)


def test_the_spec_gives_the_cross_encoder_bce_and_refuses_the_losses_on_vectors():
    spec = spec_from_options(model="cross-encoder")
    assert (spec.loss.name, spec.loss.batch_kind, spec.train.lr) == ("bce", "labelled", 5e-5)
    # a preset's loss is a bi-encoder's: dropped with its model; its margin means nothing to bce
    assert spec_from_options("minilm-quora", model="cross-encoder", margin=0.3).loss == LossConfig("bce")
    with pytest.raises(SpecError, match="triplet does not apply to the cross-encoder") as error:
        spec_from_options(model="cross-encoder", loss="triplet")
    assert error.value.option == "loss"
    with pytest.raises(SpecError, match="bce is the cross-encoder's"):
        spec_from_options(model="minilm", loss="bce")


# ---- reranking -----------------------------------------------------------------------------------
class FixedScores:
    """A reranker whose score of a pair is given by hand (either order), and which counts the pairs it is asked."""

    def __init__(self, scores: dict):
        self.scores, self.asked = {frozenset(pair): value for pair, value in scores.items()}, []

    def score_pairs(self, first, second):
        self.asked += list(zip(first, second))
        return np.array([self.scores[frozenset((a, b))] for a, b in zip(first, second)])


def test_confirmed_clusters_take_only_the_pairs_above_the_threshold():
    first, second = np.array([0, 1, 0, 3]), np.array([1, 2, 2, 4])
    scores = np.array([0.9, 0.8, 0.3, 0.95])  # 0-2 is not confirmed: 1 links both, so 1 is the centre
    clusters = confirmed_clusters(5, first, second, scores, 0.5)
    assert [c.members.tolist() for c in clusters] == [[1, 0, 2], [3, 4]]
    np.testing.assert_allclose(clusters[0].similarities, [1.0, 0.9, 0.8])
    assert [c.members.tolist() for c in confirmed_clusters(5, first, second, scores, 0.5, min_size=3)] == [[1, 0, 2]]
    assert confirmed_clusters(5, first, second, scores, 0.99) == []


def test_rerank_keeps_other_pairs_than_the_bi_encoder_alone():
    # The bi-encoder puts a, b, c within 0.2 rad of each other (cosines > 0.98) and d far off; the cross-encoder
    # confirms a-b only. Identical texts (the two "a" rows) are a pair scored 1 without being asked.
    texts = ["a", "b", "c", "d", "a"]
    angles = np.array([0.0, 0.1, 0.2, 2.0, 0.0])
    vectors = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    graph = NeighbourGraph(vectors, k=4)
    assert [c.members.tolist() for c in graph.cluster(0.9)] == [[0, 4, 1, 2]]
    reranker = FixedScores({("a", "b"): 0.9, ("a", "c"): 0.2, ("b", "c"): 0.1})
    first, second, scores = candidate_scores(graph, texts, 0.9, reranker)
    assert sorted(zip(first.tolist(), second.tolist(), scores.tolist())) == [
        (0, 1, 0.9), (0, 2, 0.2), (0, 4, 1.0), (1, 2, 0.1), (1, 4, 0.9), (2, 4, 0.2)]
    assert sorted(map(frozenset, reranker.asked)) == sorted(map(frozenset, [("a", "b"), ("a", "c"), ("b", "c"),
                                                                             ("b", "a"), ("c", "a")]))
    assert [c.members.tolist() for c in confirmed_clusters(len(texts), first, second, scores, 0.5)] == [[0, 4, 1]]


def test_suggest_candidates_take_the_rerankers_scores():
    candidates = pd.DataFrame({"question1": ["a", "b"], "question2": ["b", "c"], "similarity": [0.99, 0.98]})
    reranked = rescored(candidates, FixedScores({("a", "b"): 0.7, ("b", "c"): 0.1}))
    assert reranked["similarity"].tolist() == [0.7, 0.1] and candidates["similarity"].tolist() == [0.99, 0.98]


# ---- the command line ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cross_run(tmp_path_factory, bert_folder, sample_pairs):
    """(the saved cross-encoder's folder, its pairs file), trained by ``python -m core train``."""
    from core.cli.main import main

    root = tmp_path_factory.mktemp("cross")
    pairs, _ = sample_pairs
    data = root / "pairs.csv"
    pairs.head(80).to_csv(data, index=False)
    assert main(["train", "--model", "cross-encoder", "--base-model", str(bert_folder), "--data", str(data),
                 "--out", str(root / "run"), "--epochs", "2", "--batch-size", "8", "--max-length", "24",
                 "--lr", "1e-3", "--device", "cpu"]) == 0
    return root / "run", data


def test_train_saves_a_cross_encoder_that_loads_and_was_validated(cross_run):
    from core.models import load_model

    folder, _ = cross_run
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "cross-encoder" and config["loss"]["name"] == "bce"
    assert 0 <= config["metrics"]["validation"]["roc_auc"] <= 1 and set(config["metrics"]["baselines"]) >= {"tfidf"}
    assert 0 < config["thresholds"]["accuracy"] < 1  # a probability, not a cosine
    model, loaded = load_model(folder)
    assert isinstance(model, CrossEncoder) and not model.training and loaded["name"] == "run"


def test_the_pair_commands_take_it_and_agree_with_its_scores(cross_run, tmp_path, capsys):
    from core.models import load_model

    folder, data = cross_run
    model, config = load_model(folder)
    pairs = pd.read_csv(data)
    expected = model.score_pairs(pairs["question1"].tolist(), pairs["question2"].tolist())
    code, out, _ = run_cli(capsys, "predict", "--model", folder, pairs["question1"][0], pairs["question2"][0])
    assert code == 0 and json.loads(out)["similarity"] == pytest.approx(expected[0], abs=1e-5)
    code, out, _ = run_cli(capsys, "evaluate", "--model", folder, "--data", data)
    assert code == 0
    code, _, _ = run_cli(capsys, "score", "--model", folder, "--pairs", data, "--out", tmp_path / "scored.csv")
    assert code == 0
    np.testing.assert_allclose(pd.read_csv(tmp_path / "scored.csv")["similarity"], expected, atol=1e-5)
    code, out, _ = run_cli(capsys, "calibrate", "--model", folder, "--data", data, "--out", tmp_path / "calibrated")
    assert code == 0 and json.loads(out)["calibration"]["pairs"] == 80
    code, out, _ = run_cli(capsys, "predict", "--model", tmp_path / "calibrated", "a", "b")
    assert code == 0 and json.loads(out)["threshold"] == pytest.approx(json.loads(
        (tmp_path / "calibrated" / "config.json").read_text())["thresholds"]["accuracy"])


@pytest.mark.parametrize("argv", [
    ["embed", "--data", str(SAMPLE), "--out", "{tmp}/v.npy"],
    ["search", "--corpus", str(SAMPLE), "how do I learn python"],
    ["dedup", "--questions", str(SAMPLE), "--out", "{tmp}/clusters.csv"],
    ["suggest", "--questions", str(SAMPLE), "--n", "3", "--out", "{tmp}/suggested.csv"],
    ["predict", "--backend", "onnx", "a", "b"],
], ids=["embed", "search", "dedup", "suggest", "onnx"])
def test_the_commands_that_need_vectors_refuse_it_in_one_line(cross_run, tmp_path, capsys, argv):
    folder, _ = cross_run
    argv = [argv[0], "--model", str(folder), *(a.format(tmp=tmp_path) for a in argv[1:])]
    one_error_line(run_cli(capsys, *argv), "is a cross-encoder", "no vectors")
    assert list(tmp_path.iterdir()) == []


def test_dedup_rerank_keeps_only_the_pairs_the_cross_encoder_confirms(cross_run, tiny_models, tmp_path, capsys):
    from core.models import load_model

    folder, data = cross_run
    questions = tmp_path / "questions.txt"
    frame = pd.read_csv(data)
    texts = list(dict.fromkeys(frame["question1"].tolist() + frame["question2"].tolist()))[:40]
    questions.write_text("\n".join(texts) + "\n")
    common = ["dedup", "--model", tiny_models["lstm"], "--questions", questions, "--threshold", "0.3"]
    code, out, _ = run_cli(capsys, *common, "--out", tmp_path / "alone.csv")
    assert code == 0
    code, out, _ = run_cli(capsys, *common, "--rerank", folder, "--out", tmp_path / "reranked.csv")
    assert code == 0
    rerank = json.loads(out)["rerank"]
    alone, reranked = pd.read_csv(tmp_path / "alone.csv"), pd.read_csv(tmp_path / "reranked.csv")
    assert 0 < rerank["confirmed_pairs"] < rerank["candidate_pairs"]
    assert not alone.equals(reranked)
    # every member is confirmed with its representative: the cross-encoder's score of the pair, the earlier question
    # of the corpus first, is above its threshold
    model, _ = load_model(folder)
    members = reranked[reranked["question"] != reranked["representative"]]
    pairs = [sorted(pair, key=texts.index) for pair in zip(members["representative"], members["question"])]
    scores = model.score_pairs([a for a, _ in pairs], [b for _, b in pairs])
    np.testing.assert_allclose(members["similarity_to_representative"], scores, atol=1e-4)
    assert (scores > rerank["threshold"]).all()
    # without --threshold, the candidates are the pairs the bi-encoder alone calls duplicates (its pair threshold)
    from core.inference.calibration import pair_threshold

    code, out, _ = run_cli(capsys, *common[:-2], "--rerank", folder, "--out", tmp_path / "default.csv")
    summary, (_, lstm_config) = json.loads(out), load_model(tiny_models["lstm"])
    assert code == 0 and summary["threshold"] == pytest.approx(pair_threshold(lstm_config).threshold)
    assert summary["threshold_source"] == pair_threshold(lstm_config).source
    one_error_line(run_cli(capsys, *common, "--rerank", tiny_models["lstm"], "--out", tmp_path / "x.csv"),
                   "--rerank takes a cross-encoder's folder")
    code, _, _ = run_cli(capsys, "suggest", "--model", tiny_models["lstm"], "--questions", questions, "--n", "4",
                         "--rerank", folder, "--out", tmp_path / "suggested.csv")
    suggested = pd.read_csv(tmp_path / "suggested.csv")
    assert code == 0 and len(suggested) == 4
    np.testing.assert_allclose(suggested["similarity"],
                               model.score_pairs(suggested["question1"].tolist(), suggested["question2"].tolist()),
                               atol=1e-5)


def test_its_onnx_export_scores_as_it_does_and_its_card_says_what_it_is_and_costs(cross_run, tmp_path, capsys):
    import re

    from core.models import load_model

    folder, _ = cross_run
    code, out, _ = run_cli(capsys, "export", "--model", folder, "--format", "onnx", "--out", tmp_path / "export")
    assert code == 0 and json.loads(out)["files"] == ["README.md", "model.onnx", "siamese_lab.json", "tokenizer.json"]
    manifest = json.loads((tmp_path / "export" / "siamese_lab.json").read_text())
    assert manifest["model_type"] == "cross-encoder" and manifest["embedding_dim"] is None
    assert manifest["check"]["max_abs_diff_vs_pytorch"] <= 1e-4
    card = (tmp_path / "export" / "README.md").read_text()
    for words in ("MiniLM cross-encoder", "reads both questions together", "cannot embed, index or search",
                  "every pair costs one forward pass of the whole model", "n(n-1)/2 passes",
                  "`dedup --rerank`", "pipeline_tag: text-classification"):
        assert words in card
    assert "cosine similarity" not in card.split("## Evaluation")[0]
    # the card's own snippet, run on its folder, gives the model's probabilities
    snippet = re.search(r"```python\n(.*?)```", card, re.S)[1].replace('MODEL_DIR = "export"',
                                                                      f'MODEL_DIR = "{tmp_path / "export"}"')
    exec(snippet, {})
    printed = capsys.readouterr().out.split()
    model, _ = load_model(folder)
    expected = model.score_pairs(["How do I learn Python?"], ["What is the best way to learn Python?"])[0]
    assert float(printed[0]) == pytest.approx(expected, abs=1e-4)
    one_error_line(run_cli(capsys, "predict", "--backend", "onnx", "--model", tmp_path / "export", "a", "b"),
                   "a cross-encoder's ONNX export")
    one_error_line(run_cli(capsys, "export", "--model", folder, "--format", "sentence-transformers", "--out",
                           tmp_path / "st"), "only MiniLM models export as sentence-transformers")


def test_verdict_takes_it_and_the_pages_that_need_vectors_say_they_cannot(cross_run, runs_root):
    import shutil

    from app_support import open_page

    from lab.navigation import SEARCH, VERDICT
    from lab.session import ACTIVE_MODEL, ACTIVE_MODEL_PICKED

    folder = shutil.copytree(cross_run[0], runs_root / "cross")
    at = open_page(VERDICT.path, timeout=120)
    at.selectbox(key="active_model").set_value(str(folder)).run()
    at.text_area(key="question1").input("How do I learn Python?")
    at.text_area(key="question2").input("What is the best way to learn Python?")
    at.button(key="check").click().run()
    assert not at.exception and not at.error
    assert [h.value for h in at.header if "DUPLICATE" in h.value]
    # its score is a probability, said so, not a cosine
    assert [m.label for m in at.metric if m.label in ("Cosine similarity", "Duplicate probability")] == [
        "Duplicate probability"]
    at = open_page(SEARCH.path, **{ACTIVE_MODEL: str(folder), ACTIVE_MODEL_PICKED: True})
    assert not at.exception and not at.error
    assert [info.value for info in at.info if "is a cross-encoder" in info.value]
    assert not at.text_input  # the page stopped before its search box


def test_the_deduplicate_page_confirms_the_candidate_pairs_with_a_cross_encoder(cross_run, runs_with_models,
                                                                              monkeypatch):
    import shutil

    from app_support import open_page

    from core.inference.calibration import clustering_threshold
    from core.models import load_model
    from lab.navigation import DEDUPLICATE

    runs_root, folders = runs_with_models
    cross = shutil.copytree(cross_run[0], runs_root / "cross")
    at = open_page(DEDUPLICATE.path, timeout=120)
    at.selectbox(key="active_model").set_value(str(folders["lstm"])).run()
    at.slider(key="dedup_threshold").set_value(0.95).run()
    alone = at.dataframe[0].value
    rerank = at.selectbox(key="dedup_rerank")
    assert rerank.options[0].startswith("none") and len(rerank.options) == 2  # none, and the one cross-encoder
    rerank.set_value(rerank.options[1]).run()
    assert not at.exception and not at.error, (at.exception, at.error)
    # the slider now picks candidates: it starts where the bi-encoder alone calls pairs duplicates (this tiny LSTM
    # recorded no clustering threshold, so both starts are its pair threshold, and the user's 0.95 stays)
    from core.inference.calibration import pair_threshold

    pair = pair_threshold(load_model(folders["lstm"])[1])
    assert f"Starts at {pair.threshold:.3f}: {pair.source}." in [c.value for c in at.caption]
    assert at.slider(key="dedup_threshold").value == 0.95
    model, config = load_model(cross)
    decide = clustering_threshold(config)
    [note] = [c.value for c in at.caption if c.value.startswith("The cross-encoder confirmed")]
    assert f"its threshold {decide.threshold:.3f}" in note
    reranked = at.dataframe[0].value if at.dataframe else alone.iloc[:0]
    assert int(reranked["size"].sum()) <= int(alone["size"].sum())  # confirming only removes links
    assert at.expander  # the tiny cross-encoder confirms some of the candidates at this threshold, not all
    for cluster in range(len(at.expander)):  # each member's similarity: the cross-encoder's score of its pair
        members = at.dataframe[1 + cluster].value  # (in corpus order, which the page knows and this test does not)
        representative, others = members["question"].iloc[0], members.iloc[1:]
        shown = others["similarity_to_representative"].to_numpy()
        forward = model.score_pairs([representative] * len(others), others["question"].tolist())
        backward = model.score_pairs(others["question"].tolist(), [representative] * len(others))
        assert (np.isclose(shown, forward, atol=1e-4) | np.isclose(shown, backward, atol=1e-4)).all()
        assert (shown > decide.threshold).all()
    import lab.dedup_view

    monkeypatch.setattr(lab.dedup_view, "RERANK_CAP", 100)  # a shared server's bound: more pairs are the CLI's work
    at.slider(key="dedup_threshold").set_value(0.9).run()
    [error] = at.error
    assert "pairs are above the threshold; the page confirms at most 100" in error.value and "--rerank" in error.value
