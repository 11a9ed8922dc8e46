"""The verdict page: a verdict only for the pair last checked, the threshold measured on exactly the pairs
the model never trained on (core.inference.honest_pairs), the error analysis, hostile text; the one threshold."""
from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import app_support
import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core.data import load_pairs, normalise_questions, split_pairs
from core.inference.honest_pairs import DATASET, HELD_OUT, honest_pairs
from core.inference.metrics import best_thresholds, ranking_metrics, threshold_metrics
from core.models import ZERO_SHOT, ZERO_SHOT_THRESHOLD
from core.saving.safe_csv import FORMULA_STARTS
from lab.navigation import DATA, VERDICT

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "assets" / "sample_pairs.csv"
HOSTILE = "<script>alert(1)</script> **bold** 😀 ما هو عمرك؟"
DEFAULT_PAIR = ("How do I learn Python?", "What is the best way to learn Python?")


@pytest.fixture(scope="module")
def minilm():
    from lab.session import get_model

    return get_model("minilm")[0]  # the app's own cached instance


@pytest.fixture(scope="module")
def sample():
    return load_pairs(SAMPLE)[0]


@pytest.fixture(scope="module")
def zero_shot(minilm, sample):
    """Labels and zero-shot scores of the pairs the page measures MiniLM on: all the active dataset."""
    held = honest_pairs([], sample)
    assert len(held.pairs) == len(sample) == 479
    return held, held.pairs["is_duplicate"].to_numpy(), scores_of(minilm, held.pairs)


def scores_of(model, pairs: pd.DataFrame) -> np.ndarray:
    return model.score_pairs(pairs["question1"].tolist(), pairs["question2"].tolist())


def new_app() -> AppTest:
    """The page in a new session; request ``runs_root`` or ``runs_with_models`` (conftest) first."""
    at = app_support.open_page(VERDICT.path, timeout=120)
    assert not at.exception, at.exception
    return at


def check(at: AppTest, question1: str | None = None, question2: str | None = None) -> AppTest:
    """Type the questions given (into the form) and press Check."""
    if question1 is not None:
        at.text_area(key="question1").input(question1)
    if question2 is not None:
        at.text_area(key="question2").input(question2)
    at.button(key="check").click().run()
    assert not at.exception, at.exception
    return at


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def verdicts(at: AppTest) -> list[str]:
    return [h.value for h in at.header if "DUPLICATE" in h.value]


def verdict(at: AppTest) -> str:
    [shown] = verdicts(at)
    return shown


def choose(at: AppTest, choice: Path | str) -> None:
    """Pick a model in the shared picker of the analysis pages (lab.session.model_picker)."""
    at.selectbox(key="active_model").set_value(str(choice)).run()
    assert not at.exception and not at.error


def error_tables(at: AppTest) -> dict[int, pd.DataFrame]:
    """The shown error tables by the label of their pairs: 0 the false positives, 1 the false negatives."""
    tables = [frame.value for frame in at.dataframe if "question1" in frame.value.columns]
    assert all(t["label"].nunique() == 1 for t in tables)
    return {int(t["label"].iloc[0]): t for t in tables}


def assert_metrics_shown(at: AppTest, labels, scores, threshold: float) -> None:
    expected = {**threshold_metrics(labels, scores, threshold), **ranking_metrics(labels, scores)}
    for label, name in (("Accuracy", "accuracy"), ("Precision", "precision"), ("Recall", "recall"), ("F1", "f1"),
                        ("ROC AUC", "roc_auc"), ("Average precision", "average_precision")):
        assert metric(at, label) == f"{expected[name]:.3f}", label


def subtitle(figure: dict) -> str:
    return figure["layout"]["title"]["subtitle"]["text"].replace("<br>", " ")


# ---- the verdict -------------------------------------------------------------------------------
def test_the_verdict_comes_only_after_check_and_never_stays_next_to_other_questions(runs_root, minilm):
    at = new_app()
    assert not at.error and not verdicts(at)
    assert not any(m.label == "Cosine similarity" for m in at.metric)
    assert any("Press **Check**" in i.value for i in at.info)
    assert (at.text_area(key="question1").value, at.text_area(key="question2").value) == DEFAULT_PAIR

    check(at)
    threshold = at.slider(key="threshold").value
    score = scores_of(minilm, pd.DataFrame([DEFAULT_PAIR], columns=["question1", "question2"]))[0]
    assert metric(at, "Cosine similarity") == f"{score:.3f}"
    assert ("NOT DUPLICATE" not in verdict(at)) == (score > threshold)
    assert [t.value for t in at.text] == list(DEFAULT_PAIR)  # the pair it was computed for

    # Typed but not checked: the form keeps the text to itself, the page still shows the checked pair.
    at.text_area(key="question2").input("How do I cook rice?")
    at.run()
    assert at.text_area(key="question2").value == DEFAULT_PAIR[1]
    assert [t.value for t in at.text] == list(DEFAULT_PAIR) and metric(at, "Cosine similarity") == f"{score:.3f}"

    # Questions that change without Check (here through the session state) lose the verdict at once.
    at.session_state["question2"] = "How do I cook rice?"
    at.run()
    assert not at.exception and not verdicts(at) and not at.text
    assert not any(m.label == "Cosine similarity" for m in at.metric)
    assert any("Press **Check**" in i.value for i in at.info)

    # Check: the verdict of exactly the new pair.
    check(at)
    new_score = scores_of(minilm, pd.DataFrame([(DEFAULT_PAIR[0], "How do I cook rice?")],
                                               columns=["question1", "question2"]))[0]
    assert metric(at, "Cosine similarity") == f"{new_score:.3f}"
    assert ("NOT DUPLICATE" not in verdict(at)) == (new_score > threshold)
    assert [t.value for t in at.text] == [DEFAULT_PAIR[0], "How do I cook rice?"]
    check(at, question1="What is the capital of France?", question2="Which city is the capital of France?")
    assert [t.value for t in at.text] == ["What is the capital of France?", "Which city is the capital of France?"]


def test_the_questions_are_drawn_before_the_model_loads(runs_root, monkeypatch):
    """On a cold server loading the model takes seconds: the form comes first, so a model still loading (or, here,
    one that cannot load) never hides it; the threshold slider comes with the model."""
    import lab.session

    def unreadable(choice):
        raise OSError("the weights cannot be read")

    monkeypatch.setattr(lab.session, "get_model", unreadable)
    at = new_app()
    assert [area.key for area in at.text_area] == ["question1", "question2"] and at.button(key="check")
    assert at.error[0].value.startswith("Could not load") and not at.slider


def test_a_check_scores_only_the_typed_pair(runs_root, minilm, monkeypatch):
    at = new_app()
    check(at)  # the held-out pairs are scored (or already cached) here
    encoded = []
    original = type(minilm).encode_table

    def counting(self, table, *args, **kwargs):
        encoded.append(len(table.ids))
        return original(self, table, *args, **kwargs)

    monkeypatch.setattr(type(minilm), "encode_table", counting)
    started = time.perf_counter()
    check(at, question2="What is the fastest way to learn Python?")
    elapsed = time.perf_counter() - started
    assert encoded == [1, 1]  # one score_pairs call on one pair: nothing else is encoded
    print(f"\nverdict after Check: {elapsed:.2f} s for the whole page")  # information only: no clock asserted


def test_moving_the_threshold_changes_the_verdict_and_the_metrics(runs_root, zero_shot):
    at = check(new_app())
    score = float(metric(at, "Cosine similarity"))
    _, labels, scores = zero_shot
    for threshold in (round(score - 0.05, 2), round(score + 0.05, 2)):
        at.slider(key="threshold").set_value(threshold).run()
        assert not at.exception
        assert ("NOT DUPLICATE" not in verdict(at)) == (score > threshold)
        assert_metrics_shown(at, labels, scores, threshold)


def test_hostile_and_long_text_is_shown_as_text(runs_root):
    long_question = "why " * 200 + "?"
    at = check(new_app(), HOSTILE, long_question)
    assert not at.error
    shown = [t.value for t in at.text]
    assert HOSTILE in shown and long_question in shown
    assert not any(m.proto.allow_html for m in at.markdown)  # nothing is ever rendered as HTML
    assert any("truncated to 64 tokens" in c.value for c in at.caption)
    assert not any("truncated" in c.value and "Question 1" in c.value for c in at.caption)


def test_empty_question_asks_for_text(runs_root):
    at = check(new_app(), question1="   ")
    assert not at.error and not verdicts(at)
    assert any("both boxes" in i.value for i in at.info)


# ---- measured on held-out pairs ----------------------------------------------------------------
def test_zero_shot_is_measured_on_all_the_active_dataset(runs_root, zero_shot, plotly_figures):
    held, labels, scores = zero_shot
    at = new_app()
    threshold = at.slider(key="threshold").value
    assert threshold == pytest.approx(round(best_thresholds(labels, scores)["accuracy"], 3))
    assert_metrics_shown(at, labels, scores, threshold)
    assert held.description == "all 479 pairs of the active dataset (no model measured on them trained on this dataset)"
    assert any(f"Measured on {held.description}." in c.value for c in at.caption)
    figures = plotly_figures(at)
    assert len(figures) == 5 and all(subtitle(figure) == held.description for figure in figures)
    # ROC with the threshold's point marked at (fpr, tpr).
    expected = threshold_metrics(labels, scores, threshold)
    roc = next(f for f in figures if f["layout"]["title"]["text"].startswith("ROC"))
    point = roc["data"][-1]
    fpr = expected["fp"] / (expected["fp"] + expected["tn"])
    assert point["x"][0] == pytest.approx(fpr) and point["y"][0] == pytest.approx(expected["recall"])
    # Titles sit left in a top margin the toolbar (top right, shown on hover only) keeps clear of.
    for chart, figure in zip(at.get("plotly_chart"), figures):
        assert json.loads(chart.proto.config)["displayModeBar"] == "hover"
        assert figure["layout"]["title"]["x"] == 0 and figure["layout"]["margin"]["t"] >= 80


def test_a_trained_model_is_measured_on_exactly_its_held_out_pairs(runs_with_models, sample, plotly_figures):
    from lab.session import get_model

    _, folders = runs_with_models
    at = new_app()
    for folder in folders.values():
        choose(at, folder)
        model, config = get_model(str(folder))
        held = honest_pairs([config], sample)
        assert held.source == HELD_OUT and len(held.pairs) == round(0.1 * len(sample)) == 48
        labels, scores = held.pairs["is_duplicate"].to_numpy(), scores_of(model, held.pairs)
        threshold = at.slider(key="threshold").value
        assert threshold == pytest.approx(round(config["thresholds"]["accuracy"], 3))
        assert_metrics_shown(at, labels, scores, threshold)
        assert held.description.startswith(f"the {len(held.pairs)} pairs of the active dataset that {folder.name} "
                                           "held out of training")
        assert any(f"Measured on {held.description}." in c.value for c in at.caption)
        # the subtitle wraps the model's name at its hyphens: compared without spaces
        assert all(subtitle(figure).replace(" ", "") == held.description.replace(" ", "")
                   for figure in plotly_figures(at))
        at.slider(key="threshold").set_value(0.1).run()
        assert_metrics_shown(at, labels, scores, 0.1)


def test_error_analysis_lists_the_worst_errors_at_the_threshold(runs_with_models, sample, plotly_figures):
    from lab.session import get_model

    _, folders = runs_with_models
    at = new_app()
    folder = folders["lstm"]
    choose(at, folder)
    model, config = get_model(str(folder))
    held = honest_pairs([config], sample).pairs
    scores = scores_of(model, held)
    train = split_pairs(sample, val_fraction=config["run"]["val_fraction"],
                        test_fraction=config["run"]["test_fraction"], seed=config["train_config"]["seed"]).train
    known = set(normalise_questions(pd.concat([train["question1"], train["question2"]])))
    compared = set()
    for threshold in (at.slider(key="threshold").value, float(np.median(scores).round(2))):
        at.slider(key="threshold").set_value(threshold).run()
        labels = held["is_duplicate"].to_numpy()
        tables = error_tables(at)
        for label, mask, descending in ((0, (labels == 0) & (scores > threshold), True),
                                        (1, (labels == 1) & (scores <= threshold), False)):
            rows = sorted(np.flatnonzero(mask), key=lambda row: -scores[row] if descending else scores[row])[:20]
            assert (label in tables) == bool(rows)
            if not rows:
                continue
            shown, _ = tables[label], compared.add(label)
            assert shown.index.tolist() == rows, label
            assert shown["question1"].tolist() == held["question1"].iloc[rows].tolist()
            assert shown["question2"].tolist() == held["question2"].iloc[rows].tolist()
            assert shown["label"].tolist() == labels[rows].tolist()
            assert shown["score"].to_numpy() == pytest.approx(scores[rows], abs=1e-5)
            seen = [sum(text in known for text in normalise_questions([held["question1"].iloc[row],
                                                                       held["question2"].iloc[row]]))
                    for row in rows]
            assert shown["seen in training"].tolist() == [["neither", "one", "both"][count] for count in seen]
        # Scores by length: the box plot's medians are those of the scores in each bucket of the longer question.
        box = next(f for f in plotly_figures(at) if f["layout"]["title"]["text"] == "Scores by question length")
        longer = np.maximum(held["question1"].str.split().str.len(), held["question2"].str.split().str.len())
        assert [trace["name"] for trace in box["data"]] == ["not duplicate", "duplicate"]
        for trace, label in zip(box["data"], (0, 1)):
            for bucket, median in zip(trace["x"], trace["median"]):
                low, _, high = bucket.partition("–")
                high = high or "1000"
                low = low.rstrip("+")
                chosen = (labels == label) & (longer >= int(low)).to_numpy() & (longer <= int(high)).to_numpy()
                assert median == pytest.approx(np.median(scores[chosen]), abs=1e-5)
    assert compared == {0, 1}  # both kinds of error were there to compare
    assert "Which of these questions" not in " ".join(c.value for c in at.caption)
    assert any(f"the {len(train)} pairs this model trained on" in c.value for c in at.caption)


def test_the_errors_download_is_formula_safe(runs_with_models, sample, download_stores):
    from lab.session import get_model

    stores = download_stores
    _, folders = runs_with_models
    # Another dataset whose non-duplicates start like spreadsheet formulas; at threshold -1 every one of
    # them is a false positive, so every one is in the download.
    pairs = sample.iloc[:60].reset_index(drop=True)
    hostile = ["=HYPERLINK(\"http://x\")", "+1+1", "-2", "@SUM(A1)"]
    negatives = np.flatnonzero(pairs["is_duplicate"].to_numpy() == 0)[:4]
    pairs.loc[negatives, "question1"] = [f"{start} {i}" for i, start in enumerate(hostile)]
    at = app_support.open_page(VERDICT.path, timeout=120, pairs=pairs, data_name="formulas.csv",
                               data_report=load_pairs(SAMPLE)[1])
    choose(at, folders["lstm"])
    at.slider(key="threshold").set_value(-1.0).run()
    assert not at.exception and not at.error
    model, config = get_model(str(folders["lstm"]))
    held = honest_pairs([config], pairs)
    assert held.source == DATASET and any(f"Measured on {held.description}." in c.value for c in at.caption)
    assert "Which of these questions this model's training saw is not known" in " ".join(c.value for c in at.caption)

    [button] = at.get("download_button")
    data = stores[-1].get_file(button.proto.url.rsplit("/", 1)[-1]).content
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8"))))
    scores = scores_of(model, held.pairs)
    labels = held.pairs["is_duplicate"].to_numpy()
    assert len(rows) == int(((labels == 0) & (scores > -1)).sum() + ((labels == 1) & (scores <= -1)).sum())
    assert {row["error"] for row in rows} == {"false positive"}
    cells = [value for row in rows for key, value in row.items() if key != "score"]
    assert not any(cell.startswith(FORMULA_STARTS) for cell in cells)
    quoted = {row["question1"] for row in rows if row["question1"].startswith("'")}
    assert quoted == {f"'{start} {i}" for i, start in enumerate(hostile)}
    for row in rows:
        assert float(row["score"]) == pytest.approx(scores[int(row["pair"])], abs=1e-5)


# ---- the model and the state -------------------------------------------------------------------
def test_changing_model_resets_the_threshold(runs_with_models, zero_shot):
    _, folders = runs_with_models
    calibrated = {model: json.loads((folder / "config.json").read_text())["thresholds"]["accuracy"]
                  for model, folder in folders.items()}
    _, labels, scores = zero_shot
    zero_shot_threshold = round(best_thresholds(labels, scores)["accuracy"], 3)  # calibrated on the sample
    at = new_app()
    assert len(at.selectbox(key="active_model").options) == 3
    choose(at, ZERO_SHOT)
    assert at.slider(key="threshold").value == pytest.approx(zero_shot_threshold)
    at.slider(key="threshold").set_value(0.33).run()
    for model, folder in folders.items():
        choose(at, folder)
        assert at.slider(key="threshold").value == pytest.approx(round(calibrated[model], 3))
    at.slider(key="threshold").set_value(0.33).run()  # the user's value stays until the model changes
    assert at.slider(key="threshold").value == pytest.approx(0.33)
    choose(at, ZERO_SHOT)
    assert at.slider(key="threshold").value == pytest.approx(zero_shot_threshold)


def test_questions_threshold_and_model_survive_a_visit_to_another_page(runs_with_models, open_page):
    _, folders = runs_with_models
    at = open_page(VERDICT.path)
    choose(at, folders["lstm"])
    at.slider(key="threshold").set_value(0.27).run()
    check(at, "Is tea healthy?", "Is green tea good for you?")
    score = metric(at, "Cosine similarity")
    at.switch_page(DATA.path).run()
    assert not at.exception
    at.switch_page(VERDICT.path).run()
    assert not at.exception and not at.error
    assert at.selectbox(key="active_model").value == str(folders["lstm"])
    assert at.slider(key="threshold").value == pytest.approx(0.27)
    assert at.text_area(key="question1").value == "Is tea healthy?"
    assert at.text_area(key="question2").value == "Is green tea good for you?"
    assert metric(at, "Cosine similarity") == score and len(verdicts(at)) == 1


def test_a_whole_file_is_scored_at_the_threshold_and_downloaded(runs_with_models, tmp_path, download_stores):
    from core.inference.scoring import score_file
    from lab.session import get_model

    stores = download_stores
    _, folders = runs_with_models
    at = new_app()
    choose(at, folders["lstm"])
    at.slider(key="threshold").set_value(0.3).run()
    at.file_uploader(key="score_upload").set_value(("pairs.csv", SAMPLE.read_bytes(), "text/csv")).run()
    assert not at.exception and not at.error
    assert any(s.value.startswith("Scored 479 of 479 pairs at threshold 0.300") for s in at.success)
    model, _ = get_model(str(folders["lstm"]))
    expected = score_file(model, SAMPLE, tmp_path / "expected.csv", 0.3)
    assert any(f"ROC AUC {expected.metrics['roc_auc']:.3f}" in c.value for c in at.caption)
    button = next(b for b in at.get("download_button") if "scored" in b.proto.label)
    data = stores[-1].get_file(button.proto.url.rsplit("/", 1)[-1]).content
    assert data == (tmp_path / "expected.csv").read_bytes()


def test_the_scored_file_survives_a_visit_to_another_page(runs_with_models, tmp_path, download_stores):
    from core.inference.scoring import score_file
    from lab.session import get_model

    stores = download_stores

    def downloaded(at: AppTest) -> bytes:
        button = next(b for b in at.get("download_button") if "scored" in b.proto.label)
        return stores[-1].get_file(button.proto.url.rsplit("/", 1)[-1]).content

    _, folders = runs_with_models
    at = new_app()
    choose(at, folders["lstm"])
    at.slider(key="threshold").set_value(0.3).run()
    at.file_uploader(key="score_upload").set_value(("pairs.csv", SAMPLE.read_bytes(), "text/csv")).run()
    model, _ = get_model(str(folders["lstm"]))
    expected = score_file(model, SAMPLE, tmp_path / "expected.csv", 0.3)
    summary = f"On its 479 labelled pairs: ROC AUC {expected.metrics['roc_auc']:.3f}"

    at.switch_page(DATA.path).run()
    assert not at.exception
    at.switch_page(VERDICT.path).run()
    assert not at.exception and not at.error
    assert at.file_uploader(key="score_upload").value is None  # the uploader itself is empty again
    assert any(s.value.startswith("Scored 479 of 479 pairs at threshold 0.300 (pairs.csv)") for s in at.success)
    assert any(c.value.startswith(summary) for c in at.caption)
    assert any(c.value == "pairs.csv was scored earlier in this session." for c in at.caption)
    assert downloaded(at) == (tmp_path / "expected.csv").read_bytes()

    # Another threshold now: the kept result still says the threshold it was scored at, and that it was.
    at.slider(key="threshold").set_value(0.5).run()
    assert any(s.value.startswith("Scored 479 of 479 pairs at threshold 0.300") for s in at.success)
    assert any("with another model or threshold" in c.value for c in at.caption)


# ---- zero-shot MiniLM calibrated on the user's labelled pairs ----------------------------------
def test_zero_shot_is_calibrated_on_the_labelled_pairs_loaded(runs_root, zero_shot):
    _, labels, scores = zero_shot
    best = best_thresholds(labels, scores)["accuracy"]  # best accuracy on the 479 pairs of the sample
    assert round(best, 3) != round(ZERO_SHOT_THRESHOLD, 3)
    at = new_app()
    assert at.slider(key="threshold").value == pytest.approx(round(best, 3))
    captions = [c.value for c in at.caption]
    assert any(c.startswith(f"Calibrated threshold of this model: {best:.3f} (best accuracy on 479 of your "
                            "labelled pairs).") for c in captions), captions
    assert any("optimistic" in c for c in captions)


def test_zero_shot_keeps_its_fixed_default_without_both_classes(runs_root, sample):
    duplicates = sample[sample["is_duplicate"] == 1].head(30).reset_index(drop=True)  # one class only
    at = app_support.open_page(VERDICT.path, timeout=120, pairs=duplicates, data_name="duplicates.csv",
                               data_report=load_pairs(SAMPLE)[1])
    assert not at.exception and not at.error
    assert at.slider(key="threshold").value == pytest.approx(ZERO_SHOT_THRESHOLD)
    captions = [c.value for c in at.caption]
    assert any(c.startswith(f"Calibrated threshold of this model: {ZERO_SHOT_THRESHOLD:.3f} (MiniLM's fixed default")
               for c in captions), captions
    assert not any("your labelled pairs" in c for c in captions)


# ---- never measured on pairs the model trained on -------------------------------------------------------------
def test_a_run_trained_on_an_upload_is_measured_on_no_pair_it_trained_on(runs_root, sample):
    """Validated on its own file, the run trained on all of the upload but its test split: the page measures it on
    that split less the swapped copies of training pairs (by content), then on the test file once one is loaded;
    with its split unknown, on nothing, said so."""
    from core.data import pair_keys
    from lab.session import get_model

    upload, val, folder, trained = app_support.trained_on_upload(runs_root, (sample, None))
    at = app_support.open_page(VERDICT.path, timeout=120, pairs=upload, data_name="upload.csv",
                               data_report=load_pairs(SAMPLE)[1])
    choose(at, folder)
    expected = upload[[key not in trained for key in pair_keys(upload["question1"], upload["question2"])]]
    assert 0 < len(expected) < round(0.2 * len(upload))
    [measured] = [c.value for c in at.caption if c.value.startswith("Measured on ")]
    assert measured.startswith(f"Measured on the {len(expected)} pairs of the active dataset that {folder.name} held out")
    model, config = get_model(str(folder))
    assert_metrics_shown(at, expected["is_duplicate"].to_numpy(), scores_of(model, expected),
                         at.slider(key="threshold").value)

    test = pd.concat([upload.iloc[[0]], sample.iloc[400:440]], ignore_index=True)  # one pair it trained on
    at.session_state["held_out_files"] = {"val": (val, "val.csv"), "test": (test, "test.csv")}
    at.run()
    assert not at.exception
    assert any(c.value.startswith("Measured on the 40 pairs of the test file test.csv, less 1 that") for c in at.caption)

    config["data"]["train_pairs"] += 1  # the recorded split no longer matches: any pair of the upload may be trained on
    (folder / "config.json").write_text(json.dumps(config))
    at = app_support.open_page(VERDICT.path, timeout=120, pairs=upload, data_name="upload.csv",
                               data_report=load_pairs(SAMPLE)[1])
    choose(at, folder)
    assert not at.exception and not at.get("plotly_chart")
    [warning] = [w.value for w in at.warning if w.value.startswith("Nothing is measured")]
    assert f"{folder.name} trained on the active dataset, but its folder does not say which pairs it held out" in warning


def test_zero_shot_is_calibrated_on_the_validation_file_and_measured_on_the_test_file(runs_root, minilm, sample):
    val, test = sample.iloc[:60].reset_index(drop=True), sample.iloc[300:340].reset_index(drop=True)
    at = new_app()
    at.session_state["held_out_files"] = {"val": (val, "val.csv"), "test": (test, "test.csv")}
    at.run()
    assert not at.exception
    expected = round(best_thresholds(val["is_duplicate"].to_numpy(), scores_of(minilm, val))["accuracy"], 3)
    assert at.slider(key="threshold").value == pytest.approx(expected, abs=1e-9)
    captions = [c.value for c in at.caption]
    assert any(c.startswith(f"Calibrated threshold of this model: {expected:.3f} (best accuracy on the 60 pairs of "
                            "the validation file)") and "measured below on the test file" in c for c in captions)
    assert any(c.startswith("Measured on the 40 pairs of the test file test.csv") for c in captions)
    assert_metrics_shown(at, test["is_duplicate"].to_numpy(), scores_of(minilm, test), expected)
