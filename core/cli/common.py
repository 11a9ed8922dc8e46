"""What every ``python -m core`` command shares: the one-line error, the parser and its help format,
the argparse types, JSON printing, a progress counter, loading a pairs file and a model (torch or ONNX).

Every expected failure is a ``CliError``: ``core.cli.main`` prints it as one ``error: ...`` line and
exits with status 2.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import sys
from contextlib import contextmanager
from pathlib import Path

BACKENDS = ("torch", "onnx")
ENGINES = ("local", "ray")  # where embed / dedup encode and search: this process, or a Ray cluster
# The metrics evaluate and score print, in this order.
METRIC_KEYS = ("roc_auc", "average_precision", "accuracy", "precision", "recall", "f1", "threshold", "n",
               "tp", "fp", "tn", "fn")


class CliError(Exception):
    """An expected failure: printed as one line, exit status 2."""


class CliParser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage block
        raise CliError(f"{self.prog}: {message}")


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows "(default: X)" except where there is no default value, whose help says what applies."""

    def _get_help_string(self, action):
        if action.default is None or isinstance(action.default, bool):
            return action.help
        return super()._get_help_string(action)


def help_formatter(prog):
    return DefaultsFormatter(prog, max_help_position=32)


def model_command(sub, name: str, help: str, func, scores_pairs: bool = False) -> argparse.ArgumentParser:
    """A subcommand that runs a saved (or the zero-shot) model: --model and --device, then its own options.
    ``scores_pairs``: the command only scores pairs, so ``--model tfidf`` (``core.cli.scorers``) is offered too."""
    command = sub.add_parser(name, help=help, formatter_class=help_formatter)
    tfidf = (", or 'tfidf' for the TF-IDF cosine baseline (fitted on the questions it scores; a calibrated "
             "TF-IDF folder keeps the fit of its calibration file); a stacked scorer's folder (calibrate --stacked) "
             "too") if scores_pairs else ""
    command.add_argument("--model", required=True,
                         help=f"a saved model folder (a calibrated copy included), 'minilm' for zero-shot MiniLM{tfidf}")
    command.add_argument("--device", default="auto", type=device_name, metavar="{auto,cpu,cuda,cuda:N}",
                         help="where the model runs (auto: CUDA when PyTorch sees a GPU); on CUDA the transformer "
                              "models encode in float16, and dedup and suggest search their neighbours exactly on "
                              "the GPU when the corpus's vectors fit in its memory")
    command.set_defaults(func=func)
    return command


def device_name(text: str) -> str:
    """argparse type of ``--device``: auto, cpu, cuda or cuda:N (whether that device is here, ``resolved_device``)."""
    from core.device import DeviceError, checked_device_name

    try:
        return checked_device_name(text)
    except DeviceError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def resolved_device(args):
    """``args.device`` as a ``torch.device`` (``core.device.resolve_device``); one that is not here is a ``CliError``."""
    from core.device import DeviceError, resolve_device

    try:
        return resolve_device(args.device)
    except DeviceError as error:
        raise CliError(str(error)) from None


def add_backend_option(command) -> None:
    """``--backend {torch,onnx}`` of predict / score / dedup / embed / search; ``load_backend`` reads it."""
    command.add_argument("--backend", choices=BACKENDS, default="torch",
                         help="torch: the PyTorch model; onnx: its ONNX graph run by onnxruntime on the CPU "
                              "(exported on first use into the lab's cache, $SIAMESE_LAB_CACHE or "
                              "~/.cache/siamese-lab; --model may also be an ONNX export folder, used as it is)")


# ---- argparse types ----------------------------------------------------------------------------
def add_engine_options(command) -> None:
    """``--engine {local,ray}``, ``--ray-address`` and ``--workers`` of embed / dedup (``engine_session`` and
    ``ray_vectors`` read them)."""
    command.add_argument("--engine", choices=ENGINES, default="local",
                         help="local: encode and search in this process; ray: on a Ray cluster (encoder actors "
                              "and search tasks, core.inference.ray_engine), the same output")
    command.add_argument("--ray-address", default="",
                         help="with --engine ray: a running cluster's address (host:6379 or ray://host:10001), "
                              "where the model folder must be on storage every node sees; "
                              "empty starts a local Ray sized to this machine")
    command.add_argument("--workers", type=count, default=2,
                         help="with --engine ray: encoder actors, and search tasks, at once")


@contextmanager
def engine_session(args):
    """A Ray session for the block when ``args.engine`` is "ray" (``core.inference.ray_engine.ray_session``:
    started or joined, and shut down after), else nothing."""
    if args.engine != "ray":
        yield
        return
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise CliError("--engine ray needs Ray: pip install 'ray[data]==2.60.0' (requirements.txt)")
    from core.inference.ray_engine import RayAddressError, ray_session

    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(ray_session(args.ray_address))
        except RayAddressError as error:  # an address nothing answers at: one line, not Ray's minutes of retries
            raise CliError(str(error)) from None
        yield


def ray_vectors(args, texts, unit: bool):
    """(vectors, queries or None) of ``texts`` encoded on Ray (``engine_session``'s) by ``args.workers`` actors, each
    loading ``args.model`` the way ``load_backend`` does."""
    import functools

    from core.inference.ray_engine import ray_encode

    return ray_encode(functools.partial(backend_model, args), texts, batch_size=256, workers=args.workers, unit=unit)


def count(text: str) -> int:
    """argparse type of a count: a whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def minutes(text: str) -> float:
    """argparse type of a time budget: a finite number of minutes above 0, at most a year."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of minutes, got {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= 525_600):
        raise argparse.ArgumentTypeError(f"must be above 0 and at most a year (525600), got {text}")
    return value


def threshold(text: str) -> float:
    """argparse type of a cosine threshold: a finite number in [-1, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not (math.isfinite(value) and -1.0 <= value <= 1.0):
        raise argparse.ArgumentTypeError(f"must be a cosine between -1 and 1, got {text}")
    return value


def columns_spec(text: str) -> dict[str, str]:
    """argparse type of ``--columns``: ``ROLE=NAME`` pairs separated by commas, each role of
    ``core.data.ROLES`` at most once; role -> column name, for ``core.data``'s reader to resolve."""
    from core.data import ROLES

    mapping: dict[str, str] = {}
    for entry in text.split(","):
        role, equals, name = (part.strip() for part in entry.partition("="))
        if not equals or not role:
            raise argparse.ArgumentTypeError(
                f"expected ROLE=NAME pairs separated by commas (e.g. question1=#1 String), got {entry.strip()!r}")
        if role not in ROLES:
            raise argparse.ArgumentTypeError(f"unknown role {role!r}; the roles are {', '.join(ROLES)}")
        if role in mapping:
            raise argparse.ArgumentTypeError(f"{role} is given twice")
        if not name:
            raise argparse.ArgumentTypeError(f"{role} has no column name")
        mapping[role] = name
    return mapping


def label_map_spec(text: str) -> dict[str, int]:
    """argparse type of ``--label-map``: ``VALUE=1`` or ``VALUE=0`` pairs separated by commas, a value holding a
    comma in double quotes (CSV quoting: ``"Yes, exactly"=1``; a value may hold "=": the last one splits), or a
    rule on a numeric label (``>=4=1,<4=0``); value -> label, for ``core.data``'s reader, which matches the values
    ignoring case and surrounding spaces."""
    mapping: dict[str, int] = {}
    for entry in next(csv.reader([text], skipinitialspace=True), []):
        value, equals, label = (part.strip() for part in entry.rpartition("="))
        if not equals or not value:
            raise argparse.ArgumentTypeError(
                f"expected VALUE=1 or VALUE=0 pairs separated by commas (e.g. PerfectMatch=1,Irrelevant=0), "
                f"got {entry.strip()!r}")
        if label not in ("0", "1"):
            raise argparse.ArgumentTypeError(f"{value!r} must map to 1 (duplicate) or 0 (not duplicate), got {label!r}")
        if value.lower() in {known.lower() for known in mapping}:
            raise argparse.ArgumentTypeError(f"{value!r} is given twice (values match ignoring case and spaces)")
        mapping[value] = int(label)
    return mapping


def add_columns_option(command, labels: bool = True) -> None:
    """``--columns`` of every command that reads pairs, and ``--label-map`` of those that read their labels
    (``labels``); ``load_data`` (or ``score_file``) takes them."""
    command.add_argument("--columns", type=columns_spec, default=None, metavar="ROLE=NAME,...",
                         help="the file's columns for the pair, e.g. 'question1=#1 String,question2=#2 String,"
                              "is_duplicate=Quality'; a role left out is found by its usual names "
                              "(question1/q1/sentence1, question2/q2/sentence2, is_duplicate/label/labels)")
    if labels:
        command.add_argument("--label-map", type=label_map_spec, default=None, metavar="VALUE=0|1,...",
                             help="what the label column's values mean, e.g. 'PerfectMatch=1,Relevant=1,"
                                  "Irrelevant=0' (matched ignoring case and surrounding spaces; a value with a "
                                  "comma in double quotes), or rules on a score, e.g. '>=4=1,<4=0'; a value left "
                                  "out is an unreadable label, its rows dropped (default: 1/0, true/false, "
                                  "yes/no, t/f, y/n)")


# ---- output ------------------------------------------------------------------------------------
def json_safe(value):
    """NaN and infinities become null: what the CLI prints is always valid JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if hasattr(value, "item"):  # numpy scalars
        return json_safe(value.item())
    return value


def print_json(value, indent: int | None = None) -> None:
    print(json.dumps(json_safe(value), indent=indent, ensure_ascii=False, allow_nan=False))


class TqdmCounter:
    """progress(done, total) -> one tqdm bar on stderr (index building, embedding)."""

    def __init__(self, description: str, unit: str = "q", delay: float = 0):
        self.description, self.unit, self.bar = description, unit, None
        self.delay = delay  # seconds before the bar first shows: a step done sooner prints nothing

    def __call__(self, done: int, total: int | None) -> None:
        from tqdm import tqdm

        if self.bar is None:
            self.bar = tqdm(total=total, desc=self.description, unit=self.unit, file=sys.stderr, mininterval=0.5,
                            delay=self.delay)
        self.bar.update(done - self.bar.n)
        if total is not None and done >= total:
            self.bar.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ---- output files ------------------------------------------------------------------------------
@contextmanager
def claimed_output(paths, overwrite: bool, create_folder: bool = False, flag: str = "--out"):
    """``core.saving.user_files.claim_files`` for a command's output files, claimed before its work:
    a refusal, or a failure while writing (a full disk), is one ``CliError`` naming ``flag``; the files
    go into place when the block ends normally, and nothing of them is left when it raises."""
    from core.saving.user_files import UserFileError, claim_files

    try:
        with claim_files(paths, overwrite=overwrite, create_folder=create_folder) as claim:
            yield claim
    except UserFileError as error:
        if error.reason == "exists":
            raise CliError(f"{flag} {error.path} exists; choose a new file or add --overwrite") from None
        raise CliError(f"{flag} {error}") from None


# ---- loading -----------------------------------------------------------------------------------
def load_data(path: str, max_rows: int | None = None, columns: dict[str, str] | None = None,
              label_map: dict[str, int] | None = None):
    """The pairs of a CSV/TSV file, its columns found by name or by ``columns`` (``--columns``), its labels
    read by ``label_map`` (``--label-map``) when given; what was dropped, and any warning, is reported on
    stderr."""
    from core.data import DataError, load_pairs

    check_input_file(path, "data")
    try:
        pairs, report = load_pairs(path, columns=columns, max_rows=max_rows, label_map=label_map)
    except DataError as error:  # core.data's message names the file itself: no second mention
        raise CliError(str(error)) from None
    if report.rows_kept < report.rows_read:
        print(f"data: {report.summary()}", file=sys.stderr)
    for warning in report.warnings:
        print(f"data: warning: {warning}", file=sys.stderr)
    return pairs


def check_input_file(path: str | Path, kind: str) -> None:
    """One ``CliError`` unless ``path`` is a regular file (symlinks followed), said as missing or as not one."""
    if not os.path.exists(path):
        raise CliError(f"no {kind} file at {path}")
    if not Path(path).is_file():
        raise CliError(f"{path} is not a regular file (a folder, a pipe or a device); give a {kind} file")


def load_corpus(path: str) -> list[str]:
    """The questions of a corpus file (``core.data.load_questions``: one per line, a question column or a pairs
    file), dropped rows and notes on stderr; a missing or unreadable file is one ``CliError``."""
    return read_corpus(path)[0]


def read_corpus(path: str):
    """``load_corpus``'s (questions, ``core.data.QuestionsReport``): the report says the file's shape."""
    from core.data import DataError, load_questions

    check_input_file(path, "questions")
    try:
        questions, report = load_questions(path)
    except DataError as error:
        raise CliError(str(error)) from None  # core.data's message names the file itself
    if report.dropped:
        print(f"data: {report.summary()}", file=sys.stderr)
    for warning in report.warnings:
        print(f"data: note: {warning}", file=sys.stderr)
    return questions, report


def same_file(a: str | Path | None, b: str | Path | None) -> bool:
    """Whether ``a`` and ``b`` both exist and name one file (``os.path.samefile``: links and hard links followed)."""
    return bool(a and b) and os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)


def output_path(path: str, *inputs: str | None) -> Path:
    """The ``--out`` path, never an input file nor inside a model folder: any folder holding a model's or an export's
    files (``--model``'s own, a calibrated copy's parent); what else may be written is ``claimed_output``'s rule."""
    out = Path(path)
    for source in inputs:
        if same_file(out, source):
            raise CliError(f"--out is {source}, an input; choose a new file")
    folder = model_folder_above(out)
    if folder is not None:
        raise CliError(f"--out is inside the model folder {folder}; a command never writes into a model; choose a "
                       "file elsewhere")
    return out


MODEL_MARKERS = ("config.json", "siamese_lab.json")  # a saved model's or calibrated copy's; an export's manifest


def model_folder_above(out: Path) -> Path | None:
    """The nearest folder above ``out`` that holds a model (``MODEL_MARKERS``), or None."""
    for folder in out.resolve().parents:
        if any((folder / marker).is_file() for marker in MODEL_MARKERS):
            return folder
    return None


def refuse_tfidf(name: str) -> None:
    """One ``CliError`` when ``--model`` is the TF-IDF baseline (``tfidf`` or a calibrated TF-IDF folder) or a
    stacked scorer (``core.inference.stacked_scorer``), which have no weights, for a command that needs a model."""
    from core.inference.tfidf_scorer import is_tfidf

    if is_tfidf(name):
        raise CliError(f"--model {name} is the TF-IDF baseline: it scores pairs (evaluate, score, predict, calibrate) "
                       "but has no vectors for this command")
    from core.inference.stacked_scorer import is_stacked

    if is_stacked(name):
        raise CliError(f"--model {name} is a stacked scorer: it scores pairs (evaluate, score, predict, calibrate) "
                       "but has no vectors for this command")


def refuse_without_vectors(name: str) -> None:
    """``refuse_tfidf``, and one ``CliError`` for a cross-encoder: a command that needs vectors refuses all three."""
    refuse_tfidf(name)
    from core.models.registry import scores_pairs_only

    if scores_pairs_only(name):
        raise CliError(f"--model {name} is a cross-encoder: it reads both questions together and scores pairs "
                       "(evaluate, score, predict, calibrate with --backend torch; dedup and suggest --rerank) but has "
                       "no vectors for this command")


def load_model(name: str, device: str, vectors: bool = True):
    """(model, config) of a saved model folder, or zero-shot MiniLM for 'minilm', on ``device``; with ``vectors``,
    a model without them is refused first (``refuse_without_vectors``)."""
    (refuse_without_vectors if vectors else refuse_tfidf)(name)
    from core import models
    from core.device import DeviceError, resolve_device
    from core.saving import ModelLoadError

    try:
        return models.load_model(name, device=str(resolve_device(device)))
    except (DeviceError, ModelLoadError) as error:
        raise CliError(str(error)) from None


def load_backend(args, vectors: bool = True):
    """(model, config) for ``args.model`` on ``args.backend``: ``load_model`` for torch, else
    ``core.export.onnx_backend.onnx_model`` (the exported graph run by onnxruntime on the CPU). ``vectors``: False
    for a command that only scores pairs, which a cross-encoder does too."""
    if getattr(args, "backend", "torch") != "onnx":
        return load_model(args.model, args.device, vectors)
    refuse_without_vectors(args.model)
    if args.device.startswith("cuda"):
        raise CliError(f"--backend onnx runs on the CPU; drop --device {args.device}")
    from core.export.formats import ExportError
    from core.export.onnx_backend import OnnxBackendError, onnx_model
    from core.saving import ModelLoadError

    try:
        return onnx_model(args.model)
    except (OnnxBackendError, ExportError, ModelLoadError) as error:
        raise CliError(str(error)) from None


def add_rerank_option(command) -> None:
    """``--rerank MODEL`` of dedup and suggest; ``load_reranker`` reads it."""
    command.add_argument("--rerank", default=None, metavar="MODEL",
                         help="a cross-encoder's folder (train --model cross-encoder, or a calibrated copy) that "
                              "scores the candidate pairs --model finds, its own threshold deciding")


def load_reranker(args):
    """(model, config) of ``args.rerank``, a cross-encoder, or (None, None) without one; anything else is one
    ``CliError`` before any work."""
    if args.rerank is None:
        return None, None
    from core.models.registry import scores_pairs_only

    if not scores_pairs_only(args.rerank):
        raise CliError(f"--rerank takes a cross-encoder's folder (train --model cross-encoder); {args.rerank} is "
                       "not one")
    return load_model(args.rerank, args.device, vectors=False)


def backend_model(args):
    """``load_backend(args)``'s model alone: a picklable loader for Ray's encoder actors."""
    return load_backend(args)[0]
