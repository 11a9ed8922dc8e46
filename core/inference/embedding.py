"""Embedding a corpus of any size to disk in chunks, memory bounded. The three files (``<out>.npy``,
``<out>.questions.jsonl`` and ``<out>.npy.sha256``) are written through one ``core.saving.user_files`` claim, so an
interrupted run leaves the old files or none; ``dedup --vectors`` takes a vector file only with its sha256.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from core.saving.user_files import FileClaim

CHUNK = 4096  # texts encoded per call: bounds the live tensors whatever the corpus size
DIGEST_MAX_BYTES = 4096  # a sha256 file holds one line


def embedding_paths(out: str | Path) -> tuple[Path, Path, Path]:
    """``<stem>.npy``, ``<stem>.questions.jsonl`` and ``<stem>.npy.sha256`` of ``--out``, ``<stem>`` being ``out``
    without a final ``.npy``; any other suffix stays (``emb.v2`` gives ``emb.v2.npy``), never aiming at another file."""
    out = Path(out)
    if out.name in ("", ".", ".."):
        return out, out, out
    stem = out.name[: -len(".npy")] if out.name.lower().endswith(".npy") and len(out.name) > 4 else out.name
    return out.with_name(f"{stem}.npy"), out.with_name(f"{stem}.questions.jsonl"), out.with_name(f"{stem}.npy.sha256")


def write_embeddings(claim: FileClaim, model, texts: Sequence[str], vectors_path: Path,
                     progress: Callable[[int, int], None] | None = None, rows: np.ndarray | None = None) -> None:
    """Fill ``claim``'s temporaries for ``embedding_paths``' three files: ``model``'s tower 1 vectors of ``texts`` (or
    ``rows``, encoded already), chunk by chunk into a memory-mapped ``.npy`` whose size is reserved first, so a full
    disk is an error here and not a SIGBUS while the map is written."""
    vectors_path, questions_path, digest_path = embedding_paths(vectors_path)
    total, width = len(texts), int(model.embedding_dim if rows is None else rows.shape[1])
    shape, dtype = (total, width), np.dtype(np.float32)
    with claim.open(vectors_path, "r+b") as handle:  # the header np.save writes first
        np.lib.format.write_array_header_1_0(handle, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                      "fortran_order": False, "shape": shape})
        offset = handle.tell()
    claim.allocate(vectors_path, offset + total * width * dtype.itemsize)
    if total and width:
        with open(claim.fileno(vectors_path), "r+b", closefd=False) as raw:
            vectors = np.memmap(raw, dtype=dtype, mode="r+", offset=offset, shape=shape)
            for start in range(0, total, CHUNK):
                chunk = list(texts[start : start + CHUNK])
                vectors[start : start + len(chunk)] = rows[start : start + len(chunk)] if rows is not None else (
                    model.encode(chunk, tower=1).numpy())
                if progress is not None:
                    progress(start + len(chunk), total)
            vectors.flush()
            del vectors
    with claim.open(questions_path, "w", encoding="utf-8") as handle:
        for text in texts:
            handle.write(json.dumps(text, ensure_ascii=False) + "\n")
    with claim.open(digest_path, "w", encoding="utf-8") as handle:  # what dedup --vectors takes it by
        handle.write(f"{_file_sha256(claim.fileno(vectors_path))}  {vectors_path.name}\n")


def _file_sha256(fd: int) -> str:
    """The sha256 of the whole file open at ``fd``, read from its start."""
    os.lseek(fd, 0, os.SEEK_SET)
    with open(fd, "rb", closefd=False) as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# ---- reading them back: ``dedup --vectors`` ----------------------------------------------------------
QUESTIONS_MAX_BYTES = 4 << 30  # the questions file beside a vector file: a corpus's texts, bounded
VECTOR_CHECKS = 16  # rows, evenly spread, compared with the model's own vectors of their texts: the sha256 says the
# file is embed's, these that it is this model's
VECTOR_TOLERANCE = 0.05  # largest L2 distance between a file's unit row and the model's vector of its text


def read_embedding_file(path: str | Path, texts: Sequence[str], model) -> np.ndarray:
    """(N, d) float32 unit rows of ``embed``'s vector file ``path`` for ``texts``; ValueError saying what disagrees
    (the sha256 written beside it, shape, finite rows, its questions file, one tower, a few rows re-encoded)."""
    from core.inference.search import encode_unit_rows, towers_differ, unit_rows

    path, texts = Path(path), list(texts)
    _check_digest(path)
    rows = unit_rows(_read_npy(path, len(texts), int(model.embedding_dim)), f"{path}'s vectors")
    _check_questions(embedding_paths(path)[1], texts, path)
    if towers_differ(model, texts):
        raise ValueError(f"{path} holds one tower's vectors (embed's question2 side), and this model's two towers "
                         "differ: dedup needs both, so it encodes them itself; drop --vectors")
    picks = np.unique(np.linspace(0, len(texts) - 1, min(VECTOR_CHECKS, len(texts))).astype(np.int64))
    fresh = encode_unit_rows(model, [texts[i] for i in picks], tower=1, batch_size=64, progress=None)
    distance = np.linalg.norm(fresh - rows[picks], axis=1)
    if distance.max() > VECTOR_TOLERANCE:
        row = int(picks[int(distance.argmax())])
        raise ValueError(f"{path} was not written by this model: row {row:,} is {distance.max():.3g} away from "
                         "the model's vector of its question")
    return rows


def _read_npy(path: Path, count: int, dim: int) -> np.ndarray:
    """The (count, dim) float32 rows of the ``.npy`` file ``path`` (no pickled objects)."""
    try:
        rows = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError):  # numpy's words would say to trust the file with allow_pickle
        rows = None
    if not isinstance(rows, np.ndarray):
        raise ValueError(f"{path} is not a .npy vector file")
    if rows.dtype.kind != "f" or rows.ndim != 2:
        raise ValueError(f"{path} holds a {'x'.join(map(str, rows.shape)) or 'scalar'} {rows.dtype} array; a vector "
                         "file is a 2-D float array, one row per question")
    if rows.shape[0] != count:
        raise ValueError(f"{path} holds {rows.shape[0]:,} vectors; the corpus has {count:,} questions")
    if rows.shape[1] != dim:
        raise ValueError(f"{path} holds vectors of width {rows.shape[1]:,}; this model's are {dim:,} wide")
    return np.array(rows, dtype=np.float32, order="C")


def _check_digest(path: Path) -> None:
    """``path`` must have the sha256 ``embed`` wrote beside it (``embedding_paths``)."""
    from core.saving.files import open_regular_file, read_regular_file

    digest_path = embedding_paths(path)[2]
    if not path.exists():
        raise ValueError(f"no vector file at {path}")
    try:
        recorded = read_regular_file(digest_path, DIGEST_MAX_BYTES).decode("ascii", "replace").split()
    except FileNotFoundError:
        raise ValueError(f"{path} has no {digest_path.name} beside it: only a vector file embed wrote is taken (with "
                         f"its sha256); embed the corpus, or drop --vectors") from None
    except (OSError, ValueError) as error:
        raise ValueError(f"{digest_path} cannot be read ({error})") from None
    with open_regular_file(path, 1 << 50) as (fd, _):
        found = _file_sha256(fd)
    if not recorded or recorded[0].lower() != found:
        raise ValueError(f"{path} changed since embed wrote it (its sha256 is not the one in {digest_path.name}); "
                         f"embed the corpus again, or drop --vectors")


def _check_questions(questions: Path, texts: list[str], path: Path) -> None:
    """``embed``'s questions file for ``path``, when there is one, must list ``texts`` in order."""
    from core.saving.files import open_regular_file

    if not questions.exists():
        return
    with open_regular_file(questions, QUESTIONS_MAX_BYTES) as (fd, _), os.fdopen(os.dup(fd), encoding="utf-8") as lines:
        try:  # the first line that differs, or where the shorter of the two ends
            number = next((number for number, (line, text) in enumerate(itertools.zip_longest(lines, texts), start=1)
                           if line is None or text is None or json.loads(line) != text), 0)
        except (ValueError, UnicodeDecodeError):
            raise ValueError(f"{questions} is not embed's questions file (one JSON string per line)") from None
    if number:
        raise ValueError(f"{path} was embedded from other questions than the corpus's (its {questions.name} "
                         f"differs at question {number:,}): embed the same file, or drop --vectors")
