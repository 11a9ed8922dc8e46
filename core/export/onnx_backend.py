"""Inference on an exported ONNX graph with onnxruntime on the CPU, behind the calls commands make.

``OnnxEncoder(folder)`` reads an ONNX export (``core.export.onnx_graph``: ``siamese_lab.json``,
``tokenizer.json``, ``model.onnx`` and, for a dual encoder with two towers, ``model_tower1.onnx``) and
offers what inference asks of a ``PairEncoder``: ``encode(texts, tower, batch_size, progress)`` ->
(N, d) float32 CPU tensor, ``score_pairs(first, second)`` -> cosines, ``embedding_dim``. The manifest's
numbers are checked for every export (``core.export.onnx_checks.export_settings``); graphs the lab wrote
itself (``core.export.onnx_trust``: a manifest sealed with this lab's cache key, recording the sha256 of
the bytes read) then run as they are. Any other graph is foreign: it must pass ``core.export.onnx_checks``
(onnx's checker, the operators, inputs and output), then its probe (the probe texts and the largest token
id) runs in a child process under a memory cap and a time limit (``core.export.onnx_probe``) and must give
finite unit vectors, before this process makes a session of it. Every session is made from the bytes read
once, under the memory cap of ``core.export.onnx_session``. Texts are tokenised by the export's Hugging
Face tokenizer, padded per batch (longest texts first, at most ``MAX_BATCH_ROWS`` rows and the family's
token budget, as ``PairEncoder.encode_table`` does), and an empty text keeps one padding token, so the
vectors are the PyTorch model's within 1e-4, L2-normalised (a dual encoder's PyTorch vectors are not,
their cosines the same). A batch onnxruntime fails on is an ``OnnxBackendError`` (one line).

``onnx_model(source, cache_root)`` is what ``--backend onnx`` loads: an ONNX export folder as it is,
read-only; a saved model folder or zero-shot MiniLM (``"minilm"``) through the lab's cache
(``core.export.onnx_cache``: ``$SIAMESE_LAB_CACHE/onnx/<content hash>/``), exported there on first use; an
entry there the lab did not write is never run, only exported again over.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from core.export.common import PROBE_TEXTS, TOKENIZER_FILE, OnnxBackendError
from core.export.manifest import read_manifest
from core.export.onnx_cache import cache_entry
from core.export.onnx_checks import (
    MAX_BATCH_ROWS,
    ExportSettings,
    check_foreign_graph,
    check_vectors,
    export_settings,
    read_graph,
)
from core.export.onnx_probe import probe_in_child
from core.export.onnx_session import capped_session, failure_reason
from core.export.onnx_trust import lab_wrote
from core.model_names import ZERO_SHOT
from core.saving.files import VOCAB_MAX_BYTES, ModelLoadError, read_regular_file
from core.text.encoding_batches import TOKEN_BUDGETS, encoding_batches

__all__ = ["OnnxBackendError", "OnnxEncoder", "onnx_model"]


def _tokenizer(folder: Path):
    """(the export's tokenizer, its bytes, its largest id + 1)."""
    from tokenizers import Tokenizer

    try:
        data = read_regular_file(folder / TOKENIZER_FILE, VOCAB_MAX_BYTES, folder)
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        vocabulary = max(tokenizer.get_vocab(with_added_tokens=True).values(), default=-1) + 1
    except FileNotFoundError:
        raise OnnxBackendError(f"{folder}: {TOKENIZER_FILE} is missing") from None
    except ModelLoadError as error:
        raise OnnxBackendError(str(error)) from None
    except Exception as error:  # noqa: BLE001 - tokenizers raises plain Exception for a bad file
        raise OnnxBackendError(f"{folder / TOKENIZER_FILE} is not a usable tokenizer ({str(error)[:120]})") from None
    return tokenizer, data, vocabulary


def _session(graph: bytes, path: Path):
    """A capped onnxruntime session of ``graph``, the bytes read from ``path``."""
    try:
        return capped_session(graph)
    except Exception as error:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise OnnxBackendError(f"{path} is not a usable ONNX graph ({failure_reason(error)})") from None


def _digest(graphs: dict[str, bytes], tokenizer: bytes) -> bytes:
    """The sha256 of the graphs (by name, in order) and the tokenizer."""
    digest = hashlib.sha256()
    for name, graph in graphs.items():
        digest.update(name.encode() + b"\0" + graph)
    digest.update(TOKENIZER_FILE.encode() + b"\0" + tokenizer)
    return digest.digest()


class OnnxEncoder:
    """An ONNX export run by onnxruntime on the CPU, with the inference calls of a ``PairEncoder``."""

    def __init__(self, folder: str | Path, threads: int | None = None, cache_root: str | Path | None = None,
                 foreign: bool = True):
        """``threads``: how many batches run at once (default: torch's thread count). ``cache_root``: the
        lab's cache whose key tells the lab's own exports (default: ``core.export.onnx_cache.cache_root()``).
        ``foreign=False`` refuses an export the lab did not write instead of checking it.

        Each batch runs on one onnxruntime thread, and the batches run side by side on one session
        (``InferenceSession.run`` is thread-safe): the matrices of a short-question batch are too small
        for two threads to share one product well. Two batches at once measured 1.07x to 1.22x the
        speed of one batch on two intra-op threads (``bench/onnx_variants.py``), with the same vectors."""
        import torch

        self.folder = folder = Path(folder)
        manifest = read_manifest(folder)
        if manifest is None:
            raise OnnxBackendError(f"{folder} is not a Siamese Lab export (no usable siamese_lab.json)")
        if manifest.get("export_format") != "onnx":
            raise OnnxBackendError(f"{folder} is a {manifest.get('export_format')!s:.40} export, not an onnx one")
        self.manifest = manifest
        self.tokenizer, tokenizer_bytes, self.vocabulary = _tokenizer(folder)
        self.settings = settings = export_settings(manifest, folder / "siamese_lab.json", self.vocabulary)
        self.model_type, self.max_length = settings.model_type, settings.max_length
        self.pad_id, self.embedding_dim = settings.pad_id, settings.embedding_dim
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_length)
        self.workers = max(1, int(threads or torch.get_num_threads()))
        graphs = {name: read_graph(folder / name, folder) for name in sorted(set(settings.towers))}
        self.lab_wrote = lab_wrote(manifest, {**graphs, TOKENIZER_FILE: tokenizer_bytes}, cache_root)
        if not self.lab_wrote:
            if not foreign:
                raise OnnxBackendError(f"{folder} was not written by this lab")
            for name, graph in graphs.items():
                self._check_foreign(graph, folder / name, settings)
        sessions = {name: _session(graph, folder / name) for name, graph in graphs.items()}
        self.digest = _digest(graphs, tokenizer_bytes)  # of the bytes checked and run: what decides the vectors
        self._sessions = [sessions[settings.towers[0]], sessions[settings.towers[1]]]

    def _check_foreign(self, graph: bytes, path: Path, settings: ExportSettings) -> None:
        """The static checks, then the probe in a capped child: the probe texts, and a row holding the
        largest token id and the padding id, must give finite unit vectors of the promised width."""
        check_foreign_graph(graph, path, settings)
        rows = self.token_rows(PROBE_TEXTS) + [[self.vocabulary - 1, self.pad_id]]
        batches = [[rows[index] for index in picked] for picked in self._batches(rows, 4)]
        vectors = probe_in_child(graph, [self._padded(batch) for batch in batches], path)
        for batch, found in zip(batches, vectors):
            check_vectors(found, len(batch), settings, path)

    # ---- what inference calls ------------------------------------------------------------------
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
        """Row positions in batches: longest first, at most ``MAX_BATCH_ROWS`` rows and the family's token
        budget (``core.text.encoding_batches``)."""
        lengths = np.array([len(row) for row in rows])
        return encoding_batches(lengths, min(batch_size, MAX_BATCH_ROWS), TOKEN_BUDGETS.get(self.model_type))

    def _padded(self, rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """(input_ids, attention_mask) of token-id rows, padded to the longest."""
        width = max(len(row) for row in rows)
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for index, row in enumerate(rows):
            ids[index, : len(row)] = row
            mask[index, : len(row)] = 1
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

        return {"onnx_sha256": torch.frombuffer(bytearray(self.digest), dtype=torch.uint8)}

    def __repr__(self) -> str:
        return f"OnnxEncoder({str(self.folder)!r}, model_type={self.model_type!r}, dim={self.embedding_dim})"


def _counted(batches: list[np.ndarray]):
    """(rows done after this batch, batch) for each batch."""
    done = 0
    for picked in batches:
        done += len(picked)
        yield done, picked


# ---- what --backend onnx loads -----------------------------------------------------------------
def _export_config(manifest: dict) -> dict:
    """What commands read of a config (thresholds, name, model type), from an export's manifest."""
    config = manifest.get("config") if isinstance(manifest.get("config"), dict) else {}
    thresholds = manifest.get("thresholds") if isinstance(manifest.get("thresholds"), dict) else {}
    thresholds = {k: v for k, v in thresholds.items()
                  if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) <= 1.001}
    return {**config, "model_type": manifest.get("model_type"), "name": str(manifest.get("name", ""))[:200],
            "thresholds": thresholds}


def onnx_model(source: str | Path, cache_root: str | Path | None = None,
               threads: int | None = None) -> tuple[OnnxEncoder, dict]:
    """(encoder, config) for ``--backend onnx``: ``source`` is an ONNX export folder (used as it is, never
    written), a saved model folder or ``"minilm"`` (exported once into the lab's cache,
    ``core.export.onnx_cache``; ``cache_root`` overrides its root). Raises OnnxBackendError, or
    ``core.saving.ModelLoadError`` for a folder that is neither an export nor a usable model."""
    from core.saving import read_config, write_folder_atomically

    if str(source) == ZERO_SHOT:
        from core.models.registry import zero_shot_config

        config = zero_shot_config()
    else:
        folder = Path(source)
        manifest = read_manifest(folder) if folder.is_dir() else None
        if manifest is not None:  # an export: used as it is
            return OnnxEncoder(folder, threads, cache_root), _export_config(manifest)
        config = read_config(folder)  # ModelLoadError when it is not a saved model either
    entry, key = cache_entry(source, cache_root)
    if read_manifest(entry) is not None:
        try:
            return OnnxEncoder(entry, threads, cache_root, foreign=False), config
        except OnnxBackendError:
            pass  # not an export this lab wrote (or from an older exporter): exported again over it
    from core.export.export_folder import write_export
    from core.models import load_model

    model, config = load_model(source, device="cpu")
    try:
        write_folder_atomically(entry, lambda temp: write_export(
            model, config, temp, "onnx", source=str(source), extra={"source_sha256": key}, cache_root=cache_root))
    except OSError as error:
        raise OnnxBackendError(
            f"cannot write the ONNX cache {entry} ({error.strerror or error}); set SIAMESE_LAB_CACHE to a writable "
            f"folder, or export the model with 'python -m core export --format onnx --out DIR' and pass --model DIR"
        ) from None
    return OnnxEncoder(entry, threads, cache_root), config
