"""``python -m core evaluate`` and ``predict``: a model's metrics on a labelled pairs file, and its verdict on one
pair of questions."""
from __future__ import annotations

from core.cli.common import (
    METRIC_KEYS, CliError, add_columns_option, load_data, model_command, print_json,
    threshold,
)
from core.cli.scorers import calibrate_on_file, load_scorer


def cmd_evaluate(args) -> int:
    from core.data import resampling_groups
    from core.inference.calibration import pair_threshold
    from core.inference.metrics import evaluate_scores, metric_intervals, scorer_scores
    from core.inference.run_quality import finite_number

    if args.threshold is not None and args.calibrate_on:
        raise CliError("--threshold and --calibrate-on both set the threshold; give one of them")
    model, config = load_scorer(args)
    pairs = load_data(args.data, args, args.max_rows)
    calibrated = None
    if args.calibrate_on:  # before --data is scored: a TF-IDF baseline is fitted on the calibration file
        model, calibrated = calibrate_on_file(model, args.calibrate_on, args)
    if args.threshold is not None:
        cosine, source = args.threshold, "--threshold"
    elif calibrated is not None:
        cosine = calibrated.thresholds["accuracy"]
        source = f"best accuracy on the {calibrated.pairs:,} labelled pairs of {calibrated.data} (--calibrate-on)"
    elif finite_number((config.get("thresholds") or {}).get("accuracy")) is not None:
        cosine, source = (chosen := pair_threshold(config)).threshold, chosen.source
    else:  # the best accuracy on the evaluated pairs themselves
        cosine, source = None, "best accuracy on these very pairs (the model has no threshold of its own: optimistic)"
    labels, scores = pairs["is_duplicate"].to_numpy(), scorer_scores(model, pairs)
    metrics = evaluate_scores(labels, scores, threshold=cosine)
    result = {**{key: metrics[key] for key in METRIC_KEYS}, "threshold_from": source}
    if calibrated is not None:
        result["calibrated_on"] = {**calibrated.record(), "thresholds": calibrated.thresholds}
    # 95 % bootstrap intervals, pairs sharing a question resampled together
    result["intervals"] = metric_intervals(labels, scores, metrics["threshold"], groups=resampling_groups(pairs))
    print_json(result)
    return 0


def cmd_predict(args) -> int:
    for name in ("question1", "question2"):
        if not getattr(args, name).strip():
            raise CliError(f"{name} is empty: type the question to compare")
    model, config = load_scorer(args)  # the TF-IDF baseline, unless calibrated, is fitted on the two questions
    cosine = args.threshold if args.threshold is not None else config.get("thresholds", {}).get("accuracy", 0.5)
    score = float(model.score_pairs([args.question1], [args.question2])[0])
    verdict = "DUPLICATE" if score > cosine else "NOT DUPLICATE"
    print_json({"similarity": round(score, 6), "threshold": cosine, "verdict": verdict})
    return 0


def add_parsers(sub) -> None:
    evaluate = model_command(sub, "evaluate", "metrics of a model on a labelled pairs file", cmd_evaluate,
                             scores_pairs=True)
    evaluate.add_argument("--data", required=True, help="labelled pairs (CSV/TSV/Parquet, optionally .gz)")
    add_columns_option(evaluate, max_rows=True)
    evaluate.add_argument("--threshold", type=threshold, default=None,
                          help="cosine threshold (default: the model's calibrated best-accuracy threshold)")
    evaluate.add_argument("--calibrate-on", default=None, metavar="FILE",
                          help="labelled pairs to calibrate the threshold on first (read with --columns): the metrics "
                               "are at its best-accuracy threshold")

    predict = model_command(sub, "predict", "are two questions duplicates?", cmd_predict, scores_pairs=True,
                            backend=True)
    predict.add_argument("question1")
    predict.add_argument("question2")
    predict.add_argument("--threshold", type=threshold, default=None, help="cosine threshold (default: calibrated)")
