"""An onnxruntime session under the lab's memory cap: ``capped_session(graph_bytes)``.

onnxruntime has no per-session memory limit for the CPU, but an arena allocator registered with its
environment takes one (``OrtArenaCfg`` ``max_mem``): every session that opts in
(``session.use_env_allocators``) allocates its tensors from that one arena, and an allocation past
``ARENA_MAX_BYTES`` fails as an onnxruntime error (which the backend reports on one line) instead of
growing until the machine gives up. The cap is per process, shared by all the sessions of the backend.
It covers what kernels allocate through the arena; what a kernel allocates by other means (scratch
buffers) is not capped here, which is why ``core.export.onnx_checks`` also bounds every tensor a graph
can make before it runs.

The session is made from the bytes the checks read, never from the path again, so a file swapped
after the checks is never run.
"""
from __future__ import annotations

import threading

ARENA_MAX_BYTES = 4 * 2**30
_REGISTERED = threading.Lock()
_registered = False


def _register_arena(ort) -> None:
    global _registered
    with _REGISTERED:
        if not _registered:
            info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
            # Grow by what is asked (1), not by powers of two, so the cap is what it says.
            ort.create_and_register_allocator(info, ort.OrtArenaCfg({"max_mem": ARENA_MAX_BYTES,
                                                                     "arena_extend_strategy": 1}))
            _registered = True


def capped_session(graph: bytes, threads: int = 1):
    """An ``onnxruntime.InferenceSession`` of ``graph`` on the CPU, ``threads`` intra-op threads, its
    tensors from the capped arena; onnxruntime logs nothing (its errors reach the caller as exceptions)."""
    import onnxruntime as ort

    _register_arena(ort)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 4  # fatal only: failures are reported by the caller, on one line
    options.add_session_config_entry("session.use_env_allocators", "1")
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
