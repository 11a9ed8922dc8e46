"""Inference on the lab's own ONNX exports with onnxruntime on the CPU: ``OnnxEncoder`` offers what commands ask of a
``PairEncoder``; ``onnx_model`` is what ``--backend onnx`` loads. An export runs only when its files have the sha256
its manifest records; anything else is refused in one line (foreign graphs are outside the threat model).

The lab's cache (``cache_root``): ``onnx/<key>/``, the ONNX export of a saved model or zero-shot MiniLM, keyed by the
sha256 of what it is made from (``content_key``); ``search/``, the indexes built on those exports' vectors."""
from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import accumulate
from pathlib import Path

import numpy as np

from core.export.formats import onnx_session
from core.export.manifest import (EXPORT_VERSION, FILE_HASHES, MANIFEST_FILE, TOKENIZER_FILE, file_hashes, finite, part,
                                  read_manifest)
from core.model_names import ZERO_SHOT
from core.saving.files import VOCAB_MAX_BYTES, ModelLoadError, read_regular_file

MAX_GRAPH_BYTES = 2 * 2**30 - 1  # protobuf's own limit on one message
MAX_BATCH_ROWS = 256  # OnnxEncoder never runs a larger batch
CACHE_ENV = "SIAMESE_LAB_CACHE"


class OnnxBackendError(ValueError):
    """An ONNX export that cannot be used, or a cache that cannot be written; the message is one line."""


class OnnxEncoder:
    """An ONNX export run by onnxruntime on the CPU, with the inference calls of a ``PairEncoder``."""

    def __init__(self, folder: str | Path, threads: int | None = None):
        """``threads``: batches run at once on one session, one onnxruntime thread each, as a short question's
        matrices are too small to share (default: torch's thread count; ``bench/onnx_variants.py``)."""
        import torch
        from tokenizers import Tokenizer

        self.folder = folder = Path(folder)
        manifest = read_manifest(folder)
        if manifest is None:
            raise OnnxBackendError(f"{folder} is not a Siamese Lab export (no usable siamese_lab.json)")
        if manifest.get("export_format") != "onnx":
            raise OnnxBackendError(f"{folder} is a {manifest.get('export_format')!s:.40} export, not an onnx one")
        hashes = part(manifest, FILE_HASHES)  # file name -> sha256, the graphs (tower 0's first), then the tokenizer
        graphs = [name for name in hashes if name != TOKENIZER_FILE]
        try:  # each a regular file inside the folder, read once: the bytes hashed are the bytes run
            files = {name: read_regular_file(folder / name, MAX_GRAPH_BYTES if name in graphs else VOCAB_MAX_BYTES,
                                             folder) for name in hashes}
        except FileNotFoundError as error:
            raise OnnxBackendError(f"{folder}: {Path(error.filename or '?').name} is missing") from None
        except ModelLoadError as error:
            raise OnnxBackendError(str(error)) from None
        if not graphs or TOKENIZER_FILE not in files or file_hashes(files) != hashes:
            raise OnnxBackendError(f"{folder} is not an ONNX export this lab wrote, or its files changed since (their "
                                   f"sha256 differ from {MANIFEST_FILE}'s); export the model again with "
                                   f"'python -m core export --format onnx'")
        # The lab wrote these figures with the files whose sha256 matched, and checked the graphs against PyTorch.
        self.model_type, self.max_length = str(manifest["model_type"]), int(manifest["max_length"])
        self.pad_id, self.embedding_dim = int(manifest["pad_id"]), int(manifest["embedding_dim"])
        self.tokenizer = Tokenizer.from_str(files[TOKENIZER_FILE].decode("utf-8"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_length)
        self.workers = max(1, int(threads or torch.get_num_threads()))
        sessions = [onnx_session(files[name]) for name in graphs]
        self._sessions = [sessions[0], sessions[-1]]  # a Siamese model's one graph encodes both sides
        self.digest = hashlib.sha256(json.dumps(hashes).encode()).digest()  # what decides the vectors: the files run

    @property
    def device(self):
        import torch

        return torch.device("cpu")

    def eval(self) -> OnnxEncoder:
        return self

    def token_rows(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text, cut to ``max_length``; an empty text keeps one padding token, as ``TokenTable``'s."""
        return [encoding.ids[: self.max_length] or [self.pad_id]
                for encoding in self.tokenizer.encode_batch(list(texts))]

    def run_rows(self, rows: list[list[int]], tower: int = 0) -> np.ndarray:
        """One batch of token-id rows (padded here to the longest) through the graph of ``tower``: (len(rows), d)."""
        lengths = np.array([len(row) for row in rows])
        mask = (np.arange(lengths.max()) < lengths[:, None]).astype(np.int64)
        ids = np.full(mask.shape, self.pad_id, dtype=np.int64)
        ids[mask == 1] = np.concatenate(rows)
        try:
            return self._sessions[tower].run(None, {"input_ids": ids, "attention_mask": mask})[0]
        except Exception as error:  # noqa: BLE001 - onnxruntime raises its own exception types
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
            raise OnnxBackendError(f"onnxruntime failed on a batch of {ids.shape[0]} x {ids.shape[1]} tokens of "
                                   f"{self.folder}: {reason}") from None

    def encode(self, texts: Sequence[str], tower: int = 0, batch_size: int = 256,
               progress: Callable[[int, int], None] | None = None):
        """Texts -> (N, d) float32 CPU tensor (what ``PairEncoder.encode`` returns)."""
        import torch

        from core.models.base import TOKEN_BUDGETS, encoding_batches

        rows = self.token_rows(texts)
        out = np.empty((len(rows), self.embedding_dim), dtype=np.float32)
        # Longest first, under MAX_BATCH_ROWS rows and the family's token budget; at least one batch per worker,
        # so a short list still keeps every thread busy.
        batch_size = max(1, min(int(batch_size), math.ceil(len(rows) / self.workers), MAX_BATCH_ROWS))
        batches = encoding_batches(np.array([len(row) for row in rows]), batch_size, TOKEN_BUDGETS.get(self.model_type))

        def run(picked: np.ndarray) -> None:
            out[picked] = self.run_rows([rows[index] for index in picked], tower)

        pool = ThreadPoolExecutor(self.workers, thread_name_prefix="onnx-encode") \
            if self.workers > 1 and len(batches) > 1 else None
        try:
            # Progress is reported in batch order from this thread, so a callback that raises (a cancelled
            # job) stops the batches not yet started and waits for the running ones.
            for done, _ in zip(accumulate(map(len, batches)), (pool.map if pool else map)(run, batches)):
                if progress is not None:
                    progress(done, len(rows))
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        return torch.from_numpy(out)

    def score_pairs(self, first: Sequence[str], second: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """Cosine similarity of each (first[i], second[i]) pair, (N,) float64."""
        import torch

        v1 = self.encode(first, tower=0, batch_size=batch_size)
        v2 = self.encode(second, tower=1, batch_size=batch_size)
        return torch.nn.functional.cosine_similarity(v1, v2, dim=-1).double().numpy()

    def state_dict(self) -> dict:
        """One uint8 tensor, ``digest``: so ``core.inference.search.model_identity`` tells exports apart."""
        import torch

        return {"onnx_sha256": torch.frombuffer(bytearray(self.digest), dtype=torch.uint8)}


# ---- the lab's cache, and what --backend onnx loads -------------------------------------------------
def cache_root() -> Path:
    """``$SIAMESE_LAB_CACHE``, else ``siamese-lab`` in ``$XDG_CACHE_HOME`` or ``~/.cache``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "siamese-lab"


def content_key(source: str | Path) -> str:
    """The sha256 (hex) of what ``source``'s ONNX export is made from: its files' digest (as a calibrated copy records
    its parent's), the zero-shot config for ``"minilm"``, and the export format's version."""
    from core.models.registry import parent_record, zero_shot_config

    files = parent_record(source, "")["sha256"]
    zero_shot = json.dumps(zero_shot_config(), sort_keys=True, default=str) if str(source) == ZERO_SHOT else ""
    return hashlib.sha256(f"siamese-lab-onnx-cache {EXPORT_VERSION}\0{files}\0{zero_shot}".encode()).hexdigest()


def cache_entry(source: str | Path) -> tuple[Path, str]:
    """(the cache folder of ``source``'s ONNX export, its key)."""
    key = content_key(source)
    return cache_root() / "onnx" / key[:32], key


def search_cache(digest: bytes) -> Path:
    """Where the search indexes of the ONNX export whose graphs have ``digest`` are kept."""
    return cache_root() / "search" / digest.hex()[:32]


def onnx_model(source: str | Path) -> tuple[OnnxEncoder, dict]:
    """(encoder, config) for ``--backend onnx``: ``source`` is an ONNX export folder (used as it is), a saved
    model folder or ``"minilm"`` (exported once into the lab's cache). Raises
    OnnxBackendError, or ``core.saving.ModelLoadError`` for a folder that is neither an export nor a model."""
    from core.saving import read_config, write_folder_atomically

    if str(source) == ZERO_SHOT:
        from core.models.registry import zero_shot_config

        config = zero_shot_config()
    else:
        folder = Path(source)
        manifest = read_manifest(folder) if folder.is_dir() else None
        if manifest is not None and manifest.get("model_type") == "cross-encoder":
            raise OnnxBackendError(f"{folder} is a cross-encoder's ONNX export, for onnxruntime outside the lab; "
                                   "give its model folder (--backend torch) to score pairs here")
        if manifest is not None:  # an export, used as it is; commands read its thresholds, name and model type
            thresholds = {k: v for k, v in part(manifest, "thresholds").items() if finite(v) and abs(v) <= 1.001}
            return OnnxEncoder(folder), {
                **part(manifest, "config"), "model_type": manifest.get("model_type"),
                "name": str(manifest.get("name", ""))[:200], "thresholds": thresholds}
        config = read_config(folder)  # ModelLoadError when it is not a saved model either
    entry, key = cache_entry(source)
    if read_manifest(entry) is not None:
        try:
            return OnnxEncoder(entry), config
        except OnnxBackendError:
            pass  # changed since the lab wrote it (or from an older exporter): exported again over it
    from core.export.export_folder import write_export
    from core.models import load_model

    model, config = load_model(source, device="cpu")
    try:
        write_folder_atomically(entry, lambda temp: write_export(
            model, config, temp, "onnx", source=str(source), extra={"source_sha256": key}))
    except OSError as error:
        raise OnnxBackendError(
            f"cannot write the ONNX cache {entry} ({error.strerror or error}); set SIAMESE_LAB_CACHE to a writable "
            f"folder, or export the model with 'python -m core export --format onnx --out DIR' and pass --model DIR"
        ) from None
    return OnnxEncoder(entry), config
