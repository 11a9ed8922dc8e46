"""What every ``python -m core`` command shares: the parser, its option groups and argparse types, JSON printing,
a progress counter, the output rule, and loading pairs, a corpus and a model (torch or ONNX). An expected failure is
a ``CliError`` (or a library error ``core.cli.main`` names): one ``error:`` line and exit status 2.
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

QUESTIONS_HELP = ("a file with a question column (question, text, sentence, title or q), a pairs file (its distinct "
                  "questions), or plain text with one question per line; optionally .gz")
# The metrics evaluate and score print, in this order.
METRIC_KEYS = ("roc_auc", "average_precision", "accuracy", "precision", "recall", "f1", "threshold", "n",
               "tp", "fp", "tn", "fn")


class CliError(Exception):
    """An expected failure: printed as one line, exit status 2."""


class CliParser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage block
        raise CliError(f"{self.prog}: {message}")


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """"(default: X)" except where the default is None or a switch: its help says what applies."""

    def _get_help_string(self, action):
        if action.default is None or isinstance(action.default, bool):
            return action.help
        return super()._get_help_string(action)


def help_formatter(prog):
    return DefaultsFormatter(prog, max_help_position=32)


# ---- argparse types ----------------------------------------------------------------------------
def number(bounds: str, low: float, high: float = math.inf, whole: bool = False, above: bool = False,
           noun: str = "number"):
    """An argparse type: a finite (``whole``) number in [``low``, ``high``] (``above``: low excluded)."""
    def parse(text: str):
        try:
            value = int(text) if whole else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a {'whole ' if whole else ''}{noun}, got {text!r}") from None
        if not (math.isfinite(value) and (value > low if above else value >= low) and value <= high):
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {text}")
        return value
    return parse


count = number("at least 1", 1, whole=True)
minutes = number("above 0 and at most a year (525600)", 0, 525_600, above=True, noun="number of minutes")
threshold = number("a cosine between -1 and 1", -1, 1)


def device_name(text: str) -> str:
    """argparse type of ``--device``: auto, cpu, cuda or cuda:N (whether it is here: ``core.device.resolve_device``)."""
    from core.device import DeviceError, checked_device_name

    try:
        return checked_device_name(text)
    except DeviceError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def columns_spec(text: str) -> dict[str, str]:
    """argparse type of ``--columns``: ``ROLE=NAME`` pairs separated by commas, each role at most once."""
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


def names_spec(text: str) -> list[str]:
    """argparse type of ``--names``: the columns' names in order, separated by commas (CSV quoting), each once."""
    names = [name.strip() for name in next(csv.reader([text], skipinitialspace=True), [])]
    if not names or "" in names:
        raise argparse.ArgumentTypeError(f"expected column names separated by commas (e.g. question1,question2,"
                                         f"is_duplicate), got {text!r}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(f"{', '.join(repeated)} is given twice")
    return names


def label_map_spec(text: str) -> dict[str, int]:
    """argparse type of ``--label-map``: ``VALUE=1`` or ``VALUE=0`` pairs in CSV quoting (the last "=" splits), or
    rules on a numeric label (``>=4=1,<4=0``), checked as ``core.data.normalise_label_map`` checks any label map."""
    from core.data import DataError, normalise_label_map

    entries = [entry.rpartition("=") for entry in next(csv.reader([text], skipinitialspace=True), [])]
    for value, equals, label in entries:
        if not equals or not value.strip():
            raise argparse.ArgumentTypeError(f"expected VALUE=1 or VALUE=0 pairs separated by commas (e.g. "
                                             f"PerfectMatch=1,Irrelevant=0), got {(value + equals + label).strip()!r}")
    pairs = [(value.strip(), label.strip()) for value, _, label in entries]
    try:
        normalise_label_map(pairs)  # the pairs, not a dict of them: a value given both 1 and 0 is refused
    except DataError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return {value: int(label) for value, label in pairs}


# ---- option groups -----------------------------------------------------------------------------
def model_command(sub, name: str, help: str, func, scores_pairs: bool = False,
                  backend: bool = False) -> argparse.ArgumentParser:
    """A subcommand that runs a model: --model (``scores_pairs``: TF-IDF and stacked too), --device and, with
    ``backend``, ``--backend {torch,onnx}`` (``load_backend`` reads it)."""
    command = sub.add_parser(name, help=help, formatter_class=help_formatter)
    tfidf = (", 'tfidf' for the TF-IDF cosine baseline (fitted on the questions it scores, or its calibration "
             "file's), or a stacked scorer's folder") if scores_pairs else ""
    command.add_argument("--model", required=True,
                         help=f"a saved model folder (a calibrated copy too), 'minilm' for zero-shot MiniLM{tfidf}")
    command.add_argument("--device", default="auto", type=device_name, metavar="{auto,cpu,cuda,cuda:N}",
                         help="where the model runs (auto: CUDA when there is one; transformers encode in float16 "
                              "there, and dedup and suggest search exactly on the GPU when the vectors fit)")
    if backend:
        command.add_argument("--backend", choices=("torch", "onnx"), default="torch",
                             help="torch: the PyTorch model; onnx: its ONNX graph on the CPU (exported on first use "
                                  "into the lab's cache, $SIAMESE_LAB_CACHE or ~/.cache/siamese-lab; --model may "
                                  "also be an ONNX export folder)")
    command.set_defaults(func=func)
    return command


def add_output_options(command, required: bool = True, help: str = "output CSV",
                       overwrite: str = "replace --out if it exists") -> None:
    """``--out`` and ``--overwrite`` of a command that writes files or a folder."""
    command.add_argument("--out", required=required, default=None, help=help)
    command.add_argument("--overwrite", action="store_true", help=overwrite)


def add_engine_options(command) -> None:
    """``--engine {local,ray}``, ``--ray-address`` and ``--workers`` of embed / dedup."""
    command.add_argument("--engine", choices=("local", "ray"), default="local",
                         help="local: encode and search in this process; ray: on a Ray cluster, the same output")
    command.add_argument("--ray-address", default="",
                         help="with --engine ray: a running cluster (host:6379 or ray://host:10001), whose nodes "
                              "all see the model and --out's folder; empty starts a local Ray")
    command.add_argument("--workers", type=count, default=2, help="with --engine ray: encoder actors and search tasks")


def add_columns_option(command, labels: bool = True, max_rows: bool = False) -> None:
    """``--columns`` and ``--names``, ``--label-map`` for a command that reads labels, and ``--max-rows``;
    ``load_data`` takes them."""
    command.add_argument("--columns", type=columns_spec, default=None, metavar="ROLE=NAME,...",
                         help="the file's columns, e.g. 'question1=#1 String,question2=#2 String,"
                              "is_duplicate=Quality'; a role left out is found by its usual names")
    command.add_argument("--names", type=names_spec, default=None, metavar="NAME,...",
                         help="for files without a header row (their first row is data): the columns' names in "
                              "order, e.g. 'question1,question2,is_duplicate'; --columns then maps other names")
    if labels:
        command.add_argument("--label-map", type=label_map_spec, default=None, metavar="VALUE=0|1,...",
                             help="what the label values mean, e.g. 'PerfectMatch=1,Irrelevant=0' (ignoring case "
                                  "and spaces; a value with a comma in double quotes), or rules on a score, e.g. "
                                  "'>=4=1,<4=0'; rows of other values are dropped (default: 1/0, true/false, yes/no)")
    if max_rows:
        command.add_argument("--max-rows", type=count, default=None, help="use only the first N usable rows")


def add_rerank_option(command) -> None:
    """``--rerank MODEL`` of dedup and suggest; ``load_reranker`` reads it."""
    command.add_argument("--rerank", default=None, metavar="MODEL",
                         help="a cross-encoder's folder that scores the candidate pairs --model finds, at its own "
                              "threshold")


# ---- Ray ---------------------------------------------------------------------------------------
@contextmanager
def engine_session(args):
    """A Ray session for the block when ``args.engine`` is "ray" (started or joined, shut down after)."""
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


# ---- output ------------------------------------------------------------------------------------
def print_json(value, indent: int | None = None) -> None:
    from core.export.manifest import json_ready

    print(json.dumps(json_ready(value), indent=indent, ensure_ascii=False, allow_nan=False))


class TqdmCounter(contextlib.AbstractContextManager):
    """progress(done, total) -> one tqdm bar on stderr, shown after ``delay`` seconds; closed when a ``with`` ends."""

    def __init__(self, description: str, unit: str = "q", delay: float = 0):
        self.description, self.unit, self.delay, self.bar = description, unit, delay, None

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

    def __exit__(self, *error) -> None:
        self.close()


@contextmanager
def claimed_output(paths, overwrite: bool, create_folder: bool = False):
    """``claim_files`` for a command's outputs before its work: placed whole at the end, or nothing left."""
    from core.saving.user_files import UserFileError, claim_files

    try:
        with claim_files(paths, overwrite=overwrite, create_folder=create_folder) as claim:
            yield claim
    except UserFileError as error:
        if error.reason == "exists":
            raise CliError(f"--out {error.path} exists; choose a new file or add --overwrite") from None
        raise CliError(f"--out {error}") from None


MODEL_MARKERS = ("config.json", "siamese_lab.json")  # a saved model's or calibrated copy's; an export's manifest


def output_path(path: str, *inputs: str | None) -> Path:
    """The one output rule: ``--out`` is never an input file nor inside any folder holding a model or an export
    (``--model``'s own, a calibrated copy's parent); what else may be written is ``claimed_output``'s rule."""
    out = Path(path)
    for source in inputs:  # one file, links and hard links followed
        if source and out.exists() and os.path.exists(source) and os.path.samefile(out, source):
            raise CliError(f"--out is {source}, an input; choose a new file")
    for folder in out.resolve().parents:
        if any((folder / marker).is_file() for marker in MODEL_MARKERS):
            raise CliError(f"--out is inside the model folder {folder}; a command never writes into a model; "
                           "choose a file elsewhere")
    return out


# ---- loading -----------------------------------------------------------------------------------
def load_data(path: str, args, max_rows: int | None = None, group_column: str | None = None):
    """The pairs of a file (``core.data.load_pairs``) read with ``args``' --columns, --names and --label-map; what
    was dropped, and any warning, on stderr."""
    from core.data import load_pairs

    pairs, report = load_pairs(path, columns=args.columns, max_rows=max_rows, names=args.names,
                               label_map=getattr(args, "label_map", None), group_column=group_column)
    if report.rows_kept < report.rows_read:
        print(f"data: {report.summary()}", file=sys.stderr)
    for warning in report.warnings:
        print(f"data: warning: {warning}", file=sys.stderr)
    return pairs


def load_corpus(path: str) -> list[str]:
    """The questions of a corpus file (``core.data.load_questions``), dropped rows and notes on stderr."""
    from core.data import load_questions

    questions, report = load_questions(path)
    if report.dropped:
        print(f"data: {report.summary()}", file=sys.stderr)
    for warning in report.warnings:
        print(f"data: note: {warning}", file=sys.stderr)
    return questions


def refuse_without_vectors(name: str, vectors: bool = True) -> None:
    """One ``CliError`` when ``--model`` is the TF-IDF baseline or a stacked scorer (pairs only, no weights), or a
    cross-encoder where the command needs ``vectors``."""
    from core.inference.stacked_scorer import is_stacked
    from core.inference.tfidf_scorer import is_tfidf
    from core.models.registry import scores_pairs_only

    for what, found in (("the TF-IDF baseline", is_tfidf), ("a stacked scorer", is_stacked)):
        if found(name):
            raise CliError(f"--model {name} is {what}: it scores pairs (evaluate, score, predict, calibrate) "
                           "but has no vectors for this command")
    if vectors and scores_pairs_only(name):
        raise CliError(f"--model {name} is a cross-encoder: it reads both questions together and scores pairs "
                       "(evaluate, score, predict, calibrate with --backend torch; dedup and suggest --rerank) but has "
                       "no vectors for this command")


def load_model(name: str, device: str, vectors: bool = True):
    """(model, config) of a model folder or 'minilm' on ``device``; one without ``vectors`` refused first."""
    refuse_without_vectors(name, vectors)
    from core import models
    from core.device import resolve_device

    return models.load_model(name, device=str(resolve_device(device)))


def load_backend(args, vectors: bool = True):
    """(model, config) for ``args.model`` on ``args.backend``: ``load_model``, or its ONNX graph on the CPU."""
    if getattr(args, "backend", "torch") != "onnx":
        return load_model(args.model, args.device, vectors)
    refuse_without_vectors(args.model)
    if args.device.startswith("cuda"):
        raise CliError(f"--backend onnx runs on the CPU; drop --device {args.device}")
    from core.export.onnx_backend import onnx_model

    return onnx_model(args.model)


def backend_model(args):
    """``load_backend(args)``'s model alone: a picklable loader for Ray's encoder actors."""
    return load_backend(args)[0]


def load_reranker(args):
    """(model, config) of ``args.rerank``, a cross-encoder, or (None, None) without one."""
    if args.rerank is None:
        return None, None
    from core.models.registry import scores_pairs_only

    if not scores_pairs_only(args.rerank):
        raise CliError(f"--rerank takes a cross-encoder's folder (train --model cross-encoder); {args.rerank} is "
                       "not one")
    return load_model(args.rerank, args.device, vectors=False)


# ---- the vector cache --------------------------------------------------------------------------
def vector_cache():
    """The lab's cache of corpus vectors (``$SIAMESE_LAB_CACHE/vectors``), shared by dedup, suggest and search."""
    from core.export.onnx_backend import cache_root
    from core.inference.search import VectorCache

    return VectorCache(cache_root() / "vectors")


def vector_cache_key(args) -> str | None:
    """What names ``args.model``'s vectors in ``vector_cache`` before it is loaded, so a cached run never loads it:
    the sha256 of its files (a calibrated copy's parent's too, as they are now), with "-fp16" where it encodes in
    half precision; None on the ONNX backend (its graphs' digest names them) and for what has no vectors."""
    from core.export.onnx_backend import content_key
    from core.inference.stacked_scorer import is_stacked
    from core.model_names import TFIDF, ZERO_SHOT
    from core.models.registry import encodes_in_half
    from core.saving import read_config
    from core.saving.model_folder import CALIBRATED_FROM

    if getattr(args, "backend", "torch") == "onnx" or not (args.model == ZERO_SHOT or Path(args.model).is_dir()):
        return None
    parent = None
    if Path(args.model).is_dir():
        try:
            record = read_config(args.model).get(CALIBRATED_FROM)
        except ValueError:  # a folder that is no model: loading it says why, in one line
            return None
        parent = str(record["source"]) if isinstance(record, dict) else None
    if parent == TFIDF or is_stacked(args.model):
        return None
    key = "files-" + content_key(args.model) + ("" if parent is None else "-" + content_key(parent))
    return key + ("-fp16" if encodes_in_half(args.model, args.device) else "")
