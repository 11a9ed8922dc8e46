"""all-MiniLM-L6-v2, the pretrained sentence encoder, loaded from its installed package folder."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from core.models.base import PairEncoder
from core.text.wordpiece_tokenizer import bert_wordpiece, minilm_folder

# Zero-shot MiniLM's cosine threshold when none is given: about its best-accuracy threshold on the bundled sample.
ZERO_SHOT_THRESHOLD = 0.80


# ---- the ``bert`` sub-config: what transformers.BertConfig may be given from a model folder ----------
# Sizes BertConfig falls back to when a key is absent (transformers' defaults; tests check them).
BERT_DEFAULTS = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                 "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2}
_INT_MAX = 10_000_000
_HIDDEN_ACTS = frozenset({"gelu", "relu", "silu", "swish", "gelu_new", "gelu_fast", "gelu_python",
                          "gelu_pytorch_tanh", "quick_gelu", "tanh", "mish", "gelu_accurate"})
_NONE = frozenset({None})


def _fits(rule, value) -> bool:
    """Whether ``value`` is what ``rule`` allows: a range of integers, a (low, high) pair of finite numbers, a set of
    values (compared with their type), a JSON type, or a list of rules of which one must hold."""
    if isinstance(rule, list):
        return any(_fits(each, value) for each in rule)
    if isinstance(rule, frozenset):
        return any(value is a or (type(value) is type(a) and value == a) for a in rule)
    if isinstance(value, bool) and rule is not bool:
        return False
    if isinstance(rule, range):
        return isinstance(value, int) and value in rule
    if isinstance(rule, tuple):
        return isinstance(value, (int, float)) and math.isfinite(value) and rule[0] <= value <= rule[1]
    return isinstance(value, rule)


# Every key BertConfig may be given from a folder, and what its value may be (``_fits``); anything else is refused.
BERT_KEYS = {
    **dict.fromkeys(("vocab_size", "hidden_size", "num_attention_heads", "intermediate_size", "type_vocab_size"),
                    range(1, _INT_MAX + 1)),
    "num_hidden_layers": range(257),
    "max_position_embeddings": range(1, 65_537),
    "chunk_size_feed_forward": range(_INT_MAX + 1),
    "hidden_act": _HIDDEN_ACTS,
    **dict.fromkeys(("hidden_dropout_prob", "attention_probs_dropout_prob"), (0.0, 1.0)),
    "classifier_dropout": [_NONE, (0.0, 1.0)],
    "initializer_range": (0.0, 10.0),
    "layer_norm_eps": (1e-30, 1.0),
    "pad_token_id": [_NONE, range(_INT_MAX)],
    **dict.fromkeys(("bos_token_id", "eos_token_id"), [_NONE, range(_INT_MAX), list]),
    "position_embedding_type": frozenset({"absolute"}),
    "model_type": frozenset({"bert"}),
    "architectures": [_NONE, list],
    "_name_or_path": str,
    "transformers_version": [_NONE, str],
    **dict.fromkeys(("gradient_checkpointing", "use_cache", "tie_word_embeddings", "output_attentions",
                     "output_hidden_states"), bool),
    "return_dict": frozenset({True}),
    **dict.fromkeys(("is_decoder", "add_cross_attention", "is_encoder_decoder"), frozenset({False})),
    **dict.fromkeys(("dtype", "torch_dtype"), frozenset({None, "float32"})),
    "problem_type": frozenset({None, "regression", "single_label_classification", "multi_label_classification"}),
    **dict.fromkeys(("id2label", "label2id"), [_NONE, dict]),
}


def bert_size(bert: dict, key: str) -> int:
    """``bert[key]``, or BertConfig's default for it."""
    return int(bert.get(key, BERT_DEFAULTS[key]))


def check_bert_config(bert: dict) -> None:
    """ValueError unless ``bert`` holds only keys of ``BERT_KEYS``, each with a value it allows, and the
    sizes fit together (heads divide the width, the padding id is a token id)."""
    unknown = sorted(set(bert) - set(BERT_KEYS))
    if unknown:
        raise ValueError(f"bert has unknown or unsupported key(s): {', '.join(map(str, unknown))[:200]}")
    for key, value in bert.items():
        if not _fits(BERT_KEYS[key], value):
            raise ValueError(f"bert.{key} cannot be {value!r:.80}")
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

    def __init__(self, config: MiniLMConfig, tokenizer):
        super().__init__(config, tokenizer)
        from transformers import BertConfig, BertModel

        # Random init from the stored architecture: the caller loads the weights.
        self.bert = BertModel(BertConfig(**config.bert), add_pooling_layer=False)

    @classmethod
    def pretrained(cls, max_length: int = 64) -> "MiniLM":
        """The installed all-MiniLM-L6-v2 weights, usable zero-shot or as a start for fine-tuning. The package is the
        lab's own environment, not a folder from elsewhere: read as it is (``MiniLMConfig`` checks its config)."""
        from safetensors.torch import load_file

        folder = minilm_folder()
        bert_config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        # The pooler is unused by mean pooling; the position-id buffer is rebuilt by current transformers.
        weights = {k: v for k, v in load_file(folder / "model.safetensors").items()
                   if not k.startswith("pooler.") and k != "embeddings.position_ids"}
        model = cls(cls.config_class(max_length=max_length, bert=bert_config), bert_wordpiece(max_length))
        model.bert.load_state_dict(weights, strict=True)
        return model

    @classmethod
    def parameter_count(cls, config: MiniLMConfig) -> int:
        """BertModel without its pooler, in closed form."""
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
    def input_length(cls, max_length: int) -> int:
        """The longest input the encoder reads at once: one question of ``max_length`` tokens."""
        return max_length

    @classmethod
    def check_tokenizer(cls, config: MiniLMConfig, tokenizer) -> None:
        positions, longest = bert_size(config.bert, "max_position_embeddings"), cls.input_length(tokenizer.max_length)
        if longest > positions:
            raise ValueError(f"inputs of up to {longest} tokens ({tokenizer.max_length} per question) do not fit "
                             f"the model's {positions} positions")

    @classmethod
    def for_run(cls, spec, train_texts) -> "MiniLM":
        """The pretrained weights, to fine-tune: a run only chooses the max length."""
        return cls.pretrained(max_length=spec.max_length)

    @property
    def embedding_dim(self) -> int:
        return int(self.bert.config.hidden_size)

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, tower: int = 0) -> torch.Tensor:
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask.long()).last_hidden_state  # (B, T, h)
        m = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
        pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)  # (B, h)
        return F.normalize(pooled, dim=-1) if self.config.normalize else pooled
