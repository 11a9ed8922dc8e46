"""Validation ROC AUC against training time, one line per row, from bench/quality.py's JSON rows.

Each row that ``bench/quality.py`` trained carries its ``validation_curve`` (step, train_seconds,
roc_auc per validation; ``--validate-every N`` gives a one-epoch run more than one point). The x axis
is the time spent in training steps, validations left out, so recipes that validate more or less
often compare fairly. Rows without a curve (baselines, the peer) are skipped and named.

A PNG needs matplotlib, else plotly with kaleido; an ``.html`` output needs only plotly (the app's).

    .venv/bin/python bench/plot_curves.py bench/out/quality-2026-11-24-*.json
    .venv/bin/python bench/plot_curves.py bench/out/a.json bench/out/b.json --only preset --out docs/auc_vs_time.png
    .venv/bin/python bench/plot_curves.py bench/out/a.json --only preset --reference  # assets/reference_curves.json points
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "docs" / "auc_vs_time.png"
TITLE = "Validation ROC AUC against training time"
X_LABEL = "training minutes (validation time left out)"
Y_LABEL = "validation ROC AUC"


def read_curves(paths: list[Path], only: list[str] = ()) -> tuple[dict[str, list[tuple[float, float]]], list[str]]:
    """``{row name: [(training seconds, ROC AUC), ...]}`` over every file, and the names of the rows
    without a curve. A name found in several files is suffixed with its file's name."""
    found: list[tuple[str, Path, list]] = []
    skipped = []
    for path in paths:
        data = json.loads(path.read_text())
        rows = data.get("rows", []) if isinstance(data, dict) else data
        for row in rows:
            name = str(row.get("name", "?"))
            if only and not any(part in name for part in only):
                continue
            points = [(p["train_seconds"], p["roc_auc"]) for p in row.get("validation_curve") or []
                      if isinstance(p.get("roc_auc"), (int, float)) and math.isfinite(p["roc_auc"])]
            if points:
                found.append((name, path, sorted(points)))
            else:
                skipped.append(name)
    names = [name for name, _, _ in found]
    curves = {}
    for name, path, points in found:
        curves[f"{name} ({path.stem})" if names.count(name) > 1 else name] = points
    return curves, skipped


def plot_matplotlib(curves: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display: write the file only
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 5.5), dpi=120)
    for name, points in curves.items():
        axes.plot([x / 60 for x, _ in points], [y for _, y in points], marker="o", markersize=4, label=name)
    axes.set(title=TITLE, xlabel=X_LABEL, ylabel=Y_LABEL)
    axes.set_xlim(left=0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(out)
    plt.close(figure)


def plotly_figure(curves: dict):
    import plotly.graph_objects as go

    figure = go.Figure()
    for name, points in curves.items():
        figure.add_scatter(x=[x / 60 for x, _ in points], y=[y for _, y in points], mode="lines+markers", name=name)
    figure.update_layout(title=TITLE, xaxis_title=X_LABEL, yaxis_title=Y_LABEL, width=1000, height=600,
                         xaxis=dict(rangemode="tozero"))
    return figure


def write(curves: dict, out: Path) -> str:
    """Write the figure to ``out`` (.png or .html); returns what wrote it. Exits with a message when
    no installed library can write a PNG."""
    if out.suffix.lower() == ".html":
        plotly_figure(curves).write_html(out, include_plotlyjs=True)
        return "plotly"
    try:
        plot_matplotlib(curves, out)
        return "matplotlib"
    except ImportError:
        pass
    try:
        import kaleido  # noqa: F401  (plotly's PNG export needs it)
    except ImportError:
        sys.exit(f"cannot write {out}: a PNG needs matplotlib (or plotly with kaleido), and neither is installed; "
                 f"pip install matplotlib, or give --out a .html path")
    plotly_figure(curves).write_image(out)
    return "plotly + kaleido"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", type=Path, help="bench/out JSON files written by bench/quality.py")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the figure to write (.png or .html)")
    p.add_argument("--only", default="", help="comma-separated parts of row names to keep (e.g. preset)")
    p.add_argument("--reference", action="store_true",
                   help="print each curve as assets/reference_curves.json points instead of drawing")
    args = p.parse_args(argv)
    curves, skipped = read_curves(args.files, [part for part in args.only.split(",") if part])
    if skipped:
        print(f"no validation curve, not drawn: {', '.join(skipped)}")
    if not curves:
        sys.exit("no row with a validation curve in " + ", ".join(map(str, args.files)))
    if args.reference:
        for name, points in curves.items():
            print(f'{name}: "points": [{", ".join(f"[{x:.1f}, {y:.4f}]" for x, y in points)}]')
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    backend = write(curves, args.out)
    print(f"{len(curves)} curve(s) written to {args.out} ({backend})")


if __name__ == "__main__":
    main()
