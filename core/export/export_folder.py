"""Exporting a model for use outside Siamese Lab (``export_model``): a sentence-transformers folder or ONNX
graphs, with a model card and a manifest, claimed and written like a model folder. An export records the
files it wrote, so ``overwrite`` replaces it only when it holds nothing else."""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path

from core.export.formats import ExportError, write_onnx, write_sentence_transformers
from core.export.manifest import FILE_HASHES, MANIFEST_FILE, build_manifest, file_hashes, read_manifest
from core.export.model_card import CARD_FILE, model_card
from core.saving.atomic import RECORD_FILE, owned_by, write_folder_atomically
from core.saving.output import OutputError, claim_output, refuse_others_files

EXPORT_FORMATS = ("sentence-transformers", "onnx")
QUANTIZE_CHOICES = ("int8",)


def _existing_export(target: Path, overwrite: bool) -> dict | None:
    """What ``claim_output`` may replace: a new or empty folder, or an earlier export with ``overwrite`` (else reason
    ``model_exists``); anything else (a saved model, other files, a file) never (reason ``not_a_model``)."""
    if not os.path.lexists(target):
        return None
    if target.is_symlink() or not target.is_dir():
        raise OutputError(target, "exists and is not a folder; choose a new folder", "not_a_model")
    if not any(target.iterdir()):
        return None
    manifest = read_manifest(target)
    if manifest is None:
        raise OutputError(target, "is not empty and holds no export (a saved model or other files, which an export "
                                  "never replaces); choose a new or empty folder", "not_a_model")
    if not overwrite:
        raise OutputError(target, "holds an earlier export; replacing it needs overwrite", "model_exists")
    refuse_others_files(target)
    return manifest


def check_export(model_type: str, fmt: str, quantize: str | None = None) -> None:
    """ExportError unless a ``model_type`` model can be exported as ``fmt`` (one of ``EXPORT_FORMATS``), with
    ``quantize`` (None or one of ``QUANTIZE_CHOICES``)."""
    if fmt == "sentence-transformers" and model_type != "minilm":
        from core.model_names import MODEL_LABELS

        label = MODEL_LABELS.get(model_type, model_type)
        raise ExportError(f"only MiniLM models export as sentence-transformers; this is a {label} "
                          f"({model_type}): use --format onnx")
    if quantize is not None and fmt != "onnx":
        raise ExportError("quantisation applies to the onnx format only")


def export_model(model, config: dict, out: str | Path, fmt: str, *, overwrite: bool = False,
                 quantize: str | None = None, source: str | None = None) -> dict:
    """Write ``model`` (with ``config``, its config.json or ``zero_shot_config()``) as ``fmt`` to the
    folder ``out``, claimed (one writer at a time) and written atomically. Returns the manifest written to
    ``siamese_lab.json``. Raises ExportError (the model or format) or OutputError (the folder)."""
    check_export(model.model_type, fmt, quantize)
    manifest: dict = {}
    with claim_output(out, overwrite, existing=_existing_export) as claim:
        write_folder_atomically(claim.target, lambda temp: manifest.update(write_export(
            model, config, temp, fmt, quantize=quantize, source=source, name=claim.target.name)))
    return manifest


def export_files(folder: str | Path) -> list[str]:
    """The files of the export in ``folder`` (relative paths), without the user's own or the record."""
    return sorted(path for path in owned_by(Path(folder))[0] if path != RECORD_FILE)


def write_export(model, config: dict, folder: str | Path, fmt: str, *, quantize: str | None = None,
                 source: str | None = None, extra: dict | None = None, name: str | None = None) -> dict:
    """Fill the existing ``folder`` with the export and return its manifest; neither claimed nor atomic
    (``export_model`` and the ONNX cache wrap it). ``name``: the folder's final name, which the card's snippet opens."""
    folder = Path(folder)
    was_training = model.training
    try:
        # In eval mode on the CPU: the model itself when it is there already, else a copy.
        exported = (model if model.device.type == "cpu" else copy.deepcopy(model).to("cpu")).eval()
        details = write_onnx(exported, folder, quantize) if fmt == "onnx" else \
            write_sentence_transformers(exported, folder)
    finally:
        model.train(was_training)  # the caller's model (often a shared, cached one) is left as it was
    manifest = build_manifest(model, config, fmt, details, source, extra or {})
    if fmt == "onnx":  # the backend runs only graphs whose bytes are the ones recorded here
        names = [*manifest["files"]["graphs"], manifest["files"]["tokenizer"]]
        manifest[FILE_HASHES] = file_hashes({name: (folder / name).read_bytes() for name in names})
    (folder / CARD_FILE).write_text(model_card(manifest, name or folder.name), encoding="utf-8")
    # The manifest last: a folder with one is a complete export.
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, allow_nan=False),
                                        encoding="utf-8")
    return manifest

