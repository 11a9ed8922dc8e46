"""What the commands that only score pairs share (evaluate, score, predict, calibrate): loading a scorer, the
TF-IDF baseline and a stacked scorer included, and calibrating or stacking one on labelled files."""
from __future__ import annotations

from pathlib import Path

from core.cli.common import CliError, TqdmCounter, load_backend, load_data


def load_scorer(args):
    """(scorer, config): the TF-IDF baseline (``tfidf`` or a calibrated TF-IDF folder), a stacked scorer's folder,
    else ``load_backend``'s model, a cross-encoder included."""
    from core.device import resolve_device
    from core.inference.stacked_scorer import is_stacked, load_stacked
    from core.inference.tfidf_scorer import is_tfidf, load_tfidf

    kind = "the TF-IDF baseline" if is_tfidf(args.model) else "a stacked scorer" if is_stacked(args.model) else None
    if kind is None:
        return load_backend(args, vectors=False)
    if getattr(args, "backend", "torch") == "onnx":
        raise CliError(f"--model {args.model} is {kind}, which has no ONNX graph; drop --backend onnx")
    if is_stacked(args.model):
        return load_stacked(args.model, str(resolve_device(args.device)))
    return load_tfidf(args.model)


def calibrate_on_file(model, path: str, args, max_rows: int | None = None):
    """(scorer, ``FileCalibration``) of ``model`` calibrated on the labelled pairs of ``path``, a bar on stderr; a
    file that cannot calibrate is one ``CliError`` before any encoding. The TF-IDF baseline is fitted on it."""
    from core.inference.calibration import calibrate_scorer, calibration_problem

    pairs = load_data(path, args, max_rows)
    problem = calibration_problem(pairs["is_duplicate"].to_numpy(), Path(path).name)
    if problem:
        raise CliError(problem)
    with TqdmCounter("calibrating", unit="pair") as bar:
        return calibrate_scorer(model, pairs, Path(path).name, progress=bar)


def stack_on_files(encoder, args, parent_name: str):
    """(scorer, ``FileCalibration``, config base) of a stacked scorer over ``encoder`` fitted on ``args.data``, its
    thresholds picked on ``args.val`` or a held-out share of ``args.data``."""
    from core.inference.stacked_scorer import stack_and_calibrate, stacked_config, stacking_problem

    train = load_data(args.data, args, args.max_rows)
    val = load_data(args.val, args) if args.val else None
    names = Path(args.data).name, Path(args.val).name if args.val else ""
    problem = stacking_problem(train, names[0], val, names[1])
    if problem:
        raise CliError(problem)
    with TqdmCounter("encoding the fit pairs", unit="pair") as bar:
        scorer, calibrated, fit = stack_and_calibrate(encoder, train, names[0], val, names[1], progress=bar)
    return scorer, calibrated, stacked_config(scorer, fit, parent_name)
