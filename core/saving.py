"""Model folders: ``config.json`` + ``model.safetensors`` + the tokenizer's vocabulary file.

Loading never unpickles and never runs code from the folder: the config is JSON checked field by
field, the weights are safetensors, the vocabulary is plain text.

Saving is atomic. Everything is written (and fsynced) to a hidden ``.tmp-<name>-<id>`` folder beside
the target, which then takes the target's place:

* If the process dies at any moment (SIGKILL, a crash, an exception), the target holds the previous
  model or the new one, each whole; never a mix, never a half-written file. (tests/test_crash_save.py
  kills a save before each of its filesystem steps and at random moments.) Files and folders are
  fsynced before and after the swap so that a power cut behaves the same; that part is not tested.
* Replacing an existing folder is one ``renameat2(RENAME_EXCHANGE)`` on Linux, so the target is
  never missing. Where that call is unavailable (other systems, some filesystems) it falls back to
  two renames (target -> ``.old-<name>-<id>``, new -> target); a crash between them leaves the
  target missing and the complete previous model in ``.old-<name>-<id>``: ``load_model`` and
  ``list_runs`` say so and ``recover_interrupted_saves(root)`` puts it back.
* Leftover ``.tmp-*`` / ``.old-*`` folders are never loaded; ``list_runs`` reports them as problems.
"""
from __future__ import annotations

import ctypes
import dataclasses
import errno
import json
import os
import re
import shutil
import sys
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
_OLD_FOLDER = re.compile(r"^\.old-(?P<name>.+)-[0-9a-f]{8}$")
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2  # from <fcntl.h> and <linux/fs.h>


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
        _fsync_folder(temp)
        if folder.exists() and _exchange_folders(temp, folder):
            shutil.rmtree(temp, ignore_errors=True)  # temp now holds the previous model
        elif folder.exists():
            old = folder.parent / f"{OLD_PREFIX}{folder.name}-{uuid.uuid4().hex[:8]}"
            os.rename(folder, old)
            os.rename(temp, folder)  # a crash just before this leaves the target missing: see recovery
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(temp, folder)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    _fsync_folder(folder.parent)  # make the rename itself survive a power cut
    return folder


def _exchange_folders(new: Path, target: Path) -> bool:
    """Swap two existing paths in one step (Linux ``renameat2`` with ``RENAME_EXCHANGE``).

    False when the system or filesystem cannot, so the caller falls back to two renames.
    """
    rename_exchange = _renameat2()
    if rename_exchange is None:
        return False
    if rename_exchange(_AT_FDCWD, os.fsencode(new), _AT_FDCWD, os.fsencode(target), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(target))


def _renameat2():
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2  # glibc >= 2.28
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def _fsync_folder(folder: Path) -> None:
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open a directory; the rename is still atomic there
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


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
    for name, previous in _interrupted_saves(root).items():
        problems.append(f"{name}: missing after an interrupted save; the previous model is in {previous.name} "
                        "and recover_interrupted_saves() puts it back")
    for path in sorted(root.iterdir()):
        if not path.is_dir():
            continue
        if path.name.startswith((TEMP_PREFIX, OLD_PREFIX)):
            problems.append(f"{path.name}: left over from an interrupted save; ignored")
            continue
        if path.name.startswith("."):  # hidden folders hold caches (e.g. .cache/), not models
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


def _interrupted_saves(root: Path) -> dict[str, Path]:
    """Run name -> its complete ``.old-<name>-*`` folder, for runs whose folder is missing.

    Only the two-rename fallback of ``save_model`` can leave this state (killed between its renames).
    """
    newest: dict[str, tuple[str, Path]] = {}  # several interrupted saves of one run: keep the newest
    if not root.is_dir():
        return {}
    for path in sorted(root.iterdir()):
        match = _OLD_FOLDER.match(path.name)
        name = match["name"] if match else ""
        if not match or not _SAFE_NAME.match(name) or (root / name).exists() or not (path / WEIGHTS_FILE).is_file():
            continue
        try:
            saved_at = str(read_config(path).get("saved_at", ""))
        except ModelLoadError:
            continue
        if name not in newest or saved_at > newest[name][0]:
            newest[name] = (saved_at, path)
    return {name: path for name, (_, path) in newest.items()}


def recover_interrupted_saves(root: str | Path) -> list[str]:
    """Put back the previous model of every run whose save died between its two renames.

    Returns one message per restored run. Other leftovers are left alone: a ``.tmp-*`` folder may
    belong to a save that is still running.
    """
    root = Path(root)
    restored = []
    for name, previous in _interrupted_saves(root).items():
        try:
            os.rename(previous, root / name)
        except OSError:  # restored or saved again by someone else meanwhile
            continue
        restored.append(f"{name}: restored the previous model from {previous.name}")
    return restored
