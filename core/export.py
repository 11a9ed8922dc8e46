"""Tables of saved models and their safe export to CSV.

``runs_table`` turns ``core.saving.list_runs`` entries (config.json contents) into one row per model;
``safe_csv`` writes any table as CSV that a spreadsheet will not execute.
"""
from __future__ import annotations

import pandas as pd

from core.objectives import LossConfig
from core.status import DONE

# validation metric key in config.json -> column name in the runs table
METRIC_COLUMNS = {"roc_auc": "val ROC AUC", "average_precision": "val AP", "accuracy": "val accuracy", "f1": "val F1"}
RUN_COLUMNS = ["name", "status", "model", "loss", "data", "epochs run", "training time (s)", "pairs/s",
               *METRIC_COLUMNS.values()]
# How folders saved before core.status recorded a done run.
_OLD_DONE = ("completed", "early_stopped")
# A cell starting with one of these is a formula to Excel / LibreOffice / Sheets (OWASP "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _loss_label(loss: object) -> str:
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
    """One row per saved model, in ``runs`` order, with the columns of ``RUN_COLUMNS``.

    Missing or malformed fields become NaN / "?" rather than errors: a folder written by an older
    version still gets a row.
    """
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


def _neutralise(value):
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def safe_csv(table: pd.DataFrame) -> bytes:
    """UTF-8 CSV bytes of ``table`` in which no text cell (or header) can run as a spreadsheet formula.

    Text starting with ``= + - @`` (or a tab / carriage return) gets a leading ``'``; numbers are left
    alone, so ``-0.5`` stays a number.

    >>> safe_csv(pd.DataFrame({"name": ["=1+1", "ok"], "x": [-0.5, 2.0]})).decode()
    "name,x\\r\\n'=1+1,-0.5\\r\\nok,2.0\\r\\n"
    """
    return safe_csv_text(table).encode("utf-8")


def safe_csv_text(table: pd.DataFrame, header: bool = True) -> str:
    """``safe_csv`` as text, optionally without the header row: files written in chunks append these."""
    clean = table.copy()
    clean.columns = [_neutralise(str(column)) for column in clean.columns]
    for column in clean.columns:
        if not pd.api.types.is_numeric_dtype(clean[column]):
            clean[column] = clean[column].map(_neutralise)
    # CRLF rows (RFC 4180): the csv writer then quotes any cell holding a lone \r, which a "\n"
    # terminator would leave bare and a reader would split into two rows.
    return clean.to_csv(index=False, header=header, lineterminator="\r\n")
