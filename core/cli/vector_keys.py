"""Where ``dedup``, ``suggest`` and ``search`` keep a corpus's vectors between runs, and the key that names a
model's vectors there before the model is loaded."""
from __future__ import annotations

from pathlib import Path


def vector_cache():
    """``core.inference.vector_cache.VectorCache`` in the lab's cache (``$SIAMESE_LAB_CACHE``, ``vectors/``):
    dedup, suggest and search keep a corpus's vectors there and reuse them."""
    from core.export.onnx_backend import cache_root
    from core.inference.vector_cache import VectorCache

    return VectorCache(cache_root() / "vectors")


def vector_cache_key(args) -> str | None:
    """What names ``args.model``'s vectors in ``vector_cache`` before it is loaded: on the torch backend the
    sha256 of the files they are made from (``core.export.onnx_backend.content_key``), so a run whose vectors
    are cached never loads the model; None on the ONNX backend (its loaded graphs' digest names them)."""
    from core.model_names import TFIDF, ZERO_SHOT

    if getattr(args, "backend", "torch") == "onnx" or not (args.model == ZERO_SHOT or Path(args.model).is_dir()):
        return None  # None also for what is no model folder at all (or TF-IDF): loading it says why, in one line
    from core.export.onnx_backend import content_key

    key = "files-" + content_key(args.model)
    parent = _calibrated_parent(args.model)
    if parent == TFIDF or _is_pair_scorer(args.model):
        return None  # no vectors at all: loading it refuses, in one line
    # A calibrated copy's vectors are its parent's: keyed by the parent's files as they are now, so a parent changed
    # since the copy was made is not served from the cache (loading the copy then refuses it, in one line).
    key = key if parent is None else key + "-" + content_key(parent)
    if args.device == "cpu" or args.device == "auto" and not _gpu_here():
        return key
    from core.models.registry import encodes_in_half

    # Vectors encoded in half precision are close to the float32 ones but not equal: the cache keeps them apart.
    return key + ("-fp16" if encodes_in_half(args.model, args.device) else "")


def _gpu_here() -> bool:
    from core.device import cuda_available

    return cuda_available()


def _calibrated_parent(model: str) -> str | None:
    """The source a calibrated copy (``python -m core calibrate``) points at, or None for any other model."""
    from core.saving import ModelLoadError, read_config
    from core.saving.calibrated import CALIBRATED_FROM

    if not Path(model).is_dir():
        return None
    try:
        record = read_config(model).get(CALIBRATED_FROM)
    except ModelLoadError:
        return None
    return str(record["source"]) if isinstance(record, dict) else None


def _is_pair_scorer(model: str) -> bool:
    """Whether ``model`` is a stacked scorer's folder (``core.inference.stacked_scorer``): pairs only, no vectors."""
    from core.inference.stacked_scorer import is_stacked

    return is_stacked(model)
