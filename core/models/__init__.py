"""The three model families, behind one interface (``PairEncoder``)."""
from core.models.base import PairEncoder
from core.models.dual_encoder import DualEncoder, DualEncoderConfig
from core.models.minilm import MiniLM, MiniLMConfig, ZERO_SHOT_THRESHOLD
from core.models.siamese_lstm import SiameseLSTM, SiameseLSTMConfig

MODEL_TYPES: dict[str, type[PairEncoder]] = {
    SiameseLSTM.model_type: SiameseLSTM,
    DualEncoder.model_type: DualEncoder,
    MiniLM.model_type: MiniLM,
}

__all__ = [
    "PairEncoder", "SiameseLSTM", "SiameseLSTMConfig", "DualEncoder", "DualEncoderConfig",
    "MiniLM", "MiniLMConfig", "MODEL_TYPES", "ZERO_SHOT_THRESHOLD",
]
