"""``python -m core score``: every pair of a file scored at a threshold, streamed to a CSV."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

from core.cli.common import (
    METRIC_KEYS, TqdmCounter, add_columns_option, add_output_options,
    claimed_output, model_command, output_path, print_json, threshold,
)
from core.cli.scorers import load_scorer


def cmd_score(args) -> int:
    from core.inference.scoring import ScoreSteps, score_file
    from core.inference.tfidf_scorer import TfidfScorer, fit_on_file

    source = Path(args.pairs)
    out = output_path(args.out, args.pairs)
    # Claimed before the model loads; written to a temporary of its own, renamed onto --out once whole.
    with claimed_output([out], args.overwrite) as claim:
        model, config = load_scorer(args)
        cosine = args.threshold if args.threshold is not None else config.get("thresholds", {}).get("accuracy", 0.5)
        bars = [TqdmCounter(step, unit="pair", delay=PROGRESS_DELAY) for step in ("reading", "encoding", "writing")]
        if isinstance(model, TfidfScorer) and not model.fitted:  # the plain TF-IDF baseline: fitted on this file
            model = fit_on_file(source, args.columns, names=args.names)
        with claim.open(out, "w", encoding="utf-8", newline="") as sink, _ticking(bars):
            report = score_file(model, source, sink, cosine, columns=args.columns, label_map=args.label_map,
                                steps=ScoreSteps(*bars), names=args.names)
    for warning in report.warnings:
        print(f"data: warning: {warning}", file=sys.stderr)
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"scored {report.scored:,} of {report.rows:,} pairs"
          + (f" ({report.skipped_empty:,} with an empty question left unscored)" if report.skipped_empty else "")
          + (f" ({report.malformed:,} malformed line(s) dropped, as load_pairs drops them)" if report.malformed else "")
          + f" at threshold {cosine:g}: {out}", file=sys.stderr)
    if report.metrics:
        print_json({key: report.metrics[key] for key in METRIC_KEYS})
    return 0


TICK_SECONDS = 0.5  # how often the bars' clocks move while a step gives no news
# A step's bar shows once it has taken this long: a small file is scored without them, and a file refused by
# the reader's first pass gets its one-line error alone.
PROGRESS_DELAY = 2.0


@contextmanager
def _ticking(bars: list[TqdmCounter]):
    """The bars redrawn every ``TICK_SECONDS``, so their clocks move through a silent step (the first pass), and
    closed at the end."""
    import threading

    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(TICK_SECONDS):
            for counter in bars:  # a closed bar is disabled (nothing drawn); a bar within its delay stays unseen
                if counter.bar is not None and counter.bar.format_dict["elapsed"] >= counter.delay:
                    counter.bar.refresh()

    thread = threading.Thread(target=tick, name="score-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        for counter in bars:
            counter.close()


def add_parsers(sub) -> None:
    score = model_command(sub, "score", "score every pair of a file at a threshold (CSV out, streamed)", cmd_score,
                          scores_pairs=True, backend=True)
    score.add_argument("--pairs", required=True, help="pairs file (is_duplicate optional: metrics when present)")
    add_columns_option(score)
    add_output_options(score, help="output CSV: the input columns + similarity, predicted_duplicate (or <name>_1 ... "
                                   "where the input has them)")
    score.add_argument("--threshold", type=threshold, default=None,
                       help="cosine threshold (default: the model's calibrated best-accuracy threshold)")
