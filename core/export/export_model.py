"""Exporting a model for use outside Siamese Lab: a sentence-transformers folder or ONNX graphs.

``export_model(model, config, out, fmt)`` writes one folder, claimed and written like a model folder
(``claim_export``: refused when it holds anything but an earlier export, an earlier export replaced only
with ``overwrite``, one writer at a time; then ``core.saving.write_folder_atomically``). Every export
holds a model card (``README.md``, laid out loosely like sentence-transformers' cards) and
``siamese_lab.json`` (the threshold, what the export holds, a summary of the run's config).

* ``sentence-transformers`` (MiniLM, zero-shot or fine-tuned): the folder sentence-transformers' own
  ``save`` writes for Transformer -> mean Pooling -> Normalize around this model's BertModel, its
  tokenizer and ``max_seq_length`` = the model's max length; ``SentenceTransformer(folder).encode``
  gives this model's ``encode`` (checked on export, within ``ST_TOLERANCE``).
* ``onnx`` (every family): ``model.onnx`` takes ``input_ids`` and ``attention_mask`` (int64, dynamic
  batch and length; the mask is 1 on real tokens, which come first) and returns
  ``sentence_embedding``, the model's vectors L2-normalised (the dual encoder's PyTorch vectors are not:
  its graphs add the normalisation, which changes no cosine). A dual encoder with two towers also
  gets ``model_tower1.onnx``, the tower of question 2; every other model encodes both sides with
  ``model.onnx``. ``tokenizer.json`` is a Hugging Face ``tokenizers`` file giving the model's token ids
  (``Tokenizer.to_hf_tokenizer``). The graphs are checked against PyTorch on ``PROBE_TEXTS`` on export
  (within ``ONNX_TOLERANCE``); ``quantize="int8"`` writes dynamically quantised graphs instead (weights
  int8), whose measured difference is recorded rather than enforced.
"""
from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
import os
import re
import stat
import sys
import tempfile
import threading
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from core.saving.atomic import write_folder_atomically
from core.saving.files import CONFIG_MAX_BYTES, read_json_file
from core.saving.output import OutputClaim, OutputError, claim_output

EXPORT_FORMATS = ("sentence-transformers", "onnx")
QUANTIZE_CHOICES = ("int8",)
MANIFEST_FILE = "siamese_lab.json"
CARD_FILE = "README.md"
TOKENIZER_FILE = "tokenizer.json"
GRAPH_FILES = ("model.onnx", "model_tower1.onnx")  # tower 0 (question 1, and both sides when Siamese), tower 1
EXPORT_FORMAT = "siamese-lab-export"
EXPORT_VERSION = 1
INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAME = "sentence_embedding"
OPSET = 17
ONNX_TOLERANCE = 1e-4  # max |onnxruntime - PyTorch| over the probe vectors, float32 graphs
ST_TOLERANCE = 1e-5  # max |SentenceTransformer.encode - model.encode| over the probe texts
BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

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

FORMAT_LABELS = {"sentence-transformers": "a sentence-transformers folder", "onnx": "ONNX graphs for onnxruntime"}


class ExportError(ValueError):
    """A model or format that cannot be exported as asked; the message is one line."""


# ---- the output folder -------------------------------------------------------------------------
def claim_export(target: str | Path, overwrite: bool = False) -> OutputClaim:
    """Claim ``target`` for one export, under the rules of ``core.saving.output.claim_output``: a new
    or empty folder is fine; a folder holding an earlier export (``siamese_lab.json`` of this format) is
    replaced only with ``overwrite`` (``OutputError`` reason ``model_exists``); anything else (a saved
    model, other files, a file) is never replaced (reason ``not_a_model``). One writer at a time: the
    same hidden lock file beside the target that a training takes."""
    return claim_output(target, overwrite, existing=_existing_export)


def read_manifest(folder: str | Path) -> dict | None:
    """``folder``'s ``siamese_lab.json`` when it is an export's (a regular JSON file of this format), else None."""
    try:
        manifest = read_json_file(Path(folder) / MANIFEST_FILE, CONFIG_MAX_BYTES, folder=Path(folder))
    except (OSError, ValueError):
        return None
    if isinstance(manifest, dict) and manifest.get("format") == EXPORT_FORMAT:
        return manifest
    return None


def _existing_export(target: Path, overwrite: bool) -> dict | None:
    if not os.path.lexists(target):
        return None
    if target.is_symlink() or not target.is_dir():
        raise OutputError(target, "exists and is not a folder; choose a new folder", "not_a_model")
    if not any(target.iterdir()):
        return None
    manifest = read_manifest(target)
    if manifest is None:
        raise OutputError(target, "is not empty and holds no export (a saved model or other files, which an export "
                                  "never replaces); choose a new or empty folder", "not_a_model")
    if not overwrite:
        raise OutputError(target, "holds an earlier export; replacing it needs overwrite", "model_exists")
    return manifest


# ---- what can be exported ----------------------------------------------------------------------
def check_export(model_type: str, fmt: str, quantize: str | None = None) -> None:
    """ExportError unless a ``model_type`` model can be exported as ``fmt`` (with ``quantize``)."""
    if fmt not in EXPORT_FORMATS:
        raise ExportError(f"unknown export format {fmt!r}; expected one of {', '.join(EXPORT_FORMATS)}")
    if fmt == "sentence-transformers" and model_type != "minilm":
        from core.model_names import MODEL_LABELS

        label = MODEL_LABELS.get(model_type, model_type)
        raise ExportError(f"only MiniLM models export as sentence-transformers; this is a {label} "
                          f"({model_type}): use --format onnx")
    if quantize is not None:
        if quantize not in QUANTIZE_CHOICES:
            raise ExportError(f"unknown quantisation {quantize!r}; expected one of {', '.join(QUANTIZE_CHOICES)}")
        if fmt != "onnx":
            raise ExportError("quantisation applies to the onnx format only")


def tower_count(model) -> int:
    """2 for a dual encoder with two towers, else 1 (one encoder for both sides)."""
    return len(getattr(model, "towers", ())) if model.model_type == "dual-transformer" else 1


# ---- exporting ---------------------------------------------------------------------------------
def export_model(model, config: dict, out: str | Path, fmt: str, *, overwrite: bool = False,
                 quantize: str | None = None, source: str | None = None) -> dict:
    """Write ``model`` (with ``config``, its config.json or ``zero_shot_config()``) as ``fmt`` to the
    folder ``out``, claimed by ``claim_export`` and written atomically. Returns the manifest written to
    ``siamese_lab.json``. Raises ExportError (the model or format) or OutputError (the folder)."""
    check_export(model.model_type, fmt, quantize)
    manifest: dict = {}
    with claim_export(out, overwrite) as claim:
        def write(temp: Path) -> None:
            manifest.update(write_export(model, config, temp, fmt, quantize=quantize, source=source,
                                         name=claim.target.name))

        write_folder_atomically(claim.target, write)
    return manifest


def write_export(model, config: dict, folder: str | Path, fmt: str, *, quantize: str | None = None,
                 source: str | None = None, extra: dict | None = None, name: str | None = None) -> dict:
    """Fill the existing folder ``folder`` with the export (no claim, not atomic: ``export_model`` and the
    ONNX backend's cache wrap it). ``extra`` goes into the manifest; ``name`` is the folder's final name,
    which the model card's usage snippet opens (default: ``folder``'s name). Returns the manifest."""
    check_export(model.model_type, fmt, quantize)
    folder = Path(folder)
    was_training = model.training
    try:
        exported = _on_cpu(model)
        if fmt == "onnx":
            details = _write_onnx(exported, folder, quantize)
        else:
            details = _write_sentence_transformers(exported, folder)
    finally:
        model.train(was_training)  # the caller's model (often a shared, cached one) is left as it was
    manifest = _manifest(model, config, fmt, details, source, extra or {})
    (folder / CARD_FILE).write_text(model_card(manifest, name or folder.name), encoding="utf-8")
    # The manifest last: a folder with one is a complete export.
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, default=_json_default, allow_nan=False),
                                        encoding="utf-8")
    return manifest


def _on_cpu(model):
    """``model`` in eval mode on the CPU: itself when it is there already, else a copy."""
    if model.device.type != "cpu":
        model = copy.deepcopy(model).to("cpu")
    return model.eval()


# One export at a time per process: the exporter keeps global state, and _quiet / _native_stderr_dropped
# change process-wide settings (the app may export from several sessions' threads at once).
_EXPORT_LOCK = threading.RLock()


@contextlib.contextmanager
def _quiet():
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
def _native_stderr_dropped():
    """The C++ side of the TorchScript exporter writes shape-inference warnings straight to file
    descriptor 2; they are dropped for the block (Python's own sys.stderr is left alone). Use it
    inside ``_quiet()``, whose lock keeps two threads from swapping descriptor 2 at once."""
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


def _probe_batches(model):
    """(input_ids, attention_mask) batches of ``PROBE_TEXTS`` as the model's tokenizer pads them: the
    first traces the graph; the others, of other batch sizes and lengths, check it."""
    table = model.tokenizer.encode(PROBE_TEXTS)
    return [table.take(rows) for rows in ([0, 3], np.arange(len(table)), [7], [2, 5, 0])]


def _graph(model, tower: int):
    """One tower of ``model`` as a module (input_ids, attention_mask) -> vectors, for the exporter."""
    import torch

    class Graph(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            mask = attention_mask.bool()
            if self.model.model_type == "dual-transformer":
                vectors = _dual_tower(self.model.towers[min(tower, len(self.model.towers) - 1)], input_ids, mask)
            else:
                vectors = self.model.embed(input_ids, mask, tower=tower)
            return vectors if normalises(self.model) else torch.nn.functional.normalize(vectors, dim=-1)

    return Graph().eval()


def normalises(model) -> bool:
    """Whether ``model.embed`` already returns unit vectors (the LSTM, MiniLM with ``normalize``); the
    graphs of the others (the dual encoder) add the L2 normalisation, which changes no cosine."""
    return model.model_type == "lstm" or (model.model_type == "minilm" and bool(model.config.normalize))


def unit_vectors(model, input_ids, attention_mask, tower: int = 0):
    """What an exported graph returns: ``model.embed``'s vectors, L2-normalised; a (B, d) numpy array."""
    import torch

    with torch.no_grad():
        vectors = model.embed(input_ids, attention_mask, tower=tower).float()
        return (vectors if normalises(model) else torch.nn.functional.normalize(vectors, dim=-1)).numpy()


def _dual_tower(tower, input_ids, mask):
    """``core.models.dual_encoder.Tower.forward`` spelled out for the exporter: the same layers and
    weights, with the attention written as plain matrix products. nn.MultiheadAttention traced by the
    TorchScript exporter keeps the example's sequence length as a constant, so its graph fails on any
    other length."""
    import torch

    positions = torch.arange(input_ids.shape[1], device=input_ids.device)  # (T,)
    x = tower.tokens(input_ids) + tower.positions(positions)[None]  # (B, T, d)
    padding = ~mask  # (B, T) True on padding, as src_key_padding_mask
    for layer in tower.encoder.layers:
        def attend(y, layer=layer):
            return layer.dropout1(_self_attention(layer.self_attn, y, padding))

        if layer.norm_first:
            x = x + attend(layer.norm1(x))
            x = x + layer._ff_block(layer.norm2(x))
        else:
            x = layer.norm1(x + attend(x))
            x = layer.norm2(x + layer._ff_block(x))
    if tower.encoder.norm is not None:
        x = tower.encoder.norm(x)
    return tower.projection(x[:, 0])  # (B, p): the [CLS] position


def _self_attention(attention, x, padding):
    """nn.MultiheadAttention(x, x, x, key_padding_mask=padding) of a batch-first layer, (B, T, d)."""
    import torch
    import torch.nn.functional as F

    heads = attention.num_heads
    width = attention.embed_dim // heads
    q, k, v = F.linear(x, attention.in_proj_weight, attention.in_proj_bias).chunk(3, dim=-1)  # (B, T, d) each
    q, k, v = (t.unflatten(-1, (heads, width)).transpose(1, 2) for t in (q, k, v))  # (B, h, T, w)
    bias = torch.zeros_like(padding, dtype=x.dtype).masked_fill(padding, float("-inf"))[:, None, None, :]
    weights = torch.softmax(q @ k.transpose(-2, -1) * width ** -0.5 + bias, dim=-1)  # (B, h, T, T)
    return attention.out_proj((weights @ v).transpose(1, 2).flatten(2))  # (B, T, d)


def _fix_output_width(path: Path, width: int) -> None:
    """The exporter names the output's second dimension symbolically; it is the vector width, a constant."""
    import onnx

    graph = onnx.load(str(path))
    dim = graph.graph.output[0].type.tensor_type.shape.dim[1]
    dim.Clear()
    dim.dim_value = int(width)
    onnx.save(graph, str(path))


def _write_onnx(model, folder: Path, quantize: str | None) -> dict:
    import onnxruntime as ort
    import torch

    (folder / TOKENIZER_FILE).write_text(model.tokenizer.hf_tokenizer_json(), encoding="utf-8")
    (trace_ids, trace_mask), *checks = _probe_batches(model)
    towers = tower_count(model)
    differences, cosines = [], []
    for tower in range(towers):
        path = folder / GRAPH_FILES[tower]
        # With gradients on: nn.TransformerEncoder's no-grad fast path has no ONNX form.
        with _quiet(), _native_stderr_dropped():
            # The TorchScript exporter: it turns the bidirectional LSTM's packed sequence into the ONNX
            # LSTM's sequence_lens, so the backward direction starts on each text's last real token.
            torch.onnx.export(
                _graph(model, tower), (trace_ids, trace_mask.long()), str(path), input_names=list(INPUT_NAMES),
                output_names=[OUTPUT_NAME], opset_version=OPSET, dynamo=False,
                dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
                              OUTPUT_NAME: {0: "batch"}})
        _fix_output_width(path, model.embedding_dim)
        if quantize == "int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            fp32 = path.with_name(f".fp32-{path.name}")
            path.rename(fp32)
            with _quiet():
                # Per-channel scales: on MiniLM the mean cosine to the float vectors goes from 0.970 to 0.994.
                quantize_dynamic(str(fp32), str(path), weight_type=QuantType.QInt8, per_channel=True)
            fp32.unlink()
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        for ids, mask in checks:
            try:
                got = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.long().numpy()})[0]
            except Exception as error:  # noqa: BLE001 - onnxruntime's own exception types
                raise ExportError(f"the exported graph fails on a batch of {ids.shape[0]} x {ids.shape[1]} "
                                  f"tokens: {str(error).splitlines()[0][:200]}") from None
            want = unit_vectors(model, ids, mask, tower)
            differences.append(float(np.abs(got - want).max()))
            norms = np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1)
            cosines.append(float(np.min((got * want).sum(1) / np.maximum(norms, 1e-12))))
    difference = max(differences)
    if quantize is None and not difference <= ONNX_TOLERANCE:
        raise ExportError(f"the exported graph differs from the PyTorch model by {difference:.3g} "
                          f"(more than {ONNX_TOLERANCE:g}) on the probe texts")
    return {
        "files": {"graphs": list(GRAPH_FILES[:towers]), "tokenizer": TOKENIZER_FILE},
        "towers": {"0": GRAPH_FILES[0], "1": GRAPH_FILES[min(1, towers - 1)]},
        "inputs": {name: {"dtype": "int64", "shape": ["batch", "sequence"]} for name in INPUT_NAMES},
        "output": {"name": OUTPUT_NAME, "dtype": "float32", "shape": ["batch", model.embedding_dim]},
        "opset": OPSET,
        "quantization": "int8-dynamic" if quantize == "int8" else None,
        "check": {"texts": len(PROBE_TEXTS), "max_abs_diff_vs_pytorch": difference,
                  "min_cosine_vs_pytorch": min(cosines), "tolerance": None if quantize else ONNX_TOLERANCE},
    }


def _write_sentence_transformers(model, folder: Path) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertTokenizerFast

    try:  # sentence-transformers >= 6; sentence_transformers.models before (deprecated since)
        from sentence_transformers.sentence_transformer import modules as st_models
    except ImportError:
        from sentence_transformers import models as st_models

    max_length = model.tokenizer.max_length
    with _quiet(), tempfile.TemporaryDirectory(prefix="siamese-lab-st-") as hf:
        model.bert.save_pretrained(hf)  # config.json + model.safetensors, this model's weights
        rust = model.tokenizer.to_hf_tokenizer()
        rust.no_truncation()  # sentence-transformers truncates at max_seq_length itself
        BertTokenizerFast(tokenizer_object=rust, do_lower_case=True, model_max_length=max_length).save_pretrained(hf)
        with torch.random.fork_rng():
            torch.manual_seed(0)  # BertModel's pooler (unused by mean pooling) is initialised: the same each time
            transformer = st_models.Transformer(hf, max_seq_length=max_length)
        modules = [transformer, st_models.Pooling(model.embedding_dim, pooling_mode="mean")]
        if model.config.normalize:
            modules.append(st_models.Normalize())
        SentenceTransformer(modules=modules, device="cpu", similarity_fn_name="cosine").save(
            str(folder), create_model_card=False)
        # safetensors creates its file 0600; give it the mode the other files got (0666 less the umask).
        os.chmod(folder / "model.safetensors", stat.S_IMODE(os.stat(folder / "modules.json").st_mode))
        loaded = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        got = loaded.encode(PROBE_TEXTS, convert_to_numpy=True, show_progress_bar=False)
    want = model.encode(PROBE_TEXTS).numpy()
    difference = float(np.abs(got - want).max())
    if not difference <= ST_TOLERANCE:
        raise ExportError(f"the sentence-transformers folder encodes {difference:.3g} away from the model "
                          f"(more than {ST_TOLERANCE:g}) on the probe texts")
    return {
        "files": {"modules": "modules.json", "weights": "model.safetensors", "tokenizer": TOKENIZER_FILE},
        "modules": ["Transformer", "Pooling (mean)"] + (["Normalize"] if model.config.normalize else []),
        "check": {"texts": len(PROBE_TEXTS), "max_abs_diff_vs_pytorch": difference, "tolerance": ST_TOLERANCE},
    }


# ---- siamese_lab.json --------------------------------------------------------------------------
def _json_default(value):
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot store {type(value).__name__} in {MANIFEST_FILE}")


def _finite(value):
    """A number that JSON can hold, else None (NaN scores of a one-class validation set)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return value if math.isfinite(value) else None


def _clean(value):
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    return _finite(value)


def config_summary(config: dict) -> dict:
    """The parts of a model's config.json an export keeps: model, tokenizer, loss and training
    settings, thresholds, metrics, data, and how training ended (not its per-epoch history)."""
    keep = ("name", "model_type", "model_config", "tokenizer", "loss", "train_config", "run", "thresholds",
            "metrics", "data", "saved_at")
    summary = {key: config[key] for key in keep if key in config}
    training = config.get("training")
    if isinstance(training, dict):
        summary["training"] = {k: training[k] for k in ("status", "message", "best_epoch", "epochs_run", "seconds")
                               if k in training}
    return _clean(summary)


def _threshold(config: dict) -> float | None:
    thresholds = config.get("thresholds")
    value = thresholds.get("accuracy") if isinstance(thresholds, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        else None


def _versions(packages) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in packages:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def _manifest(model, config: dict, fmt: str, details: dict, source: str | None, extra: dict) -> dict:
    from core.model_names import ZERO_SHOT

    # A saved folder's config.json has a format; zero_shot_config() has none.
    zero_shot = model.model_type == "minilm" and (source == ZERO_SHOT or "format" not in config)
    return {
        "format": EXPORT_FORMAT,
        "format_version": EXPORT_VERSION,
        "export_format": fmt,
        "model_type": model.model_type,
        "name": str(config.get("name") or (ZERO_SHOT if zero_shot else "model")),
        "zero_shot": zero_shot,
        "source": None if source is None else str(source),
        "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "threshold": _threshold(config),
        "thresholds": _clean(config.get("thresholds") or {}),
        "max_length": int(model.tokenizer.max_length),
        "embedding_dim": int(model.embedding_dim),
        "pad_id": int(model.tokenizer.pad_id),
        "normalized": True if fmt == "onnx" else normalises(model),  # ONNX graphs always normalise
        "tokenizer_kind": model.tokenizer.kind,
        **details,
        "versions": _versions(("torch", "onnx", "onnxruntime") if fmt == "onnx"
                              else ("torch", "transformers", "sentence-transformers")),
        "config": config_summary(config),
        **extra,
    }


# ---- README.md ---------------------------------------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def _plain(value, limit: int = 200) -> str:
    """A config value as one line of plain text, at most ``limit`` characters."""
    text = _CONTROL.sub(" ", str(value)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _code(value, limit: int = 200) -> str:
    """Inline code: nothing in it is read as Markdown or HTML."""
    return "`" + _plain(value, limit).replace("`", "'") + "`"


def _number(value, digits: int = 4) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "n/a"
    return f"{value:,}" if isinstance(value, int) else f"{value:.{digits}f}"


def _percent(share) -> str:
    return _number(100 * share, 1) if isinstance(share, (int, float)) and not isinstance(share, bool) else "n/a"


def _loss_line(config: dict) -> str:
    loss = config.get("loss") if isinstance(config.get("loss"), dict) else {}
    run = config.get("run") if isinstance(config.get("run"), dict) else {}
    name = loss.get("name")
    if name == "triplet":
        hard = ", plus labelled hard negatives" if run.get("hard_negatives") else ""
        return (f"triplet loss on cosine similarities (L1 + L2 with the mean and the closest in-batch negative), "
                f"margin {_number(loss.get('margin'), 3)}{hard}")
    if name == "contrastive":
        return (f"contrastive loss on distances between unit vectors, form {_code(loss.get('form'))}, "
                f"margin {_number(loss.get('margin'), 3)}")
    if name == "softmax":
        hard = ", plus labelled hard negatives" if run.get("hard_negatives") else ""
        return (f"in-batch softmax (multiple negatives ranking) of cosines scaled by "
                f"{_number(loss.get('scale'), 1)}{hard}")
    if name == "cosent":
        return (f"CoSENT ranking of cosines, log(1 + Σ exp(λ·(sⱼ − sᵢ))) over every duplicate i and "
                f"non-duplicate j of a batch, λ {_number(loss.get('scale'), 1)}")
    if name == "multitask":
        return (f"multitask: contrastive loss on distances between unit vectors, form {_code(loss.get('form'))}, "
                f"margin {_number(loss.get('margin'), 3)}, plus {_number(loss.get('weight'), 2)} × in-batch softmax "
                f"of the duplicates' cosines scaled by {_number(loss.get('scale'), 1)}, with the batch's "
                f"non-duplicates as extra negatives")
    return f"{_code(name)}" if name else "n/a"


def _usage(manifest: dict, folder_name: str) -> str:
    threshold = manifest["threshold"]
    shown = f"{threshold:.6f}" if threshold is not None else "0.5  # no calibrated threshold: choose one"
    where = json.dumps(folder_name or "path/to/this/folder")
    if manifest["export_format"] == "sentence-transformers":
        return f"""```python
from sentence_transformers import SentenceTransformer

MODEL_DIR = {where}  # this folder
THRESHOLD = {shown}  # duplicate when the cosine is above it: recalibrate it on your own pairs

model = SentenceTransformer(MODEL_DIR)
q1, q2 = model.encode(["How do I learn Python?", "What is the best way to learn Python?"])
score = float(model.similarity(q1, q2))  # cosine similarity
print(round(score, 4), "DUPLICATE" if score > THRESHOLD else "NOT DUPLICATE")
```"""
    sessions = ", ".join(f'ort.InferenceSession(f"{{MODEL_DIR}}/{name}")' for name in manifest["files"]["graphs"])
    return f"""```python
import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

MODEL_DIR = {where}  # this folder
THRESHOLD = {shown}  # duplicate when the cosine is above it: recalibrate it on your own pairs
PAD_ID = {manifest["pad_id"]}

tokenizer = Tokenizer.from_file(f"{{MODEL_DIR}}/tokenizer.json")  # truncates to {manifest["max_length"]} tokens
towers = [{sessions}]


def embed(texts, tower=0):
    \"\"\"Vectors of texts; tower 1 encodes the second question of a pair.\"\"\"
    rows = [encoding.ids or [PAD_ID] for encoding in tokenizer.encode_batch(texts)]  # an empty text keeps one token
    width = max(len(row) for row in rows)
    input_ids = np.full((len(rows), width), PAD_ID, dtype=np.int64)
    attention_mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        input_ids[i, : len(row)] = row
        attention_mask[i, : len(row)] = 1
    session = towers[min(tower, len(towers) - 1)]
    return session.run(None, {{"input_ids": input_ids, "attention_mask": attention_mask}})[0]


q1 = embed(["How do I learn Python?"], tower=0)[0]
q2 = embed(["What is the best way to learn Python?"], tower=1)[0]
score = float(q1 @ q2 / (np.linalg.norm(q1) * np.linalg.norm(q2)))  # cosine similarity
print(round(score, 4), "DUPLICATE" if score > THRESHOLD else "NOT DUPLICATE")
```"""


def _metrics_table(metrics: dict) -> list[str]:
    rows = [("ROC AUC", "roc_auc"), ("Average precision", "average_precision"), ("Accuracy", "accuracy"),
            ("Precision", "precision"), ("Recall", "recall"), ("F1", "f1"), ("Threshold", "threshold")]
    lines = ["| Metric | Value |", "|:--|--:|"]
    lines += [f"| {label} | {_number(metrics.get(key))} |" for label, key in rows if key in metrics]
    if "n" in metrics:
        lines.append(f"| Pairs | {_number(metrics.get('n'))} |")
    return lines


def model_card(manifest: dict, folder_name: str = "") -> str:
    """README.md of an export, from its manifest (``manifest["config"]`` is the run's config summary)."""
    from core.models.minilm import ZERO_SHOT_THRESHOLD
    from core.model_names import MODEL_LABELS, ZERO_SHOT_LABEL

    config = manifest["config"]
    fmt, family = manifest["export_format"], manifest["model_type"]
    zero_shot = manifest["zero_shot"]
    label = ZERO_SHOT_LABEL if zero_shot else MODEL_LABELS.get(family, family)
    data = config.get("data") if isinstance(config.get("data"), dict) else {}
    metrics = config.get("metrics") if isinstance(config.get("metrics"), dict) else {}
    validation = metrics.get("validation") if isinstance(metrics.get("validation"), dict) else {}
    test = metrics.get("test") if isinstance(metrics.get("test"), dict) else {}
    train_config = config.get("train_config") if isinstance(config.get("train_config"), dict) else {}
    training = config.get("training") if isinstance(config.get("training"), dict) else {}
    threshold = manifest["threshold"]
    base = BASE_MODEL if family == "minilm" else None

    tags = ["siamese-lab", "sentence-similarity", "duplicate-questions", "feature-extraction"]
    tags += ["sentence-transformers"] if fmt == "sentence-transformers" else ["onnx"]
    front = ["---", f"library_name: {'sentence-transformers' if fmt == 'sentence-transformers' else 'onnx'}",
             "pipeline_tag: sentence-similarity", "tags:", *[f"- {tag}" for tag in tags]]
    if base:
        front.append(f"base_model: {base}")
    if data.get("name"):
        front += ["datasets:", f"- {json.dumps(_plain(data['name'], 120))}"]
    front.append("---")

    title = _plain(manifest["name"], 120) or "model"
    lines = [*front, "", f"# {_code(title)}: {label}", ""]
    what = ("all-MiniLM-L6-v2 as published (not trained in Siamese Lab)" if zero_shot
            else f"a {label} trained in Siamese Lab to tell duplicate questions apart")
    lines += [f"This is {what}, exported as {FORMAT_LABELS[fmt]}. It maps a question to a vector of "
              f"{manifest['embedding_dim']} numbers; two questions whose cosine similarity is above the threshold "
              f"are called duplicates.", ""]

    lines += ["## Model Details", "", "### Model Description", ""]
    lines.append(f"- **Model family:** {label} (`{family}`)")
    lines.append(f"- **Base model:** [{base}](https://huggingface.co/{base})" if base
                 else "- **Base model:** none (trained from scratch)")
    lines.append(f"- **Maximum sequence length:** {manifest['max_length']} tokens")
    lines.append(f"- **Output dimensionality:** {manifest['embedding_dim']}")
    lines.append("- **Similarity function:** cosine similarity" + (" (the vectors are L2-normalised)"
                                                                  if manifest["normalized"] else ""))
    if threshold is not None:
        kind = "fixed zero-shot cosine" if zero_shot else "calibrated cosine"
        lines.append(f"- **Duplicate threshold ({kind}):** {threshold:.6f}")
    else:
        lines.append("- **Duplicate threshold:** none calibrated")
    if data:
        lines.append(f"- **Training dataset:** {_code(data.get('name', 'n/a'))}, {_number(data.get('pairs'))} pairs, "
                     f"{_percent(data.get('duplicate_rate'))} % duplicates")
    lines.append("")

    if fmt == "onnx":
        lines += ["### Files", ""]
        graphs = manifest["files"]["graphs"]
        if len(graphs) == 2:
            lines.append(f"- `{graphs[0]}`: tower 0, encodes the first question of a pair; "
                         f"`{graphs[1]}`: tower 1, encodes the second (the two towers have their own weights)")
        else:
            lines.append(f"- `{graphs[0]}`: encodes both questions of a pair (one set of weights)")
        lines.append(f"- inputs `input_ids` and `attention_mask` (int64, batch × sequence, dynamic; the mask is 1 on "
                     f"real tokens, which come first), output `{OUTPUT_NAME}` (float32, batch × "
                     f"{manifest['embedding_dim']})")
        kind = "WordPiece, BERT uncased" if manifest["tokenizer_kind"] == "wordpiece" else "word level, lower-cased"
        lines.append(f"- `tokenizer.json`: the model's tokenizer for Hugging Face `tokenizers` ({kind}, truncating "
                     f"to {manifest['max_length']} tokens)")
        if manifest.get("quantization"):
            lines.append(f"- weights quantised to int8 (dynamic, per channel): on {manifest['check']['texts']} probe "
                         f"texts the vectors differ from the PyTorch model's by up to "
                         f"{manifest['check']['max_abs_diff_vs_pytorch']:.2g} (cosine to them at least "
                         f"{manifest['check']['min_cosine_vs_pytorch']:.4f}); recalibrate the threshold for them")
        else:
            check = manifest["check"]
            lines.append(f"- checked on export: onnxruntime's vectors differ from PyTorch's by at most "
                         f"{check['max_abs_diff_vs_pytorch']:.2g} on {check['texts']} probe texts")
        lines.append("")
    else:
        lines += ["### Full Model Architecture", "", "```",
                  f"SentenceTransformer(Transformer(BertModel, max_seq_length={manifest['max_length']}) -> "
                  f"Pooling(mean, dim={manifest['embedding_dim']})"
                  + (" -> Normalize()" if manifest["normalized"] else "") + ")", "```", ""]

    lines += ["## Usage", "", "### Direct Usage (" + ("Sentence Transformers" if fmt == "sentence-transformers"
                                                      else "ONNX Runtime") + ")", ""]
    lines += ["```bash", "pip install " + ("sentence-transformers" if fmt == "sentence-transformers"
                                           else "onnxruntime tokenizers numpy"), "```", ""]
    lines += [_usage(manifest, folder_name), ""]

    lines += ["## Evaluation", ""]
    if zero_shot:
        lines += [f"Not measured at export. The threshold {ZERO_SHOT_THRESHOLD:.2f} approximates zero-shot MiniLM's "
                  "best-accuracy threshold on Siamese Lab's bundled sample of 479 Quora pairs (accuracy 0.82 there).",
                  ""]
    elif validation:
        held = data.get("val_pairs", validation.get("n"))
        lines += [f"Held-out validation pairs of {_code(data.get('name', 'the training data'))}: "
                  f"{_number(validation.get('n', held))} pairs the model did not train on "
                  f"({_number(data.get('val_pairs'))} held out of {_number(data.get('pairs'))}"
                  + (", split so that no validation question occurs in training" if (config.get("run") or {}).get(
                      "split_by_question") else "")
                  + "). The threshold is the best-accuracy cosine threshold on these same pairs.", ""]
        lines += _metrics_table(validation) + [""]
        if test:
            lines += [f"Test pairs ({_number(data.get('test_pairs'))} pairs, neither trained nor calibrated on), "
                      "at that threshold:", ""]
            lines += _metrics_table(test) + [""]
    else:
        lines += ["No held-out metrics were recorded for this model.", ""]

    lines += ["## Training Details", ""]
    if zero_shot:
        lines += ["Not trained in Siamese Lab: the published all-MiniLM-L6-v2 weights (trained by the "
                  "sentence-transformers authors on about one billion sentence pairs).", ""]
    else:
        lines += ["### Training Dataset", ""]
        if data:
            lines += [f"- **Name:** {_code(data.get('name', 'n/a'))}",
                      f"- **Size:** {_number(data.get('pairs'))} pairs ({_number(data.get('unique_questions'))} "
                      f"distinct questions)",
                      f"- **Duplicate share:** {_percent(data.get('duplicate_rate'))} % "
                      f"({_number(data.get('duplicates'))} duplicate pairs)",
                      f"- **Splits:** {_number(data.get('train_pairs'))} training"
                      + (f" (of them {_number(data['implied_pairs'])} implied by the training labels)"
                         if data.get("implied_pairs") else "")
                      + f", {_number(data.get('val_pairs'))} validation, {_number(data.get('test_pairs'))} test pairs", ""]
        else:
            lines += ["Not recorded.", ""]
        lines += ["### Loss", "", f"- {_loss_line(config)}", ""]
        lines += ["### Hyperparameters", ""]
        for label_, key in (("epochs", "epochs"), ("batch size", "batch_size"), ("learning rate", "lr"),
                            ("optimizer", "optimizer"), ("warm-up ratio", "warmup_ratio"), ("seed", "seed")):
            if key in train_config:
                value = train_config[key]
                shown = _code(value) if isinstance(value, str) else (
                    f"{value:g}" if isinstance(value, float) and math.isfinite(value) else _number(value))
                lines.append(f"- **{label_}:** {shown}")
        if training:
            lines.append(f"- **training ended:** {_code(training.get('status', 'n/a'))} after "
                         f"{_number(training.get('epochs_run'))} epoch(s), best epoch "
                         f"{_number(training.get('best_epoch'))}")
        lines.append("")

    lines += ["## Intended Use and Limitations", "",
              "- Intended use: deciding whether two short questions ask the same thing (duplicate detection), "
              "and finding similar questions by cosine similarity of their vectors.",
              "- " + ("Trained on Quora questions" if not zero_shot else "The threshold was set on Quora questions")
              + ": on other kinds of text (other sites, long documents, other languages) expect lower quality; "
              "**recalibrate the threshold on your data** (a few hundred labelled pairs of your own) before "
              "trusting its verdicts.",
              f"- Texts longer than {manifest['max_length']} tokens are cut to their first {manifest['max_length']}.",
              "- A similarity score is not a probability; duplicate labels in the training data are noisy.", "",
              "## Siamese Lab", "",
              f"Exported on {manifest['exported_at']} by Siamese Lab (`python -m core export`). `{MANIFEST_FILE}` "
              "holds the threshold and the run's settings and metrics.", ""]
    return "\n".join(lines)
