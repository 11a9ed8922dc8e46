"""``python -m core``: train, evaluate and predict from the command line.

Bad input never shows a traceback: every expected failure prints one ``error: ...`` line and exits
with status 2.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import signal
import sys
import threading
from pathlib import Path

EXIT_USAGE = 2


class CliError(Exception):
    """An expected failure: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage block
        raise CliError(f"{self.prog}: {message}")


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows "(default: X)" except where there is no default value, whose help says what applies."""

    def _get_help_string(self, action):
        if action.default is None or isinstance(action.default, bool):
            return action.help
        return super()._get_help_string(action)


def _formatter(prog):
    return _DefaultsFormatter(prog, max_help_position=32)


def _model_command(sub, name: str, help: str, func) -> argparse.ArgumentParser:
    """A subcommand that runs a saved (or the zero-shot) model: --model and --device, then its own options."""
    command = sub.add_parser(name, help=help, formatter_class=_formatter)
    command.add_argument("--model", required=True, help="a saved model folder, or 'minilm' for zero-shot MiniLM")
    command.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"), help="where to run")
    command.set_defaults(func=func)
    return command


def _json_safe(value):
    """NaN and infinities become null: what the CLI prints is always valid JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    if hasattr(value, "item"):  # numpy scalars
        return _json_safe(value.item())
    return value


def _print_json(value, indent: int | None = None) -> None:
    print(json.dumps(_json_safe(value), indent=indent, ensure_ascii=False, allow_nan=False))


def _count(text: str) -> int:
    """argparse type of a count: a whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _threshold(text: str) -> float:
    """argparse type of a cosine threshold: a finite number in [-1, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not (math.isfinite(value) and -1.0 <= value <= 1.0):
        raise argparse.ArgumentTypeError(f"must be a cosine between -1 and 1, got {text}")
    return value


# ---- progress ----------------------------------------------------------------------------------
class TqdmProgress:
    """Trainer callback drawing one tqdm bar over all steps, with validation metrics per epoch."""

    def __init__(self, stream=sys.stderr):
        self.stream, self.bar = stream, None

    def on_train_start(self, trainer):
        from tqdm import tqdm

        self.bar = tqdm(total=trainer.total_steps, unit="step", file=self.stream, dynamic_ncols=True, mininterval=0.5)

    def on_batch_end(self, trainer):
        self.bar.update(1)
        self.bar.set_postfix(epoch=trainer.epoch, loss=f"{trainer.loss:.4f}", pairs_s=f"{trainer.pairs_per_second:.0f}")

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


# ---- commands ----------------------------------------------------------------------------------
def _load_data(path: str, max_rows: int | None = None):
    from core.data import DataError, load_pairs

    if not Path(path).is_file():
        raise CliError(f"no data file at {path}")
    try:
        pairs, report = load_pairs(path, max_rows=max_rows)
    except DataError as error:
        raise CliError(f"{path}: {error}") from None
    if report.rows_kept < report.rows_read:
        print(f"data: {report.summary()}", file=sys.stderr)
    for warning in report.warnings:
        print(f"data: warning: {warning}", file=sys.stderr)
    return pairs


def _load_model(name: str, device: str):
    from core.device import DeviceError, resolve_device
    from core.models import load_model
    from core.saving import ModelLoadError

    try:
        return load_model(name, device=str(resolve_device(device)))
    except (DeviceError, ModelLoadError) as error:
        raise CliError(str(error)) from None


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def _train_spec(args):
    """The RunSpec of ``train``: options given on the command line, over a preset if one is named."""
    from core.training.specs import SpecError, spec_from_options

    if args.preset and (args.model or args.loss):
        raise CliError(f"--preset {args.preset} already sets the model and the loss; drop --model/--loss")
    try:
        model_options = json.loads(args.model_options) if args.model_options else None
    except (json.JSONDecodeError, RecursionError) as error:
        raise CliError(f"--model-options is not valid JSON: {error}") from None
    options = {name: getattr(args, name) for name in (
        "model", "loss", "form", "margin", "scale", "weight", "epochs", "batch_size", "lr", "seed", "patience",
        "max_steps", "max_minutes", "device", "max_length", "min_freq", "max_vocab")}
    switches = {name: True for name in ("split_by_question", "hard_negatives", "implied_pairs", "keep_unvalidated")
                if getattr(args, name)}
    try:
        return spec_from_options(args.preset, **options, **switches, model_options=model_options,
                                 data_name=Path(args.data).name)
    except SpecError as error:
        raise CliError(f"{_flag(error.option)} {error.problem}") from None


def cmd_train(args) -> int:
    from core.device import DeviceError, resolve_device

    try:
        resolve_device(args.device)
    except DeviceError as error:
        raise CliError(str(error)) from None
    spec = _train_spec(args)
    from core.training.distributed import init_from_env

    context = init_from_env(args.device)  # a no-op unless started by torchrun
    # The output is claimed (and found writable) before the data is even read: one saved model, rank 0's.
    output = _claim_output(args, spec) if context.is_main else None
    with output or contextlib.nullcontext():
        pairs = _load_data(args.data, args.max_rows)
        return _run_training(args, spec, pairs, context, output)


def _claim_output(args, spec):
    from core.saving import OutputError, claim_new_run, claim_output

    try:
        if args.out:
            return claim_output(args.out, overwrite=args.overwrite)
        return claim_new_run(args.runs, spec.model, spec.loss.name)
    except OutputError as error:
        hint = "; add --overwrite to replace it" if error.reason == "model_exists" else ""
        problem = error.problem.replace("; replacing it needs overwrite", "")
        raise CliError(f"--out {error.path}: {problem}{hint}" if args.out else str(error)) from None


def _run_training(args, spec, pairs, context, output) -> int:
    from core.training.pipeline import train_run
    from core.status import FAILED
    from core.training.trainer import TrainingError

    stop = threading.Event()

    def first_interrupt_cancels(signum, frame):
        # The first Ctrl-C stops training after the current step and keeps the best model so far;
        # a second one aborts at once.
        print("\ncancelling after this step (Ctrl-C again to abort) ...", file=sys.stderr)
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, first_interrupt_cancels)
    try:
        # One progress bar and one saved model: both belong to rank 0.
        result = train_run(spec, pairs, callbacks=[TqdmProgress()] if context.is_main else [], stop_event=stop,
                           save=context.is_main, output=output)
    except KeyboardInterrupt:  # a second Ctrl-C during saving lands here
        raise CliError("interrupted") from None
    except (TrainingError, ValueError, TypeError) as error:
        raise CliError(str(error)) from None
    finally:
        signal.signal(signal.SIGINT, previous)
    outcome = result.outcome
    if not context.is_main:
        return 0 if outcome.status != FAILED else 1
    print(f"{outcome.status}: {outcome.message}", file=sys.stderr)
    if result.note:
        print(f"note: {result.note}", file=sys.stderr)
    _print_json({"status": outcome.status, "folder": str(result.folder) if result.folder else None,
                 "thresholds": result.thresholds, "validation": result.validation,
                 "seconds": round(outcome.seconds, 1), "pairs_per_second": round(outcome.pairs_per_second, 1)},
                indent=2)
    return 0 if outcome.status != FAILED else 1


def cmd_evaluate(args) -> int:
    from core.inference.evaluation import evaluate_model

    model, config = _load_model(args.model, args.device)
    pairs = _load_data(args.data, args.max_rows)
    threshold = args.threshold if args.threshold is not None else config.get("thresholds", {}).get("accuracy")
    metrics = evaluate_model(model, pairs, threshold=threshold)
    keys = ("roc_auc", "average_precision", "accuracy", "precision", "recall", "f1", "threshold", "n",
            "tp", "fp", "tn", "fn")
    _print_json({k: metrics[k] for k in keys})
    return 0


def cmd_predict(args) -> int:
    for name in ("question1", "question2"):
        if not getattr(args, name).strip():
            raise CliError(f"{name} is empty: type the question to compare")
    from core.cli.export import load_backend

    model, config = load_backend(args, _load_model)
    threshold = args.threshold if args.threshold is not None else config.get("thresholds", {}).get("accuracy", 0.5)
    score = float(model.score_pairs([args.question1], [args.question2])[0])
    verdict = "DUPLICATE" if score > threshold else "NOT DUPLICATE"
    _print_json({"similarity": round(score, 6), "threshold": threshold, "verdict": verdict})
    return 0


class _TqdmCounter:
    """progress(done, total) -> one tqdm bar on stderr (index building, embedding)."""

    def __init__(self, description: str, unit: str = "q"):
        self.description, self.unit, self.bar = description, unit, None

    def __call__(self, done: int, total: int | None) -> None:
        from tqdm import tqdm

        if self.bar is None:
            self.bar = tqdm(total=total, desc=self.description, unit=self.unit, file=sys.stderr, mininterval=0.5)
        self.bar.update(done - self.bar.n)
        if total is not None and done >= total:
            self.bar.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _corpus(path: str) -> list[str]:
    from core.data import corpus_questions

    return corpus_questions(_load_data(path))


def cmd_search(args) -> int:
    from core.models import ZERO_SHOT
    from core.inference.search import load_or_build

    from core.cli.export import load_backend

    model, _ = load_backend(args, _load_model)
    texts = _corpus(args.corpus)
    # Indexes are cached next to the model; zero-shot MiniLM's in the models folder's hidden cache.
    cache = Path(args.runs) / ".cache" / "minilm" if args.model == ZERO_SHOT else Path(args.model)
    cache = Path(model.folder) if args.backend == "onnx" else cache  # the graph's folder: its index goes with it
    index = load_or_build(model, texts, cache, progress=_TqdmCounter("indexing"))
    for rank, (text, score) in enumerate(index.search(args.question, args.k)[0], start=1):
        _print_json({"rank": rank, "score": round(score, 6), "question": text})
    return 0


def cmd_embed(args) -> int:
    from core.inference.embedding import embed_to_file

    from core.cli.export import load_backend

    model, _ = load_backend(args, _load_model)
    texts = _corpus(args.data)
    out = embed_to_file(model, texts, args.out, progress=_TqdmCounter("embedding"))
    _print_json({"vectors": str(out), "questions": str(out.with_suffix(".questions.jsonl")),
                 "n": len(texts), "dim": model.embedding_dim})
    return 0


# ---- parser ------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    from core.models import MODEL_NAMES
    from core.training.objectives import CONTRASTIVE_FORMS, LOSS_NAMES
    from core.training.presets import preset_names

    parser = _Parser(prog="python -m core", formatter_class=_formatter,
                     description="Siamese networks for duplicate questions: train, evaluate, predict.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    train = sub.add_parser("train", help="train a model on a pairs file and save it", formatter_class=_formatter)
    train.add_argument("--data", required=True, help="CSV/TSV (optionally .gz) with question1, question2, is_duplicate")
    train.add_argument("--preset", choices=preset_names(), default=None,
                       help="a named recipe from docs/BENCHMARKS.md (sets model, loss and settings)")
    train.add_argument("--model", choices=MODEL_NAMES, default=None, help="model family (default: lstm)")
    train.add_argument("--loss", choices=LOSS_NAMES, default=None, help="training loss (default: triplet)")
    train.add_argument("--epochs", type=int, default=None, help="epochs (default depends on the model)")
    train.add_argument("--batch-size", type=int, default=None, help="pairs per step (default depends on the model)")
    train.add_argument("--lr", type=float, default=None, help="peak learning rate (default depends on the model)")
    train.add_argument("--margin", type=float, default=None,
                       help="loss margin (default: 0.25 for triplet on cosines, 1.0 for contrastive and multitask "
                            "on distances)")
    train.add_argument("--form", choices=CONTRASTIVE_FORMS, default=None,
                       help="contrastive loss form (default: squared_hinge)")
    train.add_argument("--scale", type=float, default=None,
                       help="softmax and multitask: cosine scale; cosent: lambda (default: 20.0)")
    train.add_argument("--weight", type=float, default=None,
                       help="multitask loss: weight of the in-batch softmax term (default: 1.0)")
    train.add_argument("--max-length", type=int, default=None, help="tokens per question (default: 64)")
    train.add_argument("--max-rows", type=_count, default=None, help="use only the first N usable rows")
    train.add_argument("--min-freq", type=int, default=None,
                       help="LSTM vocabulary: words seen fewer times become <unk> (default: 1)")
    train.add_argument("--max-vocab", type=int, default=None, help="LSTM vocabulary size (default: 30000)")
    train.add_argument("--seed", type=int, default=None, help="random seed of split, weights, batches (default: 0)")
    train.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (default: no cap)")
    train.add_argument("--max-minutes", type=float, default=None,
                       help="time budget: stop after this many minutes of training, with a final validation "
                            "(default: no cap)")
    train.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="where to train")
    train.add_argument("--patience", type=int, default=None, help="early stopping patience in epochs, 0 = off (default depends on the model)")
    train.add_argument("--split-by-question", action="store_true", help="no validation question occurs in training")
    train.add_argument("--keep-unvalidated", action="store_true",
                       help="save a run cancelled (Ctrl-C) before its first validation; by default nothing is saved")
    train.add_argument("--hard-negatives", action="store_true",
                       help="triplet/softmax: also use labelled non-duplicates of batch questions as negatives")
    train.add_argument("--implied-pairs", action="store_true",
                       help="also train on the pairs the training labels imply: two duplicates of one question are "
                            "duplicates, a duplicate of a non-duplicate's question is a non-duplicate")
    train.add_argument("--model-options", default=None, help='JSON of model config fields, e.g. \'{"hidden_size": 256}\'')
    train.add_argument("--out", default=None,
                       help="output folder: a new or empty folder, or a saved model with --overwrite "
                            "(default: a new folder under --runs)")
    train.add_argument("--overwrite", action="store_true",
                       help="let --out replace the model saved there (a cancelled or failed run that is "
                            "not better keeps the old one)")
    train.add_argument("--runs", default="runs", help="models folder used when --out is not given")
    train.set_defaults(func=cmd_train)

    evaluate = _model_command(sub, "evaluate", "metrics of a model on a labelled pairs file", cmd_evaluate)
    evaluate.add_argument("--data", required=True, help="CSV/TSV (optionally .gz) of labelled pairs")
    evaluate.add_argument("--threshold", type=_threshold, default=None,
                          help="cosine threshold (default: the model's calibrated best-accuracy threshold)")
    evaluate.add_argument("--max-rows", type=_count, default=None, help="use only the first N usable rows")

    predict = _model_command(sub, "predict", "are two questions duplicates?", cmd_predict)
    predict.add_argument("question1")
    predict.add_argument("question2")
    predict.add_argument("--threshold", type=_threshold, default=None, help="cosine threshold (default: calibrated)")
    from core.cli import export as commands_export

    commands_export.add_backend_option(predict)

    search = _model_command(sub, "search", "the k questions of a corpus most similar to a question", cmd_search)
    search.add_argument("--corpus", required=True, help="pairs file whose distinct questions are searched")
    search.add_argument("question")
    search.add_argument("-k", type=_count, default=10, help="number of results")
    search.add_argument("--runs", default="runs", help="models folder (zero-shot MiniLM caches its index here)")
    commands_export.add_backend_option(search)

    embed = _model_command(sub, "embed", "write the vectors of a corpus's distinct questions to a .npy file",
                           cmd_embed)
    embed.add_argument("--data", required=True, help="pairs file whose distinct questions are embedded")
    embed.add_argument("--out", required=True, help="output .npy file (questions go to <out>.questions.jsonl)")
    commands_export.add_backend_option(embed)
    commands_export.add_parsers(sub, _model_command)

    from core.cli import score as commands_score

    commands_score.add_parser(sub, _model_command)

    from core.cli import dedup as commands_dedup

    commands_dedup.add_parser(sub, _model_command)
    return parser


def _show_lab_warnings() -> None:
    """core's LabWarnings print as one ``warning: ...`` line; every other warning as Python shows it."""
    import warnings

    from core.notices import LabWarning

    default = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, LabWarning):
            print(f"warning: {one_line(message)}", file=sys.stderr)
        else:
            default(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def one_line(text) -> str:
    """``text`` with its control and line-break characters escaped, so a message quoting a user's file
    (a JSON key holding a carriage return, say) still prints as one line."""
    return "".join(ch if ch.isprintable() or ch == " " else ascii(ch)[1:-1] for ch in str(text))


def main(argv=None) -> int:
    _show_lab_warnings()
    try:
        args = build_parser().parse_args(argv)  # inside the try: building it imports torch, which Ctrl-C may cut
        return args.func(args)
    except CliError as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
