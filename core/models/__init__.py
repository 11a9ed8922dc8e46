"""The three model families, behind one interface (``PairEncoder``), and their registry."""
from core.models.base import PairEncoder
from core.models.dual_encoder import DualEncoder, DualEncoderConfig
from core.models.minilm import MiniLM, MiniLMConfig, ZERO_SHOT_THRESHOLD
from core.models.registry import (
    DEFAULT_MAX_PARAMETERS, MAX_PARAMETERS_ENV, MODEL_LABELS, MODEL_NAMES, MODEL_TYPES, ZERO_SHOT, ZERO_SHOT_LABEL,
    ModelTooLarge, build_model, check_model_size, load_model, max_parameters,
)
from core.models.siamese_lstm import SiameseLSTM, SiameseLSTMConfig

__all__ = [
    "PairEncoder", "SiameseLSTM", "SiameseLSTMConfig", "DualEncoder", "DualEncoderConfig",
    "MiniLM", "MiniLMConfig", "MODEL_TYPES", "MODEL_NAMES", "MODEL_LABELS", "ZERO_SHOT", "ZERO_SHOT_LABEL",
    "ZERO_SHOT_THRESHOLD", "build_model", "load_model", "DEFAULT_MAX_PARAMETERS", "MAX_PARAMETERS_ENV",
    "ModelTooLarge", "check_model_size", "max_parameters",
]
