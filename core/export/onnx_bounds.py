"""How large an ONNX graph's tensors can get, and how much arithmetic it does, before onnxruntime runs it.

``graph_work(prepare(graph), batch, sequence)`` walks the graph in node order with ``input_ids`` and
``attention_mask`` of shape (batch, sequence), each an interval of what the backend may feed, every
tensor a ``core.export.onnx_tensors.Tensor`` and every operator through its rule
(``core.export.onnx_shape_rules``, element-wise ones in ``onnx_tensors``). A size made from the input's
shape is bounded through the values it is computed from; a size made from anything else (the token ids,
a float) has no bound, and the graph is refused (``Refused``). Only the operators ``core.export.onnx_graph``
writes have a rule: any other is refused, and so are control flow and subgraphs, which have none.
``Work`` is the sum of the bytes of every tensor the graph makes (an upper bound of what it holds at
once), the multiply-adds of its matrix products and LSTMs, and the output's shape.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.export.onnx_shape_rules import COSTLY, RULES
from core.export.onnx_tensors import (
    ELEMENTWISE,
    FLOAT,
    INT64,
    VALUE_LIMIT,
    Dim,
    Refused,
    Shape,
    Tensor,
    constant,
    elementwise,
    known,
)


@dataclass
class Work:
    bytes: int  # every tensor the graph makes, summed
    multiply_adds: int
    output: Shape


# ---- the walk ----------------------------------------------------------------------------------
@dataclass
class Prepared:
    """A graph read once for any number of walks: its nodes with their attributes parsed, and the
    tensors known before it runs (initializers, ``Constant`` outputs)."""
    nodes: list[tuple[str, str, list[str], list[str], dict]]  # op, name, inputs, outputs, attributes
    fixed: dict[str, Tensor]
    inputs: list[str]
    output: str


def _tensor_value(proto) -> tuple[np.ndarray, int]:
    from onnx import numpy_helper

    try:
        return numpy_helper.to_array(proto), int(proto.data_type)
    except Exception as error:  # noqa: BLE001 - onnx raises what numpy raises on a malformed tensor
        raise Refused(f"tensor {proto.name[:40]!r} cannot be read ({str(error)[:80]})") from None


def _attributes(node) -> dict:
    from onnx import AttributeProto, helper

    attrs = {}
    for attribute in node.attribute:
        if attribute.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS, AttributeProto.SPARSE_TENSOR,
                              AttributeProto.SPARSE_TENSORS, AttributeProto.TENSORS):
            raise Refused(f"node {node.name!r} ({node.op_type}) holds a subgraph or tensors, which no export has")
        value = helper.get_attribute_value(attribute)
        attrs[attribute.name] = _tensor_value(value) if attribute.type == AttributeProto.TENSOR else value
    return attrs


def _constant(attrs: dict) -> Tensor:
    if "value" in attrs:
        array, dtype = attrs["value"]
        return constant(array, dtype)
    for key, dtype in (("value_int", INT64), ("value_ints", INT64), ("value_float", FLOAT), ("value_floats", FLOAT)):
        if key in attrs:
            return constant(np.asarray(attrs[key]), dtype)
    raise Refused("a Constant without a numeric value")


def prepare(graph) -> Prepared:
    """``graph`` (an ``onnx.GraphProto``) read for ``graph_work``; Refused for an operator with no rule."""
    fixed = {}
    for initializer in graph.initializer:
        fixed[initializer.name] = known([Dim(int(d), int(d)) for d in initializer.dims], int(initializer.data_type))
        if math.prod(initializer.dims) <= VALUE_LIMIT:
            fixed[initializer.name] = constant(*_tensor_value(initializer))
    nodes = []
    for node in graph.node:
        attrs = _attributes(node)
        if node.op_type == "Constant":
            fixed[node.output[0]] = _constant(attrs)
        elif node.op_type in RULES or node.op_type in COSTLY or node.op_type in ELEMENTWISE:
            nodes.append((node.op_type, node.name, list(node.input), list(node.output), attrs))
        else:
            raise Refused(f"node {node.name!r}: operator {node.op_type} has no size rule")
    return Prepared(nodes, fixed, [i.name for i in graph.input], graph.output[0].name if graph.output else "")


def graph_work(prepared: Prepared, batch: tuple[int, int], sequence: tuple[int, int]) -> Work:
    """The bytes, multiply-adds and output shape of one run on int64 inputs of shape (batch, sequence),
    for every size in those intervals. Refused when some size has no bound."""
    tensors = dict(prepared.fixed)
    for name in prepared.inputs:  # the same two sizes for both inputs
        tensors[name] = Tensor([Dim(*batch, "batch"), Dim(*sequence, "sequence")], INT64)
    total, multiply_adds = sum(tensors[name].bytes for name in prepared.inputs), 0
    with np.errstate(all="ignore"):
        for op, name, inputs, outputs, attrs in prepared.nodes:
            if any(i and i not in tensors for i in inputs):
                raise Refused(f"node {name!r} ({op}) reads a tensor no earlier node makes")
            args = [tensors[i] if i else None for i in inputs]
            try:
                if op in COSTLY:
                    made, cost = COSTLY[op](attrs, args)
                    multiply_adds += cost
                else:
                    made = RULES[op](attrs, args) if op in RULES else elementwise(op, attrs, args)
            except Refused as error:
                raise Refused(f"node {name!r} ({op}): {error}") from None
            except (ValueError, IndexError, TypeError, KeyError, OverflowError, AttributeError) as error:
                raise Refused(f"node {name!r} ({op}): inconsistent inputs ({str(error)[:80]})") from None
            for output, tensor in zip(outputs, made):
                if output:
                    tensors[output] = tensor
                    total += tensor.bytes
    if prepared.output not in tensors:
        raise Refused("no node makes the graph's output")
    return Work(total, multiply_adds, tensors[prepared.output].shape)
