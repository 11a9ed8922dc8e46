"""all-MiniLM-L6-v2, the pretrained sentence encoder, loaded from its installed package folder."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from core.models.base import PairEncoder
from core.text.wordpiece_tokenizer import bert_wordpiece, minilm_folder

# Cosine threshold for zero-shot MiniLM, used whenever a zero-shot verdict is asked for without an
# explicit threshold. It approximates the best-accuracy threshold of zero-shot MiniLM on the bundled
# sample (assets/sample_pairs.csv, 479 pairs): core.inference.metrics.best_thresholds on its cosines gives
# 0.779 (accuracy 0.820 there; 0.800 at 0.80). No command computes it; it is a fixed constant.
ZERO_SHOT_THRESHOLD = 0.80


# ---- the ``bert`` sub-config: what transformers.BertConfig may be given from a model folder ----------
# Sizes BertConfig falls back to when a key is absent (transformers' defaults; tests/test_hostile_folders.py
# checks them against BertConfig()).
BERT_DEFAULTS = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                 "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2}
BERT_MAX_LAYERS = 256
BERT_MAX_POSITIONS = 65_536
_INT_MAX = 10_000_000
_HIDDEN_ACTS = frozenset({"gelu", "relu", "silu", "swish", "gelu_new", "gelu_fast", "gelu_python",
                          "gelu_pytorch_tanh", "quick_gelu", "tanh", "mish", "gelu_accurate"})


def _int(low: int, high: int):
    def check(value):
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            return f"an integer in {low:,}..{high:,}"
    return check


def _float(low: float, high: float):
    def check(value):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) \
                or not low <= value <= high:
            return f"a finite number in [{low:g}, {high:g}]"
    return check


def _one_of(*allowed):
    def check(value):
        if not any(value is a or (type(value) is type(a) and value == a) for a in allowed):
            return "one of " + ", ".join(repr(a) for a in allowed)
    return check


def _optional(inner):
    def check(value):
        return None if value is None else inner(value)
    return check


def _bool(value):
    if not isinstance(value, bool):
        return "true or false"


def _text(max_chars: int):
    def check(value):
        if not isinstance(value, str) or len(value) > max_chars:
            return f"a string of at most {max_chars} characters"
    return check


def _small_list_of_text(value):
    if not isinstance(value, list) or len(value) > 16 or not all(isinstance(v, str) and len(v) <= 128 for v in value):
        return "a list of at most 16 short strings"


def _label_map(value):
    if not isinstance(value, dict) or len(value) > 1024 or not all(
            isinstance(v, (str, int)) and not isinstance(v, bool) and len(str(v)) <= 128 and len(str(k)) <= 128
            for k, v in value.items()):
        return "a mapping of at most 1,024 short labels"


def _id_or_ids(value):
    ids = value if isinstance(value, list) else [value]
    if len(ids) > 16 or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < _INT_MAX for i in ids):
        return "null, a token id or a list of token ids"


# Every key BertConfig may be given from a folder, and what its value may be. Anything else (an
# unknown key, cross-attention, a decoder, relative positions) is refused.
BERT_KEYS = {
    "vocab_size": _int(1, _INT_MAX),
    "hidden_size": _int(1, _INT_MAX),
    "num_hidden_layers": _int(0, BERT_MAX_LAYERS),
    "num_attention_heads": _int(1, _INT_MAX),
    "intermediate_size": _int(1, _INT_MAX),
    "max_position_embeddings": _int(1, BERT_MAX_POSITIONS),
    "type_vocab_size": _int(1, _INT_MAX),
    "hidden_act": _one_of(*sorted(_HIDDEN_ACTS)),
    "hidden_dropout_prob": _float(0.0, 1.0),
    "attention_probs_dropout_prob": _float(0.0, 1.0),
    "classifier_dropout": _optional(_float(0.0, 1.0)),
    "initializer_range": _float(0.0, 10.0),
    "layer_norm_eps": _float(1e-30, 1.0),
    "pad_token_id": _optional(_int(0, _INT_MAX)),
    "bos_token_id": _optional(_id_or_ids),
    "eos_token_id": _optional(_id_or_ids),
    "position_embedding_type": _one_of("absolute"),
    "model_type": _one_of("bert"),
    "architectures": _optional(_small_list_of_text),
    "_name_or_path": _text(4096),
    "transformers_version": _optional(_text(64)),
    "gradient_checkpointing": _bool,
    "use_cache": _bool,
    "tie_word_embeddings": _bool,
    "output_attentions": _bool,
    "output_hidden_states": _bool,
    "return_dict": _one_of(True),
    "is_decoder": _one_of(False),
    "add_cross_attention": _one_of(False),
    "is_encoder_decoder": _one_of(False),
    "chunk_size_feed_forward": _int(0, _INT_MAX),
    "dtype": _optional(_one_of("float32")),
    "torch_dtype": _optional(_one_of("float32")),
    "problem_type": _optional(_one_of("regression", "single_label_classification", "multi_label_classification")),
    "id2label": _optional(_label_map),
    "label2id": _optional(_label_map),
}


def bert_size(bert: dict, key: str) -> int:
    """``bert[key]``, or BertConfig's default for it."""
    return int(bert.get(key, BERT_DEFAULTS[key]))


def check_bert_config(bert: dict) -> None:
    """ValueError unless ``bert`` holds only keys of ``BERT_KEYS``, each with a value it allows, and the
    sizes fit together (heads divide the width, the padding id is a token id)."""
    if not isinstance(bert, dict):
        raise ValueError("bert must be a JSON object")
    unknown = sorted(set(bert) - set(BERT_KEYS))
    if unknown:
        raise ValueError(f"bert has unknown or unsupported key(s): {', '.join(map(str, unknown))[:200]}")
    for key, value in bert.items():
        problem = BERT_KEYS[key](value)
        if problem:
            raise ValueError(f"bert.{key} must be {problem}, got {value!r:.80}")
    hidden, heads = bert_size(bert, "hidden_size"), bert_size(bert, "num_attention_heads")
    if hidden % heads:
        raise ValueError(f"bert.hidden_size ({hidden}) must be divisible by bert.num_attention_heads ({heads})")
    pad = bert.get("pad_token_id", 0)
    if pad is not None and pad >= bert_size(bert, "vocab_size"):
        raise ValueError(f"bert.pad_token_id ({pad}) must be below bert.vocab_size ({bert_size(bert, 'vocab_size')})")


@dataclass
class MiniLMConfig:
    max_length: int = 64  # tokens per question, [CLS]/[SEP] included; Quora questions are short
    normalize: bool = True  # L2-normalise the mean-pooled vector, as sentence-transformers does
    bert: dict = field(default_factory=dict)  # the BertConfig of the weights (filled from the package)

    def __post_init__(self):
        check_bert_config(self.bert)


class MiniLM(PairEncoder):
    """One BERT encoder for both sides (Siamese) -> mean pooling over real tokens -> normalise."""

    model_type = "minilm"
    config_class = MiniLMConfig
    half_precision_encoding = True

    def __init__(self, config: MiniLMConfig, tokenizer, bert=None):
        super().__init__(config, tokenizer)
        from transformers import BertConfig, BertModel

        if bert is None:
            # Random init from the stored architecture: the weights are loaded by core.saving.
            bert = BertModel(BertConfig(**config.bert), add_pooling_layer=False)
        self.bert = bert

    @classmethod
    def pretrained(cls, max_length: int = 64) -> "MiniLM":
        """The installed all-MiniLM-L6-v2 weights, usable zero-shot or as a start for fine-tuning."""
        bert_config, weights = pretrained_bert()
        model = cls(cls.config_class(max_length=max_length, bert=bert_config), bert_wordpiece(max_length))
        model.bert.load_state_dict(weights, strict=True)
        return model

    @classmethod
    def parameter_count(cls, config: MiniLMConfig) -> int:
        """BertModel without its pooler: word, position and token-type tables and a layer norm, then
        per layer the query/key/value/output projections, the feed-forward pair and two layer norms."""
        bert = config.bert
        h, inner = bert_size(bert, "hidden_size"), bert_size(bert, "intermediate_size")
        tables = (bert_size(bert, "vocab_size") + bert_size(bert, "max_position_embeddings")
                  + bert_size(bert, "type_vocab_size")) * h + 2 * h
        layer = 4 * (h * h + h) + 2 * h + (h * inner + inner) + (inner * h + h) + 2 * h
        return tables + bert_size(bert, "num_hidden_layers") * layer

    @classmethod
    def vocab_size_of(cls, config: MiniLMConfig) -> int:
        return bert_size(config.bert, "vocab_size")

    @classmethod
    def check_tokenizer(cls, config: MiniLMConfig, tokenizer) -> None:
        super().check_tokenizer(config, tokenizer)
        positions = bert_size(config.bert, "max_position_embeddings")
        if tokenizer.max_length > positions:
            raise ValueError(f"the tokenizer keeps up to {tokenizer.max_length} tokens but the model has "
                             f"{positions} positions")

    @classmethod
    def for_run(cls, spec, train_texts) -> "MiniLM":
        """The pretrained weights, to fine-tune: a run only chooses the max length (a run with a ``base_model``
        starts from ``core.models.base_folder.base_minilm`` instead)."""
        return cls.pretrained(max_length=spec.max_length)

    @property
    def embedding_dim(self) -> int:
        return int(self.bert.config.hidden_size)

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, tower: int = 0) -> torch.Tensor:
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask.long()).last_hidden_state  # (B, T, h)
        m = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
        pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)  # (B, h)
        return F.normalize(pooled, dim=-1) if self.config.normalize else pooled


def pretrained_bert() -> tuple[dict, dict]:
    """The installed all-MiniLM-L6-v2: its BertConfig (checked by ``check_bert_config``) and the
    state dict of a ``BertModel`` without pooler, read from the package folder with size checks.
    ``MiniLM.pretrained`` (and so the cross-encoder's) starts from it."""
    from safetensors.torch import load_file

    from core.saving.files import CONFIG_MAX_BYTES, check_regular_file, read_json_file
    from core.saving.model_folder import weights_max_bytes

    folder = minilm_folder()
    bert_config = read_json_file(folder / "config.json", CONFIG_MAX_BYTES, folder=folder)
    # MiniLMConfig checks the config; room for twice the model: the checkpoint also carries the pooler and a position-id buffer.
    check_regular_file(folder / "model.safetensors",
                       weights_max_bytes(2 * MiniLM.parameter_count(MiniLMConfig(bert=bert_config))), folder=folder)
    # The pooler is unused by mean pooling; the position-id buffer is rebuilt by current transformers.
    weights = {k: v for k, v in load_file(folder / "model.safetensors").items()
               if not k.startswith("pooler.") and k != "embeddings.position_ids"}
    return bert_config, weights
