"""``python -m core evaluate`` and ``predict``: a model's metrics on a labelled pairs file, and its
verdict on one pair of questions."""
from __future__ import annotations

from core.cli.common import (
    METRIC_KEYS,
    CliError,
    add_backend_option,
    add_columns_option,
    count,
    load_backend,
    load_data,
    load_model,
    model_command,
    print_json,
    threshold,
)


def cmd_evaluate(args) -> int:
    from core.inference.evaluation import evaluate_model

    model, config = load_model(args.model, args.device)
    pairs = load_data(args.data, args.max_rows, args.columns)
    cosine = args.threshold if args.threshold is not None else config.get("thresholds", {}).get("accuracy")
    metrics = evaluate_model(model, pairs, threshold=cosine)
    print_json({k: metrics[k] for k in METRIC_KEYS})
    return 0


def cmd_predict(args) -> int:
    for name in ("question1", "question2"):
        if not getattr(args, name).strip():
            raise CliError(f"{name} is empty: type the question to compare")
    model, config = load_backend(args)
    cosine = args.threshold if args.threshold is not None else config.get("thresholds", {}).get("accuracy", 0.5)
    score = float(model.score_pairs([args.question1], [args.question2])[0])
    verdict = "DUPLICATE" if score > cosine else "NOT DUPLICATE"
    print_json({"similarity": round(score, 6), "threshold": cosine, "verdict": verdict})
    return 0


def add_parsers(sub) -> None:
    """Register ``evaluate`` and ``predict`` on the subparsers ``sub``."""
    evaluate = model_command(sub, "evaluate", "metrics of a model on a labelled pairs file", cmd_evaluate)
    evaluate.add_argument("--data", required=True, help="CSV/TSV (optionally .gz) of labelled pairs")
    add_columns_option(evaluate)
    evaluate.add_argument("--threshold", type=threshold, default=None,
                          help="cosine threshold (default: the model's calibrated best-accuracy threshold)")
    evaluate.add_argument("--max-rows", type=count, default=None, help="use only the first N usable rows")

    predict = model_command(sub, "predict", "are two questions duplicates?", cmd_predict)
    predict.add_argument("question1")
    predict.add_argument("question2")
    predict.add_argument("--threshold", type=threshold, default=None, help="cosine threshold (default: calibrated)")
    add_backend_option(predict)
