"""The model families by name: ``build_model`` for a run, ``load_model`` for any use (inference never imports the
trainer), and the calibrated copies' parents. A config is refused by its parameter count before anything is allocated
(``check_model_size``)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from core.model_names import MODEL_NAMES, STACKED, TFIDF, ZERO_SHOT
from core.models.base import PairEncoder
from core.models.cross_encoder import CrossEncoder
from core.models.dual_encoder import DualEncoder
from core.models.minilm import ZERO_SHOT_THRESHOLD, MiniLM
from core.models.siamese_lstm import SiameseLSTM
from core.saving import ModelLoadError, read_config
from core.saving.model_folder import CALIBRATED_FROM, folder_digest, is_calibrated, parent_folder

MODEL_TYPES: dict[str, type[PairEncoder]] = {cls.model_type: cls for cls in (SiameseLSTM, DualEncoder, MiniLM, CrossEncoder)}
assert tuple(MODEL_TYPES) == MODEL_NAMES, "core.model_names must list every family, in menu order"
MAX_PARAMETERS_ENV = "SIAMESE_LAB_MAX_PARAMETERS"
DEFAULT_MAX_PARAMETERS = 200_000_000


class ModelTooLarge(ValueError):
    """A model config whose parameter count is over ``max_parameters()``."""


def max_parameters() -> int:
    """``SIAMESE_LAB_MAX_PARAMETERS`` (a positive integer) when set, else the default; ValueError for anything else."""
    raw = os.environ.get(MAX_PARAMETERS_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_PARAMETERS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{MAX_PARAMETERS_ENV} must be a positive integer, got {raw!r:.40}")
    return value


def check_model_size(model_type: str, config) -> int:
    """The parameter count of a ``model_type`` model from its config dataclass, allocating nothing; ``ModelTooLarge``
    over ``max_parameters()``."""
    count = int(MODEL_TYPES[model_type].parameter_count(config))
    limit = max_parameters()
    if count > limit:
        size = f"{count * 4 / 2**30:,.1f} GiB" if count * 4 >= 2**30 else f"{count * 4 / 2**20:,.1f} MiB"
        raise ModelTooLarge(
            f"this {model_type} model would have {count:,} parameters ({size} as float32), "
            f"more than the limit of {limit:,}; set {MAX_PARAMETERS_ENV} to a larger number to allow it")
    return count


def build_model(spec, train_texts: Sequence[str]) -> PairEncoder:
    return MODEL_TYPES[spec.model].for_run(spec, train_texts)


def zero_shot_config() -> dict:
    return {"model_type": MiniLM.model_type, "name": "minilm (zero-shot)", "zero_shot": True,
            "thresholds": {"accuracy": ZERO_SHOT_THRESHOLD, "f1": ZERO_SHOT_THRESHOLD}}


def load_model(source: str | Path, device: str = "cpu") -> tuple[PairEncoder, dict]:
    """(the model in eval mode on ``device``, its config) of ``ZERO_SHOT`` (the pretrained MiniLM), a saved model
    folder, or a calibrated copy (its parent's weights, with the copy's config); ModelLoadError says which file and
    why a folder cannot be used."""
    if str(source) == ZERO_SHOT:
        return for_inference(MiniLM.pretrained(), device), zero_shot_config()
    from core.saving import CONFIG_FILE, WEIGHTS_FILE, config_from_dict, read_weights
    from core.saving.model_folder import check_weight_dtypes, weights_max_bytes
    from core.text.pair_table import read_tokenizer

    folder = Path(source)
    # 1. config.json: a regular file <= 1 MiB, shallow JSON, known format and type, usable metadata.
    config = read_config(folder)
    if is_calibrated(config):  # the parent's weights, this folder's thresholds
        parent = parent_of(folder, config)  # the same files as when the copy was made, or refused
        if parent == TFIDF or config["model_type"] in (TFIDF, STACKED):
            kind = "a stacked scorer" if config["model_type"] == STACKED else "a calibrated TF-IDF baseline"
            raise ModelLoadError(f"{folder} is {kind}: it has no vectors (only evaluate, score, predict and calibrate "
                                 "take it)")
        return load_model(parent, device)[0], config
    model_class = MODEL_TYPES[config["model_type"]]
    # 2. every field of the model config typed and bounded; 3. the parameter count under the limit.
    try:
        model_config = config_from_dict(model_class.config_class, config.get("model_config", {}))
        parameters = check_model_size(config["model_type"], model_config)
    except ValueError as error:  # ModelLoadError, ModelTooLarge, a bad SIAMESE_LAB_MAX_PARAMETERS
        raise ModelLoadError(f"{folder / CONFIG_FILE}: {error}") from None
    # 4. the vocabulary (a regular file <= 64 MiB) of exactly the size the config says.
    tokenizer = read_tokenizer(folder, config, vocab_size=model_class.vocab_size_of(model_config))
    try:
        model_class.check_tokenizer(model_config, tokenizer)
    except ValueError as error:
        raise ModelLoadError(f"{folder}: the tokenizer does not fit {CONFIG_FILE}: {error}") from None
    # 5. the weights: a regular file no larger than this model needs, every value finite.
    weights = read_weights(folder, max_bytes=weights_max_bytes(parameters))
    try:
        model = model_class(model_config, tokenizer)
    except Exception as error:  # noqa: BLE001 - a checked config that still cannot build is a bad folder
        raise ModelLoadError(f"{folder}: cannot build the model from its config: {error}") from None
    # 6. strict: every tensor present, of the dtype and shape the config gives.
    check_weight_dtypes(weights, {name: value.dtype for name, value in model.state_dict().items()},
                        folder / WEIGHTS_FILE)
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as error:
        first = " ".join(str(error).splitlines()[:3])
        raise ModelLoadError(f"{folder / WEIGHTS_FILE} does not fit the model in {CONFIG_FILE}: {first}") from None
    return for_inference(model, device), config


def scores_pairs_only(source: str | Path) -> bool:
    """Whether the load source is a cross-encoder's folder (or a copy of one): it scores pairs and has no vectors."""
    if str(source) in (ZERO_SHOT, TFIDF) or not Path(source).is_dir():
        return False
    try:
        return read_config(source).get("model_type") == CrossEncoder.model_type
    except ModelLoadError:
        return False


def encoding_dtype(model_type: str, device) -> torch.dtype:
    """float16 on CUDA for the families that allow it (``half_precision_encoding``), else float32."""
    import torch

    half = torch.device(device).type == "cuda" and MODEL_TYPES[model_type].half_precision_encoding
    return torch.float16 if half else torch.float32


def encodes_in_half(source: str | Path, device: str) -> bool:
    """Whether ``load_model(source, device)`` would encode in float16, told from its config alone."""
    from core.device import DeviceError, resolve_device

    try:
        if resolve_device(device).type != "cuda":
            return False
        model_type = MiniLM.model_type if str(source) == ZERO_SHOT else read_config(source).get("model_type")
    except (DeviceError, ModelLoadError):
        return False
    return model_type in MODEL_TYPES and MODEL_TYPES[model_type].half_precision_encoding


def for_inference(model: PairEncoder, device) -> PairEncoder:
    model.encoding_dtype = encoding_dtype(model.model_type, device)
    return model.to(device).eval()


# ---- calibrated copies (core.saving.model_folder): which model one stands for, checked before it is served ----
def _digest_limit() -> int:
    """The largest parent file read for its digest: the weights of the largest model allowed."""
    from core.saving import weights_max_bytes

    try:
        return weights_max_bytes(2 * max_parameters())  # MiniLM's package file also holds its pooler
    except ValueError as error:  # SIAMESE_LAB_MAX_PARAMETERS set to something other than a count
        raise ModelLoadError(str(error)) from None


def source_folder(source: str | Path) -> Path | None:
    """The folder a load source's vectors come from (the package for zero-shot MiniLM); None for TF-IDF."""
    if str(source) == TFIDF:
        return None
    if str(source) == ZERO_SHOT:
        from core.text.wordpiece_tokenizer import minilm_folder

        return minilm_folder()
    return Path(source)


def parent_record(source: str | Path, name: str) -> dict:
    """``calibrated_from`` of a copy of ``source``: the source by name or absolute path, its name, its files' digest."""
    folder = source_folder(source)
    if folder is None:
        return {"source": TFIDF, "name": name}
    shown = ZERO_SHOT if str(source) == ZERO_SHOT else os.path.abspath(folder)
    return {"source": shown, "name": name, "sha256": folder_digest(folder, _digest_limit())}


def parent_of(folder: str | Path, config: dict) -> str | Path:
    """The load source of the calibrated copy in ``folder``; ModelLoadError, one line, when the parent is unknown,
    missing, itself a copy, or no longer the model the thresholds were calibrated on."""
    record = config[CALIBRATED_FROM]
    source = record["source"]
    if source == TFIDF:
        return TFIDF
    parent = parent_folder(config)
    if source != ZERO_SHOT and parent is None:
        raise ModelLoadError(f"{folder}: {CALIBRATED_FROM}.source must be 'minilm', 'tfidf' or an absolute path, "
                             f"got {source!r:.80}")
    if parent is not None:
        if not parent.is_dir():
            raise ModelLoadError(f"{folder} was calibrated from {parent}, which is gone; calibrate the model again")
        if is_calibrated(read_config(parent)):
            raise ModelLoadError(f"{folder} points at {parent}, itself a calibrated copy; calibrate the original")
    files = source_folder(source)
    if record.get("sha256") != folder_digest(files, _digest_limit()):
        raise ModelLoadError(f"{folder} was calibrated on another version of {files} (its files changed since); "
                             "calibrate the model again")
    return source if parent is None else parent
