"""The two formats an export writes, each checked against the PyTorch model on ``PROBE_TEXTS``: ``onnx``
(``write_onnx``: graphs that return the model's vectors L2-normalised, and ``tokenizer.json`` for Hugging Face
``tokenizers``) and ``sentence-transformers`` (``write_sentence_transformers``, MiniLM: the folder
sentence-transformers' own ``save`` writes). One export runs at a time per process (``quiet_export``)."""
from __future__ import annotations

import contextlib
import logging
import stat
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np

from core.export.manifest import TOKENIZER_FILE, normalises
from core.notices import native_stderr_dropped

GRAPH_FILES = ("model.onnx", "model_tower1.onnx")  # tower 0 (question 1, and both sides when Siamese), tower 1
INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAME = "sentence_embedding"
OPSET = 17
ONNX_TOLERANCE = 1e-4  # max |onnxruntime - PyTorch| over the probe vectors, float32 graphs
ST_TOLERANCE = 1e-5  # max |SentenceTransformer.encode - model.encode| over the probe texts

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


def onnx_session(graph: bytes):
    """An ``onnxruntime.InferenceSession`` of ``graph`` on the CPU, one thread (the backend runs batches side by
    side); onnxruntime logs nothing (its errors reach the caller as exceptions)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 4  # fatal only
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


# One export at a time per process: the exporter keeps global state, and quiet_export changes process-wide
# settings (the app may export from several sessions' threads at once).
_EXPORT_LOCK = threading.RLock()


@contextlib.contextmanager
def quiet_export(native: bool = False):
    """Under the export lock: Python warnings, log records below ERROR and Hugging Face's progress bars off for the
    block; with ``native``, file descriptor 2 to /dev/null too (the TorchScript exporter's C++ side writes there)."""
    from transformers.utils import logging as hf_logging

    with _EXPORT_LOCK, warnings.catch_warnings(), contextlib.ExitStack() as restore:
        warnings.simplefilter("ignore")
        if hf_logging.is_progress_bar_enabled():
            hf_logging.disable_progress_bar()
            restore.callback(hf_logging.enable_progress_bar)
        restore.callback(logging.disable, logging.root.manager.disable)
        logging.disable(logging.WARNING)
        if native:
            restore.enter_context(native_stderr_dropped())
        yield


def _unit(model, vectors):
    """What an exported graph returns: ``vectors`` of ``model``, L2-normalised unless they are already."""
    import torch

    return vectors if normalises(model) else torch.nn.functional.normalize(vectors, dim=-1)


def _graph(model, tower: int):
    """One tower of ``model`` as a module for the exporter: (input_ids, attention_mask) -> unit vectors; a
    cross-encoder's joined pair (ids, mask, token types) -> ``duplicate_probability``."""
    import torch

    class Graph(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model  # its weights, for the exporter

        def forward(self, input_ids, attention_mask, *types):
            mask = attention_mask.bool()
            if model.model_type == "cross-encoder":
                return torch.sigmoid(model.logits(input_ids, mask, *types))
            if model.model_type == "dual-transformer":
                return _unit(model, _dual_tower(model.towers[min(tower, len(model.towers) - 1)], input_ids, mask))
            return _unit(model, model.embed(input_ids, mask, tower=tower))

    return Graph().eval()


def _dual_tower(tower, input_ids, mask):
    """``core.models.dual_encoder.Tower.forward`` with the attention written out (``_self_attention``): traced by
    the TorchScript exporter, nn.MultiheadAttention keeps the example's sequence length as a constant."""
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
    import torch.nn.functional as F

    heads = attention.num_heads
    q, k, v = F.linear(x, attention.in_proj_weight, attention.in_proj_bias).chunk(3, dim=-1)  # (B, T, d) each
    q, k, v = (t.unflatten(-1, (heads, -1)).transpose(1, 2) for t in (q, k, v))  # (B, h, T, w)
    attended = F.scaled_dot_product_attention(q, k, v, attn_mask=~padding[:, None, None, :])  # (B, h, T, w)
    return attention.out_proj(attended.transpose(1, 2).flatten(2))  # (B, T, d)


def _saved_graph(module, inputs: dict, path: Path, output: str, width: int | None, quantize: str | None):
    """``module`` traced on ``inputs`` (name -> example, each batch x sequence) into the ONNX file ``path``, output
    ``output`` (batch x ``width``, or batch alone), int8 when ``quantize`` says; an onnxruntime session of it."""
    import onnx
    import torch

    # With gradients on: nn.TransformerEncoder's no-grad fast path has no ONNX form.
    with quiet_export(native=True):
        # The TorchScript exporter: it turns the bidirectional LSTM's packed sequence into the ONNX
        # LSTM's sequence_lens, so the backward direction starts on each text's last real token.
        torch.onnx.export(
            module, tuple(inputs.values()), str(path), input_names=list(inputs), output_names=[output],
            opset_version=OPSET, dynamo=False,
            dynamic_axes={**{name: {0: "batch", 1: "sequence"} for name in inputs}, output: {0: "batch"}})
    graph = onnx.load(str(path))
    if width is not None:  # the exporter names the output's second dimension symbolically; it is a constant
        graph.graph.output[0].type.tensor_type.shape.dim[1].dim_value = width
    if quantize == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        with quiet_export():
            # Per-channel scales: on MiniLM the mean cosine to the float vectors goes from 0.970 to 0.994.
            quantize_dynamic(graph, str(path), weight_type=QuantType.QInt8, per_channel=True)
    else:
        onnx.save(graph, str(path))
    return onnx_session(path.read_bytes())


CROSS_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
CROSS_OUTPUT = "duplicate_probability"


def write_onnx(model, folder: Path, quantize: str | None) -> dict:
    """The graphs and ``tokenizer.json`` into ``folder``, checked against PyTorch on ``PROBE_TEXTS`` (a
    cross-encoder's one graph on them paired with each other, as ``tokenizer.json`` encodes a pair of texts)."""
    import json

    import torch

    cross = model.model_type == "cross-encoder"
    settings = model.tokenizer.hf_tokenizer_json()
    if cross:
        settings = json.loads(settings)
        settings["truncation"]["max_length"] = 2 * model.tokenizer.max_length - 1  # both questions together
        settings = json.dumps(settings)
    (folder / TOKENIZER_FILE).write_text(settings, encoding="utf-8")
    # PROBE_TEXTS as the model's tokenizer pads them: the first batch traces the graphs, the others (other batch
    # sizes and lengths) check them.
    first, second = model.tokenizer.encode(PROBE_TEXTS), model.tokenizer.encode(PROBE_TEXTS[::-1])
    rows = ([0, 3], np.arange(len(first)), [7], [2, 5, 0])
    if cross:
        from core.models.cross_encoder import joined

        inputs, output, width, towers = CROSS_INPUTS, CROSS_OUTPUT, None, 1
        batches = [joined(first.take(picked), second.take(picked)) for picked in rows]
    else:
        inputs, output, width = INPUT_NAMES, OUTPUT_NAME, int(model.embedding_dim)
        batches = [first.take(picked) for picked in rows]
        towers = len(getattr(model, "towers", ())) if model.model_type == "dual-transformer" else 1
    feeds = [dict(zip(inputs, (tensor.long() if tensor.dtype == torch.bool else tensor for tensor in batch)))
             for batch in batches]
    differences, cosines = [], []
    for tower in range(towers):
        session = _saved_graph(_graph(model, tower), feeds[0], folder / GRAPH_FILES[tower], output, width, quantize)
        for (ids, mask, *types), feed in zip(batches[1:], feeds[1:]):
            got = session.run(None, {name: tensor.numpy() for name, tensor in feed.items()})[0]
            with torch.no_grad():  # the model's own forward, not the graph's (the dual encoder's differs)
                want = (torch.sigmoid(model.logits(ids, mask, *types)) if cross
                        else _unit(model, model.embed(ids, mask, tower=tower).float())).numpy()
            differences.append(float(np.abs(got - want).max()))
            if not cross:
                norms = np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1)
                cosines.append(float(np.min((got * want).sum(1) / np.maximum(norms, 1e-12))))
    difference = max(differences)
    if quantize is None and not difference <= ONNX_TOLERANCE:
        raise ExportError(f"the exported graph differs from the PyTorch model by {difference:.3g} "
                          f"(more than {ONNX_TOLERANCE:g}) on the probe {'pairs' if cross else 'texts'}")
    check = {"pairs": len(first)} if cross else {"texts": len(PROBE_TEXTS), "min_cosine_vs_pytorch": min(cosines)}
    return {
        "files": {"graphs": list(GRAPH_FILES[:towers]), "tokenizer": TOKENIZER_FILE},
        **({} if cross else {"towers": {"0": GRAPH_FILES[0], "1": GRAPH_FILES[min(1, towers - 1)]}}),
        "inputs": {name: {"dtype": "int64", "shape": ["batch", "sequence"]} for name in inputs},
        "output": {"name": output, "dtype": "float32", "shape": ["batch"] + ([width] if width else [])},
        "opset": OPSET,
        "quantization": "int8-dynamic" if quantize == "int8" else None,
        "check": {**check, "max_abs_diff_vs_pytorch": difference, "tolerance": None if quantize else ONNX_TOLERANCE},
    }


def write_sentence_transformers(model, folder: Path) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertTokenizerFast

    from sentence_transformers.sentence_transformer import modules as st_models

    max_length = model.tokenizer.max_length
    with quiet_export(), tempfile.TemporaryDirectory(prefix="siamese-lab-st-") as hf:
        model.bert.save_pretrained(hf)  # config.json + model.safetensors, this model's weights
        rust = model.tokenizer.to_hf_tokenizer()
        rust.no_truncation()  # sentence-transformers truncates at max_seq_length itself
        BertTokenizerFast(tokenizer_object=rust, do_lower_case=True, model_max_length=max_length).save_pretrained(hf)
        with torch.random.fork_rng():
            torch.manual_seed(0)  # BertModel's pooler (unused by mean pooling) is initialised: the same each time
            transformer = st_models.Transformer(hf, max_seq_length=max_length)
        modules = [transformer, st_models.Pooling(model.embedding_dim, pooling_mode="mean")] + (
            [st_models.Normalize()] if model.config.normalize else [])
        SentenceTransformer(modules=modules, device="cpu", similarity_fn_name="cosine").save(
            str(folder), create_model_card=False)
        # safetensors creates its file 0600; give it the mode the other files got (0666 less the umask).
        (folder / "model.safetensors").chmod(stat.S_IMODE((folder / "modules.json").stat().st_mode))
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
