"""What the export writers share: the errors, the tokenizer file name, the texts every export is checked
on, a few small readers of manifest fields, and the lock that runs one export at a time with the
exporters' chatter silenced (``quiet_export``, ``native_stderr_dropped``)."""
from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading
import warnings

TOKENIZER_FILE = "tokenizer.json"

# Texts every export is checked on: short and long (past any max length), empty, punctuation,
# apostrophes, accents, digits, emoji, CJK.
PROBE_TEXTS = [
    "How do I learn Python?",
    "What is the best way to learn Python quickly, and which books should I read first?",
    "",
    "Why don't cats like water???",
    "Café, naïve, façade: ÀÉÎÕÜ and ΟΔΟΣ",
    "Is 3.14 > 22/7? (1,000,000 digits)",
    "日本語の質問はどうですか？ 😀👍",
    "a",
    " ".join(["word"] * 80),
    "What's the capital of India - New Delhi or Mumbai?",
]


class ExportError(ValueError):
    """A model or format that cannot be exported as asked; the message is one line."""


class OnnxBackendError(ValueError):
    """An ONNX export that cannot be used, or a cache that cannot be written; the message is one line."""


def part(mapping: dict, key: str, kind: type = dict):
    """``mapping[key]`` when it is a ``kind`` (a dict by default), else an empty one."""
    value = mapping.get(key)
    return value if isinstance(value, kind) else kind()


def finite(value) -> bool:
    """Whether ``value`` is a finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def normalises(model) -> bool:
    """Whether ``model.embed`` already returns unit vectors (the LSTM, MiniLM with ``normalize``); the
    graphs of the others (the dual encoder) add the L2 normalisation, which changes no cosine."""
    return model.model_type == "lstm" or (model.model_type == "minilm" and bool(model.config.normalize))


# One export at a time per process: the exporter keeps global state, and quiet_export / native_stderr_dropped
# change process-wide settings (the app may export from several sessions' threads at once).
_EXPORT_LOCK = threading.RLock()


@contextlib.contextmanager
def quiet_export():
    """Python warnings, log records below ERROR (every logger's, Hugging Face's and onnxruntime's included)
    and Hugging Face's progress bars off for the block, which holds the export lock."""
    from transformers.utils import logging as hf_logging

    with _EXPORT_LOCK:
        bars, disabled = hf_logging.is_progress_bar_enabled(), logging.root.manager.disable
        hf_logging.disable_progress_bar()
        logging.disable(logging.WARNING)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                yield
        finally:
            logging.disable(disabled)
            if bars:
                hf_logging.enable_progress_bar()


@contextlib.contextmanager
def native_stderr_dropped():
    """File descriptor 2 to /dev/null for the block (the TorchScript exporter's C++ side writes its
    warnings there; Python's sys.stderr is left alone). Use it inside ``quiet_export()``, whose lock keeps
    two threads from swapping descriptor 2 at once."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no usable descriptor 2: nothing to hide
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
