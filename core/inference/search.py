"""Nearest questions: every question of a dataset as a unit vector in a FAISS index.

The corpus is encoded once through tower 1 (the question2 side) and a query through tower 0 (the
question1 side), the same way pairs are scored, so a search score is the cosine similarity the
model would give the pair (query, corpus question). Up to ``FLAT_LIMIT`` texts the index is exact
(``IndexFlatIP``); above it, an HNSW graph answers in milliseconds with a small loss of recall.

An index can be saved beside the model it was built with (``load_or_build``'s cache, inside the
model folder) and reloaded when the same texts are asked for again by the same model. A model folder
may come from someone else, so a saved index is never trusted as it is: ``meta.json`` records what it
was built from (the model's ``model_fingerprint``, the texts' ``fingerprint``, their number, the vector
width and the sha256 of the index file); every file is read through ``core.saving.files`` (regular,
size-capped); only a flat or HNSW inner-product index is parsed, under FAISS's allocation limits, and
its HNSW graph is checked to point only at stored vectors; and a few stored vectors, chosen at random,
must equal what the model gives their texts now. Any mismatch rebuilds the index.

These checks catch a torn, stale or mismatched index, not a forgery: someone who can write into the lab's
cache is outside the threat model (``docs/RELIABILITY.md``).
"""
from __future__ import annotations

import hashlib
import json
import threading
import weakref
from pathlib import Path
from typing import Callable, Sequence

import faiss
import numpy as np

from core.inference.index_kinds import FLAT_LIMIT
from core.saving.atomic import write_folder_atomically
from core.saving.files import CONFIG_MAX_BYTES, read_json_file, read_regular_file

HNSW_NEIGHBOURS = 32  # M: graph links per vector
HNSW_EF_SEARCH = 512  # candidates kept while searching: recall@10 above 0.95 at millisecond latency (docs/BENCHMARKS.md)
HNSW_EF_CONSTRUCTION = 80  # candidates kept while building
ENCODE_CHUNK = 4096  # texts per model.encode call, so progress moves and memory stays bounded
INDEX_FILE, TEXTS_FILE, META_FILE = "index.faiss", "texts.json", "meta.json"
FORMAT = "siamese-lab-search"
FORMAT_VERSION = 2  # 2: meta.json records the model, the width and the index's sha256
MAX_TEXTS = 50_000_000  # the most texts a saved index may claim
MAX_DIM = 65_536  # the widest vectors a saved index may claim
TEXTS_MAX_BYTES = 2 * 1024**3  # texts.json
SPOT_CHECKS = 16  # stored vectors compared with a fresh encoding of their texts on every load
SPOT_TOLERANCE = 0.05  # largest L2 distance allowed between a stored unit vector and a fresh one
_INDEX_MAGIC = {b"IxFI": "flat", b"IHNf": "hnsw"}  # the only FAISS index types ever parsed

Progress = Callable[[int, int], None]  # (texts encoded so far, total)
UnitEncoder = Callable[[list, "Progress | None"], np.ndarray]  # (texts, progress) -> (N, d) unit rows, tower 1


def fingerprint(texts: Sequence[str]) -> str:
    """sha1 of the texts in order; a NUL between texts keeps ["ab", "c"] apart from ["a", "bc"]."""
    digest = hashlib.sha1()
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


_MODEL_FINGERPRINTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def model_fingerprint(model) -> str | None:
    """sha256 of what decides a model's vectors: its tokenizer's settings and vocabulary, and every
    tensor of its ``state_dict`` (name, dtype, shape, bytes); None for an object without a state_dict.

    Cached per model object while its tensors are unchanged (their version counters move on any
    in-place update, such as an optimiser step), so asking again costs nothing.
    """
    state_dict = getattr(model, "state_dict", None)
    if not callable(state_dict):
        return None
    import torch

    tensors = sorted(state_dict().items())
    stamp = tuple((name, t.data_ptr(), t._version, tuple(t.shape), str(t.dtype)) for name, t in tensors)
    try:
        cached = _MODEL_FINGERPRINTS.get(model)
    except TypeError:  # not weak-referenceable: no cache
        cached = None
    if cached is not None and cached[0] == stamp:
        return cached[1]
    digest = hashlib.sha256()
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None:
        settings = tokenizer.to_dict() if hasattr(tokenizer, "to_dict") else {}
        digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
        digest.update(str(getattr(tokenizer, "vocab_size", "")).encode() + b"\0")
        vocab = getattr(tokenizer, "vocab", None)
        if isinstance(vocab, list):
            digest.update("\n".join(vocab).encode("utf-8", "surrogatepass"))
    for name, tensor in tensors:
        t = tensor.detach().to("cpu").contiguous()
        digest.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        if t.numel():
            digest.update(t.reshape(-1).view(torch.uint8).numpy())
    value = digest.hexdigest()
    try:
        _MODEL_FINGERPRINTS[model] = (stamp, value)
    except TypeError:
        pass
    return value


def unit_rows(vectors) -> np.ndarray:
    """(N, d) float32 rows scaled to length 1; an all-zero row stays zero (scores 0), as in
    ``F.normalize``."""
    v = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))  # (N, d)
    norms = np.linalg.norm(v, axis=1, keepdims=True)  # (N, 1)
    return np.ascontiguousarray(v / np.maximum(norms, 1e-12), dtype=np.float32)


def encode_unit_rows(model, texts: Sequence[str], tower: int, batch_size: int,
                     progress: Progress | None) -> np.ndarray:
    """(N, d) unit rows of ``texts``, encoded ``ENCODE_CHUNK`` at a time into one array filled in place
    (a corpus's vectors are held once, not once per chunk and again joined and again scaled)."""
    total = len(texts)
    out = None
    for offset in range(0, total, ENCODE_CHUNK):
        chunk = list(texts[offset : offset + ENCODE_CHUNK])
        inner = None
        if progress is not None:
            inner = lambda done, _n, offset=offset: progress(offset + done, total)  # noqa: E731
        part = np.asarray(model.encode(chunk, tower=tower, batch_size=batch_size, progress=inner), dtype=np.float32)
        if out is None:
            out = np.empty((total, part.shape[1]), dtype=np.float32)  # (N, d)
        norms = np.linalg.norm(part, axis=1, keepdims=True)
        np.divide(part, np.maximum(norms, 1e-12), out=out[offset : offset + len(chunk)])
    if out is None:
        return np.zeros((0, 0), dtype=np.float32)
    return out


def new_index(dim: int, size: int, flat_limit: int, links: int = HNSW_NEIGHBOURS) -> faiss.Index:
    """An empty inner-product index for ``size`` vectors of width ``dim``: exact (``IndexFlatIP``) up to
    ``flat_limit`` of them, else HNSW with ``links`` links per vector."""
    if size <= flat_limit:
        return faiss.IndexFlatIP(dim)
    index = faiss.IndexHNSWFlat(dim, links, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    index.hnsw.efSearch = HNSW_EF_SEARCH
    return index


class SearchIndex:
    """Unit vectors of ``texts`` in a FAISS inner-product index, plus the model that encodes queries."""

    def __init__(self, model, index: faiss.Index, texts: list[str], fingerprint_: str | None = None):
        if index.ntotal != len(texts):
            raise ValueError(f"the index holds {index.ntotal} vectors for {len(texts)} texts")
        self.model = model
        self.index = index
        self.texts = list(texts)
        self.fingerprint = fingerprint_ or fingerprint(self.texts)

    @property
    def kind(self) -> str:
        if isinstance(self.index, faiss.IndexIVFPQ):
            return "ivfpq"
        return "hnsw" if isinstance(self.index, faiss.IndexHNSWFlat) else "flat"

    def __len__(self) -> int:
        return len(self.texts)

    @classmethod
    def build(cls, model, texts: Sequence[str], progress: Progress | None = None, batch_size: int = 256,
              flat_limit: int = FLAT_LIMIT, encode: UnitEncoder | None = None) -> "SearchIndex":
        """Encode ``texts`` with ``model`` (tower 1; or ``encode(texts, progress)``'s unit rows, such as the
        vectors cached by ``core.inference.vector_cache``) and index them; exact up to ``flat_limit`` texts."""
        texts = list(texts)
        if not texts:
            raise ValueError("nothing to index: the corpus has no questions")
        vectors = encode(texts, progress) if encode is not None else encode_unit_rows(  # (N, d)
            model, texts, tower=1, batch_size=batch_size, progress=progress)
        index = new_index(vectors.shape[1], len(texts), flat_limit)
        index.add(vectors)
        return cls(model, index, texts)

    def search(self, query: str | Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """The ``k`` most similar corpus texts of each query, best first, as (text, cosine score).

        A single string still gives a list with one result list.
        """
        queries = [query] if isinstance(query, str) else list(query)
        if not queries:
            return []
        k = max(0, min(int(k), len(self.texts)))
        if k == 0:
            return [[] for _ in queries]
        vectors = encode_unit_rows(self.model, queries, tower=0, batch_size=256, progress=None)  # (Q, d)
        scores, ids = self.index.search(vectors, k)  # (Q, k) each; id -1 where HNSW found fewer
        return [[(self.texts[i], float(s)) for s, i in zip(row_scores, row_ids) if i >= 0]
                for row_scores, row_ids in zip(scores, ids)]

    # ---- on disk -------------------------------------------------------------------------------
    def save(self, folder: str | Path) -> Path:
        """Write the index, the texts and ``meta.json`` (what the index was built from) to ``folder`` atomically (``write_folder_atomically``)."""
        data = faiss.serialize_index(self.index).tobytes()
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "fingerprint": self.fingerprint,
                "count": len(self.texts), "dim": int(self.index.d), "kind": self.kind,
                "model": model_fingerprint(self.model), "index_sha256": hashlib.sha256(data).hexdigest()}

        def write(temp: Path) -> None:
            (temp / INDEX_FILE).write_bytes(data)
            (temp / TEXTS_FILE).write_text(json.dumps(self.texts, ensure_ascii=False), encoding="utf-8")
            (temp / META_FILE).write_text(json.dumps(meta), encoding="utf-8")

        return write_folder_atomically(folder, write, owned_before=(INDEX_FILE, TEXTS_FILE, META_FILE))

    @classmethod
    def load(cls, folder: str | Path, model) -> "SearchIndex":
        """Read an index written by ``save`` for ``model``; raises ``ValueError`` (``ModelLoadError``
        for an unusable file) when anything does not agree: the format, the
        model it was built with, the texts, their number, the vector width, the index file's sha256, its type,
        its graph, or a sampled vector against a fresh encoding of its text."""
        folder = Path(folder)
        meta = read_json_file(folder / META_FILE, CONFIG_MAX_BYTES, folder=folder)
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{folder} is not a saved search index of this version")
        count, dim = meta.get("count"), meta.get("dim")
        for name, value, high in (("count", count, MAX_TEXTS), ("dim", dim, MAX_DIM)):
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
                raise ValueError(f"{folder / META_FILE}: {name} must be an integer in 1..{high:,}, got {value!r:.40}")
        wanted_model = model_fingerprint(model)
        if wanted_model is None or meta.get("model") != wanted_model:
            raise ValueError(f"{folder} was built with another model (or its weights changed since)")
        texts = read_json_file(folder / TEXTS_FILE, TEXTS_MAX_BYTES, folder=folder)
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ValueError(f"{folder / TEXTS_FILE} is not a list of texts")
        if len(texts) != count or fingerprint(texts) != meta.get("fingerprint"):
            raise ValueError(f"{folder}: the texts do not match the saved count and fingerprint")
        data = read_regular_file(folder / INDEX_FILE, _index_max_bytes(count, dim), folder=folder)
        if hashlib.sha256(data).hexdigest() != meta.get("index_sha256"):
            raise ValueError(f"{folder / INDEX_FILE} is not the index {META_FILE} describes (sha256 differs)")
        index = _parse_index(data, folder / INDEX_FILE)
        if index.d != dim or index.ntotal != count:
            raise ValueError(f"{folder / INDEX_FILE} holds {index.ntotal} vectors of width {index.d}; "
                             f"{META_FILE} says {count} of width {dim}")
        _spot_check(model, index, texts, folder)
        if isinstance(index, faiss.IndexHNSWFlat):
            index.hnsw.efSearch = HNSW_EF_SEARCH
        return cls(model, index, texts, meta["fingerprint"])


def _index_max_bytes(count: int, dim: int) -> int:
    """The largest index file ``count`` vectors of width ``dim`` make: the vectors, and for HNSW a
    level, an offset and (generously) 6 x M neighbour ids per vector, plus 1 MiB of headers."""
    return count * (4 * dim + 4 + 8 + 4 * 6 * HNSW_NEIGHBOURS) + 1024 * 1024


_FAISS_LIMITS = threading.Lock()  # FAISS's deserialisation limits are process-wide


def _parse_index(data: bytes, path: Path) -> faiss.Index:
    """A flat or HNSW inner-product index from ``data``: anything else is refused before FAISS parses
    it, and FAISS may allocate no vector larger than ``data`` itself while parsing."""
    kind = _INDEX_MAGIC.get(bytes(data[:4]))
    if kind is None:
        raise ValueError(f"{path} is not a flat or HNSW FAISS index")
    index = deserialize_bounded(data, path)
    expected = faiss.IndexFlatIP if kind == "flat" else faiss.IndexHNSWFlat
    if type(index) is not expected or index.metric_type != faiss.METRIC_INNER_PRODUCT:
        raise ValueError(f"{path} is not an inner-product {kind} index")
    if kind == "hnsw":
        _check_hnsw(index, path)
    return index


def deserialize_bounded(data: bytes, path: Path, io_flags: int = 0) -> faiss.Index:
    """FAISS's parse of ``data`` (whose type the caller has checked by its magic), with FAISS's ``io_flags``,
    allocating no vector larger than ``data`` itself; ``ValueError`` when FAISS cannot read it."""
    with _FAISS_LIMITS:
        byte_limit, loop_limit = faiss.get_deserialization_vector_byte_limit(), faiss.get_deserialization_loop_limit()
        faiss.set_deserialization_vector_byte_limit(len(data) + 1)
        faiss.set_deserialization_loop_limit(1_000_000)
        try:
            index = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8), io_flags)
        except RuntimeError as error:
            raise ValueError(f"{path} is not a readable FAISS index: {str(error).splitlines()[0][:200]}") from None
        finally:
            faiss.set_deserialization_vector_byte_limit(byte_limit)
            faiss.set_deserialization_loop_limit(loop_limit)
    return index


def _check_hnsw(index: faiss.IndexHNSWFlat, path: Path) -> None:
    """The graph may only point at stored vectors, and its tables must agree (FAISS trusts them)."""
    storage = faiss.downcast_index(index.storage)
    if type(storage) is not faiss.IndexFlatIP or storage.ntotal != index.ntotal or storage.d != index.d:
        raise ValueError(f"{path}: the HNSW graph's vector storage does not match it")
    graph, n = index.hnsw, index.ntotal
    levels = faiss.vector_to_array(graph.levels).astype(np.int64)
    offsets = faiss.vector_to_array(graph.offsets).astype(np.int64)
    neighbours = faiss.vector_to_array(graph.neighbors)
    per_level = faiss.vector_to_array(graph.cum_nneighbor_per_level).astype(np.int64)
    ok = (len(levels) == n and len(offsets) == n + 1 and len(per_level) >= 2 and per_level[0] == 0
          and (np.diff(per_level) >= 0).all() and n > 0 and (levels >= 1).all() and (levels < len(per_level)).all())
    ok = ok and offsets[0] == 0 and (np.diff(offsets) == per_level[levels]).all() and offsets[-1] == len(neighbours)
    ok = ok and (len(neighbours) == 0 or (neighbours.min() >= -1 and neighbours.max() < n))
    ok = ok and 0 <= graph.entry_point < n and graph.max_level == levels.max() - 1
    if not ok:
        raise ValueError(f"{path}: the HNSW graph is inconsistent")


def _spot_check(model, index: faiss.Index, texts: list[str], folder: Path) -> None:
    """A few stored vectors, chosen at random (the first and last always), must be what ``model``
    gives their texts now: a swapped or edited index, or a changed vocabulary, shows here."""
    rng = np.random.default_rng()
    picks = sorted({0, len(texts) - 1, *rng.choice(len(texts), size=min(SPOT_CHECKS, len(texts)), replace=False).tolist()})
    fresh = encode_unit_rows(model, [texts[i] for i in picks], tower=1, batch_size=64, progress=None)  # (k, d)
    if fresh.shape[1] != index.d:
        raise ValueError(f"{folder}: the model gives vectors of width {fresh.shape[1]}, the index holds {index.d}")
    stored = np.stack([index.reconstruct(int(i)) for i in picks])  # (k, d)
    distance = np.linalg.norm(stored - fresh, axis=1)
    if not np.isfinite(distance).all() or distance.max() > SPOT_TOLERANCE:
        raise ValueError(f"{folder}: stored vectors differ from the model's (by up to {distance.max():.3g})")


def cache_folder(cache_dir: str | Path, texts_fingerprint: str) -> Path:
    return Path(cache_dir) / f"search-{texts_fingerprint[:12]}"


def load_or_build(model, texts: Sequence[str], cache_dir: str | Path | None, progress: Progress | None = None,
                  flat_limit: int = FLAT_LIMIT, batch_size: int = 256, encode: UnitEncoder | None = None) -> SearchIndex:
    """The saved index for exactly these texts in ``cache_dir`` if there is one, else a new one
    (saved there when ``cache_dir`` is given and writable).

    A saved index is used only when everything ``SearchIndex.load`` checks agrees (the model, the texts, the width, the index file's hash,
    sampled vectors); anything else, including files that are not regular or are too large, rebuilds it, from
    ``encode``'s vectors when given (``SearchIndex.build``), and saves it.
    """
    texts = list(texts)
    wanted = fingerprint(texts)
    folder = cache_folder(cache_dir, wanted) if cache_dir is not None else None
    if folder is not None and (folder / META_FILE).is_file():
        try:
            saved = SearchIndex.load(folder, model)
            if saved.fingerprint == wanted and saved.texts == texts:
                return saved
        except (OSError, ValueError, RuntimeError, MemoryError):  # unreadable, tampered or stale: rebuild
            pass
    built = SearchIndex.build(model, texts, progress=progress, batch_size=batch_size, flat_limit=flat_limit,
                              encode=encode)
    if folder is not None:
        try:
            built.save(folder)
        except OSError:  # a read-only cache still gets a working (in-memory) index
            pass
    return built
