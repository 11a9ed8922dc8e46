"""What a foreign ONNX export (one the lab did not write, ``core.export.onnx_trust``) must pass before the
lab's process runs it: the manifest's numbers (``export_settings``, checked for every export); per graph,
read once (``read_export_file``), onnx's parser and checker, only ``ALLOWED_OPS`` (no control flow), no
external tensor, and the backend's inputs and output (``check_foreign_graph``); then the probe's vectors
(``check_vectors``). Each refusal is an ``OnnxBackendError`` of one line naming the file."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.export.common import OnnxBackendError
from core.export.onnx_graph import GRAPH_FILES, INPUT_NAMES, OPSET, OUTPUT_NAME
from core.saving.files import ModelLoadError, read_regular_file

MAX_GRAPH_BYTES = 2 * 2**30 - 1  # protobuf's own limit on one message
MAX_BATCH_ROWS = 256  # OnnxEncoder never runs a larger batch
MAX_VOCABULARY = 1 << 24
MAX_EMBEDDING_DIM = 65536
MAX_NODES = 100_000
UNIT_NORM_TOLERANCE = 1e-3
OPSETS = {"": OPSET, "ai.onnx": OPSET, "com.microsoft": 1}
ALLOWED_OPS = frozenset({
    # What torch.onnx writes for the LSTM (each pooling, words or WordPiece), the dual encoder and MiniLM ...
    "Add", "And", "Cast", "Clip", "Concat", "Constant", "ConstantOfShape", "Div", "Equal", "Erf", "Expand",
    "Flatten", "Gather", "GatherElements", "Gemm", "GreaterOrEqual", "Identity", "IsNaN", "LSTM",
    "LayerNormalization", "MatMul", "Mod", "Mul", "Not", "Range", "ReduceL2", "ReduceMax", "ReduceProd",
    "ReduceSum", "Relu", "Reshape", "ScatterElements", "Shape", "Slice", "Softmax", "Squeeze", "TopK",
    "Transpose", "Unsqueeze", "Where",
    # ... and what onnxruntime's dynamic int8 quantisation puts in their place.
    "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "com.microsoft:DynamicQuantizeLSTM",
})


@dataclass(frozen=True)
class ExportSettings:
    model_type: str
    max_length: int
    pad_id: int
    embedding_dim: int
    normalized: bool
    towers: tuple[str, str]  # the graph file of question 1 and of question 2


def export_settings(manifest: dict, path: Path, vocabulary: int) -> ExportSettings:
    """The numbers of an export's manifest (``path``), checked; ``vocabulary`` is the tokenizer's largest id + 1."""
    if not 1 <= vocabulary <= MAX_VOCABULARY:
        raise OnnxBackendError(f"{path}: the tokenizer has {vocabulary:,} ids; at most {MAX_VOCABULARY:,} are allowed")
    towers = manifest.get("towers")
    if not isinstance(towers, dict) or set(towers) != {"0", "1"} or not set(towers.values()) <= set(GRAPH_FILES):
        raise OnnxBackendError(f"{path}: towers must map 0 and 1 to {' / '.join(GRAPH_FILES)}")

    def integer(key: str, low: int, high: int) -> int:
        value = manifest.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise OnnxBackendError(f"{path}: {key} must be an integer in {low}..{high}, got {value!r:.40}")
        return value

    return ExportSettings(str(manifest.get("model_type"))[:40], integer("max_length", 1, 4096),
                          integer("pad_id", 0, vocabulary - 1), integer("embedding_dim", 1, MAX_EMBEDDING_DIM),
                          manifest.get("normalized") is not False, (towers["0"], towers["1"]))


def read_export_file(folder: Path, name: str, max_bytes: int = MAX_GRAPH_BYTES) -> bytes:
    """The bytes of the file ``name`` of the export ``folder``: a regular file inside it, read once (the
    bytes checked are the bytes run)."""
    try:
        return read_regular_file(folder / name, max_bytes, folder)
    except FileNotFoundError:
        raise OnnxBackendError(f"{folder}: {name} is missing") from None
    except ModelLoadError as error:
        raise OnnxBackendError(str(error)) from None


def check_foreign_graph(data: bytes, path: Path, settings: ExportSettings) -> None:
    """Every static check on the bytes of one graph file; the probe comes after."""
    import onnx
    from google.protobuf.message import DecodeError
    from onnx import TensorProto

    try:  # parsed from the bytes, so no tensor stored outside the file is ever read
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as error:
        raise OnnxBackendError(f"{path} is not a usable ONNX graph ({str(error)[:120]})") from None
    opsets = {o.domain: o.version for o in model.opset_import}
    if any(OPSETS.get(domain) != version for domain, version in opsets.items()):
        raise OnnxBackendError(f"{path} imports opsets {str(opsets)[:120]}; an export uses {OPSET} "
                               f"(and com.microsoft 1)")
    graph = model.graph
    if model.functions or graph.sparse_initializer or len(graph.node) > MAX_NODES:
        raise OnnxBackendError(f"{path} holds local functions, sparse tensors or more than {MAX_NODES:,} nodes; "
                               f"no export does")
    # Refused wherever they point: an export never stores a tensor outside its graph file.
    tensors = list(graph.initializer) + [a.t for n in graph.node for a in n.attribute if a.HasField("t")]
    if any(t.data_location == TensorProto.EXTERNAL or t.external_data for t in tensors):
        raise OnnxBackendError(f"{path} refers to tensors stored in other files; an export keeps them inside")
    for node in graph.node:
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"
        if op not in ALLOWED_OPS:
            raise OnnxBackendError(f"{path} uses the operator {op[:60]!r}, which the exporter never writes; refused")

    def described(value):  # (name, element type, dims with None where symbolic)
        kind = value.type.tensor_type
        return value.name, kind.elem_type, [d.dim_value if d.HasField("dim_value") else None for d in kind.shape.dim]

    inputs = sorted(described(i) for i in graph.input)
    if [(name, kind, len(dims)) for name, kind, dims in inputs] != [(name, TensorProto.INT64, 2)
                                                                    for name in sorted(INPUT_NAMES)]:
        raise OnnxBackendError(f"{path} takes {[i[0][:40] for i in inputs][:4]}, not int64 matrices "
                               f"{' and '.join(INPUT_NAMES)}")
    outputs = [described(o) for o in graph.output]
    if len(outputs) != 1 or outputs[0][:2] != (OUTPUT_NAME, TensorProto.FLOAT) or len(outputs[0][2]) != 2:
        raise OnnxBackendError(f"{path} must give one float32 matrix {OUTPUT_NAME}, one row per question")
    if outputs[0][2][1] not in (None, settings.embedding_dim):  # the probe checks a symbolic one
        raise OnnxBackendError(f"{path} gives vectors of {outputs[0][2][1]} numbers; the manifest says "
                               f"embedding_dim {settings.embedding_dim}")
    try:  # types and shapes inferred strictly: a contradiction is refused here rather than at run time
        onnx.checker.check_model(model, full_check=True)
    except Exception as error:  # noqa: BLE001 - the checker raises several types, all meaning "not valid"
        raise OnnxBackendError(f"{path} fails onnx's checker ({' '.join(str(error).split())[:160]})") from None


def check_vectors(vectors: np.ndarray, rows: int, settings: ExportSettings, path: Path) -> None:
    """A probe's output: ``rows`` finite vectors of ``embedding_dim`` numbers, unit-norm if promised."""
    if vectors.shape != (rows, settings.embedding_dim) or not np.isfinite(vectors).all():
        raise OnnxBackendError(f"{path} gives {vectors.shape} vectors for {rows} probe texts, not one finite row "
                               f"of embedding_dim {settings.embedding_dim} per question")
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    if settings.normalized and not (np.abs(norms - 1) <= UNIT_NORM_TOLERANCE).all():
        raise OnnxBackendError(f"{path} gives vectors of length {norms.min():.3g}..{norms.max():.3g} on the probe "
                               f"texts; the manifest promises unit vectors")
