"""Exact nearest neighbours by cosine in torch: matrix products over L2-normalised rows, a chunk of queries at a
time, each chunk's best ``k`` kept by ``torch.topk``.

``DeviceIndex`` searches wherever torch runs; on a CUDA GPU it does the work of FAISS's exact index
(``IndexFlatIP``) many times faster, so ``dedup`` and ``suggest`` search with it there
(``device_index``), when the corpus's vectors and one chunk's scores fit in the GPU's free memory; anything
else keeps FAISS. The products are computed in IEEE float32 (never TF32), so the scores are FAISS's up to
rounding in the last bits and a threshold cuts the same neighbourhoods.
"""
from __future__ import annotations

import contextlib

import numpy as np
import torch
import torch.nn.functional as F

CHUNK_ROWS = 4096  # queries per matrix product
SCORE_BLOCK_BYTES = 1 << 30  # the (chunk, N) float32 scores of one product at most: fewer rows for a large corpus
GPU_MEMORY_SHARE = 0.8  # of the free GPU memory the vectors and one score block may take; the rest is headroom


def _top_k(stored: torch.Tensor, asked: torch.Tensor, k: int, chunk_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, indices), each (Q, k), of the ``k`` rows of ``stored`` ((N, d)) closest to each row of ``asked``
    ((Q, d)), unit rows on one device, best first, equal scores by lower index. Where ``k`` is over N the missing
    places are index -1 with score -inf, as FAISS gives them. Computed in chunks of ``chunk_rows`` queries (fewer
    when one chunk's scores would pass ``SCORE_BLOCK_BYTES``); numpy arrays on the CPU back."""
    n, q = stored.shape[0], asked.shape[0]
    if asked.shape[1] != stored.shape[1]:
        raise ValueError(f"queries of width {asked.shape[1]} against vectors of width {stored.shape[1]}")
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    scores = np.full((q, k), -np.inf, dtype=np.float32)
    indices = np.full((q, k), -1, dtype=np.int64)
    found = min(k, n)
    step = max(1, min(int(chunk_rows), SCORE_BLOCK_BYTES // (4 * max(n, 1))))
    with _ieee_float32(stored.device), torch.inference_mode():
        for start in range(0, q if found else 0, step):
            block = asked[start : start + step] @ stored.T  # (rows, N)
            best, where = _ties_by_index(*torch.topk(block, found, dim=1))  # (rows, found) each
            scores[start : start + step, :found] = best.cpu().numpy()
            indices[start : start + step, :found] = where.cpu().numpy()
    return scores, indices


def _unit_tensor(rows, device: torch.device) -> torch.Tensor:
    """(N, d) float32 unit rows of ``rows`` (a numpy array or a tensor) on ``device``."""
    tensor = rows if isinstance(rows, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32))
    tensor = tensor.to(device=device, dtype=torch.float32)
    if tensor.ndim != 2:
        raise ValueError(f"expected a 2-D (N, d) array, got shape {tuple(tensor.shape)}")
    return F.normalize(tensor, dim=1)


def _ties_by_index(scores: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row of ``topk``'s answer in a fixed order: by score, highest first, equal scores by lower index
    (topk leaves the order of equal values to the kernel)."""
    by_index = torch.argsort(indices, dim=1)
    scores, indices = torch.gather(scores, 1, by_index), torch.gather(indices, 1, by_index)
    by_score = torch.sort(scores, dim=1, descending=True, stable=True).indices
    return torch.gather(scores, 1, by_score), torch.gather(indices, 1, by_score)


@contextlib.contextmanager
def _ieee_float32(device: torch.device):
    """Full float32 matrix products on a GPU for the block (TF32 keeps 10 bits: scores off by 1e-3)."""
    previous = torch.get_float32_matmul_precision()
    if device.type != "cuda" or previous == "highest":
        yield
        return
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def fits_on_device(n: int, dim: int, device, copies: int = 1, chunk_rows: int = CHUNK_ROWS) -> bool:
    """Whether ``copies`` (N, d) float32 arrays and one chunk's scores fit in ``GPU_MEMORY_SHARE`` of the free
    memory of the CUDA ``device``; False for any other device."""
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return False
    free, _ = torch.cuda.mem_get_info(device)
    rows = max(1, min(chunk_rows, SCORE_BLOCK_BYTES // (4 * max(n, 1))))
    needed = 4 * n * dim * copies + 4 * rows * n * 2  # the vectors, one score block and topk's workspace
    return needed <= GPU_MEMORY_SHARE * free


class DeviceIndex:
    """An exact inner-product index held on a torch device: what ``core.inference.dedup_graph.NeighbourGraph``
    asks of FAISS's flat index (``ntotal``, ``d``, ``search(queries, k) -> (scores, ids)``), answered by
    ``_top_k`` over rows L2-normalised first (an all-zero row scores 0). The vectors go to the device once; every
    search sends only its queries."""

    kind = "flat"  # exact, as FAISS's IndexFlatIP

    def __init__(self, vectors: np.ndarray, device):
        self.device = torch.device(device)
        self.vectors = _unit_tensor(vectors, self.device)  # (N, d)
        self.ntotal, self.d = (int(size) for size in self.vectors.shape)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return _top_k(self.vectors, _unit_tensor(queries, self.device), k, CHUNK_ROWS)


def device_index(vectors: np.ndarray, device, queries: np.ndarray | None = None) -> DeviceIndex | None:
    """A ``DeviceIndex`` of ``vectors`` on ``device`` when it is a CUDA device they fit on (with ``queries``, a
    second array of their shape, when those differ), else None: the caller searches with FAISS."""
    if device is None or vectors.size == 0:
        return None
    copies = 1 if queries is None or queries is vectors else 2
    if not fits_on_device(vectors.shape[0], vectors.shape[1], device, copies):
        return None
    return DeviceIndex(vectors, device)
