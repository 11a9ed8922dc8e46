"""The model families by name: how a run builds a model, and how any model is loaded for use.

``build_model(spec, train_texts)`` and ``load_model(source)`` dispatch through ``MODEL_TYPES``; the
names and the labels people see live here too. Inference (the CLI's predict / evaluate / search /
embed, the Verdict, Search, Similarity and Compare pages) loads through ``load_model`` and so never
imports the trainer or the training pipeline.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from core.models.base import PairEncoder
from core.models.dual_encoder import DualEncoder
from core.models.minilm import ZERO_SHOT_THRESHOLD, MiniLM
from core.models.siamese_lstm import SiameseLSTM

MODEL_TYPES: dict[str, type[PairEncoder]] = {cls.model_type: cls for cls in (SiameseLSTM, DualEncoder, MiniLM)}
MODEL_NAMES = tuple(MODEL_TYPES)  # lstm | dual-transformer | minilm
MODEL_LABELS = {"lstm": "Siamese LSTM", "dual-transformer": "Dual transformer encoder", "minilm": "MiniLM (fine-tune)"}
ZERO_SHOT = "minilm"  # the load source that means the pretrained MiniLM, with no training
ZERO_SHOT_LABEL = "MiniLM zero-shot (pretrained, no training)"


def build_model(spec, train_texts: Sequence[str]) -> PairEncoder:
    """A model ready to train for a ``core.specs.RunSpec``."""
    return MODEL_TYPES[spec.model].for_run(spec, train_texts)


def zero_shot_config() -> dict:
    """What a saved folder's config.json would say of the zero-shot model."""
    return {"model_type": MiniLM.model_type, "name": "minilm (zero-shot)",
            "thresholds": {"accuracy": ZERO_SHOT_THRESHOLD, "f1": ZERO_SHOT_THRESHOLD}}


def load_model(source: str | Path, device: str = "cpu") -> tuple[PairEncoder, dict]:
    """``ZERO_SHOT`` ("minilm") is the pretrained MiniLM; anything else is a saved model folder.

    Returns the model in eval mode on ``device`` and its config (config.json's contents). A folder
    that cannot be used raises ``core.saving.ModelLoadError`` saying which file and why.
    """
    if str(source) == ZERO_SHOT:
        return MiniLM.pretrained().to(device).eval(), zero_shot_config()
    from core.saving import CONFIG_FILE, WEIGHTS_FILE, ModelLoadError, config_from_dict, read_config, read_tokenizer, read_weights

    folder = Path(source)
    config = read_config(folder)  # checks the format and that the model type is one of MODEL_NAMES
    model_class = MODEL_TYPES[config["model_type"]]
    model_config = config_from_dict(model_class.config_class, config.get("model_config", {}))
    tokenizer = read_tokenizer(folder, config)
    try:
        model = model_class(model_config, tokenizer)
    except (TypeError, ValueError, RuntimeError) as error:
        raise ModelLoadError(f"{folder}: cannot build the model from its config: {error}") from None
    try:
        model.load_state_dict(read_weights(folder), strict=True)
    except RuntimeError as error:
        first = " ".join(str(error).splitlines()[:3])
        raise ModelLoadError(f"{folder / WEIGHTS_FILE} does not fit the model in {CONFIG_FILE}: {first}") from None
    return model.to(device).eval(), config
