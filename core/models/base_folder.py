"""A local Hugging Face BERT folder to fine-tune instead of the bundled all-MiniLM-L6-v2 (``train --base-model``).

It comes from elsewhere, so it is read as a saved model folder is: data only, never code and never a pickle.
"""
from __future__ import annotations

from pathlib import Path

from core.models.minilm import MiniLM, MiniLMConfig, bert_size
from core.models.registry import check_model_size
from core.saving.files import CONFIG_MAX_BYTES, ModelLoadError, read_json_file

WEIGHTS = "model.safetensors"
VOCAB = "vocab.txt"
TOKENIZER_CONFIG = "tokenizer_config.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
# Keys of older BERT configs that change nothing in the encoder the lab builds (the pooler is dropped).
IGNORED_KEYS = frozenset({"pooler_fc_size", "pooler_num_attention_heads", "pooler_num_fc_layers",
                          "pooler_size_per_head", "pooler_type", "directionality", "output_past"})
# A checkpoint saved from a model with heads holds the encoder under "bert."; the heads are not used.
ENCODER_PREFIX = "bert."
UNUSED_WEIGHTS = ("pooler.", "cls.", "classifier.", "qa_outputs.")


def check_base_folder(folder: str | Path) -> dict:
    """The BertConfig of the BERT folder ``folder`` once it passes every check that needs no weights;
    ModelLoadError, one line, naming what is wrong."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelLoadError(f"no folder at {folder}")
    names = sorted(path.name for path in folder.iterdir())
    code = [name for name in names if name.endswith(".py")]
    if code:
        raise ModelLoadError(f"{folder} holds Python code ({code[0]}); a base model's code is never run, "
                             "so only a plain BERT folder can be used")
    if WEIGHTS not in names:
        pickles = [name for name in names if name.endswith(PICKLE_SUFFIXES)]
        why = (f"holds only pickled weights ({pickles[0]}), which are never loaded: save them as safetensors "
               f"(save_pretrained(..., safe_serialization=True))" if pickles else f"has no {WEIGHTS}")
        raise ModelLoadError(f"{folder} {why}")
    config = _json(folder, "config.json")
    # No custom tokenizer code, and a lower-casing tokenizer: the lab's WordPiece always lower-cases.
    settings = _json(folder, TOKENIZER_CONFIG) if TOKENIZER_CONFIG in names else {}
    if "auto_map" in settings:
        raise ModelLoadError(f"{folder / TOKENIZER_CONFIG} names custom code (auto_map); only plain BERT folders "
                             "are used")
    if settings.get("do_lower_case") is False:
        raise ModelLoadError(f"{folder / TOKENIZER_CONFIG} says do_lower_case false: the lab's WordPiece "
                             "tokenizer lower-cases, so a cased model cannot be fine-tuned here")
    bert = {key: value for key, value in config.items() if key not in IGNORED_KEYS | {"dtype", "torch_dtype"}}
    try:  # MiniLMConfig refuses any key it does not know (auto_map too) and a model_type other than "bert"
        check_model_size("minilm", MiniLMConfig(bert={"model_type": None, **bert}))
    except ValueError as error:  # ModelTooLarge too; the weights are read as float32 whatever their dtype
        raise ModelLoadError(f"{folder / 'config.json'}: {error}") from None
    if VOCAB not in names:
        raise ModelLoadError(f"{folder} has no {VOCAB}: the lab reads BERT WordPiece vocabularies")
    return bert


def _json(folder: Path, name: str) -> dict:
    value = read_json_file(folder / name, CONFIG_MAX_BYTES, folder=folder)
    if not isinstance(value, dict):
        raise ModelLoadError(f"{folder / name} is not a JSON object")
    return value


def base_minilm(folder: str | Path, max_length: int = 64, family: type[MiniLM] = MiniLM) -> MiniLM:
    """A ``MiniLM`` (or ``family``, the cross-encoder) holding the encoder and vocabulary of the BERT folder."""
    import torch

    from core.saving.model_folder import read_weights, weights_max_bytes
    from core.text.wordpiece_tokenizer import WordPieceTokenizer

    folder = Path(folder)
    bert = check_base_folder(folder)
    config = family.config_class(max_length=max_length, bert=bert)
    # Room for twice the encoder, as for the bundled MiniLM: a checkpoint may carry a pooler and heads too.
    weights = read_weights(folder, max_bytes=weights_max_bytes(2 * MiniLM.parameter_count(config)))
    encoder = {}
    for name, tensor in weights.items():
        name = name.removeprefix(ENCODER_PREFIX)
        if not name.startswith(UNUSED_WEIGHTS) and name != "embeddings.position_ids":
            encoder[name] = tensor.to(torch.float32) if tensor.is_floating_point() else tensor
            # read_weights found every value finite in its own dtype; float64's may still overflow float32
            if encoder[name].is_floating_point() and not bool(torch.isfinite(encoder[name]).all()):
                raise ModelLoadError(f"{folder}: the weight {name[:200]} is not finite as float32 (it was saved as "
                                     f"{str(tensor.dtype).removeprefix('torch.')}); refused")
    try:
        tokenizer = WordPieceTokenizer(folder / VOCAB, max_length=max_length, folder=folder,
                                       vocab_size=bert_size(bert, "vocab_size"))
        family.check_tokenizer(config, tokenizer)
        model = family(config, tokenizer)
        model.bert.load_state_dict(encoder, strict=True)
    except (ValueError, UnicodeDecodeError, RuntimeError) as error:  # RuntimeError: a tensor missing or misshapen
        raise ModelLoadError(f"{folder}: {' '.join(str(error).splitlines()[:2])[:300]}") from None
    return model
