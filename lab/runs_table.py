"""The table of saved models: ``runs_table`` turns ``core.saving.list_runs`` entries (config.json
contents) into one row per model, in the training vocabulary (loss labels, statuses)."""
from __future__ import annotations

import pandas as pd

from core.status import DONE

# validation metric key in config.json -> column name in the runs table
METRIC_COLUMNS = {"roc_auc": "val ROC AUC", "average_precision": "val AP", "accuracy": "val accuracy", "f1": "val F1"}
RUN_COLUMNS = ["name", "status", "model", "loss", "data", "epochs run", "training time (s)", "pairs/s",
               *METRIC_COLUMNS.values()]
NUMBER_FORMATS = {"epochs run": "%d", "training time (s)": "%.1f", "pairs/s": "%.0f",
                  **{column: "%.3f" for column in METRIC_COLUMNS.values()}}  # how the pages show the numbers
# How folders saved before core.status recorded a done run.
_OLD_DONE = ("completed", "early_stopped")


def _loss_label(loss: object) -> str:
    # imported here: the objectives import PyTorch, which the model picker of every page does not need
    from core.training.objectives import LossConfig

    if not isinstance(loss, dict):
        return "?"
    try:
        return LossConfig(**loss).label()
    except (TypeError, ValueError):
        return str(loss.get("name", "?"))


def run_status(run: dict) -> str:
    """A saved run's status in ``core.status``' vocabulary (done, cancelled, failed), "?" when unreadable."""
    training = run.get("training") if isinstance(run.get("training"), dict) else {}
    status = training.get("status")
    if not isinstance(status, str) or not status:
        return "?"
    return DONE if status in _OLD_DONE else status


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("nan")


def runs_table(runs: list[dict], model_labels: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per saved model, in ``runs`` order; missing or malformed fields become NaN or "?" (older folders)."""
    labels = model_labels or {}
    rows = []
    for run in runs:
        training = run.get("training") if isinstance(run.get("training"), dict) else {}
        data = run.get("data") if isinstance(run.get("data"), dict) else {}
        metrics = run.get("metrics", {}).get("validation", {}) if isinstance(run.get("metrics"), dict) else {}
        metrics = metrics if isinstance(metrics, dict) else {}
        rows.append({
            "name": str(run.get("name", "?")),
            "status": run_status(run),
            "model": labels.get(run.get("model_type"), str(run.get("model_type", "?"))),
            "loss": _loss_label(run.get("loss")),
            "data": str(data.get("name") or "?"),
            "epochs run": _number(training.get("epochs_run")),
            "training time (s)": _number(training.get("seconds")),
            "pairs/s": _number(training.get("pairs_per_second")),
            **{column: _number(metrics.get(key)) for key, column in METRIC_COLUMNS.items()},
        })
    return pd.DataFrame(rows, columns=RUN_COLUMNS)
