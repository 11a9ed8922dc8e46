"""A MiniLM cross-encoder: both questions in one forward pass, one duplicate logit out.

``[CLS] q1 [SEP] q2 [SEP]`` goes through the BERT layers, whose tokens can then attend across the
two questions: word by word comparison that a bi-encoder, which squeezes each question into one
vector first, cannot make. It is far slower to search with (every pair is a forward pass, nothing
can be indexed), so here it is a teacher and an upper reference, not a model users serve.

Reference: Thakur et al. (2021), "Augmented SBERT", which trains such a cross-encoder on the gold
pairs and distils it into the bi-encoder (``core.training.distillation``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn as nn

from core.models.minilm import check_bert_config, pretrained_bert
from core.text.wordpiece_tokenizer import WORDPIECE_VOCAB_FILE
from core.text.wordpiece_tokenizer import minilm_folder

PairTokens = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # ids, mask, token types: (B, T) each


@dataclass
class CrossEncoderConfig:
    max_length: int = 80  # tokens of both questions together, [CLS] and both [SEP] included
    dropout: float = 0.1  # on the pooled vector, before the logit
    bert: dict = field(default_factory=dict)  # the BertConfig of the weights

    def __post_init__(self):
        check_bert_config(self.bert)


class CrossEncoder(nn.Module):
    """BERT over the joined pair -> mean of its real tokens -> dropout -> linear -> logit.

    Mean pooling rather than the [CLS] vector: the MiniLM weights were trained to mean-pool, so the
    head starts from a meaningful vector instead of an untrained one.
    """

    def __init__(self, config: CrossEncoderConfig, vocab_file: Path, bert=None):
        super().__init__()
        from tokenizers import BertWordPieceTokenizer
        from transformers import BertConfig, BertModel

        self.config = config
        self.bert = bert if bert is not None else BertModel(BertConfig(**config.bert), add_pooling_layer=False)
        self.dropout = nn.Dropout(config.dropout)
        self.head = nn.Linear(self.bert.config.hidden_size, 1)
        self.tokenizer = BertWordPieceTokenizer(str(vocab_file), lowercase=True)
        self.tokenizer.enable_truncation(config.max_length)  # longest first: the longer question is cut
        self.tokenizer.enable_padding(pad_id=self.tokenizer.token_to_id("[PAD]"))

    @classmethod
    def pretrained(cls, max_length: int = 80, dropout: float = 0.1) -> "CrossEncoder":
        """The installed all-MiniLM-L6-v2 weights under a fresh logit head."""
        bert_config, weights = pretrained_bert()
        model = cls(CrossEncoderConfig(max_length, dropout, bert_config), minilm_folder() / WORDPIECE_VOCAB_FILE)
        model.bert.load_state_dict(weights, strict=True)
        return model

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def tokenize(self, first: Sequence[str], second: Sequence[str]) -> PairTokens:
        """Both questions of each pair joined, padded to the batch's longest: three (B, T) tensors."""
        if len(first) != len(second):
            raise ValueError(f"{len(first)} first questions for {len(second)} second ones")
        encodings = self.tokenizer.encode_batch([(str(a), str(b)) for a, b in zip(first, second)])
        as_tensor = lambda rows: torch.tensor(rows, dtype=torch.long, device=self.device)  # noqa: E731
        return (as_tensor([e.ids for e in encodings]), as_tensor([e.attention_mask for e in encodings]),
                as_tensor([e.type_ids for e in encodings]))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, token_types: torch.Tensor) -> torch.Tensor:
        """(B,) duplicate logits of the joined pairs; ids, mask, token_types are (B, T)."""
        hidden = self.bert(input_ids=ids, attention_mask=mask, token_type_ids=token_types).last_hidden_state  # (B, T, h)
        weights = mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)  # (B, h)
        return self.head(self.dropout(pooled)).squeeze(-1)  # (B,)

    @torch.no_grad()
    def score_pairs(self, first: Sequence[str], second: Sequence[str], batch_size: int = 128,
                    progress=None) -> np.ndarray:
        """(N,) duplicate probabilities, in the pairs' order. Pairs are scored in length order, so
        each batch pads to little more than its own rows; ``progress(done, total)`` after each batch."""
        first, second = list(first), list(second)
        order = np.argsort([len(a) + len(b) for a, b in zip(first, second)], kind="stable")
        scores = np.empty(len(first), dtype=np.float32)
        was_training = self.training
        self.eval()
        try:
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                logits = self(*self.tokenize([first[i] for i in rows], [second[i] for i in rows]))  # (b,)
                scores[rows] = torch.sigmoid(logits).float().cpu().numpy()
                if progress is not None:
                    progress(min(start + batch_size, len(order)), len(order))
        finally:
            self.train(was_training)
        return scores
