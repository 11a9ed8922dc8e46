"""The verdict page: the score, the verdict at the slider's threshold, validation metrics, hostile text."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.data import load_pairs, split_pairs
from core.metrics import threshold_metrics
from core.models import ZERO_SHOT_THRESHOLD

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "pages" / "4_Verdict.py")
SAMPLE = ROOT / "assets" / "sample_pairs.csv"
HOSTILE = "<script>alert(1)</script> **bold** 😀 ما هو عمرك؟"


@pytest.fixture(scope="module")
def minilm():
    from lab.session import get_model

    return get_model("minilm")[0]  # the app's own cached instance


@pytest.fixture(scope="module")
def validation(minilm):
    """Labels and zero-shot scores of the pairs the page documents: the 20 % split, seed 0."""
    val = split_pairs(load_pairs(SAMPLE)[0], val_fraction=0.2, test_fraction=0.0, seed=0).val
    return val["is_duplicate"].to_numpy(), minilm.score_pairs(val["question1"].tolist(), val["question2"].tolist())


def new_app() -> AppTest:
    """The page in a new session; request ``runs_root`` or ``runs_with_models`` (conftest) first."""
    at = AppTest.from_file(PAGE, default_timeout=90)
    at.run()
    assert not at.exception, at.exception
    return at


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def verdict(at: AppTest) -> str:
    return next(h.value for h in at.header if "DUPLICATE" in h.value)


def test_default_pair_zero_shot(runs_root, minilm, validation, plotly_figures):
    at = new_app()
    assert not at.error
    assert at.slider(key="threshold").value == pytest.approx(ZERO_SHOT_THRESHOLD)
    score = minilm.score_pairs([at.text_area(key="question1").value], [at.text_area(key="question2").value])[0]
    assert metric(at, "Cosine similarity") == f"{score:.3f}"
    assert ("NOT DUPLICATE" not in verdict(at)) == (score > ZERO_SHOT_THRESHOLD)
    labels, scores = validation
    expected = threshold_metrics(labels, scores, ZERO_SHOT_THRESHOLD)
    assert metric(at, "Accuracy") == f"{expected['accuracy']:.3f}"
    assert metric(at, "F1") == f"{expected['f1']:.3f}"
    # ROC with the threshold's point marked at (fpr, tpr).
    roc = next(f for f in plotly_figures(at) if f["layout"]["title"]["text"].startswith("ROC"))
    point = roc["data"][-1]
    fpr = expected["fp"] / (expected["fp"] + expected["tn"])
    assert point["x"][0] == pytest.approx(fpr) and point["y"][0] == pytest.approx(expected["recall"])


def test_moving_the_threshold_changes_the_verdict_and_the_metrics(runs_root, minilm, validation):
    at = new_app()
    score = float(metric(at, "Cosine similarity"))
    labels, scores = validation
    for threshold in (round(score - 0.05, 2), round(score + 0.05, 2)):
        at.slider(key="threshold").set_value(threshold).run()
        assert not at.exception
        assert ("NOT DUPLICATE" not in verdict(at)) == (score > threshold)
        expected = threshold_metrics(labels, scores, threshold)
        assert metric(at, "Accuracy") == f"{expected['accuracy']:.3f}"
        assert metric(at, "Recall") == f"{expected['recall']:.3f}"
        assert metric(at, "Precision") == f"{expected['precision']:.3f}"


def test_hostile_and_long_text_is_shown_as_text(runs_root):
    at = new_app()
    at.text_area(key="question1").input(HOSTILE).run()
    long_question = "why " * 200 + "?"
    at.text_area(key="question2").input(long_question).run()
    assert not at.exception and not at.error
    shown = [t.value for t in at.text]
    assert HOSTILE in shown and long_question in shown
    assert not any(m.proto.allow_html for m in at.markdown)  # nothing is ever rendered as HTML
    assert any("truncated to 64 tokens" in c.value for c in at.caption)
    assert not any("truncated" in c.value and "Question 1" in c.value for c in at.caption)


def test_empty_question_asks_for_text(runs_root):
    at = new_app()
    at.text_area(key="question1").input("   ").run()
    assert not at.exception and not at.error
    assert any("both boxes" in i.value for i in at.info)


def test_changing_model_resets_the_threshold(runs_with_models):
    _, folders = runs_with_models
    calibrated = {model: json.loads((folder / "config.json").read_text())["thresholds"]["accuracy"]
                  for model, folder in folders.items()}
    at = new_app()
    labels = at.selectbox(key="verdict_choice").options
    assert len(labels) == 3
    at.slider(key="threshold").set_value(0.33).run()
    for model, folder in folders.items():
        label = next(option for option in labels if option.startswith(folder.name))
        at.selectbox(key="verdict_choice").set_value(label).run()
        assert not at.exception and not at.error
        assert at.slider(key="threshold").value == pytest.approx(round(calibrated[model], 2))
    at.slider(key="threshold").set_value(0.33).run()  # the user's value stays until the model changes
    assert at.slider(key="threshold").value == pytest.approx(0.33)
    at.selectbox(key="verdict_choice").set_value(labels[0]).run()
    assert at.slider(key="threshold").value == pytest.approx(ZERO_SHOT_THRESHOLD)
