"""Model folders: ``config.json`` + ``model.safetensors`` + the tokenizer's vocabulary file.

Loading never unpickles and never runs code from the folder: the config is JSON checked field by
field, the weights are safetensors, the vocabulary is plain text. Saving is atomic: everything is
written to a hidden temporary folder beside the target, then renamed into place.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from core.models import MODEL_TYPES, PairEncoder
from core.tokenizers import tokenizer_from_dict

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
FORMAT = "siamese-lab-model"
FORMAT_VERSION = 1
TEMP_PREFIX, OLD_PREFIX = ".tmp-", ".old-"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class ModelLoadError(ValueError):
    """A model folder that cannot be used; the message says which file and why."""


# ---- saving ------------------------------------------------------------------------------------
def save_model(model: PairEncoder, folder: str | Path, metadata: dict | None = None) -> Path:
    """Write ``model`` (weights, tokenizer, config + ``metadata``) to ``folder``, atomically."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    temp = folder.parent / f"{TEMP_PREFIX}{folder.name}-{uuid.uuid4().hex[:8]}"
    temp.mkdir()
    try:
        config = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "model_type": model.model_type,
            "model_config": model.config_dict(),
            "tokenizer": model.tokenizer.to_dict(),
            "saved_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            **(metadata or {}),
        }
        weights = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
        save_file(weights, str(temp / WEIGHTS_FILE))
        model.tokenizer.save(temp)
        # config.json last: a folder with a config is a folder whose other files are complete.
        (temp / CONFIG_FILE).write_text(json.dumps(config, indent=2, default=_json_default), encoding="utf-8")
        for path in temp.iterdir():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
        if folder.exists():
            old = folder.parent / f"{OLD_PREFIX}{folder.name}-{uuid.uuid4().hex[:8]}"
            os.rename(folder, old)
            os.rename(temp, folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(temp, folder)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return folder


def _json_default(value):
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot store {type(value).__name__} in config.json")


# ---- loading -----------------------------------------------------------------------------------
def read_config(folder: str | Path) -> dict:
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelLoadError(f"no model folder at {folder}")
    path = folder / CONFIG_FILE
    if not path.is_file():
        raise ModelLoadError(f"{folder} has no {CONFIG_FILE}; it is not a saved model")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelLoadError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise ModelLoadError(f"{path} is not a {FORMAT} config")
    if config.get("model_type") not in MODEL_TYPES:
        raise ModelLoadError(
            f"{path}: unknown model type {config.get('model_type')!r}; expected one of {', '.join(MODEL_TYPES)}")
    return config


def _check_field(cls_name: str, field: dataclasses.Field, value):
    default = field.default if field.default is not dataclasses.MISSING else field.default_factory()  # type: ignore[misc]
    kind = type(default)
    ok = (
        isinstance(value, bool) if kind is bool
        else (isinstance(value, int) and not isinstance(value, bool)) if kind is int
        else (isinstance(value, (int, float)) and not isinstance(value, bool)) if kind is float
        else isinstance(value, kind)
    )
    if not ok:
        raise ModelLoadError(f"{cls_name}.{field.name} must be {kind.__name__}, got {value!r}")
    if kind is int and value < 0:
        raise ModelLoadError(f"{cls_name}.{field.name} must not be negative, got {value}")
    if kind is int and value > 10_000_000:
        raise ModelLoadError(f"{cls_name}.{field.name} is implausibly large ({value})")
    if kind is float and not (0.0 <= value < 1e6):
        raise ModelLoadError(f"{cls_name}.{field.name} is out of range ({value})")


def config_from_dict(cls, values: dict):
    """Build a model config dataclass from stored JSON, refusing unknown fields and wrong types."""
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


def load_model(folder: str | Path, device: str | torch.device = "cpu") -> tuple[PairEncoder, dict]:
    """Rebuild a saved model and return it (in eval mode) with its config.json contents."""
    folder = Path(folder)
    config = read_config(folder)
    model_class = MODEL_TYPES[config["model_type"]]
    model_config = config_from_dict(model_class.config_class, config.get("model_config", {}))
    try:
        tokenizer = tokenizer_from_dict(config.get("tokenizer", {}), folder)
    except FileNotFoundError as error:
        raise ModelLoadError(f"{folder}: tokenizer file missing ({Path(error.filename).name})") from None
    except (ValueError, UnicodeDecodeError, Exception) as error:  # tokenizers raises plain Exception
        raise ModelLoadError(f"{folder}: unusable tokenizer: {error}") from None
    try:
        model = model_class(model_config, tokenizer)
    except (TypeError, ValueError, RuntimeError) as error:
        raise ModelLoadError(f"{folder}: cannot build the model from its config: {error}") from None
    weights_path = folder / WEIGHTS_FILE
    if not weights_path.is_file():
        raise ModelLoadError(f"{folder} has no {WEIGHTS_FILE}")
    try:
        state = load_file(str(weights_path))
    except (SafetensorError, OSError, ValueError) as error:
        raise ModelLoadError(f"{weights_path} is not a readable safetensors file: {error}") from None
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as error:
        first = str(error).splitlines()
        raise ModelLoadError(f"{weights_path} does not fit the model in {CONFIG_FILE}: {' '.join(first[:3])}") from None
    model.to(device).eval()
    return model, config


# ---- the runs folder ---------------------------------------------------------------------------
def check_run_name(name: str) -> str:
    """A run name is one plain folder name: no separators, no '..', nothing hidden."""
    if not isinstance(name, str) or not _SAFE_NAME.match(name) or ".." in name:
        raise ModelLoadError(f"{name!r} is not a valid model name (letters, digits, '.', '_' and '-' only)")
    return name


def run_folder(root: str | Path, name: str) -> Path:
    return Path(root) / check_run_name(name)


def new_run_name(root: str | Path, model_type: str, loss: str) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = f"{model_type}-{loss}-{stamp}"
    name, n = base, 1
    while (Path(root) / name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def list_runs(root: str | Path) -> tuple[list[dict], list[str]]:
    """Saved models under ``root`` (newest first) and notes on folders that are not usable models."""
    root = Path(root)
    runs, problems = [], []
    if not root.is_dir():
        return runs, problems
    for path in sorted(root.iterdir()):
        if not path.is_dir():
            continue
        if path.name.startswith((TEMP_PREFIX, OLD_PREFIX)):
            problems.append(f"{path.name}: left over from an interrupted save; ignored")
            continue
        try:
            config = read_config(path)
        except ModelLoadError as error:
            problems.append(f"{path.name}: {error}")
            continue
        if not (path / WEIGHTS_FILE).is_file():
            problems.append(f"{path.name}: no {WEIGHTS_FILE}; ignored")
            continue
        runs.append({"name": path.name, "path": str(path), **config})
    runs.sort(key=lambda r: str(r.get("saved_at", "")), reverse=True)
    return runs, problems
