"""The Compare page (AppTest: every model and the references on the same pairs) and its helpers: the runs
table, the formula-safe CSV."""
import io
import json
import math

import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from core.data import resampling_groups, split_pairs
from core.inference.honest_pairs import (
    COMPARE_COLUMNS,
    METRICS,
    TFIDF_FIT,
    TFIDF_LABEL,
    comparison_row,
    honest_pairs,
    sort_table,
)
from core.inference.metrics import scorer_scores
from core.inference.metrics import best_thresholds
from core.inference.tfidf_scorer import TfidfScorer
from core.models import MODEL_LABELS, ZERO_SHOT_LABEL, ZERO_SHOT_THRESHOLD
from core.saving import list_runs
from core.saving.safe_csv import safe_csv
from core.training.objectives import LossConfig
from lab.runs_table import METRIC_COLUMNS, RUN_COLUMNS, runs_table
from lab import compare_view
from lab.navigation import COMPARE


# ---- safe_csv ---------------------------------------------------------------------------------------
def test_safe_csv_neutralises_formulas_in_text_cells_only():
    table = pd.DataFrame({
        "name": ["=HYPERLINK(\"http://x\")", "+1", "-2+3", "@SUM(A1)", "plain", "a=b", "\tTAB"],
        "score": [-0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        "=evil header": ["x"] * 7,
    })
    text = safe_csv(table).decode("utf-8")
    back = pd.read_csv(io.StringIO(text), keep_default_na=False)
    assert back.columns.tolist() == ["name", "score", "'=evil header"]
    assert back["name"].tolist() == ["'=HYPERLINK(\"http://x\")", "+1", "'-2+3", "'@SUM(A1)", "plain", "a=b", "'\tTAB"]
    assert back["score"].tolist() == [-0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # numbers stay numbers, minus sign included
    assert text.splitlines()[1].endswith(",-0.5,x")


def test_safe_csv_leaves_a_harmless_table_unchanged():
    table = pd.DataFrame({"name": ["lstm-triplet-1", "dual"], "val F1": [0.5, float("nan")]})
    assert safe_csv(table) == table.to_csv(index=False, lineterminator="\r\n").encode("utf-8")


# ---- runs_table -------------------------------------------------------------------------------------
def test_runs_table_takes_every_number_from_config_json(tiny_models):
    runs, problems = list_runs(next(iter(tiny_models.values())).parent)
    assert problems == []
    table = runs_table(runs, MODEL_LABELS)
    assert table.columns.tolist() == RUN_COLUMNS
    for model, folder in tiny_models.items():
        config = json.loads((folder / "config.json").read_text())
        row = table.set_index("name").loc[folder.name]
        assert row["model"] == MODEL_LABELS[model]
        assert row["loss"] == LossConfig(**config["loss"]).label()
        assert row["data"] == config["data"]["name"] == "bundled sample"
        assert row["epochs run"] == config["training"]["epochs_run"] == 1
        assert row["training time (s)"] == config["training"]["seconds"]
        assert row["pairs/s"] == config["training"]["pairs_per_second"]
        for key, column in METRIC_COLUMNS.items():
            assert row[column] == pytest.approx(config["metrics"]["validation"][key], nan_ok=True)


def test_runs_table_tolerates_missing_fields():
    table = runs_table([{"name": "old", "model_type": "lstm", "loss": {"name": "nope"}, "metrics": "broken"}])
    row = table.iloc[0]
    assert (row["name"], row["model"], row["loss"], row["data"]) == ("old", "lstm", "nope", "?")
    assert all(math.isnan(row[column]) for column in ["epochs run", *METRIC_COLUMNS.values()])


# ---- the page ----------------------------------------------------------------------------------------
def _expected_row(choice, name, kind, common, source, calibrated_here=False, zero_shot_scores=None):
    """The comparison row of one model computed here, outside the app, from the same pairs: at its saved
    threshold, or (``calibrated_here``) at the best-accuracy threshold of its scores on these pairs; judged
    against ``zero_shot_scores`` when given."""
    from core.models import load_model

    model, config = load_model(choice)
    labels, scores = common.pairs["is_duplicate"].to_numpy(), scorer_scores(model, common.pairs)
    threshold = best_thresholds(labels, scores)["accuracy"] if calibrated_here else config["thresholds"]["accuracy"]
    return comparison_row(name, kind, labels, scores, threshold, source, zero_shot_scores,
                          resampling_groups(common.pairs))


@pytest.mark.slow
def test_compare_scores_every_model_and_the_references_on_the_same_pairs(runs_with_models, open_page,
                                                                          plotly_figures, sample_pairs):
    root, folders = runs_with_models
    pairs, _ = sample_pairs
    runs = list_runs(root)[0]
    at = open_page(COMPARE.path)
    assert not at.exception and not at.info

    # the common pairs: both tiny models trained on the sample split by pair, so their validation pairs, which
    # neither trained on
    common = honest_pairs(runs, pairs)
    val = split_pairs(pairs, val_fraction=0.1, test_fraction=0.0, seed=0).val
    assert len(common.pairs) == len(val) == 48 and len(common.constrained_by) == 2
    assert sorted(zip(common.pairs["question1"], common.pairs["question2"])) == \
        sorted(zip(val["question1"], val["question2"]))
    assert any(f"Scored on {common.description}" in block.value for block in at.markdown)
    [caption] = [c.value for c in at.caption if c.value.startswith(f"{len(val)} pairs (")]
    assert common.description in caption and f"TF-IDF is fitted on {TFIDF_FIT}" in caption

    [shown, details] = [frame.value for frame in at.dataframe]
    assert shown.columns.tolist() == COMPARE_COLUMNS  # all in the CSV; the screen shows the ones that fit
    assert list(at.dataframe[0].proto.column_order) == ["model", "kind", *METRICS.values(), "ROC AUC 95 %",
                                                        "vs zero-shot", "threshold"]
    assert set(shown["model"]) == {
        ZERO_SHOT_LABEL, TFIDF_LABEL, *(folder.name for folder in folders.values())}
    assert shown["ROC AUC"].tolist() == sorted(shown["ROC AUC"], reverse=True)  # the default order
    rows = shown.set_index("model")

    # every number is the metric of that model's scores on exactly these pairs, every verdict a paired bootstrap
    # against zero-shot MiniLM's scores of them
    from core.models import load_model

    zero_shot_scores = scorer_scores(load_model("minilm")[0], common.pairs)
    lstm = _expected_row(str(folders["lstm"]), folders["lstm"].name, MODEL_LABELS["lstm"], common,
                         compare_view.SAVED_SOURCE, zero_shot_scores=zero_shot_scores)
    # zero-shot MiniLM has no validation split: calibrated on these labelled pairs (core.inference.calibration)
    minilm = _expected_row("minilm", ZERO_SHOT_LABEL, "reference", common, compare_view.ZERO_SHOT_CALIBRATED_SOURCE,
                           calibrated_here=True)
    tfidf = comparison_row(TFIDF_LABEL, "reference", common.pairs["is_duplicate"].to_numpy(),
                           TfidfScorer().score_pairs(common.pairs["question1"], common.pairs["question2"]),
                           None, compare_view.TFIDF_SOURCE, zero_shot_scores, resampling_groups(common.pairs))
    assert lstm["vs zero-shot"].split(" (")[0] in ("better", "no measurable difference", "worse")
    assert minilm["vs zero-shot"] == "" and minilm["ROC AUC 95 %"].count("–") == 1
    assert minilm["threshold"] != ZERO_SHOT_THRESHOLD
    assert rows.loc[ZERO_SHOT_LABEL, "threshold"] == pytest.approx(minilm["threshold"], abs=1e-6)
    assert "Zero-shot MiniLM and the TF-IDF baseline have no threshold of their own" in caption
    for expected in (lstm, minilm, tfidf):
        row = rows.loc[expected["model"]]
        for column in COMPARE_COLUMNS[1:]:
            assert row[column] == pytest.approx(expected[column], abs=1e-6) if isinstance(expected[column], float) \
                else row[column] == expected[column], (expected["model"], column)
    lstm_config = json.loads((folders["lstm"] / "config.json").read_text())
    assert rows.loc[folders["lstm"].name, "threshold"] == pytest.approx(lstm_config["thresholds"]["accuracy"])

    # the chart: the same rows in the same order, titled with the pairs measured on
    [bars] = plotly_figures(at)
    assert common.label in bars["layout"]["title"]["text"] and "48" in bars["layout"]["title"]["text"]
    assert [trace["name"] for trace in bars["data"]] == list(METRICS.values())
    for trace, column in zip(bars["data"], METRICS.values()):
        assert trace["x"] == shown["model"].tolist()
        assert trace["y"] == pytest.approx(shown[column].tolist(), nan_ok=True)

    # the training details, on demand: the runs table of lab.runs_table
    pd.testing.assert_frame_equal(details.reset_index(drop=True), runs_table(runs, MODEL_LABELS))
    assert [b.proto.label for b in at.get("download_button")] == ["Download the table (CSV)",
                                                                  "Download the 48 pairs scored (CSV)",
                                                                  "Download the training details (CSV)"]

    # ranking by any column, either way
    at.selectbox(key="compare_sort").select("F1").run()
    at.toggle(key="compare_ascending").set_value(True).run()
    assert not at.exception
    resorted = at.dataframe[0].value
    assert resorted["F1"].tolist() == sorted(resorted["F1"])
    # the same rows; rows of equal F1 keep the app's own order, so compare them with ties broken by name
    by_f1_then_name = ["F1", "model"]
    pd.testing.assert_frame_equal(resorted.sort_values(by_f1_then_name).reset_index(drop=True),
                                  shown.sort_values(by_f1_then_name).reset_index(drop=True))
    assert plotly_figures(at)[0]["data"][0]["x"] == resorted["model"].tolist()


@pytest.mark.slow
def test_compare_without_models_compares_the_references_on_all_pairs(runs_root, sample_pairs):
    from app_support import open_app

    pairs = sample_pairs[0].iloc[:120].reset_index(drop=True)  # a small active dataset: MiniLM scores it fast
    (runs_root / ".tmp-lstm-triplet-x").mkdir()  # an interrupted save is reported, not listed
    at = open_app()
    at.session_state["pairs"] = pairs
    at.switch_page(COMPARE.path).run()
    assert not at.exception
    [info] = at.info
    assert "No trained model" in info.value and "Train page" in info.value
    assert any("Scored on all 120 pairs of the active dataset" in block.value for block in at.markdown)
    [shown] = [frame.value for frame in at.dataframe]
    assert sorted(shown["model"]) == sorted([ZERO_SHOT_LABEL, TFIDF_LABEL])
    tfidf = shown.set_index("model").loc[TFIDF_LABEL]
    scores = TfidfScorer().score_pairs(pairs["question1"], pairs["question2"])  # fitted on the pairs themselves
    assert tfidf["ROC AUC"] == pytest.approx(roc_auc_score(pairs["is_duplicate"], scores))
    assert "left over from an interrupted save" in at.warning[0].value


# ---- runs that did not finish say so: the status column and the model pickers ---------------------------
def _with_status(folder, status):
    """Rewrite a saved run's recorded status (``None``: a folder from before statuses were recorded)."""
    config = json.loads((folder / "config.json").read_text())
    if status is None:
        del config["training"]["status"]
    else:
        config["training"]["status"] = status
    (folder / "config.json").write_text(json.dumps(config))
    return config


def test_runs_table_has_a_status_column_in_the_status_vocabulary():
    recorded = ["done", "completed", "early_stopped", "cancelled", "failed", None]
    runs = [{"name": f"run{i}", "training": {} if status is None else {"status": status}}
            for i, status in enumerate(recorded)]
    runs.append({"name": "broken", "training": "not a mapping"})
    table = runs_table(runs)
    assert RUN_COLUMNS[:2] == ["name", "status"]
    # folders saved before core.status say completed / early_stopped for a done run
    assert table["status"].tolist() == ["done", "done", "done", "cancelled", "failed", "?", "?"]


def _picker_labels():
    import os

    import streamlit as st

    from lab.session import model_choices

    from app_support import TEST_WORKSPACE

    st.session_state.runs_root = os.path.join(os.environ["SIAMESE_LAB_WORKSPACES"], TEST_WORKSPACE, "models")
    for label in model_choices():
        st.text(label)


def quality_mark(config: dict) -> str:
    """", worse than chance" or ", below TF-IDF cosine" when core.inference.run_quality flags the run, else ""."""
    from core.inference.run_quality import judge_run

    quality = judge_run(config["metrics"])
    return f", {quality.short}" if quality.flagged else ""


def test_model_pickers_mark_cancelled_and_failed_runs(runs_with_models):
    from streamlit.testing.v1 import AppTest

    root, folders = runs_with_models
    cancelled = _with_status(folders["lstm"], "cancelled")
    old_done = _with_status(folders["dual-transformer"], "completed")
    at = AppTest.from_function(_picker_labels, default_timeout=60).run()
    assert not at.exception, at.exception
    labels = [text.value for text in at.text]
    auc = cancelled["metrics"]["validation"]["roc_auc"]
    assert f"{folders['lstm'].name} (cancelled, val AUC {auc:.3f}{quality_mark(cancelled)})" in labels
    old_auc = old_done["metrics"]["validation"]["roc_auc"]
    old_mark = quality_mark(old_done)
    assert f"{folders['dual-transformer'].name} (val AUC {old_auc:.3f}{old_mark})" in labels  # a done run needs no mark
    assert len(labels) == 3  # zero-shot MiniLM and the two saved runs

    _with_status(folders["dual-transformer"], "failed")
    at.run()
    assert f"{folders['dual-transformer'].name} (failed, val AUC {old_auc:.3f}{old_mark})" in [t.value for t in at.text]


def test_compare_keeps_zero_shot_at_its_fixed_default_on_one_class(runs_root, sample_pairs):
    from app_support import open_app

    pairs = sample_pairs[0]
    duplicates = pairs[pairs["is_duplicate"] == 1].head(30).reset_index(drop=True)  # nothing to calibrate on
    at = open_app()
    at.session_state["pairs"] = duplicates
    at.switch_page(COMPARE.path).run()
    assert not at.exception
    row = at.dataframe[0].value.set_index("model").loc[ZERO_SHOT_LABEL]
    assert row["threshold"] == ZERO_SHOT_THRESHOLD and row["threshold from"] == compare_view.ZERO_SHOT_SOURCE
    assert any("zero-shot MiniLM's fixed default" in c.value for c in at.caption)


# ---- never a figure measured on training pairs ------------------------------------------------------------
def _row_keys(frame):
    """Each row's pair by content (``core.data.pair_keys``: both questions normalised, in either order)."""
    from core.data import pair_keys

    return pair_keys(frame["question1"], frame["question2"])


def _content(frame):
    return set(_row_keys(frame))


def _downloaded_pairs(stores, at) -> pd.DataFrame:
    """The "pairs scored" download of the page, read back as a frame (formula-safe CSV: none start with = + - @)."""
    [button] = [b for b in at.get("download_button") if "pairs scored" in b.proto.label]
    data = stores[-1].get_file(button.proto.url.rsplit("/", 1)[-1]).content
    return pd.read_csv(io.BytesIO(data), keep_default_na=False)


def test_compare_after_training_on_an_upload_scores_no_training_pair(runs_root, sample_pairs, download_stores):
    """A run trained on an upload with its own validation file: Compare scores it on the validation file while it
    is loaded, and without it on the upload's pairs the run held out (its test split), less every pair it trained
    on in either order; never on the upload's training pairs (the page once took all of them)."""
    from app_support import open_app, trained_on_upload

    from core.models import load_model

    upload, val, folder, trained = trained_on_upload(runs_root, sample_pairs)
    minilm = load_model("minilm")[0]

    at = open_app()
    at.session_state["pairs"] = upload
    at.switch_page(COMPARE.path).run()
    assert not at.exception
    held_out = [key for key in _row_keys(upload) if key not in trained]
    assert 0 < len(held_out) < round(0.2 * len(upload))  # a swapped copy of a training pair is not held out
    [scored] = [block.value for block in at.markdown if block.value.startswith("**Scored on")]
    assert f"the {len(held_out)} pairs of the active dataset that {folder.name} held out" in scored
    rows = at.dataframe[0].value.set_index("model")
    expected = upload[[key not in trained for key in _row_keys(upload)]]
    assert not _content(expected) & trained
    downloaded = _downloaded_pairs(download_stores, at)  # what the page says it scored, read back by content
    assert len(downloaded) == len(expected) and _content(downloaded) == _content(expected)
    assert not _content(downloaded) & trained
    assert rows.loc[ZERO_SHOT_LABEL, "ROC AUC"] == pytest.approx(
        roc_auc_score(expected["is_duplicate"], scorer_scores(minilm, expected)), abs=1e-6)
    verdict = rows.loc[folder.name, "vs zero-shot"]
    assert verdict.count(" to ") == 1 and verdict.split(" (")[0] in ("better", "no measurable difference", "worse")

    # the validation file loaded on the Data page: the run never trained on it, so it is the set
    at.session_state["held_out_files"] = {"val": (val, "val.csv")}
    at.run()
    assert not at.exception
    assert any(block.value.startswith(f"**Scored on the {len(val)} pairs of the validation file val.csv")
               for block in at.markdown)
    assert at.dataframe[0].value.set_index("model").loc[ZERO_SHOT_LABEL, "ROC AUC"] == pytest.approx(
        roc_auc_score(val["is_duplicate"], scorer_scores(minilm, val)), abs=1e-6)

    # a test file that repeats training pairs, swapped: those are left out, the rest scored
    test = pd.concat([upload.iloc[[0, 1]].rename(columns={"question1": "question2", "question2": "question1"}),
                      sample_pairs[0].iloc[400:430]], ignore_index=True)
    at.session_state["held_out_files"] = {"val": (val, "val.csv"), "test": (test, "test.csv")}
    at.run()
    assert not at.exception
    leaked = sum(key in trained for key in _row_keys(test))
    assert leaked == 2
    assert any(block.value.startswith(f"**Scored on the {len(test) - leaked} pairs of the test file test.csv, "
                                      f"less {leaked} that") for block in at.markdown)
    downloaded = _downloaded_pairs(download_stores, at)
    assert len(downloaded) == len(test) - leaked and not _content(downloaded) & trained


def test_compare_shows_no_figure_when_no_pair_is_unseen(runs_with_models, open_page, sample_pairs):
    """Every pair of the dataset trained on by one run or the other: the page says so instead of a table."""
    root, folders = runs_with_models
    config = json.loads((folders["lstm"] / "config.json").read_text())
    config["data"]["validation_fingerprint"] = "0" * 16  # its split cannot be found again: any pair may be trained on
    (folders["lstm"] / "config.json").write_text(json.dumps(config))
    at = open_page(COMPARE.path)
    assert not at.exception and not at.dataframe
    [warning] = [w.value for w in at.warning if w.value.startswith("Nothing is scored")]
    assert f"{folders['lstm'].name} trained on the active dataset, but its folder does not say" in warning
