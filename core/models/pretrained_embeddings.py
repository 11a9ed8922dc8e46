"""A start for the Siamese LSTM's embedding table: all-MiniLM-L6-v2's input word embeddings.

Only one tensor is read, ``embeddings.word_embeddings.weight`` (30,522 WordPiece rows x 384), from the
installed package's ``model.safetensors`` with ``safetensors.safe_open``: nothing is downloaded and the rest
of the checkpoint is never loaded. ``minilm_embedding_table(tokenizer, dim)`` turns it into one row per
token id of the LSTM's tokenizer:

* WordPiece tokens (MiniLM's own vocabulary): row i is MiniLM's row i;
* words: the mean of the MiniLM rows of the word's WordPiece pieces; ``<unk>``, and a word BERT's
  normaliser leaves no piece of, get the ``[UNK]`` row.

The padding row is zero (the LSTM config promises it; no pooled vector ever reads it). When ``dim`` is not
384, every row is projected onto the first ``dim`` principal axes of MiniLM's whole table (``principal_axes``:
a numpy SVD of its centred rows, each axis's sign fixed), so the same vocabulary always starts from the same
table.
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from core.text.wordpiece_tokenizer import bert_wordpiece, minilm_folder

MINILM_WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"  # the tensor's key in MiniLM's model.safetensors
MINILM_WIDTH = 384  # its columns: the largest embedding_dim a MiniLM start can give


def minilm_word_embeddings() -> np.ndarray:
    """MiniLM's input word embeddings, (30522, 384) float32, row i for WordPiece id i."""
    from safetensors import safe_open

    with safe_open(str(minilm_folder() / "model.safetensors"), framework="numpy") as weights:
        return weights.get_tensor(MINILM_WORD_EMBEDDINGS)


def principal_axes(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mean (w,) of ``rows`` (N, w) and their principal axes (w, w), by falling variance.

    An SVD leaves each axis's sign open; here the largest loading of every axis is positive, so the same
    rows always give the same axes."""
    rows = np.asarray(rows, dtype=np.float64)
    mean = rows.mean(axis=0)  # (w,)
    _, _, axes = np.linalg.svd(rows - mean, full_matrices=False)  # (w, w), one axis per row
    largest = np.abs(axes).argmax(axis=1)  # (w,) where each axis loads most
    signs = np.sign(axes[np.arange(len(axes)), largest])  # (w,) never 0: that loading is the largest
    return mean, axes * signs[:, None]


@functools.lru_cache(maxsize=1)
def _minilm_axes() -> tuple[np.ndarray, np.ndarray]:
    """``principal_axes`` of MiniLM's table, computed once per process (an SVD of 30,522 x 384)."""
    mean, axes = principal_axes(minilm_word_embeddings())
    mean.flags.writeable = axes.flags.writeable = False  # shared by every caller
    return mean, axes


def project(rows: np.ndarray, mean: np.ndarray, axes: np.ndarray, dim: int) -> np.ndarray:
    """(N, w) rows -> (N, dim): their coordinates on the first ``dim`` axes, around ``mean``."""
    return (np.asarray(rows, dtype=np.float64) - mean) @ axes[:dim].T  # (N, dim)


def word_piece_means(words: Sequence[str], minilm: np.ndarray, wordpiece) -> np.ndarray:
    """(len(words), 384): each word's vector as the mean of the MiniLM rows of its pieces (``wordpiece``,
    MiniLM's tokenizer, splits it); a word without pieces gets the ``[UNK]`` row."""
    pieces = [ids or [wordpiece.unk_id] for ids in wordpiece.piece_ids(words)]
    counts = np.array([len(ids) for ids in pieces])  # (V,) at least 1 each
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])  # (V,) where each word's pieces begin
    rows = minilm[np.concatenate(pieces)]  # (sum of counts, 384)
    return np.add.reduceat(rows, starts, axis=0) / counts[:, None]  # (V, 384)


def minilm_embedding_table(tokenizer, dim: int) -> np.ndarray:
    """(tokenizer.vocab_size, dim) float32: a row per token id of ``tokenizer`` (a WordPiece tokenizer
    with MiniLM's vocabulary, or a ``WordTokenizer``) from MiniLM's word embeddings, projected by PCA
    when ``dim`` is not 384; the padding row zero."""
    if not 1 <= dim <= MINILM_WIDTH:
        raise ValueError(f"a MiniLM start gives 1 to {MINILM_WIDTH} dimensions, not {dim}")
    minilm = minilm_word_embeddings()  # (30522, 384)
    if tokenizer.kind == "wordpiece":
        if tokenizer.vocab_size != len(minilm):
            raise ValueError(f"the WordPiece vocabulary has {tokenizer.vocab_size:,} entries, MiniLM's "
                             f"{len(minilm):,}")
        table = minilm.astype(np.float64)  # (V, 384)
    else:
        wordpiece = bert_wordpiece()
        table = word_piece_means(tokenizer.vocab, minilm, wordpiece)  # (V, 384)
        table[tokenizer.unk_id] = minilm[wordpiece.unk_id]  # "<unk>" itself would split into "<", "un", ...
    if dim != MINILM_WIDTH:
        mean, axes = _minilm_axes()
        table = project(table, mean, axes, dim)  # (V, dim)
    table[tokenizer.pad_id] = 0.0
    return table.astype(np.float32)
