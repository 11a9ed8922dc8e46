"""An onnxruntime session under the lab's memory cap (``capped_session``), made from the bytes the checks
read, and onnxruntime's errors on one line (``failure_reason``). Every session allocates from one arena
registered with onnxruntime's environment, capped at ``ARENA_MAX_BYTES`` (``OrtArenaCfg`` ``max_mem``), so an
allocation past it fails instead of growing; scratch buffers outside it are what the probe's cap is for."""
from __future__ import annotations

import re
import threading

ARENA_MAX_BYTES = 4 * 2**30  # per process, shared by every session
_REGISTERED = threading.Lock()
_registered = False
_ERROR_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ")
_SOURCE_LINE = re.compile(r"/onnxruntime_src/\S+:\d+ .*?\) ")  # where in onnxruntime's C++ it failed
_PAST_ARENA = re.compile(r"running (\w+) node.*smaller than requested bytes of (\d+)", re.DOTALL)
_PAST_PROCESS = re.compile(r"running (\w+) node.*Failed to allocate memory for requested buffer of size (\d+)",
                           re.DOTALL)


def capped_session(graph: bytes):
    """An ``onnxruntime.InferenceSession`` of ``graph`` on the CPU, one thread, its tensors from the capped
    arena; onnxruntime logs nothing (its errors reach the caller as exceptions)."""
    import onnxruntime as ort

    global _registered
    with _REGISTERED:
        if not _registered:
            info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
            # Grow by what is asked (1), not by powers of two, so the cap is what it says.
            ort.create_and_register_allocator(info, ort.OrtArenaCfg({"max_mem": ARENA_MAX_BYTES,
                                                                     "arena_extend_strategy": 1}))
            _registered = True
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 4  # fatal only
    options.add_session_config_entry("session.use_env_allocators", "1")
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def failure_reason(error: Exception) -> str:
    """onnxruntime's error on one line: an allocation past a cap as the operator and the size it asked for,
    anything else as its first line without onnxruntime's status prefix and source location."""
    text = str(error).strip()
    if found := _PAST_ARENA.search(text):
        cap = f"onnxruntime's memory cap of {ARENA_MAX_BYTES / 2**30:.3g} GiB"
    elif found := _PAST_PROCESS.search(text):
        cap = "the memory this process may take"
    if found:
        return f"{found[1]} asks for {int(found[2]) / 2**30:.3g} GiB, past {cap}"
    lines = _SOURCE_LINE.sub("", _ERROR_PREFIX.sub("", text)).splitlines()
    return (lines[0] if lines else type(error).__name__)[:200]
