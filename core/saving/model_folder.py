"""The model folder: ``config.json`` + ``model.safetensors`` + the tokenizer's vocabulary file.

Loading never unpickles and never runs code from the folder: the config is JSON checked field by
field, the weights are safetensors, the vocabulary is plain text. Saving goes through
``core.saving.atomic.write_folder_atomically``, so a save that dies half-way leaves the previous
model or the new one, whole; ``config.json`` is written last, so a folder with a config is a folder
whose other files are complete.
"""
from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from core.saving.atomic import write_folder_atomically
from core.tokenizers import tokenizer_from_dict

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
FORMAT = "siamese-lab-model"
FORMAT_VERSION = 1


class ModelLoadError(ValueError):
    """A model folder that cannot be used; the message says which file and why."""


# ---- saving ------------------------------------------------------------------------------------
def save_model(model, folder: str | Path, metadata: dict | None = None) -> Path:
    """Write ``model`` (weights, tokenizer, config + ``metadata``) to ``folder``, atomically."""
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

    def write(temp: Path) -> None:
        save_file(weights, str(temp / WEIGHTS_FILE))
        model.tokenizer.save(temp)
        # config.json last: a folder with a config is a folder whose other files are complete.
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


# ---- loading -----------------------------------------------------------------------------------
def read_config(folder: str | Path) -> dict:
    folder = Path(folder)
    if not folder.is_dir():
        # Imported here: runs.py builds on this module (list_runs reads configs).
        from core.saving.runs import _interrupted_saves

        previous = _interrupted_saves(folder.parent).get(folder.name)
        if previous is not None:
            raise ModelLoadError(
                f"no model folder at {folder}: an interrupted save left the previous model in "
                f"{previous.name}; recover_interrupted_saves({str(folder.parent)!r}) puts it back")
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
    # Imported here: the model registry sits above this module (it loads through it).
    from core.models.registry import MODEL_NAMES

    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in MODEL_NAMES:
        raise ModelLoadError(f"{path}: unknown model type {model_type!r}; expected one of {', '.join(MODEL_NAMES)}")
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


def read_tokenizer(folder: str | Path, config: dict):
    """The tokenizer described by ``config["tokenizer"]``, with its vocabulary file from ``folder``;
    ModelLoadError when the file is missing or the tokenizer unusable."""
    folder = Path(folder)
    try:
        return tokenizer_from_dict(config.get("tokenizer", {}), folder)
    except FileNotFoundError as error:
        raise ModelLoadError(f"{folder}: tokenizer file missing ({Path(error.filename).name})") from None
    except (ValueError, UnicodeDecodeError, Exception) as error:  # tokenizers raises plain Exception
        raise ModelLoadError(f"{folder}: unusable tokenizer: {error}") from None


def read_weights(folder: str | Path) -> dict[str, torch.Tensor]:
    """The tensors in ``folder``'s model.safetensors (never unpickled); ModelLoadError when the file is
    missing or not readable safetensors."""
    weights_path = Path(folder) / WEIGHTS_FILE
    if not weights_path.is_file():
        raise ModelLoadError(f"{folder} has no {WEIGHTS_FILE}")
    try:
        return load_file(str(weights_path))
    except (SafetensorError, OSError, ValueError) as error:
        raise ModelLoadError(f"{weights_path} is not a readable safetensors file: {error}") from None
