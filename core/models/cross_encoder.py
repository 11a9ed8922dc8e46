"""The MiniLM cross-encoder: ``[CLS] q1 [SEP] q2 [SEP]`` in one forward pass, one duplicate logit out.

Its tokens attend across the two questions, a comparison a bi-encoder cannot make. It has no vectors: it scores
pairs and confirms a bi-encoder's candidates (``core.inference.dedup``). Each question is tokenised alone, then joined.

Reference: Thakur et al. (2021), "Augmented SBERT", whose cross-encoder this is.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from core.models.minilm import MiniLM, bert_size, check_bert_config
from core.text.pair_table import Side
from core.text.token_table import TokenTable


@dataclass
class CrossEncoderConfig:
    max_length: int = 64  # tokens per question, [CLS]/[SEP] included: the joined pair has up to twice as many
    dropout: float = 0.1  # on the pooled vector, before the logit
    bert: dict = field(default_factory=dict)  # the BertConfig of the weights

    def __post_init__(self):
        check_bert_config(self.bert)


class CrossEncoder(MiniLM):
    """BERT over the joined pair -> mean of its real tokens (MiniLM was trained to mean-pool) -> dropout -> logit."""

    model_type = "cross-encoder"
    config_class = CrossEncoderConfig

    def __init__(self, config: CrossEncoderConfig, tokenizer):
        super().__init__(config, tokenizer)
        self.dropout = nn.Dropout(config.dropout)
        self.head = nn.Linear(self.bert.config.hidden_size, 1)

    @classmethod
    def parameter_count(cls, config: CrossEncoderConfig) -> int:
        return super().parameter_count(config) + bert_size(config.bert, "hidden_size") + 1

    @classmethod
    def input_length(cls, max_length: int) -> int:
        return 2 * max_length - 1  # both questions joined, the second one's [CLS] dropped

    @property
    def embedding_dim(self) -> int:
        raise TypeError("a cross-encoder reads both questions together and has no vectors")

    def embed(self, input_ids, attention_mask, tower: int = 0):
        raise TypeError("a cross-encoder reads both questions together and has no vectors: it scores pairs")

    def forward(self, first: Side, second: Side, negatives=None):
        """(logits (B,), None, None): the trainer's ``(v1, v2, vn)`` for the pair-classification loss."""
        return self.logits(*joined(first, second)), None, None

    def logits(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        """(B,) duplicate logits of joined pairs (``joined``): ids, mask and token types (B, T)."""
        hidden = self.bert(input_ids=ids, attention_mask=mask.long(), token_type_ids=types).last_hidden_state
        weights = mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)  # (B, h)
        return self.head(self.dropout(pooled)).squeeze(-1)

    @torch.inference_mode()
    def score_tables(self, first: TokenTable, second: TokenTable, batch_size: int = 256, progress=None) -> np.ndarray:
        """(N,) duplicate probabilities in the tables' order, pairs run in length order within a token budget."""
        scores = np.empty(len(first), dtype=np.float64)

        def run(rows: np.ndarray) -> None:
            sides = [tuple(t.to(self.device) for t in table.take(rows)) for table in (first, second)]
            scores[rows] = torch.sigmoid(self(*sides)[0].float()).cpu().numpy()

        self.in_batches(first.lengths + second.lengths, batch_size, PAIR_TOKEN_BUDGET, run, progress)
        return scores


PAIR_TOKEN_BUDGET = 2048  # joined tokens per scoring batch: rows x the batch's longest pair


def joined(first: Side, second: Side) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[CLS] q1 [SEP]`` and ``q2 [SEP]`` joined per row, padded at the end: ids, bool mask, token types (B, T)."""
    (ids1, mask1), (ids2, mask2) = first, second
    ids = torch.cat([ids1, ids2[:, 1:]], dim=1)
    mask = torch.cat([mask1, mask2[:, 1:]], dim=1)
    types = torch.cat([torch.zeros_like(ids1), torch.ones_like(ids2[:, 1:])], dim=1)
    # Each row's real tokens first, in order, then its padding: a stable sort on "is padding".
    order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)
    width = int(mask.sum(1).max())
    take = lambda tensor: torch.gather(tensor, 1, order)[:, :width]  # noqa: E731
    mask = take(mask)
    return take(ids), mask, take(types) * mask
