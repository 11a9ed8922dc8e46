"""What the commands that only score pairs share (evaluate, score, predict, calibrate): loading a scorer, the
TF-IDF baseline included (``--model tfidf``, ``core.inference.tfidf_scorer``), and calibrating one on a labelled
file with a progress bar."""
from __future__ import annotations

from pathlib import Path

from core.cli.common import CliError, TqdmCounter, load_backend, load_data


def load_scorer(args):
    """(scorer, config) of a command that only scores pairs (``model.score_pairs``): the TF-IDF baseline
    for ``--model tfidf`` or a calibrated TF-IDF folder, a stacked scorer's folder (``core.inference.stacked_scorer``),
    else ``load_backend``'s model, a cross-encoder included."""
    from core.inference.stacked_scorer import is_stacked
    from core.inference.tfidf_scorer import is_tfidf, load_tfidf
    from core.saving import ModelLoadError

    if is_stacked(args.model):
        return _load_stacked(args)
    if not is_tfidf(args.model):
        return load_backend(args, vectors=False)
    if getattr(args, "backend", "torch") == "onnx":
        raise CliError(f"--model {args.model} is the TF-IDF baseline, which has no ONNX graph; drop --backend onnx")
    try:
        return load_tfidf(args.model)
    except ModelLoadError as error:
        raise CliError(str(error)) from None


def _load_stacked(args):
    from core.device import DeviceError, resolve_device
    from core.inference.stacked_scorer import load_stacked
    from core.saving import ModelLoadError

    if getattr(args, "backend", "torch") == "onnx":
        raise CliError(f"--model {args.model} is a stacked scorer, which has no ONNX graph; drop --backend onnx")
    try:
        return load_stacked(args.model, str(resolve_device(args.device)))
    except (DeviceError, ModelLoadError) as error:
        raise CliError(str(error)) from None


def fitted_for_file(model, source: Path, columns: dict[str, str] | None = None):
    """``model``, or for the plain TF-IDF baseline the baseline fitted on the questions of the file ``source`` it
    is about to score (``core.inference.tfidf_scorer.fit_on_file``: a first pass over the file)."""
    from core.inference.tfidf_scorer import TfidfScorer, fit_on_file

    if isinstance(model, TfidfScorer) and not model.fitted:
        return fit_on_file(source, columns)
    return model


def calibrate_on_file(model, path: str, columns: dict[str, str] | None = None, max_rows: int | None = None,
                      label_map: dict[str, int] | None = None):
    """(scorer, ``core.inference.calibration.FileCalibration``) of ``model`` calibrated on the labelled pairs file
    ``path`` (read as ``load_data`` reads it), a progress bar on stderr while it encodes; a file that cannot
    calibrate is one ``CliError`` before any encoding. The scorer is ``model``, or the TF-IDF baseline fitted on
    the file's questions (``core.inference.calibration.calibrate_scorer``)."""
    from core.inference.calibration import calibrate_scorer, calibration_problem

    pairs = load_data(path, max_rows, columns, label_map=label_map)
    problem = calibration_problem(pairs["is_duplicate"].to_numpy(), Path(path).name)
    if problem:
        raise CliError(problem)
    bar = TqdmCounter("calibrating", unit="pair")
    try:
        return calibrate_scorer(model, pairs, Path(path).name, progress=bar)
    finally:
        bar.close()


def stack_on_files(encoder, args, parent_name: str):
    """(scorer, ``FileCalibration``, config base) of a stacked scorer over ``encoder`` fitted on ``args.data``, its
    thresholds picked on ``args.val`` or a held-out share of ``args.data``
    (``core.inference.stacked_scorer.stack_and_calibrate``); pairs that cannot do it are one ``CliError`` before
    any encoding."""
    from core.inference.stacked_scorer import stack_and_calibrate, stacked_config, stacking_problem

    train = load_data(args.data, args.max_rows, args.columns, label_map=args.label_map)
    val = load_data(args.val, None, args.columns, label_map=args.label_map) if args.val else None
    names = Path(args.data).name, Path(args.val).name if args.val else ""
    problem = stacking_problem(train, names[0], val, names[1])
    if problem:
        raise CliError(problem)
    bar = TqdmCounter("encoding the fit pairs", unit="pair")
    try:
        scorer, calibrated, fit = stack_and_calibrate(encoder, train, names[0], val, names[1], progress=bar)
    finally:
        bar.close()
    return scorer, calibrated, stacked_config(scorer, fit, parent_name)
