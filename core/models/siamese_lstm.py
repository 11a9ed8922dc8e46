"""Siamese LSTM: one set of weights encodes both questions (the course model)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from core.models.base import PairEncoder
from core.models.pretrained_embeddings import MINILM_WIDTH, minilm_embedding_table
from core.text.word_tokenizer import WordTokenizer
from core.text.wordpiece_tokenizer import WordPieceTokenizer, bert_wordpiece

POOLINGS = ("mean", "max", "mean+max")
TOKENS = {"words": WordTokenizer.kind, "wordpiece": WordPieceTokenizer.kind}  # setting -> tokenizer kind
INIT_EMBEDDINGS = ("random", "minilm")
WORDPIECE_VOCAB_SIZE = 30522  # entries of the BERT-uncased vocab.txt MiniLM ships (tests check it)


@dataclass
class SiameseLSTMConfig:
    vocab_size: int = 30000  # rows of the embedding table; set from the tokenizer
    embedding_dim: int = 128  # width of each token vector
    hidden_size: int = 128  # LSTM state width per direction
    num_layers: int = field(default=1, metadata={"max": 64})  # stacked LSTM layers
    bidirectional: bool = False  # read the question both ways; doubles the output width
    dropout: float = 0.3  # between stacked layers and on the embeddings; 0.3 measured best on 20k Quora pairs
    pad_id: int = 0  # token id of padding; its embedding stays zero
    # How the LSTM states of the real tokens become one vector: their mean, their element-wise max
    # (padding never takes part), or both side by side ("mean+max" doubles the output width).
    pooling: str = field(default="mean", metadata={"choices": POOLINGS})
    # "words": a vocabulary of the training texts' words (a word never seen becomes <unk>); "wordpiece":
    # BERT-uncased WordPiece (30,522 pieces), which splits any word into known pieces, so unseen questions
    # keep their words. The run's min_freq and max_vocab shape only the word vocabulary.
    tokens: str = field(default="words", metadata={"choices": tuple(TOKENS)})
    # The embedding table a new run starts from: "random", or all-MiniLM-L6-v2's word embeddings
    # (core.models.pretrained_embeddings; projected by PCA when embedding_dim is not 384). A saved model
    # carries its own trained table, so loading one never reads MiniLM.
    init_embeddings: str = field(default="random", metadata={"choices": INIT_EMBEDDINGS})
    # Keep the embedding table as it starts (MiniLM's): training then shapes only the LSTM, so a word
    # seen in training and one seen only at test time stay in the same space, and the optimiser skips
    # the table, most of the model's parameters.
    freeze_embeddings: bool = False

    def __post_init__(self):
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id ({self.pad_id}) must be a token id below vocab_size ({self.vocab_size})")
        for setting in dataclasses.fields(self):
            choices = setting.metadata.get("choices")
            if choices and getattr(self, setting.name) not in choices:
                raise ValueError(f"{setting.name} must be one of {', '.join(choices)}, "
                                 f"got {getattr(self, setting.name)!r}")
        if self.init_embeddings == "minilm" and self.embedding_dim > MINILM_WIDTH:
            raise ValueError(f"init_embeddings minilm gives at most {MINILM_WIDTH} dimensions (MiniLM's width), "
                             f"but embedding_dim is {self.embedding_dim}")
        if self.freeze_embeddings and self.init_embeddings == "random":
            raise ValueError("freeze_embeddings keeps the starting embedding table, so it needs init_embeddings "
                             "minilm: a frozen random table would never learn a word")


def pool(states: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(B, T, H) states and the (B, T) mask of real tokens -> (B, H), or (B, 2H) for "mean+max" (mean first).

    Padding never counts: the mean divides by the real tokens only, and padded states are -inf before the
    max, so a padded state larger than every real one cannot win. A row without real tokens pools to zeros."""
    real = mask.bool().unsqueeze(-1)  # (B, T, 1)
    m = real.to(states.dtype)  # (B, T, 1)
    count = m.sum(1)  # (B, 1) real tokens per row
    parts = []
    if pooling in ("mean", "mean+max"):
        parts.append((states * m).sum(1) / count.clamp(min=1.0))  # (B, H)
    if pooling in ("max", "mean+max"):
        top = states.masked_fill(~real, float("-inf")).amax(1)  # (B, H)
        parts.append(top.masked_fill(count == 0, 0.0))  # (B, H): no real token, no -inf
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)


def run_tokenizer(tokens: str, spec, train_texts):
    """The tokenizer a new run's LSTM reads with: BERT's WordPiece, or a word vocabulary built from the
    training texts."""
    if tokens == "wordpiece":
        return bert_wordpiece(spec.max_length)
    return WordTokenizer.build(train_texts, min_freq=spec.min_freq, max_size=spec.max_vocab,
                               max_length=spec.max_length)


class SiameseLSTM(PairEncoder):
    """Embedding -> LSTM -> mean, max or both over real tokens (pads masked) -> L2-normalise."""

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
        self.embedding.weight.requires_grad_(not config.freeze_embeddings)

    @classmethod
    def for_run(cls, spec, train_texts) -> "SiameseLSTM":
        """A new model for a ``RunSpec``: its tokenizer as ``tokens`` says (a word vocabulary is built from
        the training texts), its embedding table random or MiniLM's as ``init_embeddings`` says."""
        wanted = SiameseLSTMConfig(**spec.model_options)
        tokenizer = run_tokenizer(wanted.tokens, spec, train_texts)
        config = dataclasses.replace(wanted, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id)
        model = cls(config, tokenizer)
        if config.init_embeddings == "minilm":
            table = minilm_embedding_table(tokenizer, config.embedding_dim)  # (V, E)
            with torch.no_grad():
                model.embedding.weight.copy_(torch.from_numpy(table))
        return model

    @classmethod
    def check_tokenizer(cls, config: SiameseLSTMConfig, tokenizer) -> None:
        super().check_tokenizer(config, tokenizer)
        if tokenizer.kind != TOKENS[config.tokens]:
            raise ValueError(f"the model config says tokens {config.tokens!r} but the tokenizer is a "
                             f"{tokenizer.kind} tokenizer")

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
        directions = 2 if self.config.bidirectional else 1
        return self.config.hidden_size * directions * (2 if self.config.pooling == "mean+max" else 1)

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
        return F.normalize(pool(h, attention_mask, self.config.pooling), dim=-1)  # (B, d)
