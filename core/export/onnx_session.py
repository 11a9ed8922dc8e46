"""An onnxruntime session under the lab's memory cap: ``capped_session(graph_bytes)``.

onnxruntime has no per-session memory limit for the CPU, but an arena allocator registered with its
environment takes one (``OrtArenaCfg`` ``max_mem``): every session that opts in
(``session.use_env_allocators``) allocates its tensors from that one arena, and an allocation past
``ARENA_MAX_BYTES`` fails as an onnxruntime error (which the backend reports on one line) instead of
growing until the machine gives up. The cap is per process, shared by all the sessions of the backend.
It covers what kernels allocate through the arena; what a kernel allocates by other means (scratch
buffers) is not capped here, which is why a foreign graph's probe first runs in a child process whose
whole address space is capped (``core.export.onnx_probe``, which makes its session here too).

The session is made from the bytes the checks read, never from the path again, so a file swapped
after the checks is never run. ``failure_reason(error)`` says on one line why onnxruntime failed.
"""
from __future__ import annotations

import re
import threading

ARENA_MAX_BYTES = 4 * 2**30
_REGISTERED = threading.Lock()
_registered = False
_ERROR_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ")
_SOURCE_LINE = re.compile(r"/onnxruntime_src/\S+:\d+ .*?\) ")  # where in onnxruntime's C++ it failed
_PAST_ARENA = re.compile(r"running (\w+) node.*smaller than requested bytes of (\d+)", re.DOTALL)
_PAST_PROCESS = re.compile(r"running (\w+) node.*Failed to allocate memory for requested buffer of size (\d+)",
                           re.DOTALL)


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


def failure_reason(error: Exception) -> str:
    """onnxruntime's error on one line: an allocation it refused as the operator, what it asked for and
    the cap it went past (the arena's, or the process's own address space); anything else as its first
    line, without onnxruntime's status prefix and source location."""
    text = str(error).strip()
    if found := _PAST_ARENA.search(text):
        cap = f"onnxruntime's memory cap of {ARENA_MAX_BYTES / 2**30:.3g} GiB"
    elif found := _PAST_PROCESS.search(text):
        cap = "the memory this process may take"
    if found:
        return f"{found[1]} asks for {int(found[2]) / 2**30:.3g} GiB, past {cap}"
    lines = _SOURCE_LINE.sub("", _ERROR_PREFIX.sub("", text)).splitlines()
    return (lines[0] if lines else type(error).__name__)[:200]
