"""``PairEncoder``, the one interface every model family exposes: token ids to one vector per text through one of
two towers (0 for question1, 1 for question2; Siamese models ignore it), and ``score_tables`` for pairs.

Inference cuts texts into batches longest first, each under a token budget (``encoding_batches``): a
transformer's activations should fit the CPU's caches (``bench/encode_speed.py``); an LSTM wants wide batches.
"""
from __future__ import annotations

import contextlib
from dataclasses import asdict
from typing import Callable, ClassVar, Sequence

import numpy as np
import torch
from torch import nn

from core.text.token_table import TokenTable
from core.text.pair_table import Tokenizer

# Padded tokens per inference batch, per model family; a family not named here is cut by rows only.
TOKEN_BUDGETS = {"minilm": 1024, "dual-transformer": 1024}


def encoding_batches(lengths: np.ndarray, batch_size: int, max_tokens: int | None = None) -> list[np.ndarray]:
    """Row positions in batches, longest texts first, each of at most ``batch_size`` rows and, with
    ``max_tokens``, at most that many padded tokens (rows x its longest text), but at least one row."""
    lengths = np.asarray(lengths)
    order = np.argsort(-lengths, kind="stable")
    step = max(1, int(batch_size))
    batches, start = [], 0
    while start < len(order):
        rows = step
        if max_tokens:
            # The first row is the batch's widest, so it sets the padded width.
            rows = min(step, max(1, int(max_tokens) // max(1, int(lengths[order[start]]))))
        batches.append(order[start : start + rows])
        start += rows
    return batches


class PairEncoder(nn.Module):
    model_type: ClassVar[str]  # the key in config.json and the CLI's --model choice
    config_class: ClassVar[type]
    # Whether the family may encode under float16 autocast on CUDA: transformer encoders keep their vectors there
    # (autocast leaves the softmax, the layer norms and so the pooled vectors in float32).
    half_precision_encoding: ClassVar[bool] = False

    def __init__(self, config, tokenizer: Tokenizer):
        super().__init__()
        self.config = config
        self.tokenizer = tokenizer
        # float16 once loaded for inference on a GPU; training and the CPU always take float32
        self.encoding_dtype = torch.float32

    # ---- what a family implements -------------------------------------------------------------
    @classmethod
    def for_run(cls, spec, train_texts: Sequence[str]) -> "PairEncoder":
        """A model ready to train for a ``core.training.specs.RunSpec``; ``train_texts`` may shape its vocabulary."""
        raise NotImplementedError

    @classmethod
    def parameter_count(cls, config) -> int:
        """How many parameters ``cls(config, tokenizer)`` has, in closed form: nothing is allocated."""
        raise NotImplementedError

    @classmethod
    def vocab_size_of(cls, config) -> int:
        """The token ids ``config``'s embedding table has room for: the tokenizer must have exactly that many."""
        return int(config.vocab_size)

    @classmethod
    def check_tokenizer(cls, config, tokenizer) -> None:
        """ValueError when ``tokenizer`` does not fit ``config`` (its positions, its kind); the vocabulary's size is
        checked as it is read (``vocab_size_of``)."""

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, tower: int = 0) -> torch.Tensor:
        """(B, T) ids and (B, T) bool mask -> (B, d) vectors."""
        raise NotImplementedError

    # ---- shared behaviour ---------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def embedding_dim(self) -> int:
        raise NotImplementedError

    def forward(self, first, second, negatives=None):
        """(v1, v2, vn): both sides of a batch of pairs, each (B, d), and extra negatives or None (training calls
        forward: DDP hooks only it)."""
        v1, v2 = self.embed(*first, tower=0), self.embed(*second, tower=1)
        return v1, v2, (None if negatives is None else self.embed(*negatives, tower=1))

    @torch.inference_mode()
    def encode_table(
        self,
        table: TokenTable,
        tower: int = 0,
        batch_size: int = 256,
        progress: Callable[[int, int], None] | None = None,
    ) -> torch.Tensor:
        """(N, d) float32 CPU vectors of a tokenised table, in its order; rows run in length order within
        ``batch_size`` and the family's token budget, ``progress(done, total)`` after every chunk."""
        out = torch.empty(len(table), self.embedding_dim, dtype=torch.float32)

        def run(rows: np.ndarray) -> None:
            ids, mask = table.take(rows)
            vectors = self.embed(ids.to(self.device), mask.to(self.device), tower=tower)  # (b, d)
            out[torch.from_numpy(rows)] = vectors.float().cpu()

        self.in_batches(table.lengths, batch_size, TOKEN_BUDGETS.get(self.model_type), run, progress)
        return out

    def in_batches(self, lengths: np.ndarray, batch_size: int, max_tokens: int | None, run, progress=None) -> None:
        """``run(rows)`` on each of ``encoding_batches(lengths, ...)`` in eval mode under ``autocast``, then
        ``progress(done, total)``; the model's training mode is restored after."""
        was_training = self.training
        self.eval()
        done = 0
        with self.autocast():
            for rows in encoding_batches(lengths, batch_size, max_tokens):
                run(rows)
                done += len(rows)
                if progress is not None:
                    progress(done, len(lengths))
        self.train(was_training)

    def encode(self, texts: Sequence[str], tower: int = 0, batch_size: int = 256, progress=None) -> torch.Tensor:
        """Texts -> (N, d) float32 CPU tensor."""
        return self.encode_table(self.tokenizer.encode(list(texts)), tower, batch_size, progress)

    def autocast(self):
        """The context ``encode_table`` computes in: float16 autocast once loaded for inference on a GPU, else none."""
        half = self.device.type == "cuda" and self.encoding_dtype != torch.float32
        return torch.autocast("cuda", dtype=self.encoding_dtype) if half else contextlib.nullcontext()

    def score_tables(self, first: TokenTable, second: TokenTable, batch_size: int = 256, progress=None) -> np.ndarray:
        """(N,) float64 score of each pair, the one every command and page thresholds: the towers' cosine here (a
        cross-encoder's probability). ``progress(pairs_done, pairs)``: each side counts half a pair."""
        n = len(first)
        halves = (None, None) if progress is None else (lambda done, _: progress(done // 2, n),
                                                        lambda done, _: progress((n + done) // 2, n))
        v1 = self.encode_table(first, tower=0, batch_size=batch_size, progress=halves[0])
        v2 = self.encode_table(second, tower=1, batch_size=batch_size, progress=halves[1])
        return torch.nn.functional.cosine_similarity(v1, v2, dim=-1).double().numpy()

    def score_pairs(self, first: Sequence[str], second: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """``score_tables`` of the (first[i], second[i]) pairs' texts, (N,) float64."""
        return self.score_tables(self.tokenizer.encode(list(first)), self.tokenizer.encode(list(second)), batch_size)

    def config_dict(self) -> dict:
        return asdict(self.config)
