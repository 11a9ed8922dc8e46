"""An onnxruntime session made from the bytes the backend read (``onnx_session``), and onnxruntime's errors on
one line (``failure_reason``)."""
from __future__ import annotations

import re

_ERROR_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ")
_SOURCE_LINE = re.compile(r"/onnxruntime_src/\S+:\d+ .*?\) ")  # where in onnxruntime's C++ it failed


def onnx_session(graph: bytes):
    """An ``onnxruntime.InferenceSession`` of ``graph`` on the CPU, one thread (the backend runs batches side by
    side); onnxruntime logs nothing (its errors reach the caller as exceptions)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 4  # fatal only
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def failure_reason(error: Exception) -> str:
    """onnxruntime's error on one line: its first line without onnxruntime's status prefix and source location."""
    text = str(error).strip()
    lines = _SOURCE_LINE.sub("", _ERROR_PREFIX.sub("", text)).splitlines()
    return (lines[0] if lines else type(error).__name__)[:200]
