"""The ``onnx`` export: ``model.onnx`` takes ``input_ids`` and ``attention_mask`` (int64, dynamic batch and
length; the mask is 1 on real tokens, which come first) and returns ``sentence_embedding``, the model's
vectors L2-normalised. A dual encoder with two towers also gets ``model_tower1.onnx`` for question 2.
``tokenizer.json`` is the model's tokenizer for Hugging Face ``tokenizers``. The graphs are checked against
PyTorch on ``PROBE_TEXTS`` (within ``ONNX_TOLERANCE``); the int8 graphs' difference is recorded, not enforced."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from core.export.common import PROBE_TEXTS, TOKENIZER_FILE, ExportError, native_stderr_dropped, normalises, quiet_export

GRAPH_FILES = ("model.onnx", "model_tower1.onnx")  # tower 0 (question 1, and both sides when Siamese), tower 1
INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAME = "sentence_embedding"
OPSET = 17
ONNX_TOLERANCE = 1e-4  # max |onnxruntime - PyTorch| over the probe vectors, float32 graphs


def _unit(model, vectors):
    """What an exported graph returns: ``vectors`` of ``model``, L2-normalised unless they are already."""
    import torch

    return vectors if normalises(model) else torch.nn.functional.normalize(vectors, dim=-1)


def _graph(model, tower: int):
    """One tower of ``model`` as a module (input_ids, attention_mask) -> unit vectors, for the exporter."""
    import torch

    class Graph(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            mask = attention_mask.bool()
            if self.model.model_type == "dual-transformer":
                towers = self.model.towers
                return _unit(self.model, _dual_tower(towers[min(tower, len(towers) - 1)], input_ids, mask))
            return _unit(self.model, self.model.embed(input_ids, mask, tower=tower))

    return Graph().eval()


def _dual_tower(tower, input_ids, mask):
    """``core.models.dual_encoder.Tower.forward`` with the attention as plain matrix products: traced by the
    TorchScript exporter, nn.MultiheadAttention keeps the example's sequence length as a constant."""
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


def _saved_graph(module, inputs: dict, path: Path, output: str, width: int | None, quantize: str | None):
    """``module`` traced on ``inputs`` (name -> example, each batch x sequence) into the ONNX file ``path``, output
    ``output`` (batch x ``width``, or batch alone), int8 when ``quantize`` says; an onnxruntime session of it."""
    import onnx
    import onnxruntime as ort
    import torch

    # With gradients on: nn.TransformerEncoder's no-grad fast path has no ONNX form.
    with quiet_export(), native_stderr_dropped():
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
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _run(session, feeds: dict) -> np.ndarray:
    """The session's first output for ``feeds``; a failure is one ``ExportError`` line."""
    from core.export.onnx_session import failure_reason

    try:
        return session.run(None, feeds)[0]
    except Exception as error:  # noqa: BLE001 - onnxruntime's own exception types
        shape = next(iter(feeds.values())).shape
        raise ExportError(f"the exported graph fails on a batch of {shape[0]} x {shape[1]} tokens: "
                          f"{failure_reason(error)}") from None


def write_onnx(model, folder: Path, quantize: str | None) -> dict:
    import torch

    if model.model_type == "cross-encoder":
        return write_cross_encoder_onnx(model, folder, quantize)
    (folder / TOKENIZER_FILE).write_text(model.tokenizer.hf_tokenizer_json(), encoding="utf-8")
    # PROBE_TEXTS as the model's tokenizer pads them: the first batch traces the graphs, the others (other
    # batch sizes and lengths) check them.
    table = model.tokenizer.encode(PROBE_TEXTS)
    (trace_ids, trace_mask), *checks = [table.take(rows) for rows in ([0, 3], np.arange(len(table)), [7], [2, 5, 0])]
    towers = len(getattr(model, "towers", ())) if model.model_type == "dual-transformer" else 1
    differences, cosines = [], []
    for tower in range(towers):
        inputs = {"input_ids": trace_ids, "attention_mask": trace_mask.long()}
        session = _saved_graph(_graph(model, tower), inputs, folder / GRAPH_FILES[tower], OUTPUT_NAME,
                               int(model.embedding_dim), quantize)
        for ids, mask in checks:
            got = _run(session, {"input_ids": ids.numpy(), "attention_mask": mask.long().numpy()})
            with torch.no_grad():
                want = _unit(model, model.embed(ids, mask, tower=tower).float()).numpy()
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


CROSS_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
CROSS_OUTPUT = "duplicate_probability"


def write_cross_encoder_onnx(model, folder: Path, quantize: str | None) -> dict:
    """A cross-encoder's one graph: a joined pair's ``input_ids``, ``attention_mask`` and ``token_type_ids`` (as
    ``tokenizer.json`` encodes a pair of texts) -> ``duplicate_probability`` (batch,). Checked against PyTorch on the
    probe texts paired with each other; the milliseconds per pair onnxruntime took on them are recorded, measured
    here: a cross-encoder costs a forward pass per pair, where a bi-encoder's cost is per question."""
    import json
    import os
    import time

    import torch

    from core.models.cross_encoder import joined

    settings = json.loads(model.tokenizer.hf_tokenizer_json())
    settings["truncation"]["max_length"] = 2 * model.tokenizer.max_length - 1  # both questions together
    (folder / TOKENIZER_FILE).write_text(json.dumps(settings), encoding="utf-8")
    first, second = model.tokenizer.encode(PROBE_TEXTS), model.tokenizer.encode(PROBE_TEXTS[::-1])
    pairs = [joined(first.take(rows), second.take(rows)) for rows in ([0, 3], np.arange(len(first)), [7], [2, 5, 0])]

    class Graph(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return torch.sigmoid(self.model.logits(input_ids, attention_mask.bool(), token_type_ids))

    feeds = [dict(zip(CROSS_INPUTS, (ids, mask.long(), types))) for ids, mask, types in pairs]
    session = _saved_graph(Graph().eval(), feeds[0], folder / GRAPH_FILES[0], CROSS_OUTPUT, None, quantize)
    differences, seconds = [], []
    for (ids, mask, types), feed in zip(pairs[1:], feeds[1:]):
        got = _run(session, {name: tensor.numpy() for name, tensor in feed.items()})
        with torch.no_grad():
            differences.append(float(np.abs(got - torch.sigmoid(model.logits(ids, mask, types)).numpy()).max()))
    for _ in range(5):  # the whole probe batch; the fastest run is the cost (the others waited on something else)
        started = time.perf_counter()
        session.run(None, {name: tensor.numpy() for name, tensor in feeds[1].items()})
        seconds.append(time.perf_counter() - started)
    difference = max(differences)
    if quantize is None and not difference <= ONNX_TOLERANCE:
        raise ExportError(f"the exported graph differs from the PyTorch model by {difference:.3g} "
                          f"(more than {ONNX_TOLERANCE:g}) on the probe pairs")
    return {
        "files": {"graphs": [GRAPH_FILES[0]], "tokenizer": TOKENIZER_FILE},
        "inputs": {name: {"dtype": "int64", "shape": ["batch", "sequence"]} for name in CROSS_INPUTS},
        "output": {"name": CROSS_OUTPUT, "dtype": "float32", "shape": ["batch"]},
        "opset": OPSET,
        "quantization": "int8-dynamic" if quantize == "int8" else None,
        "check": {"pairs": len(first), "max_abs_diff_vs_pytorch": difference,
                  "tolerance": None if quantize else ONNX_TOLERANCE},
        "cost": {"milliseconds_per_pair": round(1000 * min(seconds) / len(first), 3), "pairs": len(first),
                 "cpus": os.cpu_count()},
    }
