"""Inference on an exported ONNX graph with onnxruntime on the CPU, behind the calls commands make.

``OnnxEncoder(folder)`` reads an ONNX export (``core.export.onnx_graph``: ``siamese_lab.json``,
``tokenizer.json``, ``model.onnx`` and, for a dual encoder with two towers, ``model_tower1.onnx``) and
offers what inference asks of a ``PairEncoder``: ``encode(texts, tower, batch_size, progress)`` ->
(N, d) float32 CPU tensor, ``score_pairs(first, second)`` -> cosines, ``embedding_dim``. Texts are
tokenised by the Hugging Face tokenizer of the export, padded per batch (longest texts first, under
the family's token budget, as ``PairEncoder.encode_table`` does), and an empty text keeps one padding
token, so the vectors are the PyTorch model's within 1e-4, L2-normalised (a dual encoder's PyTorch
vectors are not, their cosines the same).

``onnx_model(source, cache_root)`` is what ``--backend onnx`` loads: an ONNX export folder as it is;
a saved model folder through its cache ``<model>/onnx/``; zero-shot MiniLM (``"minilm"``) through
``<cache_root>/.cache/minilm/onnx/``. A cache is exported on first use, atomically, and exported again
when the model's files have changed since (``source_stamp`` in its ``siamese_lab.json``).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from core.export.common import TOKENIZER_FILE
from core.export.export_folder import write_export
from core.export.manifest import EXPORT_VERSION, read_manifest
from core.export.onnx_graph import GRAPH_FILES, INPUT_NAMES
from core.model_names import ZERO_SHOT
from core.saving.files import (
    CONFIG_MAX_BYTES,
    VOCAB_MAX_BYTES,
    check_regular_file,
    read_regular_file,
)
from core.text.encoding_batches import TOKEN_BUDGETS, encoding_batches

CACHE_FOLDER = "onnx"  # inside a saved model folder
ZERO_SHOT_CACHE = Path(".cache") / "minilm" / CACHE_FOLDER  # inside the runs folder
MAX_GRAPH_BYTES = 4 * 2**30  # one .onnx file (protobuf's own limit is 2 GiB)
RUNS_ENV = "SIAMESE_LAB_RUNS"


class OnnxBackendError(ValueError):
    """An ONNX export that cannot be used, or a cache that cannot be written; one line."""


def default_cache_root() -> Path:
    """The runs folder, where zero-shot MiniLM's graph is cached: ``$SIAMESE_LAB_RUNS`` or ``runs``."""
    return Path(os.environ.get(RUNS_ENV) or "runs")


def _int_field(manifest: dict, key: str, low: int, high: int, path: Path) -> int:
    value = manifest.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise OnnxBackendError(f"{path}: {key} must be an integer in {low}..{high}, got {value!r:.40}")
    return value


class OnnxEncoder:
    """An ONNX export run by onnxruntime on the CPU, with the inference calls of a ``PairEncoder``."""

    def __init__(self, folder: str | Path, threads: int | None = None):
        """``threads``: how many batches run at once (default: torch's thread count).

        Each batch runs on one onnxruntime thread, and the batches run side by side on one session
        (``InferenceSession.run`` is thread-safe): the matrices of a short-question batch are too small
        for two threads to share one product well. Two batches at once measured 1.07x to 1.22x the
        speed of one batch on two intra-op threads (``bench/onnx_variants.py``), with the same vectors."""
        import onnxruntime as ort
        import torch
        from tokenizers import Tokenizer

        self.folder = folder = Path(folder)
        manifest_path = folder / "siamese_lab.json"
        manifest = read_manifest(folder)
        if manifest is None:
            raise OnnxBackendError(f"{folder} is not a Siamese Lab export (no usable siamese_lab.json)")
        if manifest.get("export_format") != "onnx":
            raise OnnxBackendError(f"{folder} is a {manifest.get('export_format')!s:.40} export, not an onnx one")
        self.manifest = manifest
        self.model_type = str(manifest.get("model_type"))
        self.max_length = _int_field(manifest, "max_length", 1, 4096, manifest_path)
        self.pad_id = _int_field(manifest, "pad_id", 0, 2**31 - 1, manifest_path)
        self.embedding_dim = _int_field(manifest, "embedding_dim", 1, 65536, manifest_path)
        towers = manifest.get("towers")
        if not isinstance(towers, dict) or set(towers) != {"0", "1"} or not set(towers.values()) <= set(GRAPH_FILES):
            raise OnnxBackendError(f"{manifest_path}: towers must map 0 and 1 to {' / '.join(GRAPH_FILES)}")
        try:
            data = read_regular_file(folder / TOKENIZER_FILE, VOCAB_MAX_BYTES, folder)
            self.tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        except FileNotFoundError:
            raise OnnxBackendError(f"{folder}: {TOKENIZER_FILE} is missing") from None
        except Exception as error:  # noqa: BLE001 - tokenizers raises plain Exception for a bad file
            raise OnnxBackendError(f"{folder / TOKENIZER_FILE} is not a usable tokenizer ({error})") from None
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_length)
        options = ort.SessionOptions()
        self.workers = max(1, int(threads or torch.get_num_threads()))
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only
        sessions = {}
        for name in sorted(set(towers.values())):
            try:
                check_regular_file(folder / name, MAX_GRAPH_BYTES, folder)
                sessions[name] = ort.InferenceSession(str(folder / name), options, providers=["CPUExecutionProvider"])
            except FileNotFoundError:
                raise OnnxBackendError(f"{folder}: {name} is missing") from None
            except Exception as error:  # noqa: BLE001 - onnxruntime raises its own exception types
                raise OnnxBackendError(f"{folder / name} is not a usable ONNX graph ({str(error)[:200]})") from None
            names = [i.name for i in sessions[name].get_inputs()]
            if sorted(names) != sorted(INPUT_NAMES):
                raise OnnxBackendError(f"{folder / name} takes {names}, not {list(INPUT_NAMES)}")
        self._sessions = [sessions[towers["0"]], sessions[towers["1"]]]
        self._files = sorted(sessions)
        self._digest = None

    # ---- what inference calls ------------------------------------------------------------------
    @property
    def device(self):
        import torch

        return torch.device("cpu")

    def eval(self) -> "OnnxEncoder":
        return self

    def token_rows(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text, cut to ``max_length``; an empty text keeps one padding token (as
        ``core.text.token_table.TokenTable`` does)."""
        return [encoding.ids or [self.pad_id] for encoding in self.tokenizer.encode_batch(list(texts))]

    def encode(self, texts: Sequence[str], tower: int = 0, batch_size: int = 256,
               progress: Callable[[int, int], None] | None = None):
        """Texts -> (N, d) float32 CPU tensor (what ``PairEncoder.encode`` returns)."""
        import torch

        rows = self.token_rows(texts)
        out = np.empty((len(rows), self.embedding_dim), dtype=np.float32)
        if not rows:
            return torch.from_numpy(out)
        session = self._sessions[min(max(int(tower), 0), 1)]
        lengths = np.array([len(row) for row in rows])
        # At least one batch per worker, so a short list still keeps every thread busy.
        batch_size = max(1, min(int(batch_size), math.ceil(len(rows) / self.workers)))
        batches = encoding_batches(lengths, batch_size, TOKEN_BUDGETS.get(self.model_type))

        def run(picked: np.ndarray) -> None:
            width = int(lengths[picked].max())
            ids = np.full((len(picked), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(picked), width), dtype=np.int64)
            for row, index in enumerate(picked):
                ids[row, : lengths[index]] = rows[index]
                mask[row, : lengths[index]] = 1
            out[picked] = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]

        if self.workers == 1 or len(batches) == 1:
            for done, picked in _counted(batches):
                run(picked)
                if progress is not None:
                    progress(done, len(rows))
            return torch.from_numpy(out)
        pool = ThreadPoolExecutor(self.workers, thread_name_prefix="onnx-encode")
        try:
            futures = [pool.submit(run, picked) for picked in batches]
            # Progress is reported in batch order from this thread, so a callback that raises (a
            # cancelled job) stops the batches not yet started and waits for the running ones.
            for (done, _), future in zip(_counted(batches), futures):
                future.result()
                if progress is not None:
                    progress(done, len(rows))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return torch.from_numpy(out)

    def score_pairs(self, first: Sequence[str], second: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """Cosine similarity of each (first[i], second[i]) pair, (N,) float64."""
        import torch

        v1 = self.encode(first, tower=0, batch_size=batch_size)
        v2 = self.encode(second, tower=1, batch_size=batch_size)
        return torch.nn.functional.cosine_similarity(v1, v2, dim=-1).double().numpy()

    def state_dict(self) -> dict:
        """One uint8 tensor, the sha256 of the graphs and the tokenizer: what decides the vectors, so
        ``core.inference.search.model_fingerprint`` tells exports apart and reuses an index built with this one."""
        import torch

        if self._digest is None:
            digest = hashlib.sha256()
            for name in [*self._files, TOKENIZER_FILE]:
                digest.update(name.encode() + b"\0")
                with open(self.folder / name, "rb") as handle:
                    for block in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(block)
            self._digest = digest.digest()
        return {"onnx_sha256": torch.frombuffer(bytearray(self._digest), dtype=torch.uint8)}

    def __repr__(self) -> str:
        return f"OnnxEncoder({str(self.folder)!r}, model_type={self.model_type!r}, dim={self.embedding_dim})"


def _counted(batches: list[np.ndarray]):
    """(rows done after this batch, batch) for each batch."""
    done = 0
    for picked in batches:
        done += len(picked)
        yield done, picked


# ---- what --backend onnx loads -----------------------------------------------------------------
def _file_stamp(path: Path) -> list:
    try:
        info = path.stat()
    except OSError:
        return [path.name, None]
    return [path.name, info.st_size, info.st_mtime_ns]


def source_stamp(source: str | Path) -> str:
    """What a cached graph was exported from: config.json's bytes and the size and time of every other
    file of the model folder (for zero-shot MiniLM, of the installed package's files), and the export
    format's version. Any change means a new export."""
    digest = hashlib.sha256(f"siamese-lab-onnx-cache {EXPORT_VERSION}\0".encode())
    if str(source) == ZERO_SHOT:
        from core.text.wordpiece_tokenizer import minilm_folder

        folder = minilm_folder()
        parts = [_file_stamp(folder / name) for name in ("config.json", "model.safetensors", "vocab.txt")]
    else:
        folder = Path(source)
        digest.update(read_regular_file(folder / "config.json", CONFIG_MAX_BYTES, folder))
        parts = [_file_stamp(path) for path in sorted(folder.iterdir())
                 if path.is_file() and path.name != "config.json"]
    digest.update(json.dumps(parts).encode())
    return digest.hexdigest()


def _export_config(manifest: dict) -> dict:
    """What commands read of a config (thresholds, name, model type), from an export's manifest."""
    config = manifest.get("config") if isinstance(manifest.get("config"), dict) else {}
    thresholds = manifest.get("thresholds") if isinstance(manifest.get("thresholds"), dict) else {}
    thresholds = {k: v for k, v in thresholds.items()
                  if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) <= 1.001}
    return {**config, "model_type": manifest.get("model_type"), "name": str(manifest.get("name", "")),
            "thresholds": thresholds}


def onnx_model(source: str | Path, cache_root: str | Path | None = None,
               threads: int | None = None) -> tuple[OnnxEncoder, dict]:
    """(encoder, config) for ``--backend onnx``: ``source`` is an ONNX export folder, a saved model folder
    (its graph cached in ``<model>/onnx/``) or ``"minilm"`` (cached in ``<cache_root>/.cache/minilm/onnx/``,
    ``cache_root`` defaulting to ``default_cache_root()``). Raises OnnxBackendError, or
    ``core.saving.ModelLoadError`` for a folder that is neither an export nor a usable model."""
    from core.saving import read_config, write_folder_atomically

    if str(source) == ZERO_SHOT:
        from core.models.registry import zero_shot_config

        cache, config = Path(cache_root or default_cache_root()) / ZERO_SHOT_CACHE, zero_shot_config()
    else:
        folder = Path(source)
        manifest = read_manifest(folder) if folder.is_dir() else None
        if manifest is not None:  # an export: used as it is
            return OnnxEncoder(folder, threads), _export_config(manifest)
        config = read_config(folder)  # ModelLoadError when it is not a saved model either
        cache = folder / CACHE_FOLDER
    stamp = source_stamp(source)
    cached = read_manifest(cache)
    if not (cached and cached.get("export_format") == "onnx" and cached.get("source_stamp") == stamp
            and not cached.get("quantization")):
        from core.models import load_model

        model, config = load_model(source, device="cpu")
        try:
            write_folder_atomically(cache, lambda temp: write_export(
                model, config, temp, "onnx", source=str(source), extra={"source_stamp": stamp}))
        except OSError as error:
            raise OnnxBackendError(
                f"cannot write the ONNX cache {cache} ({error.strerror or error}); export the model with "
                f"'python -m core export --format onnx --out DIR' and pass --model DIR") from None
    return OnnxEncoder(cache, threads), config
