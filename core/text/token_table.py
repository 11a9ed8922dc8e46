"""What every tokenizer shares: the padded id table it encodes to (batching is a numpy slice), the Rust pipeline it
runs (``RustTokenizer``), and the checks of ``max_length`` and of a vocabulary's size against config.json's
``vocab_size``."""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch


@dataclass
class TokenTable:
    ids: np.ndarray  # (N, L) int32, pad_id beyond each text's length
    lengths: np.ndarray  # (N,) int32, at least 1
    pad_id: int = 0  # the id beyond each text's length, also what a wider ``take`` pads with

    @classmethod
    def padded(cls, sequences: Sequence[Sequence[int]], max_length: int, pad_id: int) -> "TokenTable":
        """``sequences`` cut to ``max_length``, right-padded with ``pad_id``; an empty one keeps one ``pad_id``
        position (a text still needs a position to pool over)."""
        width = max(1, min(max_length, max((len(s) for s in sequences), default=1)))
        ids = np.full((len(sequences), width), pad_id, dtype=np.int32)
        lengths = np.empty(len(sequences), dtype=np.int32)
        for row, seq in enumerate(sequences):
            seq = seq[:width] or [pad_id]
            ids[row, : len(seq)] = seq
            lengths[row] = len(seq)
        return cls(ids, lengths, pad_id)

    def __len__(self) -> int:
        return len(self.lengths)

    def take(self, rows: np.ndarray | Sequence[int], width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Ids and attention mask for ``rows``, trimmed to their longest text, or padded to ``width`` (a fixed width,
        so that a compiled step meets few shapes). Few numpy calls: it runs once per step, on the batch thread."""
        rows = np.asarray(rows)
        lengths = self.lengths[rows]  # (B,)
        longest = int(lengths.max())
        width = longest if width is None else width
        table = np.take(self.ids, rows, axis=0)  # (B, L)
        if width <= table.shape[1]:
            ids = table[:, :width].astype(np.int64)
        else:  # wider than this table was padded: pad the rest
            ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
            ids[:, : table.shape[1]] = table
        mask = np.arange(width) < lengths[:, None]
        return torch.from_numpy(ids), torch.from_numpy(mask)  # (B, T) int64, (B, T) bool


def pad_widths(limit: int) -> tuple[int, ...]:
    """The few widths a fixed-shape batch is padded to, up to ``limit``: multiples of 8 to 32, then steps of about
    1.5x, and ``limit``. Each is one shape (a CUDA graph) to compile; padding stays under about a third."""
    steps = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
    return tuple(w for w in steps if w < limit) + (limit,)


def padded_width(widths: Sequence[int], longest: int) -> int:
    """The smallest of ``widths`` (ascending) that holds ``longest`` tokens; the last one when none does."""
    return next((w for w in widths if w >= longest), widths[-1])


def check_max_length(max_length) -> int:
    """``max_length`` as an int, or ValueError unless it is a positive integer."""
    try:
        value = operator.index(max_length)
    except TypeError:
        value = 0
    if value < 1:
        raise ValueError(f"max_length must be a positive integer, got {max_length!r}")
    return value


def check_vocab_size(entries: int, vocab_size: int | None, path: Path) -> None:
    if vocab_size is not None and entries != vocab_size:
        raise ValueError(f"{path} has {entries:,} entries, but config.json says vocab_size {vocab_size:,}")


_SURROGATES = re.compile("[\ud800-\udfff]")


def utf8(text: str) -> str:
    """``text`` as the Rust tokenizer takes it, UTF-8 only: a lone surrogate (what Python makes of bytes that were
    not UTF-8, as on a command line) becomes U+FFFD."""
    return text if not isinstance(text, str) or text.isascii() else _SURROGATES.sub("\ufffd", text)


class RustTokenizer:
    """What both tokenizer kinds share around their ``tokenizers.Tokenizer`` (``_tokenizer``, truncating at
    ``max_length``): ``kind``, the file its vocabulary is saved as (``file``), ``pad_id``."""

    kind: str
    file: str
    max_length: int
    pad_id: int

    def encode(self, texts: Sequence[str]) -> TokenTable:
        # encode_batch without the character offsets, which nothing here reads (30% less CPU time)
        encodings = self._tokenizer.encode_batch_fast([utf8(text) for text in texts])
        return TokenTable.padded([e.ids for e in encodings], self.max_length, self.pad_id)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "max_length": self.max_length, "vocab_file": self.file}

    def hf_tokenizer_json(self) -> str:
        return self._tokenizer.to_str()

    def to_hf_tokenizer(self):
        """A copy of the pipeline this tokenizer runs: the same ids, except that an empty text gives none where
        ``encode`` keeps one padding token."""
        from tokenizers import Tokenizer

        return Tokenizer.from_str(self.hf_tokenizer_json())
