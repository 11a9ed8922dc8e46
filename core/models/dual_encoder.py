"""Dual encoder: two independent transformer towers, one per side of the pair (seed 001)."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from core.models.base import PairEncoder
from core.text.wordpiece_tokenizer import bert_wordpiece


@dataclass
class DualEncoderConfig:
    vocab_size: int = 30522  # WordPiece vocabulary (bert-base-uncased); the sizes below train in minutes on a CPU
    d_model: int = 128  # token and position embedding width, and the encoder width
    num_heads: int = 4  # attention heads per layer; must divide d_model
    num_layers: int = field(default=2, metadata={"max": 64})  # encoder layers per tower
    ff_dim: int = 512  # width of each layer's feed-forward block
    dropout: float = 0.1  # inside the encoder layers
    max_length: int = 64  # longest input in tokens, [CLS] and [SEP] included
    projection_dim: int = 128  # width of the output vector the CLS state is projected to
    share_towers: bool = False  # True makes it Siamese: one tower encodes both sides
    pad_id: int = 0  # [PAD] id; masked out of attention

    def __post_init__(self):
        if self.num_heads < 1 or self.d_model % self.num_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id ({self.pad_id}) must be a token id below vocab_size ({self.vocab_size})")


class Tower(nn.Module):
    """Token + position embeddings -> TransformerEncoder -> the [CLS] state -> linear projection."""

    def __init__(self, config: DualEncoderConfig):
        super().__init__()
        self.tokens = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_id)
        self.positions = nn.Embedding(config.max_length, config.d_model)
        layer = nn.TransformerEncoderLayer(
            config.d_model, config.num_heads, config.ff_dim, config.dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, config.num_layers, enable_nested_tensor=False)
        self.projection = nn.Linear(config.d_model, config.projection_dim)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)  # (T,)
        x = self.tokens(input_ids) + self.positions(positions)[None]  # (B, T, d)
        x = self.encoder(x, src_key_padding_mask=~attention_mask)  # (B, T, d)
        return self.projection(x[:, 0])  # (B, p): the [CLS] position


class DualEncoder(PairEncoder):
    model_type = "dual-transformer"
    config_class = DualEncoderConfig
    half_precision_encoding = True

    def __init__(self, config: DualEncoderConfig, tokenizer):
        super().__init__(config, tokenizer)
        first = Tower(config)
        self.towers = nn.ModuleList([first] if config.share_towers else [first, Tower(config)])

    @classmethod
    def for_run(cls, spec, train_texts) -> "DualEncoder":
        """A new model for a ``RunSpec``, on the bert-base-uncased WordPiece vocabulary."""
        tokenizer = bert_wordpiece(spec.max_length)
        config = DualEncoderConfig(**{**spec.model_options, "vocab_size": tokenizer.vocab_size,
                                      "pad_id": tokenizer.pad_id, "max_length": spec.max_length})
        return cls(config, tokenizer)

    @classmethod
    def parameter_count(cls, config: DualEncoderConfig) -> int:
        """Per tower: token and position tables, each layer (attention, feed-forward, two norms), the projection."""
        d, ff = config.d_model, config.ff_dim
        layer = (3 * d * d + 3 * d) + (d * d + d) + (ff * d + ff) + (d * ff + d) + 4 * d
        tower = (config.vocab_size + config.max_length) * d + config.num_layers * layer + d * config.projection_dim \
            + config.projection_dim
        return tower * (1 if config.share_towers else 2)

    @classmethod
    def check_tokenizer(cls, config: DualEncoderConfig, tokenizer) -> None:
        if tokenizer.max_length > config.max_length:
            raise ValueError(f"the tokenizer keeps up to {tokenizer.max_length} tokens but the model has "
                             f"{config.max_length} positions")

    @property
    def embedding_dim(self) -> int:
        return self.config.projection_dim

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, tower: int = 0) -> torch.Tensor:
        return self.towers[min(tower, len(self.towers) - 1)](input_ids, attention_mask)
