"""``python -m core score``: every pair of a file scored at a threshold, streamed to a CSV."""
from __future__ import annotations

import sys
from pathlib import Path

from core.cli.common import (
    METRIC_KEYS,
    CliError,
    TqdmCounter,
    add_backend_option,
    add_columns_option,
    claimed_output,
    load_backend,
    model_command,
    print_json,
    threshold,
)


def cmd_score(args) -> int:
    from core.data import DataError
    from core.inference.scoring import score_file

    source, out = Path(args.pairs), Path(args.out)
    if not source.is_file():
        raise CliError(f"no pairs file at {source}")
    # Claimed before the model loads; written to a temporary of its own, renamed onto --out once whole.
    with claimed_output([out], args.overwrite) as claim:
        if out.resolve() == source.resolve():
            raise CliError("--out is the input file; choose a new file")
        model, config = load_backend(args)
        cosine = args.threshold if args.threshold is not None else config.get("thresholds", {}).get("accuracy", 0.5)
        bar = TqdmCounter("scoring", unit="pair")
        try:
            with claim.open(out, "w", encoding="utf-8", newline="") as sink:
                report = score_file(model, source, sink, cosine, progress=lambda done: bar(done, None),
                                    columns=args.columns)
        except DataError as error:
            raise CliError(str(error)) from None
        finally:
            bar.close()
    print(f"scored {report.scored:,} of {report.rows:,} pairs"
          + (f" ({report.skipped_empty:,} with an empty question left unscored)" if report.skipped_empty else "")
          + (f" ({report.malformed:,} malformed line(s) dropped, as load_pairs drops them)" if report.malformed else "")
          + f" at threshold {cosine:g}: {out}", file=sys.stderr)
    if report.metrics:
        print_json({key: report.metrics[key] for key in METRIC_KEYS})
    return 0


def add_parsers(sub) -> None:
    """Register ``score`` on the subparsers ``sub``."""
    score = model_command(sub, "score", "score every pair of a file at a threshold (CSV out, streamed)", cmd_score)
    score.add_argument("--pairs", required=True, help="CSV/TSV (optionally .gz) with question1, question2 "
                                                      "(is_duplicate optional: metrics are printed when present)")
    add_columns_option(score)
    score.add_argument("--out", required=True, help="output CSV: the input columns + similarity, predicted_duplicate")
    score.add_argument("--threshold", type=threshold, default=None,
                       help="cosine threshold (default: the model's calibrated best-accuracy threshold)")
    score.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    add_backend_option(score)
