"""The model folder: ``config.json`` + ``model.safetensors`` + the tokenizer's vocabulary file.

Loading never unpickles or runs anything: the config is JSON checked field by field, the weights safetensors, every
file read through ``files``. Saving goes through ``write_folder_atomically``, ``config.json`` last. ``list_runs``
lists a runs folder's usable models and says why every other folder is not one (a ``.tmp-*`` / ``.old-*`` leftover
of an interrupted save is never loaded).

A calibrated copy is a small folder pointing at its parent's weights with new thresholds: its config.json
(``save_calibrated``) carries the parent's metadata, thresholds calibrated on the user's file (``calibration``) and
``calibrated_from``: ``minilm``, ``tfidf`` (fitted in ``TFIDF_FILE``) or a saved model's absolute path, with the
``folder_digest`` of the parent's files, so a parent changed since is refused rather than served.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import stat
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
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


def check_calibration_metadata(config: Mapping, path: str | Path) -> None:
    """``calibrated_from``: absent, or a mapping with a non-empty ``source`` string and, when given, a
    ``sha256`` of 64 hex digits; ``calibration``: absent, or a mapping whose ``data`` is a string and
    ``pairs`` a whole number. ModelLoadError naming ``path`` and the field otherwise."""
    if CALIBRATED_FROM in config:
        record = config[CALIBRATED_FROM]
        if not isinstance(record, Mapping):
            raise ModelLoadError(f"{path}: {CALIBRATED_FROM} must be a mapping, got {record!r:.80}")
        source = record.get("source")
        if not isinstance(source, str) or not source or len(source) > SOURCE_MAX_CHARS:
            raise ModelLoadError(f"{path}: {CALIBRATED_FROM}.source must name the parent model, got {source!r:.80}")
        if "sha256" in record and not (isinstance(record["sha256"], str) and _SHA256.match(record["sha256"])):
            raise ModelLoadError(f"{path}: {CALIBRATED_FROM}.sha256 must be 64 hex digits, got {record['sha256']!r:.80}")
    if CALIBRATION in config:
        record = config[CALIBRATION]
        pairs = record.get("pairs") if isinstance(record, Mapping) else None
        if not isinstance(record, Mapping) or not isinstance(record.get("data"), str) \
                or not isinstance(pairs, int) or isinstance(pairs, bool) or pairs < 0:
            raise ModelLoadError(f"{path}: {CALIBRATION} must name its data and pair count, got {record!r:.80}")


def parent_folder(config: Mapping) -> Path | None:
    """The saved model folder a calibrated config points at; None for a packaged parent (a plain name)."""
    source = str(config[CALIBRATED_FROM]["source"])
    return Path(source) if os.path.isabs(source) else None


if TYPE_CHECKING:  # torch is imported where weights are read or written: listing and caching need none
    import torch


def save_file(tensors: dict, path: str) -> None:
    """safetensors' writer, imported (with torch) on first use (tests replace it). Its I/O failures (a full disk,
    a file size limit) come back as the ``OSError`` they are, so the CLI says them in one line like any other."""
    from safetensors.torch import save_file as write

    try:
        write(tensors, path)
    except SafetensorError as error:
        found = re.search(r"\(os error (\d+)\)", str(error))
        if found is None:
            raise
        code = int(found[1])
        raise OSError(code, os.strerror(code), path) from None


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
    config = {"format": FORMAT, "format_version": FORMAT_VERSION, "model_type": model.model_type,
              "model_config": model.config_dict(), "tokenizer": model.tokenizer.to_dict(),
              "saved_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), **(metadata or {})}
    weights = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}

    def write(temp: Path) -> None:
        save_file(weights, str(temp / WEIGHTS_FILE))
        model.tokenizer.save(temp)
        # config.json last: a folder with a config is a folder whose other files are complete.
        (temp / CONFIG_FILE).write_text(json.dumps(config, indent=2, default=_json_default), encoding="utf-8")
        # safetensors creates its file 0600; give it the mode the other files got (0666 less the umask).
        os.chmod(temp / WEIGHTS_FILE, stat.S_IMODE(os.stat(temp / CONFIG_FILE).st_mode))

    return write_folder_atomically(Path(folder), write)


# What a calibrated copy does not take over from the config of the model it copies: what the copy says anew.
_NOT_INHERITED = ("format", "format_version", "name", "saved_at", "thresholds", "zero_shot", CALIBRATED_FROM,
                  CALIBRATION)


def calibrated_config(base: Mapping, parent: dict, thresholds: dict, calibration: dict, name: str) -> dict:
    """The config.json of a calibrated copy: ``base`` (the copied model's) less what the copy says anew, then its
    ``name``, ``thresholds`` calibrated on the file ``calibration`` describes, and ``parent`` (``calibrated_from``)."""
    inherited = {key: value for key, value in base.items() if key not in _NOT_INHERITED}
    return {"format": FORMAT, "format_version": FORMAT_VERSION, **inherited, "name": name,
            "saved_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "thresholds": dict(thresholds),
            CALIBRATED_FROM: dict(parent), CALIBRATION: dict(calibration)}


def save_calibrated(folder: str | Path, config: dict, extra: Mapping[str, object] | None = None) -> Path:
    """Write a calibrated copy as ``save_model`` writes a model: each of ``extra`` (name -> JSON), then the config."""
    def write(temp: Path) -> None:
        for name, value in (extra or {}).items():
            (temp / name).write_text(json.dumps(value), encoding="utf-8")
        (temp / CONFIG_FILE).write_text(json.dumps(config, indent=2, default=_json_default), encoding="utf-8")

    return write_folder_atomically(Path(folder), write)


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


def check_metadata(config: dict, path: str | Path = CONFIG_FILE) -> None:
    """What inference and the app read beyond the model (thresholds, name, metrics, the validation curve, a
    calibrated copy's fields), each absent or well formed; else ModelLoadError naming ``path`` and the field."""
    thresholds = config.get("thresholds")
    if "thresholds" in config:
        if not isinstance(thresholds, Mapping):
            raise ModelLoadError(f"{path}: thresholds must be a mapping of names to numbers, got {thresholds!r:.80}")
        for key, value in thresholds.items():
            if not _is_number(value) or not math.isfinite(value) or abs(value) > 1 + THRESHOLD_SLACK:
                raise ModelLoadError(f"{path}: thresholds.{key} must be a finite number in [-1, 1], got {value!r:.80}")
    if "name" in config and not isinstance(config["name"], str):
        raise ModelLoadError(f"{path}: name must be a string, got {config['name']!r:.80}")
    metrics = config.get("metrics")
    if "metrics" in config:
        if not isinstance(metrics, Mapping):
            raise ModelLoadError(f"{path}: metrics must be a mapping, got {metrics!r:.80}")
        for part in ("validation", "test"):
            if part in metrics and not isinstance(metrics[part], Mapping):
                raise ModelLoadError(f"{path}: metrics.{part} must be a mapping, got {metrics[part]!r:.80}")
    training = config.get("training")
    if isinstance(training, Mapping) and "validation_curve" in training:
        _check_curve(training["validation_curve"], path)
    for key in ("model_config", "tokenizer"):
        if key in config and not isinstance(config[key], Mapping):
            raise ModelLoadError(f"{path}: {key} must be a JSON object, got {config[key]!r:.80}")
    check_calibration_metadata(config, path)


def _check_curve(curve, path: str | Path) -> None:
    where = f"{path}: training.validation_curve"
    if not isinstance(curve, list) or len(curve) > CURVE_MAX_POINTS:
        raise ModelLoadError(f"{where} must be a list of at most {CURVE_MAX_POINTS:,} points, got {curve!r:.80}")
    for index, point in enumerate(curve):
        if not isinstance(point, Mapping):
            raise ModelLoadError(f"{where}[{index}] must be a mapping, got {point!r:.80}")
        step, seconds, auc = point.get("step"), point.get("train_seconds"), point.get("roc_auc")
        if not (isinstance(step, int) and not isinstance(step, bool) and step >= 0):
            raise ModelLoadError(f"{where}[{index}].step must be a whole number >= 0, got {step!r:.80}")
        if not (_is_number(seconds) and math.isfinite(seconds) and seconds >= 0):
            raise ModelLoadError(f"{where}[{index}].train_seconds must be a finite number >= 0, got {seconds!r:.80}")
        if not (_is_number(auc) and 0 <= auc <= 1):
            raise ModelLoadError(f"{where}[{index}].roc_auc must be a number in [0, 1], got {auc!r:.80}")


def _check_field(cls_name: str, field: dataclasses.Field, value):
    default = field.default if field.default is not dataclasses.MISSING else field.default_factory()  # type: ignore[misc]
    kind = type(default)
    if kind in (int, float):
        ok = _is_number(value) and (kind is float or isinstance(value, int))
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise ModelLoadError(f"{cls_name}.{field.name} must be {kind.__name__}, got {value!r:.80}")
    choices = field.metadata.get("choices")  # a setting of named values (e.g. the LSTM's pooling)
    if choices and value not in choices:
        raise ModelLoadError(f"{cls_name}.{field.name} must be one of {', '.join(map(repr, choices))}, "
                             f"got {value!r:.80}")
    if kind is int and value < 0:
        raise ModelLoadError(f"{cls_name}.{field.name} must not be negative, got {value}")
    limit = min(INT_FIELD_MAX, field.metadata.get("max", INT_FIELD_MAX))
    if kind is int and value > limit:
        raise ModelLoadError(f"{cls_name}.{field.name} is implausibly large ({value}; at most {limit:,})")
    if kind is float and not (0.0 <= value < 1e6):
        raise ModelLoadError(f"{cls_name}.{field.name} is out of range ({value})")


def config_from_dict(cls, values: dict):
    """Build a model config dataclass from stored JSON, refusing unknown fields, wrong types and values
    outside a field's ``choices``; a field the JSON lacks (a folder saved before it existed) takes its default."""
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
        if tensor.dtype in (torch.float16, torch.float32, torch.float64):
            finite = np.isfinite(tensor.detach().cpu().numpy()).all()  # numpy: several times faster
        elif tensor.is_floating_point() or tensor.is_complex():
            finite = torch.isfinite(tensor).all()
        else:
            continue
        if not finite:
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
        if path.name.startswith(".tmp-"):
            problems.append(f"{path.name}: left over from an interrupted save; ignored")
            continue
        if path.name.startswith(OLD_PREFIX):  # the one crash window of a save: the previous model, whole
            problems.append(f"{path.name}: the previous content of a model whose save was interrupted; if that "
                            "model is missing, rename this folder back to its name")
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
