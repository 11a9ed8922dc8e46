"""``python -m core train``: options (over a preset) -> a RunSpec, a tqdm progress bar, and Ctrl-C that cancels
after the current step and keeps the best model so far. Training is imported only by the functions that train:
the other commands build the same parser and must not load the trainer."""
from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from pathlib import Path

from core.cli.common import (
    CliError, TqdmCounter, add_columns_option, add_output_options, help_formatter, load_corpus, load_data,
    minutes, print_json,
)


class TqdmProgress:
    """Trainer callback drawing one tqdm bar over all steps, with validation metrics per epoch."""

    def __init__(self, stream=None):
        self.stream, self.bar, self.stage = stream or sys.stderr, None, None  # the stderr of now, not of the import

    def on_train_start(self, trainer):
        from tqdm import tqdm

        self.bar = tqdm(total=trainer.total_steps, unit="step", file=self.stream, dynamic_ncols=True, mininterval=0.5)

    def on_batch_end(self, trainer):  # drawn by update() at most every mininterval: a short GPU step cannot wait
        self.bar.set_postfix(epoch=trainer.epoch, loss=f"{trainer.loss:.4f}", pairs_s=f"{trainer.pairs_per_second:.0f}",
                             refresh=False)
        self.bar.update(1)

    def on_validation_progress(self, trainer):
        done, total = trainer.validation_progress
        self.bar.set_postfix_str(f"scoring validation {done:,}/{total:,}", refresh=done >= total)

    def on_epoch_end(self, trainer):
        m = trainer.epoch_results[-1].metrics
        if m:
            self.bar.write(f"epoch {trainer.epoch}: val roc_auc={m['roc_auc']:.4f} accuracy={m['accuracy']:.4f} "
                           f"f1={m['f1']:.4f}", file=self.stream)

    def on_train_end(self, trainer):
        if self.bar is not None:
            self.bar.close()

    def on_stage_progress(self, stage: str, done: int, total: int):  # scoring validation, zero-shot, the test
        if self.stage is None or self.stage.description != stage:
            self.stage = TqdmCounter(stage, unit="pair")
        self.stage(done, total)


AUTO_OVERHEAD_MINUTES = 2.5  # of a budget: the cheap candidates, then scoring and saving the chosen model

# The options that make a recipe: with none of them and no --preset, a run takes the auto recipe. A budget
# (--max-minutes, --max-steps) is not one: the auto recipe plans within it.
RECIPE_OPTIONS = ("model", "loss", "form", "margin", "scale", "weight", "epochs", "batch_size", "lr", "patience",
                  "max_length", "min_freq", "max_vocab", "model_options", "init_model",
                  "base_model", "hard_negatives", "mine_negatives", "implied_pairs")


def wants_auto_recipe(args) -> bool:
    """``--preset auto``, or no preset and no recipe option at all."""
    from core.training.presets import AUTO_PRESET

    return args.preset == AUTO_PRESET or (args.preset is None and not any(getattr(args, name, None) for name in RECIPE_OPTIONS))


def spec_from_args(args, data_options: dict | None = None):
    """The RunSpec of ``train``: the options given, over a preset if one is named, over ``data_options`` (the auto
    recipe's) if given; with ``--init-model`` and neither ``--model`` nor ``--preset``, that folder's family."""
    from core.training.presets import AUTO_PRESET
    from core.training.specs import OPTION_NAMES, SpecError, init_model_family, spec_from_options

    if wants_auto_recipe(args) and args.preset is None:
        args.preset = AUTO_PRESET
    if args.preset and (args.model or args.loss):
        raise CliError(f"--preset {args.preset} already sets the model and the loss; drop --model/--loss")
    try:
        model_options = json.loads(args.model_options) if args.model_options else None
    except (json.JSONDecodeError, RecursionError) as error:
        raise CliError(f"--model-options is not valid JSON: {error}") from None
    try:
        family = init_model_family(args.init_model) if args.init_model else None  # another --model: the spec says so
    except SpecError as error:
        raise CliError(f"--init-model {error.problem}") from None
    options = {name: getattr(args, name) for name in OPTION_NAMES if hasattr(args, name)}
    # A preset says its own model; a base folder is MiniLM's start.
    options["model"] = args.model or (None if args.preset else family or ("minilm" if args.base_model else None))
    options.update(model_options=model_options, split_by="question" if args.split_by_question else args.split_by,
                   data_name=Path(args.data).name, val_data_name=args.val and Path(args.val).name,
                   test_data_name=args.test and Path(args.test).name)
    options = {**(data_options or {}), **{name: value for name, value in options.items() if value is not None}}
    try:
        return spec_from_options(args.preset, **options)
    except SpecError as error:
        raise CliError(f"--{error.option.replace('_', '-')} {error.problem}") from None


def cmd_train(args) -> int:
    from core.device import resolve_device

    device = resolve_device(args.device)
    spec = spec_from_args(args)
    from core.training.distributed import init_from_env

    context = init_from_env(args.device)  # a no-op unless started by torchrun; the output, rank 0's, claimed first
    output = _claim_output(args, spec) if context.is_main else None
    with output or contextlib.nullcontext():
        pairs = load_data(args.data, args, args.max_rows, args.group_column)
        held_out = {kind: path and load_data(path, args) for kind, path in (("val", args.val), ("test", args.test))}
        held_out = _held_out_by_content(args, pairs, held_out)
        from core.data import dataset_summary, training_problems
        from core.notices import notice

        problems = training_problems(dataset_summary(pairs), spec.val_fraction,
                                     in_batch_loss=spec.loss.batch_kind == "duplicates")
        for problem in sorted(problems, key=lambda problem: not problem.fatal):  # a fatal one first, alone
            if problem.fatal:
                raise CliError(f"{Path(args.data).name}: {problem.message}")
            notice(f"{Path(args.data).name}: {problem.message}")
        from core.training.presets import AUGMENTED_PRESET, AUTO_PRESET

        recipe = args.preset if args.preset in (AUTO_PRESET, AUGMENTED_PRESET) else None
        questions = _unlabelled_questions(args, recipe, context.enabled)
        if recipe:
            spec = _recipe_spec(args, pairs, device.type, context.is_main)
        if context.is_main and not args.preset:
            _offer_gpu_preset(len(pairs), device.type == "cuda")
        # The auto recipe chooses among candidates (core.training.auto_choice) in one process; torchrun trains.
        return _run_training(args, spec, pairs, context, output, held_out,
                             None if recipe == AUTO_PRESET and context.enabled else recipe, questions)


def _unlabelled_questions(args, recipe: str | None, distributed: bool) -> dict:
    """For ``--preset augmented``: the questions of ``--unlabelled-questions`` and the file's name, if given."""
    from core.training.presets import AUGMENTED_PRESET

    if recipe != AUGMENTED_PRESET:
        if args.unlabelled_questions:
            raise CliError(f"--unlabelled-questions is the augmented recipe's: add --preset {AUGMENTED_PRESET}")
        return {}
    if distributed:
        raise CliError("the augmented recipe trains its teacher and its bi-encoder in one process: run it without "
                       "torchrun")
    if not args.unlabelled_questions:
        return {}
    # read as any corpus: a file that cannot be is one line at the CLI's boundary
    return {"questions": load_corpus(args.unlabelled_questions),
            "questions_name": Path(args.unlabelled_questions).name}


def _held_out_by_content(args, pairs, held_out: dict) -> dict:
    """The validation and test pairs less those the run learns from (or, for the test, that pick its thresholds),
    matched by content in either order: a file of nothing else (a copy of --data, or --val again) is one
    ``CliError``; the others are left out, and said."""
    import pandas as pd

    from core.data import seen_pair_mask
    from core.notices import notice

    seen, where = pairs, "the training file"
    for kind, flag, path in (("val", "--val", args.val), ("test", "--test", args.test)):
        frame = held_out[kind]
        if frame is None:
            continue
        found = seen_pair_mask(seen, frame)
        if found.all():
            raise CliError(f"{flag} {Path(path).name}: all its {len(frame):,} pairs are in {where} (by content, in "
                           f"either order), so its figures would be scored on pairs the run learns from; give held-out "
                           f"pairs")
        if found.any():
            notice(f"{flag} {Path(path).name}: {int(found.sum()):,} of its {len(frame):,} pairs are also in {where} (by "
                   f"content, in either order); they are left out of its figures")
            held_out[kind] = frame[~found].reset_index(drop=True)
        seen, where = pd.concat([seen, held_out[kind]], ignore_index=True), "the training or validation file"
    return held_out


def _recipe_spec(args, pairs, device: str, is_main: bool):
    """The auto or augmented recipe's spec, its settings read off ``pairs`` (auto: the GPU preset on a CUDA GPU with
    data enough for it), every option given still winning; for auto, one ``note:`` line says what was picked and
    why."""
    from core.training.presets import AUTO_PRESET, auto_options, suggested_preset

    auto = args.preset == AUTO_PRESET
    gpu_preset = auto and suggested_preset(len(pairs), device == "cuda")
    if gpu_preset:
        args.preset = gpu_preset
        reason = f"auto recipe: a CUDA GPU and {len(pairs):,} pairs: the {gpu_preset} preset"
        spec = spec_from_args(args)
    else:
        # auto's fine-tune fills the budget left once the cheap candidates and the finishing work are done.
        budget = max(1.0, args.budget_minutes - AUTO_OVERHEAD_MINUTES) if auto and args.budget_minutes else None
        recipe = auto_options(pairs, device, has_val_file=bool(args.val), seed=args.seed or 0,
                              max_minutes=args.max_minutes or budget)
        reason, spec = recipe.reason, spec_from_args(args, recipe.options)
    if auto and is_main:
        print(f"note: {reason}", file=sys.stderr)
    return spec


def _offer_gpu_preset(n_pairs: int, cuda: bool) -> None:
    """One ``note:`` line naming the GPU recipe when a run with no preset trains on a CUDA GPU with data enough."""
    from core.training.presets import suggested_preset

    name = suggested_preset(n_pairs, cuda)
    if name:
        print(f"note: a CUDA GPU is here; --preset {name} is the recipe measured for one (batches of 256, bf16, "
              "a compiled step)", file=sys.stderr)


def _claim_output(args, spec):
    """``--out``, else a new run folder in ``--runs``: one ``CliError`` when that, or its nearest existing parent, is
    not a folder."""
    from core.saving import claim_new_run, claim_output
    from core.saving.output import not_a_folder

    if args.out:
        return claim_output(args.out, overwrite=args.overwrite)
    runs = Path(args.runs).expanduser()
    blocked = not_a_folder(runs)
    if blocked:
        where = f"--runs {args.runs}" + ("" if blocked[0] == runs else f": {blocked[0]}")
        raise CliError(f"{where} is {blocked[1]}, not a folder; --runs names the folder that holds the models "
                       "(or give --out)")
    return claim_new_run(args.runs, spec.model, spec.loss.name)


def _run_training(args, spec, pairs, context, output, held_out: dict, preset: str | None, questions: dict) -> int:
    from core.status import FAILED
    from core.training.distillation import AUGMENTED_KEY
    from core.training.jobs import run_recipe
    from core.training.trainer import TrainingError

    stop = threading.Event()

    def first_interrupt_cancels(signum, frame):  # a second Ctrl-C aborts at once
        print("\ncancelling after this step (Ctrl-C again to abort) ...", file=sys.stderr)
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, first_interrupt_cancels)
    try:
        # One progress bar and one saved model: both belong to rank 0.
        callbacks = [TqdmProgress()] if context.is_main else []
        result, chosen = run_recipe(spec, pairs, preset, None, output, held_out["val"], held_out["test"], callbacks,
                                    stop, args.budget_minutes, **questions, save=context.is_main)
    except KeyboardInterrupt:  # a second Ctrl-C during saving lands here
        raise CliError("interrupted") from None
    except (TrainingError, ValueError, TypeError) as error:
        raise CliError(str(error)) from None
    finally:
        signal.signal(signal.SIGINT, previous)
    if chosen is not None:  # each candidate as the Train page lists them, then the one chosen
        for candidate, row in zip(chosen.candidates, chosen.rows()):
            auc, against, note = row["validation ROC AUC"], row["vs zero-shot MiniLM"], row["note"]
            figure = "not measured" if auc is None else f"validation ROC AUC {auc:.3f}"
            print(f"candidate: {candidate.name}: {figure}" + (f", {against} against zero-shot" if against else "")
                  + f", {row['seconds']} s"
                  + (f"; {note}" if note else ""), file=sys.stderr)
        print(f"chosen: {chosen.chosen.name}, saved in {chosen.folder}", file=sys.stderr)
    outcome = result.outcome
    if not context.is_main:
        return 0 if outcome.status != FAILED else 1
    print(f"{outcome.status}: {outcome.message}", file=sys.stderr)
    if result.note:
        print(f"note: {result.note}", file=sys.stderr)
    print_json({"status": outcome.status, "folder": str(result.folder) if result.folder else None,
                "thresholds": result.thresholds, "validation": result.validation, "test": result.test,
                "quality": result.judged().as_dict(),  # worse than chance or a baseline (the pipeline warned)
                "seconds": round(outcome.seconds, 1), "pairs_per_second": round(outcome.pairs_per_second, 1),
                **{key: (result.metadata or {})[key] for key in (AUGMENTED_KEY, "mined_negatives")
                   if key in (result.metadata or {})}, **(chosen.as_dict() if chosen else {})}, indent=2)
    return 0 if outcome.status != FAILED else 1


def add_parsers(sub) -> None:
    from core.data import SPLIT_BY
    from core.device import PRECISIONS
    from core.models import MODEL_NAMES
    from core.training.objectives import CONTRASTIVE_FORMS, LOSS_NAMES
    from core.training.presets import PRESETS

    train = sub.add_parser("train", help="train a model on a pairs file and save it", formatter_class=help_formatter)
    option = train.add_argument
    option("--data", required=True, help="pairs file (CSV/TSV/Parquet, optionally .gz)")
    add_columns_option(train, max_rows=True)
    option("--preset", choices=list(PRESETS), default=None,
           help="a named recipe from docs/BENCHMARKS.md; auto fits epochs, batches, learning rate, validation and "
                "max_length to the data (default: auto when no model, loss or training option is given)")
    option("--model", choices=MODEL_NAMES, default=None, help="model family (default: the --init-model's, else lstm)")
    option("--init-model", default=None, metavar="FOLDER",
           help="start from this saved model (minilm: the pretrained MiniLM), keeping its architecture and tokenizer, "
                "so --model-options, --max-length, --min-freq and --max-vocab do not apply")
    option("--base-model", default=None, metavar="FOLDER",
           help="fine-tune this local Hugging Face BERT folder (config.json, model.safetensors, vocab.txt; no custom "
                "code) instead of the bundled all-MiniLM-L6-v2; implies --model minilm")
    option("--loss", choices=LOSS_NAMES, default=None, help="training loss (default: triplet)")
    option("--epochs", type=int, default=None, help="epochs (default depends on the model)")
    option("--batch-size", type=int, default=None, help="pairs per step (default depends on the model)")
    option("--lr", type=float, default=None, help="peak learning rate (default depends on the model)")
    option("--margin", type=float, default=None,
           help="loss margin (default: 0.25 for triplet on cosines, 1.0 for contrastive and multitask on distances)")
    option("--form", choices=CONTRASTIVE_FORMS, default=None, help="contrastive loss form (default: squared_hinge)")
    option("--scale", type=float, default=None, help="softmax, multitask: cosine scale; cosent: lambda (default: 20.0)")
    option("--weight", type=float, default=None, help="multitask: weight of the in-batch softmax term (default: 1.0)")
    option("--max-length", type=int, default=None, help="tokens per question (default: 64)")
    option("--min-freq", type=int, default=None, help="LSTM: words seen fewer times become <unk> (default: 1)")
    option("--max-vocab", type=int, default=None, help="LSTM vocabulary size (default: 30000)")
    option("--seed", type=int, default=None, help="random seed of split, weights, batches (default: 0)")
    option("--max-steps", type=int, default=None, help="stop after this many steps (default: no cap)")
    option("--budget-minutes", type=minutes, default=None,
           help="the auto recipe's whole time: zero-shot MiniLM and a stacked scorer, then a fine-tune in the time "
                "left; the best one beyond resampling is saved (default: 10); the augmented recipe's, its teacher, "
                "silver labels and bi-encoder")
    option("--unlabelled-questions", default=None, metavar="FILE",
           help="--preset augmented: the questions its silver pairs are drawn from, one per line or a pairs file "
                "(default: the training pairs' questions)")
    option("--max-minutes", type=float, default=None,
           help="time budget: stop after this many minutes of training, with a final validation (default: no cap)")
    option("--device", default="auto", choices=("auto", "cpu", "cuda"), help="where to train")
    option("--precision", choices=PRECISIONS, default=None,
           help="arithmetic of the training steps: auto = bf16 on a CUDA GPU that has it, fp16 with loss scaling on "
                "other GPUs, fp32 on the CPU (default: the preset's, else auto)")
    option("--compile", action=argparse.BooleanOptionalAction, default=None,
           help="torch.compile the training step (default: the preset's, else off)")
    option("--patience", type=int, default=None, help="early stopping patience in epochs, 0 = off")
    option("--val", default=None, metavar="FILE", help="validation pairs, read like --data (default: held out of it)")
    option("--test", default=None, metavar="FILE", help="test pairs, scored once after training with 95 %% intervals")
    option("--split-by", choices=SPLIT_BY, default="auto",
           help="how validation pairs are held out of --data: question keeps every group of pairs linked by a shared "
                "question on one side; auto = question when a question occurs in more than one pair")
    option("--split-by-question", action="store_true", help="the same as --split-by question")
    option("--group-column", default=None, metavar="NAME",
           help="a column of --data (a URL, a topic) whose groups are each held on one side of the split, as pairs "
                "sharing a question are; the validation intervals resample them whole")
    option("--keep-unvalidated", action="store_true", default=None,
           help="save a run cancelled before its first validation")
    option("--hard-negatives", action="store_true", default=None,
           help="triplet/softmax: also use labelled non-duplicates of batch questions as negatives")
    option("--mine-negatives", action="store_true", default=None,
           help="triplet/softmax: also the nearest non-duplicates of each duplicate pair's question under the starting "
                "model, mined once from the training questions (implies --hard-negatives)")
    option("--implied-pairs", action="store_true", default=None,
           help="also train on the pairs the labels imply (duplicates of duplicates, and their non-duplicates)")
    option("--model-options", default=None, help='JSON of model config fields, e.g. \'{"hidden_size": 256}\'')
    add_output_options(train, required=False, help="output folder: new or empty, or a saved model with --overwrite "
                       "(default: a new folder in --runs)", overwrite="let --out replace the model there (a cancelled "
                       "or failed run that is not better keeps it)")
    option("--runs", default="runs", help="models folder used when --out is not given")
    train.set_defaults(func=cmd_train)
