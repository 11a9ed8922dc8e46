"""Embedding a corpus of any size to disk in chunks, so memory stays bounded as the corpus grows.

The two files (``<out>.npy`` and ``<out>.questions.jsonl``) are written through one
``core.saving.user_files`` claim: both are claimed before any work, written to temporaries and renamed
into place only when both are whole, so an interrupted run leaves the old files (or none) and never
zeros in a vector file that loads.
"""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from core.saving.user_files import FileClaim, claim_files

CHUNK = 4096  # texts encoded per call: bounds the live tensors whatever the corpus size


def embedding_paths(out: str | Path) -> tuple[Path, Path]:
    """(``<out>.npy``, ``<out>.questions.jsonl``): the vector file and the texts file of ``--out``."""
    out = Path(out)
    vectors = out.with_suffix(".npy") if out.name not in ("", ".", "..") else out
    return vectors, vectors.with_suffix(".questions.jsonl")


def embed_to_file(model, texts: Sequence[str], out: str | Path, tower: int = 1, batch_size: int = 256,
                  progress: Callable[[int, int], None] | None = None, overwrite: bool = False) -> Path:
    """Write ``(N, d)`` float32 vectors of ``texts`` to ``out`` (``.npy``) and the texts, one JSON
    string per line, to ``out`` with ``.questions.jsonl``; ``overwrite`` replaces files already there
    (else ``UserFileError``), a missing folder is created. Returns the ``.npy`` path."""
    vectors, questions = embedding_paths(out)
    with claim_files([vectors, questions], overwrite=overwrite, create_folder=True) as claim:
        write_embeddings(claim, model, texts, vectors, tower=tower, batch_size=batch_size, progress=progress)
    return vectors


def write_embeddings(claim: FileClaim, model, texts: Sequence[str], vectors_path: Path, tower: int = 1,
                     batch_size: int = 256, progress: Callable[[int, int], None] | None = None) -> None:
    """Fill ``claim``'s temporaries for ``embedding_paths``' two files (``vectors_path`` first).

    Vectors go straight into a memory-mapped ``.npy`` chunk by chunk: peak memory is one chunk's
    activations, not the corpus. The file's full size is reserved before it is mapped, so a full disk
    is an error here and not a SIGBUS while the map is written.
    """
    vectors_path, questions_path = embedding_paths(vectors_path)
    total, width = len(texts), int(model.embedding_dim)
    shape, dtype = (total, width), np.dtype(np.float32)
    header = _npy_header(shape, dtype)
    with claim.open(vectors_path, "r+b") as handle:
        handle.write(header)
    offset = len(header)
    claim.allocate(vectors_path, offset + total * width * dtype.itemsize)
    if total and width:
        with open(claim.fileno(vectors_path), "r+b", closefd=False) as raw:
            vectors = np.memmap(raw, dtype=dtype, mode="r+", offset=offset, shape=shape)
            for start in range(0, total, CHUNK):
                chunk = list(texts[start : start + CHUNK])
                vectors[start : start + len(chunk)] = model.encode(chunk, tower=tower, batch_size=batch_size).numpy()
                if progress is not None:
                    progress(start + len(chunk), total)
            vectors.flush()
            del vectors
    with claim.open(questions_path, "w", encoding="utf-8") as handle:
        for text in texts:
            handle.write(json.dumps(text, ensure_ascii=False) + "\n")


def _npy_header(shape: tuple[int, int], dtype: np.dtype) -> bytes:
    """The ``.npy`` header of a C-ordered array of ``shape`` and ``dtype`` (what ``np.save`` writes first)."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                  "fortran_order": False, "shape": shape})
    return buffer.getvalue()
