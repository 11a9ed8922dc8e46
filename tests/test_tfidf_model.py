"""``--model tfidf``: the TF-IDF cosine baseline in evaluate, score and predict, checked against scikit-learn computed
here; what it is fitted on; the commands that need vectors refuse it in one line."""
import json

import numpy as np
import pandas as pd
import pytest
from conftest import synthetic_pairs
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import accuracy_score, roc_auc_score
from sklearn.metrics.pairwise import paired_cosine_distances

from core.cli.main import main
from core.inference.metrics import best_thresholds
from core.inference.tfidf_scorer import TfidfScorer


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def sklearn_cosines(first, second, fit_on) -> np.ndarray:
    """The reference: cosine of scikit-learn TF-IDF vectors, the vectorizer fitted on ``fit_on``."""
    vectorizer = TfidfVectorizer().fit(list(fit_on))
    return 1.0 - paired_cosine_distances(vectorizer.transform(list(first)), vectorizer.transform(list(second)))


def write_pairs(path, frame):
    frame.to_csv(path, index=False)
    return path


def test_evaluate_tfidf_matches_sklearn_fitted_on_the_evaluated_questions(capsys, tmp_path):
    pairs = synthetic_pairs(80, seed=3)
    data = write_pairs(tmp_path / "pairs.csv", pairs)
    code, out, err = run_cli(capsys, "evaluate", "--model", "tfidf", "--data", data)
    assert code == 0, err
    result = json.loads(out)
    labels = pairs["is_duplicate"].to_numpy()
    cosines = sklearn_cosines(pairs["question1"], pairs["question2"], [*pairs["question1"], *pairs["question2"]])
    assert result["roc_auc"] == pytest.approx(roc_auc_score(labels, cosines), abs=1e-12)
    assert result["roc_auc"] > 0.9  # the synthetic duplicates share their topic words: TF-IDF finds them
    # no threshold of its own: the best accuracy on these very pairs, and the JSON says so
    best = best_thresholds(labels, cosines)["accuracy"]
    assert result["threshold"] == pytest.approx(best, abs=1e-9)
    assert result["accuracy"] == pytest.approx(accuracy_score(labels, cosines > best))
    assert "these very pairs" in result["threshold_from"]


def test_score_tfidf_fits_on_the_whole_file_and_predict_on_the_two_questions(capsys, tmp_path):
    pairs = synthetic_pairs(60, seed=4)
    source = write_pairs(tmp_path / "pairs.csv", pairs)
    code, _, err = run_cli(capsys, "score", "--model", "tfidf", "--pairs", source, "--out", tmp_path / "scored.csv")
    assert code == 0, err
    scored = pd.read_csv(tmp_path / "scored.csv")
    expected = sklearn_cosines(pairs["question1"], pairs["question2"], [*pairs["question1"], *pairs["question2"]])
    np.testing.assert_allclose(scored["similarity"], expected, atol=1e-6)  # the CSV rounds to 6 decimals
    assert (scored["predicted_duplicate"] == (scored["similarity"] > 0.5)).all()  # a plain default threshold

    first, second = "how do I learn python", "learn python fast"
    code, out, err = run_cli(capsys, "predict", "--model", "tfidf", first, second)
    assert code == 0, err
    assert json.loads(out)["similarity"] == pytest.approx(sklearn_cosines([first], [second], [first, second])[0],
                                                           abs=1e-6)


def test_a_fit_counted_chunk_by_chunk_equals_one_fit_on_everything():
    pairs = synthetic_pairs(50, seed=5)
    texts = [*pairs["question1"], *pairs["question2"], "", "a question with words none of the others has"]
    whole = TfidfVectorizer().fit(texts)
    assert texts[100] == ""  # a chunk of it alone holds no word: it counts as a document all the same
    chunked = TfidfScorer.fit_chunks([texts[:7], texts[7:100], texts[100:101], texts[101:]])
    assert chunked.to_dict()["vocabulary"] == whole.get_feature_names_out().tolist()
    np.testing.assert_allclose(chunked.to_dict()["idf"], whole.idf_, rtol=0, atol=1e-15)
    first, second = pairs["question1"].tolist(), pairs["question2"].tolist()
    np.testing.assert_allclose(chunked.score_pairs(first, second), sklearn_cosines(first, second, texts), atol=1e-12)
    # the saved form reads back to the same scores
    again = TfidfScorer.from_dict(json.loads(json.dumps(chunked.to_dict())), "tfidf.json")
    np.testing.assert_allclose(again.score_pairs(first, second), chunked.score_pairs(first, second), atol=0)


def test_a_fit_on_texts_without_words_scores_zero():
    scorer = TfidfScorer.fit(["", "?!", ""])
    assert scorer.score_pairs(["a b", "c"], ["a b", "d"]).tolist() == [0.0, 0.0]
    assert TfidfScorer.fit_chunks([["", "?"]]).score_pairs(["x"], ["x"]).tolist() == [0.0]


@pytest.mark.parametrize("bad", [{"vocabulary": ["a", "b"], "idf": [1.0]}, {"vocabulary": ["a", "a"], "idf": [1.0, 1.0]},
                                 {"vocabulary": ["a"], "idf": [0.5]}, {"vocabulary": ["a"], "idf": ["x"]}, []])
def test_a_malformed_saved_fit_is_refused(bad):
    with pytest.raises(ValueError, match="tfidf.json"):
        TfidfScorer.from_dict(bad, "tfidf.json")


def _assert_one_error_line(code, out, err, *fragments):
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    for fragment in fragments:
        assert fragment in lines[0]


def test_commands_that_need_vectors_refuse_tfidf_in_one_line(capsys, tmp_path):
    data = write_pairs(tmp_path / "pairs.csv", synthetic_pairs(30, seed=6))
    for argv in (["embed", "--data", data, "--out", tmp_path / "v.npy"],
                 ["search", "--corpus", data, "topic1"],
                 ["dedup", "--questions", data, "--out", tmp_path / "c.csv"],
                 ["export", "--format", "onnx", "--out", tmp_path / "x"],
                 ["suggest", "--questions", data, "--n", "5", "--out", tmp_path / "s.csv"]):
        _assert_one_error_line(*run_cli(capsys, argv[0], "--model", "tfidf", *argv[1:]), "TF-IDF baseline",
                               "no vectors")
    assert not (tmp_path / "x").exists() and not (tmp_path / "v.npy").exists()
    _assert_one_error_line(*run_cli(capsys, "predict", "--model", "tfidf", "--backend", "onnx", "a", "b"), "ONNX")
