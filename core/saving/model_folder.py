"""The model folder: ``config.json`` + ``model.safetensors`` + the tokenizer's vocabulary file, read without
unpickling or running anything (JSON checked field by field, safetensors, every file through ``files``) and written
by ``write_folder_atomically``, ``config.json`` last. ``list_runs`` says why a folder is not a usable model.

A calibrated copy (``save_calibrated``) is a config.json pointing at its parent (``calibrated_from``: ``minilm``,
``tfidf``, fitted in ``TFIDF_FILE``, or a saved model's absolute path with its ``folder_digest``, so a changed parent
is refused) with thresholds calibrated on the user's file (``calibration``).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from safetensors import SafetensorError

from core.model_names import MODEL_NAMES, PAIR_SCORERS, TFIDF
from core.saving.atomic import OLD_PREFIX, write_folder_atomically
from core.saving.files import CONFIG_MAX_BYTES, ModelLoadError, check_regular_file, hash_regular_file, read_json_file

CALIBRATED_FROM = "calibrated_from"
CALIBRATION = "calibration"
TFIDF_FILE = "tfidf.json"  # a calibrated TF-IDF baseline's fitted vocabulary and IDF weights
# The files whose bytes decide a parent's vectors (and config.json its metadata): a changed byte is a new parent.
DIGEST_FILES = ("config.json", "model.safetensors", "tokenizer.json", "word_vocab.txt", "vocab.txt")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
SOURCE_MAX_CHARS = 4096


def is_calibrated(config: Mapping) -> bool:
    return isinstance(config, Mapping) and CALIBRATED_FROM in config


def folder_digest(folder: str | Path, max_bytes: int) -> str:
    """sha256 of the name, size and bytes of each of ``DIGEST_FILES`` in ``folder`` (a missing one as missing)."""
    folder = Path(folder)
    digest = hashlib.sha256(b"siamese-lab-parent 1\0")
    for name in DIGEST_FILES:
        hash_regular_file(digest, folder / name, max_bytes, folder)
    return digest.hexdigest()


def parent_folder(config: Mapping) -> Path | None:
    """The saved model folder a calibrated config points at; None for a packaged parent (a plain name)."""
    source = str(config[CALIBRATED_FROM]["source"])
    return Path(source) if os.path.isabs(source) else None


if TYPE_CHECKING:  # torch is imported where weights are read or written: listing and caching need none
    import torch


def save_file(tensors: dict, path: str) -> None:
    """safetensors' bytes, written by Python (tests replace this): a full disk or a file size limit is then the
    ``OSError`` it is, said in one line by the CLI like any other."""
    from safetensors.torch import save

    with open(path, "wb") as handle:
        handle.write(save(tensors))


CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
FORMAT = "siamese-lab-model"
FORMAT_VERSION = 1
INT_FIELD_MAX = 10_000_000  # any int field of a model config; a field's metadata "max" may lower it
WEIGHTS_SLACK_BYTES = 16 * 1024 * 1024  # safetensors header and alignment, beyond 4 bytes per parameter
THRESHOLD_SLACK = 1e-3  # calibration may put a threshold 1e-6 beyond the highest cosine (1.0)
CURVE_MAX_POINTS = 10_000  # validations in training.validation_curve (a 1 MiB config holds ~15,000)


def save_model(model, folder: str | Path, metadata: dict | None = None) -> Path:
    """Write ``model`` (weights, tokenizer, config + ``metadata``) to ``folder`` with ``write_folder_atomically``."""
    weights = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}

    def write(temp: Path) -> None:
        save_file(weights, str(temp / WEIGHTS_FILE))
        model.tokenizer.save(temp)

    _save_folder(folder, {"model_type": model.model_type, "model_config": model.config_dict(),
                          "tokenizer": model.tokenizer.to_dict(), **(metadata or {})}, write)
    return Path(folder)


def _save_folder(folder: str | Path, config: dict, write) -> dict:
    """``write(temp)``, then config.json (the format, the time, ``config``) last: a folder with a config is a folder
    whose other files are complete; all put in place by ``write_folder_atomically``. Returns the config."""
    config = {"format": FORMAT, "format_version": FORMAT_VERSION,
              "saved_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), **config}

    def write_all(temp: Path) -> None:
        write(temp)
        (temp / CONFIG_FILE).write_text(json.dumps(config, indent=2, default=_json_default), encoding="utf-8")

    write_folder_atomically(Path(folder), write_all)
    return config


# What a calibrated copy does not take over from the config of the model it copies: what the copy says anew.
_NOT_INHERITED = ("format", "format_version", "name", "saved_at", "thresholds", "zero_shot", CALIBRATED_FROM,
                  CALIBRATION)


def save_calibrated(folder: str | Path, base: Mapping, parent: dict, calibrated, tfidf: dict | None = None,
                    record: Mapping | None = None) -> dict:
    """Write a calibrated copy of the model whose config is ``base``, as ``save_model`` writes a model: ``base`` less
    what the copy says anew, then its name, the thresholds and record of ``calibrated`` (a ``Calibrated``),
    ``parent`` (``calibrated_from``) and ``record``; a TF-IDF fit (``tfidf``) beside it. Returns its config."""
    inherited = {key: value for key, value in base.items() if key not in _NOT_INHERITED}

    def write(temp: Path) -> None:
        if tfidf is not None:
            (temp / TFIDF_FILE).write_text(json.dumps(tfidf), encoding="utf-8")

    return _save_folder(folder, {**inherited, "name": Path(folder).name, "thresholds": dict(calibrated.thresholds),
                                 CALIBRATED_FROM: dict(parent), CALIBRATION: dict(calibrated.record()), **(record or {})},
                        write)


def _json_default(value):
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot store {type(value).__name__} in config.json")


def read_config(folder: str | Path) -> dict:
    """``folder``'s config.json as a dict, once it is known to be a bounded JSON file of this format, of a known
    model type, with usable metadata (``check_metadata``); ModelLoadError otherwise."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelLoadError(f"no model folder at {folder}")
    path = folder / CONFIG_FILE
    try:
        config = read_json_file(path, CONFIG_MAX_BYTES, folder=folder)
    except FileNotFoundError:
        raise ModelLoadError(f"{folder} has no {CONFIG_FILE}; it is not a saved model") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise ModelLoadError(f"{path} is not a {FORMAT} config")
    model_type = config.get("model_type")
    pair_scorer = model_type in PAIR_SCORERS and CALIBRATED_FROM in config  # thresholds and a fit, no weights
    if not isinstance(model_type, str) or (model_type not in MODEL_NAMES and not pair_scorer):
        raise ModelLoadError(f"{path}: unknown model type {model_type!r}; expected one of {', '.join(MODEL_NAMES)}")
    check_metadata(config, path)
    return config


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _require(ok, path: str | Path, field: str, must: str, value) -> None:
    """ModelLoadError "``path``: ``field`` must ``must``, got ``value``" unless ``ok``."""
    if not ok:
        raise ModelLoadError(f"{path}: {field} must {must}, got {value!r:.80}")


def check_metadata(config: dict, path: str | Path = CONFIG_FILE) -> None:
    """What inference and the app read beyond the model (thresholds, name, metrics, the validation curve, a
    calibrated copy's parent and the data it was calibrated on), each absent or well formed; else ModelLoadError
    naming ``path`` and the field."""
    for key in ("thresholds", "metrics", "model_config", "tokenizer", CALIBRATED_FROM):
        _require(isinstance(config.get(key, {}), Mapping), path, key, "be a mapping", config.get(key))
    for part in ("validation", "test"):
        found = config.get("metrics", {}).get(part, {})
        _require(isinstance(found, Mapping), path, f"metrics.{part}", "be a mapping", found)
    for key, value in config.get("thresholds", {}).items():
        _require(_is_number(value) and math.isfinite(value) and abs(value) <= 1 + THRESHOLD_SLACK, path,
                 f"thresholds.{key}", "be a finite number in [-1, 1]", value)
    _require(isinstance(config.get("name", ""), str), path, "name", "be a string", config.get("name"))
    training = config.get("training")
    if isinstance(training, Mapping) and "validation_curve" in training:
        _check_curve(training["validation_curve"], path)
    if CALIBRATED_FROM in config:
        source, sha256 = config[CALIBRATED_FROM].get("source"), config[CALIBRATED_FROM].get("sha256", "0" * 64)
        _require(isinstance(source, str) and 0 < len(source) <= SOURCE_MAX_CHARS, path, f"{CALIBRATED_FROM}.source",
                 "name the parent model", source)
        _require(isinstance(sha256, str) and _SHA256.match(sha256), path, f"{CALIBRATED_FROM}.sha256",
                 "be 64 hex digits", sha256)
    if CALIBRATION in config:
        record = config[CALIBRATION]
        pairs = record.get("pairs") if isinstance(record, Mapping) else None
        _require(isinstance(record, Mapping) and isinstance(record.get("data"), str) and _is_number(pairs)
                 and isinstance(pairs, int) and pairs >= 0, path, CALIBRATION, "name its data and pair count", record)


def _check_curve(curve, path: str | Path) -> None:
    field = "training.validation_curve"
    _require(isinstance(curve, list) and len(curve) <= CURVE_MAX_POINTS, path, field,
             f"be a list of at most {CURVE_MAX_POINTS:,} points", curve)
    for index, point in enumerate(curve):
        _require(isinstance(point, Mapping), path, f"{field}[{index}]", "be a mapping", point)
        step, seconds, auc = point.get("step"), point.get("train_seconds"), point.get("roc_auc")
        _require(_is_number(step) and isinstance(step, int) and step >= 0, path, f"{field}[{index}].step",
                 "be a whole number >= 0", step)
        _require(_is_number(seconds) and math.isfinite(seconds) and seconds >= 0, path,
                 f"{field}[{index}].train_seconds", "be a finite number >= 0", seconds)
        _require(_is_number(auc) and 0 <= auc <= 1, path, f"{field}[{index}].roc_auc", "be a number in [0, 1]", auc)


def _check_field(cls_name: str, field: dataclasses.Field, value):
    default = field.default if field.default is not dataclasses.MISSING else field.default_factory()  # type: ignore[misc]
    kind = type(default)
    if kind in (int, float):
        ok = _is_number(value) and (kind is float or isinstance(value, int))
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise ModelLoadError(f"{cls_name}.{field.name} must be {kind.__name__}, got {value!r:.80}")
    if kind is int and value < 0:
        raise ModelLoadError(f"{cls_name}.{field.name} must not be negative, got {value}")
    limit = min(INT_FIELD_MAX, field.metadata.get("max", INT_FIELD_MAX))
    if kind is int and value > limit:
        raise ModelLoadError(f"{cls_name}.{field.name} is implausibly large ({value}; at most {limit:,})")
    if kind is float and not (0.0 <= value < 1e6):
        raise ModelLoadError(f"{cls_name}.{field.name} is out of range ({value})")


def config_from_dict(cls, values: dict):
    """Build a model config dataclass from stored JSON, refusing unknown fields, wrong types and what the class
    itself refuses; a field the JSON lacks (a folder saved before it existed) takes its default."""
    if not isinstance(values, dict):
        raise ModelLoadError(f"{cls.__name__} must be a JSON object")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ModelLoadError(f"{cls.__name__} has unknown field(s): {', '.join(unknown)}")
    for name, value in values.items():
        _check_field(cls.__name__, fields[name], value)
    try:
        return cls(**values)
    except (TypeError, ValueError) as error:
        raise ModelLoadError(f"{cls.__name__}: {error}") from None


def weights_max_bytes(parameters: int) -> int:
    """The largest model.safetensors accepted for ``parameters`` parameters: 4 bytes each plus 16 MiB."""
    return 4 * max(0, int(parameters)) + WEIGHTS_SLACK_BYTES


def read_weights(folder: str | Path, max_bytes: int) -> dict[str, torch.Tensor]:
    """The tensors in ``folder``'s model.safetensors (never unpickled); ModelLoadError when it is missing, refused
    by ``check_regular_file`` (over ``max_bytes``), not readable safetensors, or holds a NaN or infinity."""
    import torch
    from safetensors.torch import load_file

    folder = Path(folder)
    weights_path = folder / WEIGHTS_FILE
    try:
        check_regular_file(weights_path, max_bytes, folder=folder)
        weights = load_file(str(weights_path))
    except FileNotFoundError:
        raise ModelLoadError(f"{folder} has no {WEIGHTS_FILE}") from None
    except ModelLoadError:
        raise
    except (SafetensorError, OSError, ValueError) as error:
        raise ModelLoadError(f"{weights_path} is not a readable safetensors file: {error}") from None
    for name, tensor in weights.items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise ModelLoadError(f"{weights_path}: tensor {name!r} holds NaN or infinite values; refused")
    return weights


def check_weight_dtypes(weights: Mapping[str, torch.Tensor], expected: Mapping[str, torch.dtype],
                        path: str | Path) -> None:
    """Every tensor of ``weights`` in the dtype of the model built from the config (``expected``); else
    ModelLoadError naming the first. ``load_state_dict`` would cast silently (1e300 in float64 to infinity)."""
    for name, tensor in weights.items():
        want = expected.get(name)
        if want is not None and tensor.dtype != want:
            raise ModelLoadError(f"{path}: tensor {name!r} is {str(tensor.dtype).removeprefix('torch.')}; this "
                                 f"model's weights are {str(want).removeprefix('torch.')}; refused")


LABELS_FOLDER = "labels"  # the Label page's databases (core.training.active_rounds), not a model: lists skip it


def list_runs(root: str | Path) -> tuple[list[dict], list[str]]:
    """Saved models under ``root`` (newest first) and notes on folders that are not usable models."""
    root = Path(root)
    runs, problems = [], []
    if not root.is_dir():
        return runs, problems
    for path in sorted(root.iterdir()):
        if not path.is_dir():
            continue
        if path.name.startswith((".tmp-", OLD_PREFIX)):
            previous = " (the previous model, whole: if its folder is missing, rename this folder back)"
            problems.append(f"{path.name}: left over from an interrupted save; ignored"
                            f"{previous if path.name.startswith(OLD_PREFIX) else ''}")
            continue
        if path.name.startswith(".") or path.name == LABELS_FOLDER:  # caches (e.g. .cache/) and labels, not models
            continue
        try:
            config = read_config(path)
        except ModelLoadError as error:
            problems.append(f"{path.name}: {error}")
            continue
        if is_calibrated(config):  # a pointer at its parent's weights: cheap checks here, the digest when loaded
            if config.get("model_type") in PAIR_SCORERS:  # no vectors for the app's pages
                what = "a calibrated TF-IDF baseline" if config.get("model_type") == TFIDF else "a stacked scorer"
                problems.append(f"{path.name}: {what}: the command line scores pairs with it "
                                "(evaluate, score, predict); the app's pages need a model with vectors")
                continue
            parent = parent_folder(config)
            if parent is not None and not parent.is_dir():
                problems.append(f"{path.name}: calibrated from {parent}, which is gone")
                continue
        elif not (path / WEIGHTS_FILE).is_file():
            problems.append(f"{path.name}: no {WEIGHTS_FILE}; ignored")
            continue
        runs.append({"name": path.name, "path": str(path), **config})
    runs.sort(key=lambda r: str(r.get("saved_at", "")), reverse=True)
    return runs, problems
