"""Inference on an ONNX export with onnxruntime on the CPU: ``OnnxEncoder`` offers what commands ask of a
``PairEncoder``, with the PyTorch model's vectors (within 1e-4, L2-normalised); ``onnx_model`` is what
``--backend onnx`` loads. Only the lab's own exports run: their manifest records the sha256 of each graph and of
the tokenizer, and any other folder, or one whose files changed since, is refused in one line (foreign graphs
are outside the threat model, ``docs/RELIABILITY.md``)."""
from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from itertools import accumulate
from pathlib import Path

import numpy as np

from core.export.common import TOKENIZER_FILE, OnnxBackendError, finite, part
from core.export.manifest import MANIFEST_FILE, files_match, read_manifest
from core.export.onnx_cache import cache_entry
from core.export.onnx_graph import GRAPH_FILES
from core.export.onnx_session import failure_reason, onnx_session
from core.model_names import ZERO_SHOT
from core.saving.files import VOCAB_MAX_BYTES, ModelLoadError, read_regular_file
from core.text.encoding_batches import TOKEN_BUDGETS, encoding_batches

__all__ = ["OnnxBackendError", "OnnxEncoder", "onnx_model"]

MAX_GRAPH_BYTES = 2 * 2**30 - 1  # protobuf's own limit on one message
MAX_BATCH_ROWS = 256  # OnnxEncoder never runs a larger batch
MAX_VOCABULARY = 1 << 24
MAX_EMBEDDING_DIM = 65536


@dataclass(frozen=True)
class ExportSettings:
    model_type: str
    max_length: int
    pad_id: int
    embedding_dim: int
    towers: tuple[str, str]  # the graph file of question 1 and of question 2


def export_settings(manifest: dict, path: Path, vocabulary: int) -> ExportSettings:
    """The numbers of an export's manifest (``path``), checked; ``vocabulary`` is the tokenizer's largest id + 1."""
    if not 1 <= vocabulary <= MAX_VOCABULARY:
        raise OnnxBackendError(f"{path}: the tokenizer has {vocabulary:,} ids; at most {MAX_VOCABULARY:,} are allowed")
    towers = manifest.get("towers")
    if not isinstance(towers, dict) or set(towers) != {"0", "1"} or not set(towers.values()) <= set(GRAPH_FILES):
        raise OnnxBackendError(f"{path}: towers must map 0 and 1 to {' / '.join(GRAPH_FILES)}")

    def integer(key: str, low: int, high: int) -> int:
        value = manifest.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise OnnxBackendError(f"{path}: {key} must be an integer in {low}..{high}, got {value!r:.40}")
        return value

    return ExportSettings(str(manifest.get("model_type"))[:40], integer("max_length", 1, 4096),
                          integer("pad_id", 0, vocabulary - 1), integer("embedding_dim", 1, MAX_EMBEDDING_DIM),
                          (towers["0"], towers["1"]))


def read_export_file(folder: Path, name: str, max_bytes: int = MAX_GRAPH_BYTES) -> bytes:
    """The bytes of the file ``name`` of the export ``folder``: a regular file inside it, read once (the
    bytes hashed are the bytes run)."""
    try:
        return read_regular_file(folder / name, max_bytes, folder)
    except FileNotFoundError:
        raise OnnxBackendError(f"{folder}: {name} is missing") from None
    except ModelLoadError as error:
        raise OnnxBackendError(str(error)) from None


class OnnxEncoder:
    """An ONNX export run by onnxruntime on the CPU, with the inference calls of a ``PairEncoder``."""

    def __init__(self, folder: str | Path, threads: int | None = None):
        """``threads``: batches run at once on one session, one onnxruntime thread each, as a short question's
        matrices are too small to share (default: torch's thread count; ``bench/onnx_variants.py``)."""
        import torch
        from tokenizers import Tokenizer

        self.folder = folder = Path(folder)
        self.manifest = manifest = read_manifest(folder)
        if manifest is None:
            raise OnnxBackendError(f"{folder} is not a Siamese Lab export (no usable siamese_lab.json)")
        if manifest.get("export_format") != "onnx":
            raise OnnxBackendError(f"{folder} is a {manifest.get('export_format')!s:.40} export, not an onnx one")
        tokenizer = read_export_file(folder, TOKENIZER_FILE, VOCAB_MAX_BYTES)
        try:
            self.tokenizer = Tokenizer.from_str(tokenizer.decode("utf-8"))
            self.vocabulary = max(self.tokenizer.get_vocab(with_added_tokens=True).values(), default=-1) + 1
        except Exception as error:  # noqa: BLE001 - tokenizers raises plain Exception for a bad file
            raise OnnxBackendError(f"{folder / TOKENIZER_FILE} is not a usable tokenizer ({str(error)[:120]})") \
                from None
        self.settings = settings = export_settings(manifest, folder / MANIFEST_FILE, self.vocabulary)
        self.model_type, self.max_length = settings.model_type, settings.max_length
        self.pad_id, self.embedding_dim = settings.pad_id, settings.embedding_dim
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_length)
        self.workers = max(1, int(threads or torch.get_num_threads()))
        graphs = {name: read_export_file(folder, name) for name in sorted(set(settings.towers))}
        files = {**graphs, TOKENIZER_FILE: tokenizer}
        if not files_match(manifest, files):
            raise OnnxBackendError(f"{folder} is not an ONNX export this lab wrote, or its files changed since (their "
                                   f"sha256 differ from {MANIFEST_FILE}'s); export the model again with "
                                   f"'python -m core export --format onnx'")
        sessions = {}
        for name, graph in graphs.items():
            try:
                sessions[name] = onnx_session(graph)
            except Exception as error:  # noqa: BLE001 - onnxruntime raises its own exception types
                raise OnnxBackendError(f"{folder / name} is not a usable ONNX graph ({failure_reason(error)})") \
                    from None
        self._sessions = [sessions[settings.towers[0]], sessions[settings.towers[1]]]
        # The sha256 of the bytes run (the graphs by name, then the tokenizer): what decides the vectors.
        digest = hashlib.sha256()
        for name, data in files.items():
            digest.update(name.encode() + b"\0" + data)
        self.digest = digest.digest()

    @property
    def device(self):
        import torch

        return torch.device("cpu")

    def eval(self) -> OnnxEncoder:
        return self

    def token_rows(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text, cut to ``max_length``; an empty text keeps one padding token (as
        ``core.text.token_table.TokenTable`` does)."""
        return [encoding.ids[: self.max_length] or [self.pad_id]
                for encoding in self.tokenizer.encode_batch(list(texts))]

    def _batches(self, rows: list[list[int]], batch_size: int) -> list[np.ndarray]:
        """Row positions in batches: longest first, under ``MAX_BATCH_ROWS`` rows and the family's token budget."""
        return encoding_batches(np.array([len(row) for row in rows]), min(batch_size, MAX_BATCH_ROWS),
                                TOKEN_BUDGETS.get(self.model_type))

    def _padded(self, rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """(input_ids, attention_mask) of token-id rows, padded to the longest."""
        lengths = np.array([len(row) for row in rows])
        mask = (np.arange(lengths.max()) < lengths[:, None]).astype(np.int64)
        ids = np.full(mask.shape, self.pad_id, dtype=np.int64)
        ids[mask == 1] = np.concatenate(rows)
        return ids, mask

    def run_rows(self, rows: list[list[int]], tower: int = 0) -> np.ndarray:
        """One batch of token-id rows (padded here) through the graph of ``tower``: (len(rows), d)."""
        ids, mask = self._padded(rows)
        try:
            return self._sessions[tower].run(None, {"input_ids": ids, "attention_mask": mask})[0]
        except Exception as error:  # noqa: BLE001 - onnxruntime raises its own exception types
            raise OnnxBackendError(f"onnxruntime failed on a batch of {ids.shape[0]} x {ids.shape[1]} tokens of "
                                   f"{self.folder}: {failure_reason(error)}") from None

    def encode(self, texts: Sequence[str], tower: int = 0, batch_size: int = 256,
               progress: Callable[[int, int], None] | None = None):
        """Texts -> (N, d) float32 CPU tensor (what ``PairEncoder.encode`` returns)."""
        import torch

        rows = self.token_rows(texts)
        out = np.empty((len(rows), self.embedding_dim), dtype=np.float32)
        if not rows:
            return torch.from_numpy(out)
        tower = min(max(int(tower), 0), 1)
        # At least one batch per worker, so a short list still keeps every thread busy.
        batches = self._batches(rows, max(1, min(int(batch_size), math.ceil(len(rows) / self.workers))))

        def run(picked: np.ndarray) -> None:
            vectors = self.run_rows([rows[index] for index in picked], tower)
            if vectors.shape != (len(picked), self.embedding_dim):
                raise OnnxBackendError(f"{self.folder} gave {vectors.shape} vectors for {len(picked)} questions")
            out[picked] = vectors

        pool = None
        try:
            if self.workers == 1 or len(batches) == 1:
                waits = [partial(run, picked) for picked in batches]
            else:
                pool = ThreadPoolExecutor(self.workers, thread_name_prefix="onnx-encode")
                waits = [pool.submit(run, picked).result for picked in batches]
            # Progress is reported in batch order from this thread, so a callback that raises (a cancelled
            # job) stops the batches not yet started and waits for the running ones.
            for done, wait in zip(accumulate(map(len, batches)), waits):
                wait()
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
        """One uint8 tensor, ``digest``: so ``core.inference.search.model_fingerprint`` tells exports apart."""
        import torch

        return {"onnx_sha256": torch.frombuffer(bytearray(self.digest), dtype=torch.uint8)}

    def __repr__(self) -> str:
        return f"OnnxEncoder({str(self.folder)!r}, model_type={self.model_type!r}, dim={self.embedding_dim})"


# ---- what --backend onnx loads -----------------------------------------------------------------
def onnx_model(source: str | Path, cache_root: str | Path | None = None) -> tuple[OnnxEncoder, dict]:
    """(encoder, config) for ``--backend onnx``: ``source`` is an ONNX export folder (used as it is), a saved
    model folder or ``"minilm"`` (exported once into the lab's cache at ``cache_root``). Raises
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
    entry, key = cache_entry(source, cache_root)
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
