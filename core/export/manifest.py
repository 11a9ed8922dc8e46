"""``siamese_lab.json``, an export's manifest: the threshold, what the export holds, a summary of the
run's config, and the sha256 of an ONNX export's files. A folder holding one of this format is an export
(``read_manifest``); ``part`` and ``finite`` read its fields."""
from __future__ import annotations

import hashlib
import math
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path

from core.saving.files import CONFIG_MAX_BYTES, read_json_file

MANIFEST_FILE = "siamese_lab.json"
TOKENIZER_FILE = "tokenizer.json"
FILE_HASHES = "sha256"  # an ONNX manifest's field: file name -> sha256 of the bytes the lab wrote
EXPORT_FORMAT = "siamese-lab-export"
EXPORT_VERSION = 1


def part(mapping: dict, key: str, kind: type = dict):
    """``mapping[key]`` when it is a ``kind`` (a dict by default), else an empty one."""
    value = mapping.get(key)
    return value if isinstance(value, kind) else kind()


def finite(value) -> bool:
    """Whether ``value`` is a finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def normalises(model) -> bool:
    """Whether ``model.embed`` returns unit vectors already; the others' graphs add the L2 normalisation."""
    return model.model_type == "lstm" or (model.model_type == "minilm" and bool(model.config.normalize))


def read_manifest(folder: str | Path) -> dict | None:
    """``folder``'s ``siamese_lab.json`` when it is an export's (a regular JSON file of this format), else None."""
    try:
        manifest = read_json_file(Path(folder) / MANIFEST_FILE, CONFIG_MAX_BYTES, folder=Path(folder))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("format") == EXPORT_FORMAT else None


def json_ready(value):
    """``value`` in JSON's types: numpy and torch scalars as numbers, paths as text, NaN and infinities as None (what
    the manifest and the CLI's printed lines hold, so they are always valid JSON)."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and not math.isfinite(value) else value


def config_summary(config: dict) -> dict:
    """The parts of a model's config.json an export keeps: all but the per-epoch history of training."""
    keep = ("name", "model_type", "model_config", "tokenizer", "loss", "train_config", "run", "thresholds",
            "metrics", "data", "saved_at", "parent", "base_model", "augmented", "mined_negatives")
    summary = {key: config[key] for key in keep if key in config}
    training = config.get("training")
    if isinstance(training, dict):
        summary["training"] = {k: training[k] for k in ("status", "message", "best_epoch", "epochs_run", "seconds")
                               if k in training}
    return json_ready(summary)


def build_manifest(model, config: dict, fmt: str, details: dict, source: str | None, extra: dict) -> dict:
    """The manifest of ``model`` exported as ``fmt``: ``details`` is what the format's writer returned,
    ``extra`` is added as it is."""
    from core.model_names import ZERO_SHOT

    # A saved folder's config.json has a format; zero_shot_config() has none.
    zero_shot = model.model_type == "minilm" and (source == ZERO_SHOT or "format" not in config)
    threshold = part(config, "thresholds").get("accuracy")
    return json_ready({
        "format": EXPORT_FORMAT,
        "format_version": EXPORT_VERSION,
        "export_format": fmt,
        "model_type": model.model_type,
        "name": str(config.get("name") or (ZERO_SHOT if zero_shot else "model")),
        "zero_shot": zero_shot,
        "source": None if source is None else str(source),
        "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "threshold": float(threshold) if finite(threshold) else None,
        "thresholds": config.get("thresholds") or {},
        "max_length": int(model.tokenizer.max_length),
        "embedding_dim": None if model.model_type == "cross-encoder" else int(model.embedding_dim),  # pairs only
        "pad_id": int(model.tokenizer.pad_id),
        "normalized": True if fmt == "onnx" else normalises(model),  # ONNX graphs always normalise
        "tokenizer_kind": model.tokenizer.kind,
        **details,
        "versions": {package: version(package) for package in (("torch", "onnx", "onnxruntime") if fmt == "onnx"
                     else ("torch", "transformers", "sentence-transformers"))},
        "config": config_summary(config),
        **extra,
    })


def file_hashes(files: dict[str, bytes]) -> dict[str, str]:
    """name -> sha256 of the bytes, as an ONNX manifest records them (how the backend knows its own exports)."""
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
