"""What a foreign ONNX export must pass before onnxruntime runs any of its graphs in the lab's process.

A graph is foreign unless the lab wrote it (``core.export.onnx_trust``): a folder someone shared, an
export whose files changed after the lab wrote them, an entry planted in the lab's cache.

* ``export_settings(manifest, path, vocabulary)``: the manifest's numbers within bounds and consistent
  (``max_length``, ``embedding_dim``, ``pad_id`` below the tokenizer's largest id + 1, which is at most
  ``MAX_VOCABULARY``; ``towers`` naming graph files of the format). Every export passes this one.
* ``read_graph(path, folder)``: the file is a regular file inside the folder, at most ``MAX_GRAPH_BYTES``,
  read once (the bytes checked are the bytes run).
* ``check_foreign_graph(data, path, settings)``: parsed by ``onnx`` from those bytes, so no tensor stored
  outside the file is ever read; only the opsets the exporter uses, no local functions, no sparse or
  external tensors; only ``ALLOWED_OPS``, the operators the exporter writes for every family, float32 or
  int8 (``tests/test_onnx_checks.py`` exports each and checks): so no control flow (``Loop``, ``Scan``,
  ``If``), no subgraph, no random or string operator; inputs ``input_ids`` and ``attention_mask`` (int64,
  rank 2) and one output ``sentence_embedding`` (float32, rank 2, ``embedding_dim`` wide where the width
  is declared); then ``onnx.checker.check_model`` with its full check (types and shapes inferred
  strictly). How much memory and time a graph takes is not read from it: ``core.export.onnx_probe`` runs
  it in a capped child first.
* ``check_vectors(vectors, rows, settings, name)``: the probe's output has one finite row of
  ``embedding_dim`` numbers per input, unit-norm where the manifest says the vectors are normalised.

Every refusal is an ``OnnxBackendError`` naming the file and the reason, on one line.
"""
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


def _int_field(manifest: dict, key: str, low: int, high: int, path: Path) -> int:
    value = manifest.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise OnnxBackendError(f"{path}: {key} must be an integer in {low}..{high}, got {value!r:.40}")
    return value


def export_settings(manifest: dict, path: Path, vocabulary: int) -> ExportSettings:
    """The numbers of an export's manifest (``path``), checked; ``vocabulary``: the tokenizer's largest
    id + 1."""
    if not 1 <= vocabulary <= MAX_VOCABULARY:
        raise OnnxBackendError(f"{path}: the tokenizer has {vocabulary:,} ids; at most {MAX_VOCABULARY:,} are allowed")
    towers = manifest.get("towers")
    if not isinstance(towers, dict) or set(towers) != {"0", "1"} or not set(towers.values()) <= set(GRAPH_FILES):
        raise OnnxBackendError(f"{path}: towers must map 0 and 1 to {' / '.join(GRAPH_FILES)}")
    return ExportSettings(
        model_type=str(manifest.get("model_type"))[:40],
        max_length=_int_field(manifest, "max_length", 1, 4096, path),
        pad_id=_int_field(manifest, "pad_id", 0, vocabulary - 1, path),
        embedding_dim=_int_field(manifest, "embedding_dim", 1, MAX_EMBEDDING_DIM, path),
        normalized=manifest.get("normalized") is not False,
        towers=(towers["0"], towers["1"]),
    )


def read_graph(path: Path, folder: Path) -> bytes:
    """The bytes of the graph file ``path`` of the export ``folder``: a regular file inside it, read once."""
    try:
        return read_regular_file(path, MAX_GRAPH_BYTES, folder)
    except FileNotFoundError:
        raise OnnxBackendError(f"{folder}: {path.name} is missing") from None
    except ModelLoadError as error:
        raise OnnxBackendError(str(error)) from None


def _parse(data: bytes, path: Path):
    import onnx
    from google.protobuf.message import DecodeError

    try:
        return onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as error:
        raise OnnxBackendError(f"{path} is not a usable ONNX graph ({str(error)[:120]})") from None


def _check_container(model, path: Path) -> None:
    """Opsets, functions, where every tensor is stored, and the operators."""
    from onnx import TensorProto

    opsets = {o.domain: o.version for o in model.opset_import}
    if any(OPSETS.get(domain) != version for domain, version in opsets.items()):
        raise OnnxBackendError(f"{path} imports opsets {str(opsets)[:120]}; an export uses {OPSET} "
                               f"(and com.microsoft 1)")
    graph = model.graph
    if model.functions or graph.sparse_initializer or len(graph.node) > MAX_NODES:
        raise OnnxBackendError(f"{path} holds local functions, sparse tensors or more than {MAX_NODES:,} nodes; "
                               f"no export does")
    # Refused wherever they point: an export never stores a tensor outside its graph file, so a reference
    # to another file can only be a way to read one the user never meant to hand over.
    tensors = list(graph.initializer) + [a.t for n in graph.node for a in n.attribute if a.HasField("t")]
    if any(t.data_location == TensorProto.EXTERNAL or t.external_data for t in tensors):
        raise OnnxBackendError(f"{path} refers to tensors stored in other files; an export keeps them inside")
    for node in graph.node:
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"
        if op not in ALLOWED_OPS:
            raise OnnxBackendError(f"{path} uses the operator {op[:60]!r}, which the exporter never writes; refused")


def _check_signature(graph, path: Path, settings: ExportSettings) -> None:
    """The inputs and the output the backend feeds and reads: names, element types, ranks, width."""
    from onnx import TensorProto

    def described(value):
        kind = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in kind.shape.dim]
        return value.name, kind.elem_type, dims

    inputs = sorted(described(i) for i in graph.input)
    expected = [(name, TensorProto.INT64, 2) for name in sorted(INPUT_NAMES)]
    if [(name, kind, len(dims)) for name, kind, dims in inputs] != expected:
        raise OnnxBackendError(f"{path} takes {[i[0][:40] for i in inputs][:4]}, not int64 matrices "
                               f"{' and '.join(INPUT_NAMES)}")
    outputs = [described(o) for o in graph.output]
    if len(outputs) != 1 or outputs[0][:2] != (OUTPUT_NAME, TensorProto.FLOAT) or len(outputs[0][2]) != 2:
        raise OnnxBackendError(f"{path} must give one float32 matrix {OUTPUT_NAME}, one row per question")
    if outputs[0][2][1] not in (None, settings.embedding_dim):  # the probe checks a symbolic one
        raise OnnxBackendError(f"{path} gives vectors of {outputs[0][2][1]} numbers; the manifest says "
                               f"embedding_dim {settings.embedding_dim}")


def _check_with_onnx(model, path: Path) -> None:
    """onnx's own checker, with types and shapes inferred strictly: a node fed the wrong kind of tensor, or
    an output whose inferred shape contradicts the declared one, is refused here rather than at run time."""
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as error:  # noqa: BLE001 - the checker raises several types, all meaning "not valid"
        message = " ".join(str(error).split())
        raise OnnxBackendError(f"{path} fails onnx's checker ({message[:160]})") from None


def check_foreign_graph(data: bytes, path: Path, settings: ExportSettings) -> None:
    """Every static check above on the bytes of one graph file; the probe comes after."""
    model = _parse(data, path)
    _check_container(model, path)
    _check_signature(model.graph, path, settings)
    _check_with_onnx(model, path)


def check_vectors(vectors: np.ndarray, rows: int, settings: ExportSettings, path: Path) -> None:
    """A probe's output: ``rows`` finite vectors of ``embedding_dim`` numbers, unit-norm if promised."""
    if vectors.shape != (rows, settings.embedding_dim) or not np.isfinite(vectors).all():
        raise OnnxBackendError(f"{path} gives {vectors.shape} vectors for {rows} probe texts, not one finite row "
                               f"of embedding_dim {settings.embedding_dim} per question")
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    if settings.normalized and not (np.abs(norms - 1) <= UNIT_NORM_TOLERANCE).all():
        raise OnnxBackendError(f"{path} gives vectors of length {norms.min():.3g}..{norms.max():.3g} on the probe "
                               f"texts; the manifest promises unit vectors")
