"""The four model families, behind one interface (``PairEncoder``), and their registry.

The names and labels (``core.model_names``) load at once; everything else loads on first use, so a
page that only shows names (the app's home page) never waits for torch.
"""
import importlib

from core.model_names import MODEL_LABELS, MODEL_NAMES, ZERO_SHOT, ZERO_SHOT_LABEL

_LAZY = {
    "PairEncoder": "core.models.base",
    "DualEncoder": "core.models.dual_encoder", "DualEncoderConfig": "core.models.dual_encoder",
    "MiniLM": "core.models.minilm", "MiniLMConfig": "core.models.minilm", "ZERO_SHOT_THRESHOLD": "core.models.minilm",
    "SiameseLSTM": "core.models.siamese_lstm", "SiameseLSTMConfig": "core.models.siamese_lstm",
    **{name: "core.models.registry" for name in (
        "MODEL_TYPES", "build_model", "load_model", "ModelTooLarge", "check_model_size", "max_parameters")},
}

__all__ = ["MODEL_LABELS", "MODEL_NAMES", "ZERO_SHOT", "ZERO_SHOT_LABEL", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'core.models' has no attribute {name!r}")
