"""Nearest questions: a corpus's unit vectors (tower 1) in an inner-product index searched with a query's (tower 0),
so a score is the cosine the model gives the pair. ``flat`` is exact, ``hnsw`` approximate, ``ivfpq`` compressed
(IVF cells and PQ codes; its scores are estimates that callers comparing with a threshold score again exactly). On a
CUDA device, ``DeviceIndex`` searches exactly. Indexes and a corpus's vectors (``VectorCache``) are cached by what they
were built from, checked for their stamp, shapes, dtypes and finite unit rows on read. FAISS and torch are imported
lazily.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

FLAT_LIMIT = 50_000  # corpus size up to which search is exact
INDEX_KINDS = ("flat", "hnsw", "ivfpq")  # what new_index builds
HNSW_NEIGHBOURS = 32  # M: graph links per vector
HNSW_EF_SEARCH = 512  # candidates kept while searching: its recall and latency in docs/BENCHMARKS.md
HNSW_EF_CONSTRUCTION = 80  # candidates kept while building
ENCODE_CHUNK = 4096  # texts per model.encode call, so progress moves and memory stays bounded
INDEX_FILE, META_FILE = "index.faiss", "meta.json"
FORMAT = "siamese-lab-cache"
MIN_POINTS = 39  # training rows per k-means centroid below which FAISS warns (its min_points_per_centroid)
MAX_NLIST = 65_536  # IVF cells: about 4·sqrt(n), so 65,536 cells are reached at 268 million vectors
PQ_DIMS_PER_CODE = 4  # dimensions per one-byte PQ code: 384-d -> 96 bytes, 16x below float32
PROBE_TEXTS = 8  # texts encoded through both towers to tell a Siamese model from a two-tower one
PQ_BITS = 8  # bits per code (256 centroids per sub-vector), FAISS's fast path
# Cells searched per query: a 16th of them (at least 8). Near duplicates fall in their query's cell or a
# neighbouring one; on uniform random vectors (no cells to follow) recall is poor (bench/index_memory.py).
NPROBE_SHARE, MIN_NPROBE = 16, 8
CHUNK_ROWS = 4096  # queries per matrix product on a device
SCORE_BLOCK_BYTES = 1 << 30  # the (chunk, N) float32 scores of one product at most: fewer rows for a large corpus
GPU_MEMORY_SHARE = 0.8  # of the free GPU memory the vectors and one score block may take; the rest is headroom

Progress = Callable[[int, int], None]  # (texts encoded so far, total)
UnitEncoder = Callable[[list, "Progress | None"], np.ndarray]  # (texts, progress) -> (N, d) unit rows, tower 1


def fingerprint(texts: Sequence[str]) -> str:
    """sha1 of the texts in order; a NUL between texts keeps ["ab", "c"] apart from ["a", "bc"]."""
    digest = hashlib.sha1()
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()


def model_identity(model) -> str | None:
    """What names a model's vectors: the sha256 of its tokenizer's settings and vocabulary and of every tensor of its
    ``state_dict`` (name, dtype, shape, bytes; an ONNX export's is its digest); None without a state_dict."""
    if not callable(getattr(model, "state_dict", None)):
        return None
    import torch

    digest = hashlib.sha256()
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None:
        settings = tokenizer.to_dict() if hasattr(tokenizer, "to_dict") else {}
        digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
        digest.update(str(getattr(tokenizer, "vocab_size", "")).encode() + b"\0")
        if isinstance(getattr(tokenizer, "vocab", None), list):
            digest.update("\n".join(tokenizer.vocab).encode("utf-8", "surrogatepass"))
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous()
        digest.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        if t.numel():
            digest.update(t.reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


def row_norms(rows: np.ndarray, name: str = "vectors") -> np.ndarray:
    """(N,) float32 lengths of the (N, d) ``rows`` (einsum buffers: no (N, d) temporary beside a corpus's vectors);
    ValueError naming ``name`` for NaN or infinite values."""
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows, dtype=np.float64))
    if not np.isfinite(norms).all():
        raise ValueError(f"{name} hold NaN or infinite values")
    return norms.astype(np.float32)


def is_unit(norms: np.ndarray) -> bool:
    """Every row of length 1 (float32 rounding aside) or 0 (an all-zero row stays so)."""
    return bool(((np.abs(norms - 1) < 1e-5) | (norms == 0)).all())


def unit_rows(vectors, name: str = "vectors") -> np.ndarray:
    """(N, d) float32 rows scaled to length 1 (an all-zero row stays zero), without a copy when they are already;
    ValueError naming ``name`` for another shape or values not finite."""
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (N, d) array, got shape {array.shape}")
    norms = row_norms(array, name)
    return np.ascontiguousarray(array if is_unit(norms) else array / np.maximum(norms, 1e-12)[:, None])


def encode_unit_rows(model, texts: Sequence[str], tower: int, batch_size: int,
                     progress: Progress | None) -> np.ndarray:
    """(N, d) unit rows of ``texts``, encoded ``ENCODE_CHUNK`` at a time into one array filled in place."""
    total, out = len(texts), None
    for offset in range(0, total, ENCODE_CHUNK):
        chunk = list(texts[offset : offset + ENCODE_CHUNK])
        inner = None if progress is None else (lambda done, _n, offset=offset: progress(offset + done, total))
        part = np.asarray(model.encode(chunk, tower=tower, batch_size=batch_size, progress=inner), dtype=np.float32)
        if out is None:
            out = np.empty((total, part.shape[1]), dtype=np.float32)  # (N, d)
        norms = np.linalg.norm(part, axis=1, keepdims=True)
        np.divide(part, np.maximum(norms, 1e-12), out=out[offset : offset + len(chunk)])
    return np.zeros((0, 0), dtype=np.float32) if out is None else out


def towers_differ(model, texts: Sequence[str], batch_size: int = 256) -> bool:
    """Whether ``model``'s two towers give different vectors, told from the first ``PROBE_TEXTS`` of ``texts``."""
    probe = list(texts[:PROBE_TEXTS])
    if not probe:
        return False
    first = np.asarray(model.encode(probe, tower=0, batch_size=batch_size))
    second = np.asarray(model.encode(probe, tower=1, batch_size=batch_size))
    return not (first.shape == second.shape and np.allclose(first, second, atol=1e-5))


def encode_towers(model, texts: Sequence[str], progress: Progress | None = None,
                  batch_size: int = 256) -> tuple[np.ndarray, np.ndarray | None]:
    """(tower 1's unit rows, tower 0's or None when the towers agree) of ``texts``; ``progress(done, total)``
    counts every text encoded, both towers together."""
    texts = list(texts)
    towers = (1, 0) if towers_differ(model, texts, batch_size) else (1,)
    total = len(towers) * len(texts)
    rows = [encode_unit_rows(model, texts, tower, batch_size, None if progress is None else (
        lambda done, _n, before=i * len(texts): progress(before + done, total))) for i, tower in enumerate(towers)]
    return rows[0], rows[1] if len(rows) > 1 else None


def clustering_rows(second: np.ndarray, first: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """(vectors, queries): ``second`` and None for a Siamese model, else [t1, t0]/√2 and [t0, t1]/√2."""
    if first is None:
        return second, None
    half = np.float32(1 / math.sqrt(2))
    return np.hstack([second, first]) * half, np.hstack([first, second]) * half


# ---- the kinds of index ------------------------------------------------------------------------
def ivf_cells(n: int) -> int:
    """IVF cells for ``n`` vectors: about 4·sqrt(n), at most ``MAX_NLIST``, and few enough that every cell gets
    ``MIN_POINTS`` training rows when the corpus has them."""
    return int(max(1, min(round(4 * math.sqrt(max(n, 1))), MAX_NLIST, n // MIN_POINTS)))


def training_rows(n: int) -> int:
    """Sampled vectors that train an ivfpq index over ``n``: ``MIN_POINTS`` per IVF cell and per PQ centroid."""
    return min(n, MIN_POINTS * max(ivf_cells(n), 1 << PQ_BITS))


def training_sample(vectors: np.ndarray, seed: int = 0) -> np.ndarray:
    """(training_rows(N), d) rows of ``vectors`` drawn without replacement with ``seed``, in order."""
    n = len(vectors)
    rows = np.sort(np.random.default_rng(seed).choice(n, size=training_rows(n), replace=False))
    return np.ascontiguousarray(vectors[rows], dtype=np.float32)


def pq_codes(dim: int) -> int:
    """Sub-vectors per PQ code: the largest divisor of ``dim`` at most dim / ``PQ_DIMS_PER_CODE``."""
    return max(m for m in range(1, max(1, dim // PQ_DIMS_PER_CODE) + 1) if dim % m == 0)


def index_parameters(kind: str, dim: int, n: int, links: int = HNSW_NEIGHBOURS) -> dict:
    """What decides an index of ``kind`` that ``filled_index`` builds beyond the vectors (part of its stamp)."""
    if kind == "ivfpq":
        return {"nlist": ivf_cells(n), "m": pq_codes(dim), "bits": PQ_BITS, "train_rows": training_rows(n), "seed": 0}
    if kind == "hnsw":  # ef_search too: FAISS saves it in the index file, so a changed one must not be served
        return {"links": links, "ef_construction": HNSW_EF_CONSTRUCTION, "ef_search": HNSW_EF_SEARCH}
    return {}


def new_index(kind: str, dim: int, n: int, sample: np.ndarray | None = None, seed: int = 0,
              links: int = HNSW_NEIGHBOURS) -> faiss.Index:
    """An empty inner-product index of ``kind`` for ``n`` unit vectors of width ``dim``: HNSW with ``links`` links
    per vector; ivfpq trained on ``sample`` (``training_sample``'s rows: required; a single vector's is flat)."""
    import faiss

    if kind == "flat" or kind == "ivfpq" and n < 2:
        return faiss.IndexFlatIP(dim)
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, links, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction, index.hnsw.efSearch = HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH
        return index
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
    index.nprobe = min(nlist, max(MIN_NPROBE, nlist // NPROBE_SHARE))  # kept in the index's file
    return index


def index_kind(index) -> str:
    """"flat", "hnsw" or "ivfpq": what ``new_index`` built ``index`` as (a ``DeviceIndex`` is "flat")."""
    import faiss

    return "ivfpq" if isinstance(index, faiss.IndexIVFPQ) else "hnsw" if isinstance(index, faiss.IndexHNSWFlat) \
        else "flat"


def filled_index(kind: str, vectors: np.ndarray, links: int = HNSW_NEIGHBOURS) -> faiss.Index:
    """An index of ``kind`` holding ``vectors`` ((N, d) unit rows), an ivfpq one trained on their sample."""
    sample = training_sample(vectors) if kind == "ivfpq" else None
    index = new_index(kind, vectors.shape[1], len(vectors), sample, links=links)
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


# ---- exact search on a torch device ------------------------------------------------------------
class DeviceIndex:
    """An exact inner-product index on a torch device over L2-normalised rows, answering as FAISS's flat index does
    (``ntotal``, ``d``, ``search``). The vectors go to the device once; every search sends only its queries."""

    def __init__(self, vectors: np.ndarray, device):
        import torch

        self.device = torch.device(device)
        self.vectors = self._unit(vectors)  # (N, d)
        self.ntotal, self.d = (int(size) for size in self.vectors.shape)

    def _unit(self, rows):
        import torch
        import torch.nn.functional as F

        return F.normalize(torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32)).to(self.device), dim=1)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids), each (Q, k), best first, equal scores by lower index; past N, id -1 and score -inf as
        FAISS gives them. Chunks of ``CHUNK_ROWS`` queries, fewer when their scores would pass ``SCORE_BLOCK_BYTES``."""
        import torch

        stored, asked = self.vectors, self._unit(queries)
        n, q, k = stored.shape[0], asked.shape[0], int(k)
        scores, indices = np.full((q, k), -np.inf, dtype=np.float32), np.full((q, k), -1, dtype=np.int64)
        found, step = min(k, n), max(1, min(CHUNK_ROWS, SCORE_BLOCK_BYTES // (4 * max(n, 1))))
        with torch.inference_mode():  # torch's default float32 precision: full IEEE products, no TF32
            for start in range(0, q if found else 0, step):
                best, where = torch.topk(asked[start : start + step] @ stored.T, found, dim=1)  # (rows, found)
                # topk leaves the order of equal values to the kernel: by index, then stably by score
                by_index = torch.argsort(where, dim=1)
                best, where = torch.gather(best, 1, by_index), torch.gather(where, 1, by_index)
                by_score = torch.sort(best, dim=1, descending=True, stable=True).indices
                scores[start : start + step, :found] = torch.gather(best, 1, by_score).cpu().numpy()
                indices[start : start + step, :found] = torch.gather(where, 1, by_score).cpu().numpy()
        return scores, indices


def fits_on_device(n: int, dim: int, device, copies: int = 1) -> bool:
    """Whether ``copies`` (N, d) float32 arrays, one chunk's scores and topk's workspace fit in
    ``GPU_MEMORY_SHARE`` of the free memory of the CUDA ``device``; False for any other device."""
    import torch

    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return False
    rows = max(1, min(CHUNK_ROWS, SCORE_BLOCK_BYTES // (4 * max(n, 1))))
    return 4 * n * dim * copies + 8 * rows * n <= GPU_MEMORY_SHARE * torch.cuda.mem_get_info(device)[0]


def device_index(vectors: np.ndarray, device, queries: np.ndarray | None = None) -> DeviceIndex | None:
    """A ``DeviceIndex`` of ``vectors`` on a CUDA ``device`` they (and ``queries``, when another array) fit on;
    else None, and the caller searches with FAISS."""
    if device is None or vectors.size == 0:
        return None
    copies = 1 if queries is None or queries is vectors else 2
    return DeviceIndex(vectors, device) if fits_on_device(*vectors.shape, device, copies) else None


# ---- kept in a cache folder --------------------------------------------------------------------
def _save_entry(folder: str | Path, stamp: dict, writers: dict[str, Callable[[Path], None]]) -> Path:
    """Each of ``writers`` (file name -> write(path)) and ``meta.json`` (the ``stamp``) to ``folder``, atomically."""
    from core.saving.atomic import write_folder_atomically

    def write(temp: Path) -> None:
        for name, save in writers.items():
            save(temp / name)
        (temp / META_FILE).write_text(json.dumps({"format": FORMAT, "stamp": stamp}), encoding="utf-8")

    return write_folder_atomically(folder, write)


def _stamped(folder: str | Path, stamp: dict) -> bool:
    """Whether ``folder`` holds an entry saved under exactly ``stamp``."""
    try:
        meta = json.loads((Path(folder) / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return meta == {"format": FORMAT, "stamp": json.loads(json.dumps(stamp))}


@dataclass
class SavedIndex:
    """Where an index of one model's vectors of one corpus is kept under ``root`` (the lab's cache), used again only
    under exactly its stamp; ``reused``: None until used, then whether the index was loaded."""

    root: Path
    model: str  # ``model_identity`` (or the CLI's file hash) of the model whose vectors are indexed
    corpus: str  # ``fingerprint`` of the corpus's texts, in order
    count: int  # texts in the corpus (repeats included)
    use: str = "dedup"  # what the index serves: the start of its folder's name, and part of its stamp
    reused: bool | None = None

    def folder(self, kind: str) -> Path:
        return Path(self.root) / f"{self.use}-{kind}-{self.model[:16]}-{self.corpus[:16]}"

    def load_or_build(self, kind: str, parameters: dict, build: Callable[[], faiss.Index],
                      shape: tuple[int, int] | None = None) -> faiss.Index:
        """The index saved under exactly this stamp (of ``shape`` vectors when given), else ``build()``'s, saved when it
        can be; an entry FAISS cannot read (torn) or of another shape is built again."""
        import faiss

        stamp = {"use": self.use, "model": self.model, "corpus": self.corpus, "count": self.count, "kind": kind,
                 "parameters": parameters, **({"shape": list(shape)} if shape is not None else {})}
        folder, index = self.folder(kind), None
        if _stamped(folder, stamp):
            with contextlib.suppress(OSError, RuntimeError):
                index = faiss.read_index(str(folder / INDEX_FILE))
        if index is not None and shape is not None and (index.ntotal, index.d) != tuple(shape):
            index = None
        self.reused = index is not None
        if index is None:
            index = build()
            with contextlib.suppress(OSError):  # a read-only cache still gets a working (in-memory) index
                _save_entry(folder, stamp, {INDEX_FILE: lambda path: faiss.write_index(index, str(path))})
        return index


# ---- a corpus to search ------------------------------------------------------------------------
class SearchIndex:
    """Unit vectors of ``texts`` in a FAISS inner-product index, plus the model that encodes queries."""

    def __init__(self, model, index: faiss.Index, texts: list[str]):
        self.model, self.index, self.texts = model, index, list(texts)

    @property
    def kind(self) -> str:
        return index_kind(self.index)

    def __len__(self) -> int:
        return len(self.texts)

    def search(self, query: str | Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """The ``k`` most similar corpus texts of each query (a single string too), best first, as (text, cosine)."""
        queries = [query] if isinstance(query, str) else list(query)
        k = max(0, min(int(k), len(self.texts)))
        if not queries or k == 0:
            return [[] for _ in queries]
        vectors = encode_unit_rows(self.model, queries, tower=0, batch_size=256, progress=None)  # (Q, d)
        scores, ids = self.index.search(vectors, k)  # (Q, k) each; id -1 where HNSW found fewer
        return [[(self.texts[i], float(s)) for s, i in zip(row_scores, row_ids) if i >= 0]
                for row_scores, row_ids in zip(scores, ids)]


def load_or_build(model, texts: Sequence[str], cache_dir: str | Path | None, progress: Progress | None = None,
                  kind: str | None = None, batch_size: int = 256, encode: UnitEncoder | None = None) -> SearchIndex:
    """The ``SearchIndex`` of ``texts`` in an index of ``kind`` (default: exact up to ``FLAT_LIMIT`` texts, HNSW
    above), its vectors tower 1's unit rows or ``encode(texts, progress)``'s: the one kept in ``cache_dir`` for this
    model, corpus and kind, else built and kept there when it can be (``cache_dir`` None: kept nowhere). A model
    nothing identifies is kept nowhere."""
    texts = list(texts)
    if not texts:
        raise ValueError("nothing to index: the corpus has no questions")
    kind = kind or ("flat" if len(texts) <= FLAT_LIMIT else "hnsw")
    identity = model_identity(model) if cache_dir is not None else None
    store = SavedIndex(cache_dir, identity, fingerprint(texts), len(texts), "search") if identity else None
    dim = int(getattr(model, "embedding_dim", 0) or 1)  # what the ivfpq parameters need; the model fixes it

    def build() -> faiss.Index:
        return filled_index(kind, encode(texts, progress) if encode is not None else encode_unit_rows(
            model, texts, tower=1, batch_size=batch_size, progress=progress))

    index = build() if store is None else store.load_or_build(kind, index_parameters(kind, dim, len(texts)), build)
    return SearchIndex(model, index, texts)


# A corpus's vectors kept between runs, so another threshold, round or index kind on the same corpus with the same
# model encodes nothing: a folder per model key and corpus fingerprint holding tower 1's unit rows, tower 0's only
# when the towers differ, and the stamp.
SECOND, FIRST = "second.npy", "first.npy"


@dataclass
class CorpusVectors:
    """A corpus's unit vectors under one model: ``second`` (N, d) its tower 1 rows, ``first`` (N, d) its tower 0
    rows or None when the towers agree; ``reused`` says whether they came from the cache."""

    second: np.ndarray
    first: np.ndarray | None = None
    reused: bool = False

    def for_clustering(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(vectors, queries) to cluster the corpus by (``clustering_rows``)."""
        return clustering_rows(self.second, self.first)


class VectorCache:
    """Corpus vectors under ``root`` (the CLI's: the lab's cache, ``vectors/``), one folder per model and corpus."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def folder(self, model_key: str, corpus: str) -> Path:
        return self.root / f"{model_key[:16]}-{corpus[:16]}"

    @staticmethod
    def stamp(model_key: str, corpus: str, count: int) -> dict:
        return {"use": "corpus vectors", "model": model_key, "corpus": corpus, "count": count}

    def load(self, model_key: str, texts: Sequence[str], corpus: str) -> CorpusVectors | None:
        """The vectors saved for ``texts`` (``corpus``: their fingerprint) under ``model_key``: None unless the stamp
        matches and every array is (N, d) float32 finite unit rows."""
        folder = self.folder(model_key, corpus)
        if not _stamped(folder, self.stamp(model_key, corpus, len(texts))):
            return None
        try:
            arrays = [np.load(folder / name, allow_pickle=False) for name in (SECOND, FIRST)
                      if name == SECOND or (folder / name).exists()]
            if not all(rows.dtype == np.float32 and rows.ndim == 2 and rows.shape == arrays[0].shape
                       and len(rows) == len(texts) and is_unit(row_norms(rows)) for rows in arrays):
                return None
        except (OSError, ValueError, EOFError):  # missing, truncated, not a .npy file, NaN or infinite values
            return None
        return CorpusVectors(arrays[0], arrays[1] if len(arrays) > 1 else None, reused=True)

    def save(self, model_key: str, texts: Sequence[str], vectors: CorpusVectors, corpus: str) -> None:
        """Keep ``vectors`` of ``texts`` (``corpus``: their fingerprint) for the next run, when the cache can be
        written."""
        arrays = {SECOND: vectors.second, **({} if vectors.first is None else {FIRST: vectors.first})}
        writers = {name: lambda path, rows=rows: np.save(path, np.ascontiguousarray(rows), allow_pickle=False)
                   for name, rows in arrays.items()}
        with contextlib.suppress(OSError):  # a read-only or full cache: this run still has its vectors
            _save_entry(self.folder(model_key, corpus), self.stamp(model_key, corpus, len(texts)), writers)


def corpus_vectors(texts: Sequence[str], model, cache: VectorCache | None = None, model_key: str | None = None,
                   progress: Progress | None = None) -> CorpusVectors:
    """The unit vectors of ``texts``: ``cache``'s for ``model_key`` (default: the model's ``model_identity``) when it
    holds them, else encoded (``encode_towers``) and saved there. ``model`` is a model, or a function giving one,
    called only when something must be encoded."""
    def loaded():
        return model if hasattr(model, "encode") else model()

    texts = list(texts)
    if cache is not None and model_key is None:
        model_key = model_identity(model := loaded())
    corpus = fingerprint(texts) if cache is not None and model_key is not None and texts else None
    saved = cache.load(model_key, texts, corpus) if corpus is not None else None
    if saved is not None:
        return saved
    vectors = CorpusVectors(*encode_towers(loaded(), texts, progress=progress))
    if corpus is not None:
        cache.save(model_key, texts, vectors, corpus)
    return vectors
