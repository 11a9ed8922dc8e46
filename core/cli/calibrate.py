"""``python -m core calibrate``: a calibrated copy of any model (``core.saving.model_folder``: a config.json pointing at
the model's weights, never copying them, with the thresholds picked on ``--data``), loaded like any model; with
``--stacked``, a stacked scorer (``core.inference.stacked_scorer``) written the same way."""
from __future__ import annotations

import os
from pathlib import Path

from core.cli.common import CliError, add_columns_option, add_output_options, model_command, print_json
from core.cli.scorers import calibrate_on_file, load_scorer, stack_on_files


def cmd_calibrate(args) -> int:
    from core.inference.stacked_scorer import StackedScorer, is_stacked
    from core.inference.tfidf_scorer import TfidfScorer, is_tfidf
    from core.saving import claim_output
    from core.saving.model_folder import save_calibrated

    parent = _parent(args.model)
    for folder in (args.model, parent["source"]):  # a copy in the folder of the weights it points at: itself
        if Path(folder).is_dir() and os.path.realpath(args.out) == os.path.realpath(folder):
            raise CliError(f"--out {args.out} is the model being calibrated; choose a new folder for the copy")
    if args.val and not args.stacked:
        raise CliError("--val picks a stacked scorer's thresholds; add --stacked (plain calibrate uses --data)")
    if args.stacked and (is_tfidf(args.model) or is_stacked(args.model)):
        raise CliError(f"--stacked needs an encoder's cosine; --model {args.model} has none (TF-IDF is already "
                       "one of the stacked features; stack the encoder a stacked scorer stands over)")
    with claim_output(args.out, overwrite=args.overwrite) as claim:  # before any work: a refused --out costs nothing
        model, config = load_scorer(args)  # a calibrated --model: its parent is checked here
        if args.stacked:
            scorer, calibrated, config = stack_on_files(model, args, parent["name"])
        else:
            scorer, calibrated = calibrate_on_file(model, args.data, args, args.max_rows)
        fit = scorer if isinstance(scorer, TfidfScorer) else scorer.tfidf if isinstance(scorer, StackedScorer) else None
        written = save_calibrated(claim.target, config, parent, calibrated, fit.to_dict() if fit is not None else None)
    shown = {"folder": str(claim.target), "calibrated_from": written["calibrated_from"],
             "thresholds": written["thresholds"], "calibration": written["calibration"]}
    if args.stacked:
        shown["stacked"] = written["stacked"]
    print_json(shown, indent=2)
    return 0


def _parent(model: str) -> dict:
    """``calibrated_from`` of a copy of ``model``; a copy of a calibrated copy points at the same original."""
    from core.model_names import TFIDF, ZERO_SHOT, ZERO_SHOT_LABEL
    from core.models.registry import parent_record
    from core.saving import read_config
    from core.saving.model_folder import CALIBRATED_FROM, is_calibrated

    if model in (ZERO_SHOT, TFIDF):
        return parent_record(model, ZERO_SHOT_LABEL if model == ZERO_SHOT else "TF-IDF cosine")
    config = read_config(model)
    if is_calibrated(config):
        return dict(config[CALIBRATED_FROM])
    return parent_record(model, str(config.get("name") or Path(model).name))


def add_parsers(sub) -> None:
    calibrate = model_command(sub, "calibrate", "a copy of a model with thresholds calibrated on your labelled pairs",
                              cmd_calibrate, scores_pairs=True)
    calibrate.add_argument("--data", required=True, help="labelled pairs (both classes, at least 20 pairs)")
    add_columns_option(calibrate, max_rows=True)
    add_output_options(calibrate, help="the copy's folder: new or empty, or an earlier model with --overwrite",
                       overwrite="replace the model saved in --out")
    calibrate.add_argument("--stacked", action="store_true",
                           help="a stacked scorer instead: a logistic regression on the model's cosine, TF-IDF cosine, "
                                "word overlap and length ratio, fitted on --data; it scores pairs, with no vectors")
    calibrate.add_argument("--val", default=None, metavar="FILE",
                           help="with --stacked: the pairs its thresholds are picked on (default: a seeded 20%% of "
                                "--data kept from the fit)")
