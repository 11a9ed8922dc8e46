"""The Compare page (AppTest) and its helpers: the runs table, the bar chart, the formula-safe CSV."""
import io
import json
import math

import pandas as pd
import pytest

from core.export import METRIC_COLUMNS, RUN_COLUMNS, runs_table, safe_csv
from core.objectives import LossConfig
from core.models import MODEL_LABELS
from core.saving import list_runs

COMPARE = "pages/6_Compare.py"


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
    assert back["name"].tolist() == ["'=HYPERLINK(\"http://x\")", "'+1", "'-2+3", "'@SUM(A1)", "plain", "a=b", "'\tTAB"]
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


# ---- the page ---------------------------------------------------------------------------------------
def test_compare_lists_the_models_with_their_metrics(runs_with_models, open_page, plotly_figures):
    root, folders = runs_with_models
    at = open_page(COMPARE)
    assert not at.exception and not at.info
    [shown] = [frame.value for frame in at.dataframe]
    expected = runs_table(list_runs(root)[0], MODEL_LABELS)
    pd.testing.assert_frame_equal(shown.reset_index(drop=True), expected)
    assert sorted(shown["name"]) == sorted(folder.name for folder in folders.values())
    for folder in folders.values():
        validation = json.loads((folder / "config.json").read_text())["metrics"]["validation"]
        row = shown.set_index("name").loc[folder.name]
        assert row["val ROC AUC"] == pytest.approx(validation["roc_auc"])
        assert row["val accuracy"] == pytest.approx(validation["accuracy"])

    [bars] = plotly_figures(at)
    assert bars["layout"]["barmode"] == "group"
    assert [trace["name"] for trace in bars["data"]] == list(METRIC_COLUMNS.values())
    for trace, column in zip(bars["data"], METRIC_COLUMNS.values()):
        assert trace["x"] == shown["name"].tolist()
        assert trace["y"] == pytest.approx(shown[column].tolist())
    assert at.get("download_button")[0].proto.label == "Download the table (CSV)"


def test_compare_without_models_says_where_to_train(runs_root, open_page):
    (runs_root / ".tmp-lstm-triplet-x").mkdir()  # an interrupted save is reported, not listed
    at = open_page(COMPARE)
    assert not at.exception
    [info] = at.info
    assert "No trained model" in info.value and "Train page" in info.value
    assert not at.dataframe and not at.get("plotly_chart")
    assert "left over from an interrupted save" in at.warning[0].value
