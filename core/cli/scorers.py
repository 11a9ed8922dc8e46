"""What the commands that only score pairs share (evaluate, score, predict, calibrate): loading a scorer, the
TF-IDF baseline included (``--model tfidf``, ``core.inference.tfidf_scorer``), and calibrating one on a labelled
file with a progress bar."""
from __future__ import annotations

from pathlib import Path

from core.cli.common import CliError, TqdmCounter, load_backend, load_data


def load_scorer(args):
    """(scorer, config) of a command that only scores pairs (``model.score_pairs``): the TF-IDF baseline
    for ``--model tfidf`` or a calibrated TF-IDF folder, else ``load_backend``'s model."""
    from core.inference.tfidf_scorer import is_tfidf, load_tfidf
    from core.saving import ModelLoadError

    if not is_tfidf(args.model):
        return load_backend(args)
    if getattr(args, "backend", "torch") == "onnx":
        raise CliError(f"--model {args.model} is the TF-IDF baseline, which has no ONNX graph; drop --backend onnx")
    try:
        return load_tfidf(args.model)
    except ModelLoadError as error:
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
