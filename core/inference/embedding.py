"""Embedding a corpus of any size to disk in chunks, so memory stays bounded as the corpus grows."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

CHUNK = 4096  # texts encoded per call: bounds the live tensors whatever the corpus size


def embed_to_file(model, texts: Sequence[str], out: str | Path, tower: int = 1, batch_size: int = 256,
                  progress: Callable[[int, int], None] | None = None) -> Path:
    """Write ``(N, d)`` float32 vectors of ``texts`` to ``out`` (``.npy``) and the texts, one JSON
    string per line, to ``out`` with ``.questions.jsonl``. Returns the ``.npy`` path.

    Vectors go straight into a memory-mapped ``.npy`` chunk by chunk: peak memory is one chunk's
    activations, not the corpus.
    """
    out = Path(out).with_suffix(".npy")
    out.parent.mkdir(parents=True, exist_ok=True)
    total = len(texts)
    vectors = np.lib.format.open_memmap(out, mode="w+", dtype=np.float32, shape=(total, model.embedding_dim))
    for start in range(0, total, CHUNK):
        chunk = list(texts[start : start + CHUNK])
        vectors[start : start + len(chunk)] = model.encode(chunk, tower=tower, batch_size=batch_size).numpy()
        if progress is not None:
            progress(start + len(chunk), total)
    vectors.flush()
    del vectors
    with open(out.with_suffix(".questions.jsonl"), "w", encoding="utf-8") as handle:
        for text in texts:
            handle.write(json.dumps(text, ensure_ascii=False) + "\n")
    return out
