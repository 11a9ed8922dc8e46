"""all-MiniLM-L6-v2, the pretrained sentence encoder, loaded from its installed package folder."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from core.models.base import PairEncoder
from core.tokenizers import bert_wordpiece, minilm_folder

# Cosine threshold for zero-shot MiniLM, used whenever a zero-shot verdict is asked for without an
# explicit threshold. It approximates the best-accuracy threshold of zero-shot MiniLM on the bundled
# sample (assets/sample_pairs.csv, 479 pairs): core.metrics.best_thresholds on its cosines gives
# 0.779 (accuracy 0.820 there; 0.800 at 0.80). No command computes it; it is a fixed constant.
ZERO_SHOT_THRESHOLD = 0.80


@dataclass
class MiniLMConfig:
    max_length: int = 64  # tokens per question, [CLS]/[SEP] included; Quora questions are short
    normalize: bool = True  # L2-normalise the mean-pooled vector, as sentence-transformers does
    bert: dict = field(default_factory=dict)  # the BertConfig of the weights (filled from the package)


class MiniLM(PairEncoder):
    """One BERT encoder for both sides (Siamese) -> mean pooling over real tokens -> normalise."""

    model_type = "minilm"
    config_class = MiniLMConfig

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
        import json

        from safetensors.torch import load_file

        folder = minilm_folder()
        bert_config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        model = cls(MiniLMConfig(max_length=max_length, bert=bert_config), bert_wordpiece(max_length))
        # The checkpoint carries BERT's pooler (unused by mean pooling) and a position-id buffer
        # that current transformers rebuilds itself.
        weights = {k: v for k, v in load_file(folder / "model.safetensors").items() if not k.startswith("pooler.") and k != "embeddings.position_ids"}
        model.bert.load_state_dict(weights, strict=True)
        return model

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
