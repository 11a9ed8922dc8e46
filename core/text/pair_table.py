"""Tokenised pairs and the batches the trainer consumes: texts are tokenised once per dataset into padded id
tables, so building a batch is a numpy slice, never a tokenisation. The two tokenizer kinds share one interface
(``Tokenizer``); ``read_tokenizer`` rebuilds the one a saved folder names without executing anything from it."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from core.data import normalise_questions
from core.data.batching import duplicate_free_batches, labelled_batches, labelled_distinct_batches
from core.saving.files import ModelLoadError
from core.text.token_table import TokenTable, padded_width
from core.text.word_tokenizer import WordTokenizer
from core.text.wordpiece_tokenizer import WordPieceTokenizer

Tokenizer = WordTokenizer | WordPieceTokenizer
TOKENIZER_KINDS = {WordTokenizer.kind: WordTokenizer, WordPieceTokenizer.kind: WordPieceTokenizer}


def read_tokenizer(folder: str | Path, config: dict, vocab_size: int | None = None) -> Tokenizer:
    """The tokenizer ``config["tokenizer"]`` (a ``to_dict()``) describes, its vocabulary read from ``folder``;
    ModelLoadError when the settings, the file or (given ``vocab_size``) the vocabulary's size are not right."""
    folder = Path(folder)
    settings = config.get("tokenizer", {})  # a JSON object (``core.saving.read_config`` checked it)
    kind = settings.get("kind")
    try:
        if kind not in TOKENIZER_KINDS:
            raise ValueError(f"unknown tokenizer kind {kind!r}; expected one of {sorted(TOKENIZER_KINDS)}")
        # max_length is checked by the tokenizer itself (``check_max_length``), positions by the model's family
        return TOKENIZER_KINDS[kind].load(folder, max_length=settings.get("max_length"), vocab_size=vocab_size,
                                          vocab_file=settings.get("vocab_file"))
    except ModelLoadError:
        raise
    except FileNotFoundError as error:
        raise ModelLoadError(f"{folder}: tokenizer file missing ({Path(error.filename or '?').name})") from None
    except Exception as error:  # tokenizers raises plain Exception
        raise ModelLoadError(f"{folder}: unusable tokenizer: {error}") from None


Side = tuple[torch.Tensor, torch.Tensor]  # ids (B, T) and bool mask (B, T)


@dataclass
class Batch:
    first: Side  # question1 of each pair
    second: Side  # question2 of each pair
    labels: torch.Tensor  # (B,) float, 1 = duplicate
    negatives: Side | None = None  # (K, T) labelled non-duplicates of batch questions, extra negatives
    pinned: bool = False  # the tensors are in page-locked memory (``pin_memory``)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def pin_memory(self) -> "Batch":
        """This batch in page-locked memory, which ``to`` copies to a CUDA device without the host waiting."""
        return self._map(torch.Tensor.pin_memory, pinned=True)

    def to(self, device: torch.device) -> "Batch":
        if device.type == "cpu":
            return self
        # Only from page-locked memory is a non-blocking copy asynchronous (from pageable memory it waits).
        source = self.pin_memory() if device.type == "cuda" and not self.pinned else self
        return source._map(lambda tensor: tensor.to(device, non_blocking=True), pinned=False)

    def _map(self, change, pinned: bool) -> "Batch":
        def side(tensors: Side | None) -> Side | None:
            return None if tensors is None else tuple(change(t) for t in tensors)

        return Batch(side(self.first), side(self.second), change(self.labels), side(self.negatives), pinned)


class PairTable:
    """A pairs DataFrame tokenised once: both question columns, the labels and, optionally, one hard negative per
    duplicate pair (A, P): a question the data labels as not a duplicate of A (or of P), the most informative
    negative there is, since labelled non-duplicates share most of their words; else one of ``mined_negatives``
    (non-duplicate pairs of the same questions mined with a model, never trained on as pairs)."""

    def __init__(self, pairs: pd.DataFrame, tokenizer: Tokenizer, hard_negatives: bool = False,
                 mined_negatives: pd.DataFrame | None = None):
        self.pairs = pairs.reset_index(drop=True)
        self.first: TokenTable = tokenizer.encode(self.pairs["question1"].tolist())
        self.second: TokenTable = tokenizer.encode(self.pairs["question2"].tolist())
        self.labels = self.pairs["is_duplicate"].to_numpy(dtype=np.float32)
        self.negative_of: np.ndarray | None = None  # (N,) row of `negative_texts` per pair, -1 if none
        self.negative_texts: TokenTable | None = None
        if hard_negatives or mined_negatives is not None:
            self._find_hard_negatives(tokenizer, mined_negatives)

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, rows: np.ndarray) -> "PairTable":
        """The pairs at ``rows``, in that order, without tokenising again (hard negatives are not kept)."""
        rows = np.asarray(rows, dtype=np.int64)
        part = PairTable.__new__(PairTable)
        part.pairs = self.pairs.iloc[rows].reset_index(drop=True)
        part.first = TokenTable(self.first.ids[rows], self.first.lengths[rows], self.first.pad_id)
        part.second = TokenTable(self.second.ids[rows], self.second.lengths[rows], self.second.pad_id)
        part.labels = self.labels[rows]
        part.negative_of, part.negative_texts = None, None
        return part

    def _find_hard_negatives(self, tokenizer: Tokenizer, mined: pd.DataFrame | None) -> None:
        n, m = len(self.pairs), 0 if mined is None else len(mined)
        sides = [self.pairs["question1"], self.pairs["question2"]] + ([mined["question1"], mined["question2"]] if m else [])
        texts = pd.concat(sides, ignore_index=True)
        codes, _ = pd.factorize(normalise_questions(texts))
        self._codes = (codes[:n], codes[n:2 * n])  # (N,), (N,) one id per normalised text
        first, second = self._codes
        negative = self.labels == 0
        mined_first, mined_second = codes[2 * n:2 * n + m], codes[2 * n + m:]
        # Every non-duplicate edge, both ways, the labelled ones first: text code -> a text that is not its duplicate.
        partner = pd.Series(np.concatenate([second[negative], first[negative], mined_second, mined_first]),
                            index=np.concatenate([first[negative], second[negative], mined_first, mined_second]))
        partner = partner.groupby(level=0).first()
        chosen = partner.reindex(first).to_numpy(dtype=float)  # (N,) NaN where none
        fallback = partner.reindex(second).to_numpy(dtype=float)
        chosen = np.where(np.isnan(chosen), fallback, chosen)
        chosen[(self.labels != 1) | np.isnan(chosen)] = -1
        chosen = chosen.astype(np.int64)
        used = np.unique(chosen[chosen >= 0])
        # Tokenise each needed negative text once (its first spelling in the file).
        first_position = pd.Series(np.arange(len(texts))).groupby(codes).first()
        self.negative_texts = tokenizer.encode(texts.iloc[first_position.loc[used].to_numpy()].tolist())
        row_of_code = pd.Series(np.arange(len(used)), index=used)
        self.negative_of = np.where(chosen >= 0, row_of_code.reindex(chosen).fillna(-1).to_numpy(), -1).astype(np.int64)
        self._negative_code = used  # (K_all,) text code of each negative_texts row

    def _batch_negatives(self, rows: np.ndarray, widths: tuple[int, ...] | None = None) -> Side | None:
        candidates = self.negative_of[rows]
        candidates = np.unique(candidates[candidates >= 0])
        if candidates.size == 0:
            return None
        # A negative that is itself a question of this batch would be some row's positive.
        in_batch = np.concatenate([self._codes[0][rows], self._codes[1][rows]])
        candidates = candidates[~np.isin(self._negative_code[candidates], in_batch)]
        if not candidates.size:
            return None
        width = padded_width(widths, int(self.negative_texts.lengths[candidates].max())) if widths else None
        return self.negative_texts.take(candidates, width)

    def batch(self, rows: np.ndarray, widths: tuple[int, ...] | None = None) -> Batch:
        """The pairs at ``rows``, each side trimmed to its longest text, or with ``widths`` (``pad_widths``) both
        padded to the smallest width that holds the batch's longest text (few shapes for a compiled step)."""
        negatives = self._batch_negatives(rows, widths) if self.negative_of is not None else None
        width = None
        if widths:
            width = padded_width(widths, int(max(self.first.lengths[rows].max(), self.second.lengths[rows].max())))
        return Batch(self.first.take(rows, width), self.second.take(rows, width), torch.from_numpy(self.labels[rows]),
                     negatives)

    def pair_lengths(self) -> np.ndarray:
        """(N,) tokens of the longer question of each pair: what a batch holding the pair pads to."""
        return np.maximum(self.first.lengths, self.second.lengths)

    def index_batches(self, kind: str, batch_size: int, seed: int, length_buckets: bool = False) -> list[np.ndarray]:
        """Row indices per batch of ``kind`` (``LossConfig.batch_kind``, see ``core.data.batching``);
        ``length_buckets`` puts pairs of similar length together (batch order stays shuffled)."""
        batches = {"duplicates": duplicate_free_batches, "labelled": labelled_batches,
                   "labelled_distinct": labelled_distinct_batches}[kind]
        return batches(self.pairs, batch_size, seed, lengths=self.pair_lengths() if length_buckets else None)
