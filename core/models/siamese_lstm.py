"""Siamese LSTM: one set of weights encodes both questions (the course model), and its MiniLM start.

``init_embeddings minilm`` starts the embedding table from all-MiniLM-L6-v2's input word embeddings: one tensor read
with ``safetensors.safe_open`` from the installed package, nothing downloaded.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from core.models.base import PairEncoder
from core.text.word_tokenizer import WordTokenizer
from core.text.wordpiece_tokenizer import WordPieceTokenizer, bert_wordpiece, minilm_folder

TOKENS = {"words": WordTokenizer.kind, "wordpiece": WordPieceTokenizer.kind}  # setting -> tokenizer kind
WORDPIECE_VOCAB_SIZE = 30522  # entries of the BERT-uncased vocab.txt MiniLM ships (tests check it)
MINILM_WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"  # the tensor's key in MiniLM's model.safetensors
MINILM_WIDTH = 384  # its columns: the largest embedding_dim a MiniLM start can give


@dataclass
class SiameseLSTMConfig:
    vocab_size: int = 30000  # rows of the embedding table; set from the tokenizer
    embedding_dim: int = 128  # width of each token vector
    hidden_size: int = 128  # LSTM state width per direction
    num_layers: int = field(default=1, metadata={"max": 64})  # stacked LSTM layers
    bidirectional: bool = False  # read the question both ways; doubles the output width
    dropout: float = 0.3  # between stacked layers and on the embeddings; 0.3 measured best on 20k Quora pairs
    pad_id: int = 0  # token id of padding; its embedding stays zero
    # the real tokens' LSTM states become one vector by their mean, their max, or both ("mean+max": twice as wide)
    pooling: str = field(default="mean", metadata={"choices": ("mean", "max", "mean+max")})
    # "words": the training texts' vocabulary (an unseen word becomes <unk>); "wordpiece": BERT-uncased WordPiece,
    # which splits any word into known pieces. min_freq and max_vocab shape only the word vocabulary.
    tokens: str = field(default="words", metadata={"choices": tuple(TOKENS)})
    # The table a new run starts from: "random", or MiniLM's word embeddings (``minilm_embedding_table``). A saved
    # model carries its own trained table, so loading one never reads MiniLM.
    init_embeddings: str = field(default="random", metadata={"choices": ("random", "minilm")})
    # Keep MiniLM's table as it starts: a word seen only at test time stays in the trained words' space.
    freeze_embeddings: bool = False

    def __post_init__(self):
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id ({self.pad_id}) must be a token id below vocab_size ({self.vocab_size})")
        for setting in dataclasses.fields(self):
            choices = setting.metadata.get("choices")
            if choices and getattr(self, setting.name) not in choices:
                raise ValueError(f"{setting.name} must be one of {', '.join(choices)}, "
                                 f"got {getattr(self, setting.name)!r:.80}")
        if self.init_embeddings == "minilm" and self.embedding_dim > MINILM_WIDTH:
            raise ValueError(f"init_embeddings minilm gives at most {MINILM_WIDTH} dimensions (MiniLM's width), "
                             f"but embedding_dim is {self.embedding_dim}")
        if self.freeze_embeddings and self.init_embeddings == "random":
            raise ValueError("freeze_embeddings keeps the starting embedding table, so it needs init_embeddings "
                             "minilm: a frozen random table would never learn a word")


def pool(states: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(B, T, H) states and the (B, T) mask of real tokens -> (B, H), or (B, 2H) for "mean+max" (mean first).
    Padding never counts (-inf before the max); a row without real tokens pools to zeros."""
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
        """A new model for a ``RunSpec``: its tokenizer as ``tokens`` says, its table as ``init_embeddings`` says."""
        wanted = SiameseLSTMConfig(**spec.model_options)
        tokenizer = bert_wordpiece(spec.max_length) if wanted.tokens == "wordpiece" else WordTokenizer.build(
            train_texts, min_freq=spec.min_freq, max_size=spec.max_vocab, max_length=spec.max_length)
        config = dataclasses.replace(wanted, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id)
        model = cls(config, tokenizer)
        if config.init_embeddings == "minilm":
            table = minilm_embedding_table(tokenizer, config.embedding_dim)  # (V, E)
            with torch.no_grad():
                model.embedding.weight.copy_(torch.from_numpy(table))
        return model

    @classmethod
    def check_tokenizer(cls, config: SiameseLSTMConfig, tokenizer) -> None:
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
            # packed, so the backward direction starts on each question's last real token, not on padding
            lengths = attention_mask.sum(1).clamp(min=1).cpu()
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            h, _ = self.lstm(packed)
            h, _ = pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])  # (B, T, 2H)
        else:
            h, _ = self.lstm(x)  # (B, T, H); pads come after the real tokens and are masked below
        return F.normalize(pool(h, attention_mask, self.config.pooling), dim=-1)  # (B, d)


# ---- the MiniLM start ------------------------------------------------------------------------------------------------
def minilm_word_embeddings() -> np.ndarray:
    """MiniLM's input word embeddings, (30522, 384) float32, row i for WordPiece id i."""
    from safetensors import safe_open

    with safe_open(str(minilm_folder() / "model.safetensors"), framework="numpy") as weights:
        return weights.get_tensor(MINILM_WORD_EMBEDDINGS)


def principal_axes(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mean (w,) of ``rows`` (N, w) and their principal axes (w, w), by falling variance, each axis's largest
    loading positive (an SVD leaves the sign open), so the same rows always give the same axes."""
    rows = np.asarray(rows, dtype=np.float64)
    mean = rows.mean(axis=0)  # (w,)
    _, _, axes = np.linalg.svd(rows - mean, full_matrices=False)  # (w, w), one axis per row
    largest = np.abs(axes).argmax(axis=1)  # (w,) where each axis loads most
    signs = np.sign(axes[np.arange(len(axes)), largest])  # (w,) never 0: that loading is the largest
    return mean, axes * signs[:, None]


@functools.lru_cache(maxsize=1)
def _minilm_axes() -> tuple[np.ndarray, np.ndarray]:
    """``principal_axes`` of MiniLM's table, computed once per process."""
    mean, axes = principal_axes(minilm_word_embeddings())
    mean.flags.writeable = axes.flags.writeable = False  # shared by every caller
    return mean, axes


def minilm_embedding_table(tokenizer, dim: int) -> np.ndarray:
    """(tokenizer.vocab_size, dim) float32: a row per token id of ``tokenizer`` (MiniLM's WordPiece, or a
    ``WordTokenizer``: a word's pieces averaged) from MiniLM's word embeddings, projected on the first ``dim``
    principal axes of MiniLM's whole table when ``dim`` is not 384 (``SiameseLSTMConfig`` allows no more); the
    padding row zero."""
    minilm = minilm_word_embeddings()  # (30522, 384)
    if tokenizer.kind == "wordpiece":  # MiniLM's own vocabulary (``bert_wordpiece``): its rows as they are
        table = minilm.astype(np.float64)  # (V, 384)
    else:
        # Each word's mean MiniLM row over its pieces; a word without pieces gets [UNK]'s.
        wordpiece = bert_wordpiece()
        pieces = [ids or [wordpiece.unk_id] for ids in wordpiece.piece_ids(tokenizer.vocab)]
        counts = np.array([len(ids) for ids in pieces])  # (V,) at least 1 each
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])  # (V,) where each word's pieces begin
        table = np.add.reduceat(minilm[np.concatenate(pieces)], starts, axis=0) / counts[:, None]  # (V, 384)
        table[tokenizer.unk_id] = minilm[wordpiece.unk_id]  # "<unk>" itself would split into "<", "un", ...
    if dim != MINILM_WIDTH:
        mean, axes = _minilm_axes()
        table = (table - mean) @ axes[:dim].T  # (V, dim): coordinates on the first dim axes
    table[tokenizer.pad_id] = 0.0
    return table.astype(np.float32)
