"""What the export writers share: ``ExportError`` and ``OnnxBackendError``, the tokenizer file name, the
texts every export is checked on, whether a model's vectors are unit vectors already, and the lock that
runs one export at a time with the exporters' chatter silenced (``quiet_export``, ``native_stderr_dropped``)."""
from __future__ import annotations

import contextlib
import logging
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
    """An ONNX export that cannot be used (refused by the checks, or failing in onnxruntime), or a cache
    that cannot be written; the message is one line."""


def normalises(model) -> bool:
    """Whether ``model.embed`` already returns unit vectors (the LSTM, MiniLM with ``normalize``); the
    graphs of the others (the dual encoder) add the L2 normalisation, which changes no cosine."""
    return model.model_type == "lstm" or (model.model_type == "minilm" and bool(model.config.normalize))


# One export at a time per process: the exporter keeps global state, and quiet_export / native_stderr_dropped
# change process-wide settings (the app may export from several sessions' threads at once).
_EXPORT_LOCK = threading.RLock()


@contextlib.contextmanager
def quiet_export():
    """Exporters and Hugging Face loaders talk a lot: Python warnings, log records below ERROR and
    progress bars are off for the block, which holds the export lock."""
    with _EXPORT_LOCK, _quiet_unlocked():
        yield


@contextlib.contextmanager
def _quiet_unlocked():
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    disabled = logging.root.manager.disable
    logging.disable(logging.WARNING)  # onnxruntime.quantization logs its advice on the root logger
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(disabled)
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def native_stderr_dropped():
    """The C++ side of the TorchScript exporter writes shape-inference warnings straight to file
    descriptor 2; they are dropped for the block (Python's own sys.stderr is left alone). Use it
    inside ``quiet_export()``, whose lock keeps two threads from swapping descriptor 2 at once."""
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
