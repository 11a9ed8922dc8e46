"""Nearest questions: every question of a corpus as a unit vector in a FAISS inner-product index.

The corpus is encoded once through tower 1 (the question2 side) and a query through tower 0 (the
question1 side), the same way pairs are scored, so a search score is the cosine similarity the
model would give the pair (query, corpus question).

Three kinds of index (``new_index``): ``flat`` is exact (every vector in float32, 4·d bytes each); ``hnsw`` adds a
graph for fast approximate search; ``ivfpq`` compresses: the vectors are split among ``nlist`` k-means cells (IVF)
and each is stored as ``m`` one-byte codes of its residual (product quantisation), trained on a seeded sample of
the vectors (``bench/index_memory.py`` measures the saving). Its scores are PQ estimates of the cosine: callers
that compare them with a threshold score their candidates again exactly (``core.inference.dedup_graph``). By
default a corpus is searched exactly up to ``FLAT_LIMIT`` texts, with HNSW above.

An index is kept in a cache folder (``save_index``) named by what it was built from, and used again
(``load_index``) only under exactly the same stamp: the model's ``model_identity``, the texts' ``fingerprint``,
their number, the kind and its parameters. A cache is the lab's own folder: someone who can write there is
outside the threat model (``docs/RELIABILITY.md``), so an index read back is checked for what a crash or a stale
entry leaves (its stamp, its size), not for forgery; so are arrays kept the same way (``save_arrays``).

FAISS is imported only where an index is made or read: the command line's parsers take ``INDEX_KINDS`` and
``FLAT_LIMIT`` from here where FAISS is not installed.
"""
from __future__ import annotations

import hashlib
import json
import math
import weakref
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

FLAT_LIMIT = 50_000  # corpus size up to which search is exact
INDEX_KINDS = ("flat", "hnsw", "ivfpq")  # what new_index builds
HNSW_NEIGHBOURS = 32  # M: graph links per vector
HNSW_EF_SEARCH = 512  # candidates kept while searching: recall@10 above 0.95 at millisecond latency (docs/BENCHMARKS.md)
HNSW_EF_CONSTRUCTION = 80  # candidates kept while building
ENCODE_CHUNK = 4096  # texts per model.encode call, so progress moves and memory stays bounded
INDEX_FILE, META_FILE = "index.faiss", "meta.json"
FORMAT = "siamese-lab-cache"
MIN_POINTS = 39  # training rows per k-means centroid below which FAISS warns (its min_points_per_centroid)
MAX_NLIST = 65_536  # IVF cells: about 4·sqrt(n), so 65,536 cells are reached at 268 million vectors
PQ_DIMS_PER_CODE = 4  # dimensions per one-byte PQ code: 384-d -> 96 bytes, 16x below float32
PQ_BITS = 8  # bits per code (256 centroids per sub-vector), FAISS's fast path
# Cells searched per query: a 16th of them (at least 8). Near duplicates fall in their query's cell or a
# neighbouring one; on uniform random vectors (no cells to follow) recall is poor (bench/index_memory.py).
NPROBE_SHARE, MIN_NPROBE = 16, 8

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


def model_identity(model) -> str | None:
    """What names a model's vectors: its weights' ``model_fingerprint``, or an ONNX graph's digest."""
    identity = model_fingerprint(model)
    digest = getattr(model, "digest", None)
    return identity if identity is not None else digest.hex() if isinstance(digest, bytes) else None


# ---- the kinds of index ------------------------------------------------------------------------
def checked_kind(kind: str) -> str:
    if kind not in INDEX_KINDS:
        raise ValueError(f"index kind must be one of {', '.join(INDEX_KINDS)}, got {kind!r}")
    return kind


def ivf_cells(n: int) -> int:
    """IVF cells for ``n`` vectors: about 4·sqrt(n), at most ``MAX_NLIST``, and few enough that every
    cell gets ``MIN_POINTS`` training rows when the corpus has them."""
    return int(max(1, min(round(4 * math.sqrt(max(n, 1))), MAX_NLIST, n // MIN_POINTS)))


def training_rows(n: int) -> int:
    """How many sampled vectors train an ivfpq index over ``n``: ``MIN_POINTS`` per IVF cell and per PQ
    centroid, or all of them when the corpus is smaller."""
    return min(n, MIN_POINTS * max(ivf_cells(n), 1 << PQ_BITS))


def training_sample(vectors: np.ndarray, seed: int = 0) -> np.ndarray:
    """(training_rows(N), d) rows of ``vectors`` drawn without replacement with ``seed``, in order."""
    n = len(vectors)
    rows = np.sort(np.random.default_rng(seed).choice(n, size=training_rows(n), replace=False))
    return np.ascontiguousarray(vectors[rows], dtype=np.float32)


def pq_codes(dim: int) -> int:
    """Sub-vectors per PQ code: the largest divisor of ``dim`` at most dim / ``PQ_DIMS_PER_CODE``."""
    return max(m for m in range(1, max(1, dim // PQ_DIMS_PER_CODE) + 1) if dim % m == 0)


def nprobe_for(nlist: int) -> int:
    return min(nlist, max(MIN_NPROBE, nlist // NPROBE_SHARE))


def index_parameters(kind: str, dim: int, n: int) -> dict:
    """What decides an index of ``kind`` beyond the vectors (part of its stamp)."""
    if checked_kind(kind) == "ivfpq":
        return {"nlist": ivf_cells(n), "m": pq_codes(dim), "bits": PQ_BITS, "train_rows": training_rows(n)}
    return {"links": HNSW_NEIGHBOURS, "ef_search": HNSW_EF_SEARCH} if kind == "hnsw" else {}


def new_index(kind: str, dim: int, n: int, sample: np.ndarray | None = None, seed: int = 0,
              links: int = HNSW_NEIGHBOURS) -> faiss.Index:
    """An empty inner-product index of ``kind`` for ``n`` unit vectors of width ``dim``: HNSW with ``links``
    links per vector; ivfpq trained on ``sample`` (``training_sample``'s rows: required). A single vector has
    nothing to train on: its ivfpq index is flat."""
    import faiss

    if checked_kind(kind) == "flat" or kind == "ivfpq" and n < 2:
        return faiss.IndexFlatIP(dim)
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, links, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.hnsw.efSearch = HNSW_EF_SEARCH
        return index
    if sample is None or len(sample) < 2:
        raise ValueError("an ivfpq index is trained on a sample of at least 2 of its vectors")
    sample = np.ascontiguousarray(sample, dtype=np.float32)
    nlist, m = min(ivf_cells(n), len(sample)), pq_codes(dim)
    # A small corpus gets fewer PQ centroids (at least 2), so that each is trained on enough rows.
    bits = int(min(PQ_BITS, max(1, math.floor(math.log2(max(len(sample) // MIN_POINTS, 2))))))
    index = faiss.index_factory(dim, f"IVF{nlist},PQ{m}x{bits}np", faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = index.pq.cp.seed = int(seed)  # "np": no polysemous training (minutes, for a filter unused here)
    # Fewer rows than FAISS likes are a deliberate choice for a small corpus, not a warning per sub-vector.
    index.cp.min_points_per_centroid = min(MIN_POINTS, len(sample) // nlist)
    index.pq.cp.min_points_per_centroid = min(MIN_POINTS, len(sample) // (1 << bits))
    index.train(sample)
    index.nprobe = nprobe_for(nlist)
    return index


def index_kind(index) -> str:
    """"flat", "hnsw" or "ivfpq": what ``new_index`` built ``index`` as (a device's exact index is "flat")."""
    import faiss

    if isinstance(index, faiss.IndexIVFPQ):
        return "ivfpq"
    return "hnsw" if isinstance(index, faiss.IndexHNSWFlat) else "flat"


def filled_index(kind: str, vectors: np.ndarray, seed: int = 0, links: int = HNSW_NEIGHBOURS) -> faiss.Index:
    """An index of ``kind`` holding ``vectors`` ((N, d) unit rows), an ivfpq one trained on their sample."""
    sample = training_sample(vectors, seed) if kind == "ivfpq" else None
    index = new_index(kind, vectors.shape[1], len(vectors), sample, seed, links)
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


# ---- kept in a cache folder --------------------------------------------------------------------
def save_index(index: faiss.Index, folder: str | Path, stamp: dict) -> Path:
    """Write ``index`` and ``meta.json`` (the ``stamp``, the index's count and width) to ``folder`` atomically."""
    import faiss

    from core.saving.atomic import write_folder_atomically

    meta = {"format": FORMAT, "stamp": stamp, "count": int(index.ntotal), "dim": int(index.d)}

    def write(temp: Path) -> None:
        faiss.write_index(index, str(temp / INDEX_FILE))
        (temp / META_FILE).write_text(json.dumps(meta, sort_keys=True), encoding="utf-8")

    return write_folder_atomically(folder, write, owned_before=(INDEX_FILE, META_FILE))


def load_index(folder: str | Path, stamp: dict) -> faiss.Index | None:
    """The index ``save_index`` wrote to ``folder`` with exactly ``stamp``; None when there is none, it was saved
    with another stamp, or it cannot be read as the count and width its meta records."""
    import faiss

    folder = Path(folder)
    if json.dumps(saved_stamp(folder), sort_keys=True) != json.dumps(stamp, sort_keys=True):
        return None
    try:
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        index = faiss.read_index(str(folder / INDEX_FILE))
    except (OSError, ValueError, RuntimeError):  # unreadable or torn: build again
        return None
    if (index.ntotal, index.d) != (meta.get("count"), meta.get("dim")):
        return None
    if isinstance(index, faiss.IndexIVFPQ):
        index.nprobe = nprobe_for(index.nlist)
    return index


def save_arrays(folder: str | Path, arrays: dict[str, np.ndarray], stamp: dict) -> Path:
    """Write ``arrays`` (file name -> array) and ``meta.json`` (the ``stamp``) to ``folder`` atomically,
    replacing what was there."""
    from core.saving.atomic import write_folder_atomically

    def write(temp: Path) -> None:
        for name, array in arrays.items():
            np.save(temp / name, np.ascontiguousarray(array), allow_pickle=False)
        (temp / META_FILE).write_text(json.dumps({"format": FORMAT, "stamp": stamp}, sort_keys=True), encoding="utf-8")

    return write_folder_atomically(folder, write, owned_before=(META_FILE, *arrays))


def saved_stamp(folder: str | Path) -> dict | None:
    """The stamp ``save_arrays`` or ``save_index`` wrote to ``folder``; None when there is none."""
    try:
        meta = json.loads((Path(folder) / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    stamp = meta.get("stamp") if isinstance(meta, dict) and meta.get("format") == FORMAT else None
    return stamp if isinstance(stamp, dict) else None


def load_arrays(folder: str | Path, stamp: dict, shapes: dict[str, tuple[tuple[int, ...], object]]) -> dict | None:
    """The arrays ``save_arrays`` wrote to ``folder`` with exactly ``stamp``, each file's name mapped to the
    (shape, dtype) it must have; None when there is no such entry or an array has another shape or dtype."""
    if json.dumps(saved_stamp(folder), sort_keys=True) != json.dumps(stamp, sort_keys=True):
        return None
    try:
        arrays = {name: np.load(Path(folder) / name, allow_pickle=False) for name in shapes}
    except (OSError, ValueError, EOFError):  # truncated, or not a .npy file: build again
        return None
    fits = all(arrays[name].shape == tuple(shape) and arrays[name].dtype == np.dtype(dtype)
               for name, (shape, dtype) in shapes.items())
    return arrays if fits else None


# ---- a corpus to search ------------------------------------------------------------------------
class SearchIndex:
    """Unit vectors of ``texts`` in a FAISS inner-product index, plus the model that encodes queries."""

    def __init__(self, model, index: faiss.Index, texts: list[str]):
        if index.ntotal != len(texts):
            raise ValueError(f"the index holds {index.ntotal} vectors for {len(texts)} texts")
        self.model = model
        self.index = index
        self.texts = list(texts)

    @property
    def kind(self) -> str:
        return index_kind(self.index)

    def __len__(self) -> int:
        return len(self.texts)

    @classmethod
    def build(cls, model, texts: Sequence[str], progress: Progress | None = None, batch_size: int = 256,
              kind: str | None = None, flat_limit: int = FLAT_LIMIT, encode: UnitEncoder | None = None,
              seed: int = 0) -> "SearchIndex":
        """Encode ``texts`` with ``model`` (tower 1; or ``encode(texts, progress)``'s unit rows, such as the
        vectors cached by ``core.inference.vector_cache``) into an index of ``kind`` (default: exact up to
        ``flat_limit`` texts, HNSW above)."""
        texts = list(texts)
        if not texts:
            raise ValueError("nothing to index: the corpus has no questions")
        vectors = encode(texts, progress) if encode is not None else encode_unit_rows(  # (N, d)
            model, texts, tower=1, batch_size=batch_size, progress=progress)
        kind = kind or ("flat" if len(texts) <= flat_limit else "hnsw")
        return cls(model, filled_index(kind, vectors, seed), texts)

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


def load_or_build(model, texts: Sequence[str], cache_dir: str | Path | None, progress: Progress | None = None,
                  kind: str | None = None, flat_limit: int = FLAT_LIMIT, batch_size: int = 256,
                  encode: UnitEncoder | None = None, seed: int = 0) -> SearchIndex:
    """The ``SearchIndex`` of ``texts`` in an index of ``kind`` (default: exact up to ``flat_limit`` texts, HNSW
    above): the one kept in ``cache_dir`` for this model, corpus and kind when there is one, else built
    (``SearchIndex.build``) and kept there when it can be. A model nothing identifies is indexed in memory only."""
    texts = list(texts)
    if not texts:
        raise ValueError("nothing to index: the corpus has no questions")
    kind = checked_kind(kind or ("flat" if len(texts) <= flat_limit else "hnsw"))
    identity = model_identity(model) if cache_dir is not None else None
    corpus = fingerprint(texts)
    dim = int(getattr(model, "embedding_dim", 0) or 1)  # what the ivfpq parameters need; the model fixes it
    stamp = {"use": "search", "model": identity, "corpus": corpus, "count": len(texts), "kind": kind,
             "parameters": index_parameters(kind, dim, len(texts)), **({"seed": seed} if kind == "ivfpq" else {})}
    folder = Path(cache_dir) / f"search-{kind}-{identity[:16]}-{corpus[:16]}" if identity else None
    saved = load_index(folder, stamp) if folder is not None else None
    if saved is not None and saved.ntotal == len(texts) and index_kind(saved) == kind:
        return SearchIndex(model, saved, texts)
    built = SearchIndex.build(model, texts, progress, batch_size, kind=kind, encode=encode, seed=seed)
    if folder is not None:
        try:
            save_index(built.index, folder, stamp)
        except OSError:  # a read-only cache still gets a working (in-memory) index
            pass
    return built
