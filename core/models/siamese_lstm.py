"""Siamese LSTM: one set of weights encodes both questions (the course model)."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from core.models.base import PairEncoder
from core.tokenizers import WordTokenizer


@dataclass
class SiameseLSTMConfig:
    vocab_size: int = 30000  # rows of the embedding table; set from the word vocabulary
    embedding_dim: int = 128  # width of each word vector
    hidden_size: int = 128  # LSTM state width per direction
    num_layers: int = field(default=1, metadata={"max": 64})  # stacked LSTM layers
    bidirectional: bool = False  # read the question both ways; doubles the output width
    dropout: float = 0.3  # between stacked layers and on the embeddings; 0.3 measured best on 20k Quora pairs
    pad_id: int = 0  # token id of padding; its embedding stays zero

    def __post_init__(self):
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id ({self.pad_id}) must be a token id below vocab_size ({self.vocab_size})")


class SiameseLSTM(PairEncoder):
    """Embedding -> LSTM -> mean over real tokens (pads masked) -> L2-normalise."""

    model_type = "lstm"
    config_class = SiameseLSTMConfig

    def __init__(self, config: SiameseLSTMConfig, tokenizer):
        super().__init__(config, tokenizer)
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_dim, padding_idx=config.pad_id)
        self.dropout = nn.Dropout(config.dropout)
        self.lstm = nn.LSTM(
            config.embedding_dim,
            config.hidden_size,
            num_layers=config.num_layers,
            bidirectional=config.bidirectional,
            dropout=config.dropout if config.num_layers > 1 else 0.0,
            batch_first=True,
        )

    @classmethod
    def for_run(cls, spec, train_texts) -> "SiameseLSTM":
        """A new model for a ``RunSpec``: its word vocabulary is built from the training texts."""
        tokenizer = WordTokenizer.build(train_texts, min_freq=spec.min_freq, max_size=spec.max_vocab,
                                        max_length=spec.max_length)
        config = SiameseLSTMConfig(**{**spec.model_options, "vocab_size": tokenizer.vocab_size,
                                      "pad_id": tokenizer.pad_id})
        return cls(config, tokenizer)

    @classmethod
    def parameter_count(cls, config: SiameseLSTMConfig) -> int:
        """Embedding table + per direction and layer: 4 gates x (input + hidden) weights and 2 biases."""
        e, h, layers = config.embedding_dim, config.hidden_size, config.num_layers
        directions = 2 if config.bidirectional else 1
        first = directions * (4 * h * (e + h) + 8 * h)  # reads the embeddings
        later = directions * (4 * h * (directions * h + h) + 8 * h)  # reads the layer below, both directions
        return config.vocab_size * e + (first + (layers - 1) * later if layers > 0 else 0)

    @property
    def embedding_dim(self) -> int:
        return self.config.hidden_size * (2 if self.config.bidirectional else 1)

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, tower: int = 0) -> torch.Tensor:
        x = self.dropout(self.embedding(input_ids))  # (B, T, E)
        if self.config.bidirectional:
            # The backward direction would otherwise start on padding; packing makes it start on
            # each question's last real token.
            lengths = attention_mask.sum(1).clamp(min=1).cpu()
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            h, _ = self.lstm(packed)
            h, _ = pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])  # (B, T, 2H)
        else:
            h, _ = self.lstm(x)  # (B, T, H); pads come after the real tokens and are masked below
        m = attention_mask.unsqueeze(-1).to(h.dtype)  # (B, T, 1)
        mean = (h * m).sum(1) / m.sum(1).clamp(min=1.0)  # (B, H')
        return F.normalize(mean, dim=-1)
