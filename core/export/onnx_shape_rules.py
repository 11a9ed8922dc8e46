"""The size rule of every operator ``core.export.onnx_graph`` writes that is not element-wise (those are in
``core.export.onnx_tensors``), for the walk of ``core.export.onnx_bounds``.

A rule takes the node's attributes and its input ``Tensor``s and returns its output ``Tensor``s: each
dimension an interval (with the input dimension it equals, where known), and the values of small
tensors where they can be followed, so a size made from the input's shape (``ConstantOfShape``,
``Expand``, ``Range``, ``Reshape``, ``TopK``, ``Slice``) keeps a bound. A size made from values that are
not followed (the token ids, floats) raises ``Refused``. The rules in ``COSTLY`` also return their
multiply-adds (matrix products, LSTMs).
"""
from __future__ import annotations

import math

import numpy as np

from core.export.onnx_tensors import (
    FLOAT,
    INT32,
    INT64,
    ONE,
    UINT8,
    Dim,
    Refused,
    Tensor,
    broadcast,
    is_one,
    known,
    merge,
    numel,
)

_CLAMP = 2**62  # slice bounds beyond this mean "to the end"
_MAX_SCAN = 1 << 16  # dimension intervals up to this wide get exact slice lengths; wider ones a plain bound


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise Refused(f"axis {axis} outside a tensor of rank {rank}")
    return axis % max(rank, 1)


def _ints(tensor: Tensor) -> list[int]:
    return [int(v) for v in tensor.exact().reshape(-1)]


def _dims_from_values(tensor: Tensor) -> list[Dim]:
    """A 1-D tensor of sizes (ConstantOfShape's, Expand's) as dimensions."""
    lo, hi = tensor.values()
    if not np.isfinite(hi).all():
        raise Refused("a size with no bound")
    return [Dim(max(0, int(a)), max(0, int(b)), s) for a, b, s in zip(lo.reshape(-1), hi.reshape(-1),
                                                                    tensor.syms.reshape(-1))]


def _same_values(tensor: Tensor, shape, function, *args) -> Tensor:
    """``tensor`` rearranged by ``function`` (a reshape, a take, a slice...), its values and syms alike."""
    if tensor.lo is None:
        return known(shape, tensor.dtype)
    return known(shape, tensor.dtype, *(function(a, *args) for a in (tensor.lo, tensor.hi, tensor.syms)))


# ---- operators that move values, or make shapes from them --------------------------------------
def _shape(attrs, args):
    dims = args[0].shape[slice(attrs.get("start", 0), attrs.get("end"))]
    n = Dim(len(dims), len(dims))
    return [known([n], INT64, [d.lo for d in dims], [d.hi for d in dims], [d.sym for d in dims])]


def _gather(attrs, args):
    data, indices = args
    axis = _axis(int(attrs.get("axis", 0)), len(data.shape))
    shape = data.shape[:axis] + indices.shape + data.shape[axis + 1:]
    if data.lo is None or indices.lo is None or not np.array_equal(indices.lo, indices.hi):
        return [known(shape, data.dtype)]
    picked = indices.lo.astype(np.int64)
    if not ((picked >= -data.lo.shape[axis]) & (picked < data.lo.shape[axis])).all():
        raise Refused("Gather outside its data")
    return [_same_values(data, shape, np.take, picked, axis)]


def _concat(attrs, args):
    axis = _axis(int(attrs["axis"]), len(args[0].shape))
    shape = [merge([t.shape[i] for t in args]) for i in range(len(args[0].shape))]
    shape[axis] = Dim(sum(t.shape[axis].lo for t in args), sum(t.shape[axis].hi for t in args))
    if any(t.lo is None for t in args):
        return [known(shape, args[0].dtype)]
    return [known(shape, args[0].dtype, *(np.concatenate([getattr(t, part) for t in args], axis)
                                          for part in ("lo", "hi", "syms")))]


def _reshaped(tensor: Tensor, shape) -> Tensor:
    """``tensor``'s values (if known) laid out in ``shape``."""
    if tensor.lo is None or numel(shape) != tensor.lo.size or numel(shape, 0) != tensor.lo.size:
        return known(shape, tensor.dtype)
    return _same_values(tensor, shape, np.reshape, [d.lo for d in shape])


def _unsqueeze(attrs, args):
    rank = len(args[0].shape) + len(_ints(args[1]))
    shape = list(args[0].shape)
    for axis in sorted(_axis(a, rank) for a in _ints(args[1])):
        shape.insert(axis, ONE)
    return [_reshaped(args[0], shape)]


def _squeeze(attrs, args):
    shape = args[0].shape
    if len(args) > 1 and args[1] is not None:
        axes = {_axis(a, len(shape)) for a in _ints(args[1])}
    else:
        if any(d.lo <= 1 < d.hi for d in shape):
            raise Refused("Squeeze of a dimension that may or may not be 1")
        axes = {i for i, d in enumerate(shape) if is_one(d)}
    return [_reshaped(args[0], [d for i, d in enumerate(shape) if i not in axes])]


def _slice_lengths(n: np.ndarray, start: int, end: int, step: int) -> np.ndarray:
    """ONNX Slice's output length along one axis of length ``n`` (an array of lengths)."""
    first = np.where(start < 0, start + n, start)
    last = np.where(end < 0, end + n, end)
    if step > 0:
        first, last = np.clip(first, 0, n), np.clip(last, 0, n)
        return np.maximum(0, -((first - last) // step))
    first, last = np.clip(first, 0, np.maximum(n - 1, 0)), np.clip(last, -1, np.maximum(n - 1, 0))
    return np.where(n > 0, np.maximum(0, -((last - first) // -step)), 0)


def _slice_length(dim: Dim, start: tuple[int, int], end: tuple[int, int], step: int) -> Dim:
    """One axis after slicing it from ``start`` to ``end`` (each an interval) by ``step``."""
    lo, hi = dim.lo, dim.hi
    if start == (0, 0) and step == 1 and end[0] >= hi:
        return dim  # the whole axis
    if start[0] == start[1] and end[0] == end[1] and hi - lo <= _MAX_SCAN:
        lengths = _slice_lengths(np.arange(lo, hi + 1, dtype=np.int64), start[0], end[0], step)
        return Dim(int(lengths.min()), int(lengths.max()))
    if step > 0 and start[0] >= 0 and end[0] >= 0:
        # ceil((min(end, n) - min(start, n)) / step): rising with end and n, falling with start.
        def length(n, first, last):
            return max(0, -((min(first, n) - min(last, n)) // step))
        return Dim(length(lo, start[1], end[0]), length(hi, start[0], end[1]))
    return Dim(0, hi)  # a slice is never longer than its axis


def _bounds(tensor: Tensor) -> list[tuple[int, int]]:
    lo, hi = tensor.values()
    clamp = lambda v: int(max(-_CLAMP, min(float(v), _CLAMP)))  # noqa: E731 - "to the end" is 2**63 - 1
    return [(clamp(a), clamp(b)) for a, b in zip(lo.reshape(-1), hi.reshape(-1))]


def _slice(attrs, args):
    data = args[0]
    starts, ends = _bounds(args[1]), _bounds(args[2])
    rank = len(data.shape)
    axes = _ints(args[3]) if len(args) > 3 and args[3] is not None else list(range(len(starts)))
    steps = _ints(args[4]) if len(args) > 4 and args[4] is not None else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps) or 0 in steps:
        raise Refused("Slice with inconsistent starts, ends, axes or steps")
    shape, cuts = list(data.shape), [slice(None)] * rank
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = _axis(axis, rank)
        shape[axis] = _slice_length(shape[axis], start, end, step)
        cuts[axis] = slice(start[0], end[0], step)
    if any(a != b for a, b in starts + ends):
        return [known(shape, data.dtype)]
    return [_same_values(data, shape, lambda a: a[tuple(cuts)])]


def _reshape(attrs, args):
    data, wanted = args
    lo, hi = wanted.values()
    zero_copies = not attrs.get("allowzero")
    shape, infer, copied = [], None, set()
    for i, (a, b, sym) in enumerate(zip(lo.reshape(-1), hi.reshape(-1), wanted.syms.reshape(-1))):
        if a == b == -1:
            infer = i
            shape.append(Dim(0, 0))
        elif a == b == 0 and zero_copies and i < len(data.shape):
            copied.add(i)  # 0: this dimension of the input, as it is
            shape.append(data.shape[i])
        elif a < 0 or (a == 0 and zero_copies):
            raise Refused("Reshape to a size that may be -1 or 0")
        else:
            shape.append(Dim(int(a), int(b), sym))
    if infer is not None:
        # -1 is what the other dimensions leave: the copied ones, and those of the same sym on both
        # sides, cancel out.
        given = [d for i, d in enumerate(data.shape) if i not in copied]
        others = [d for i, d in enumerate(shape) if i != infer and i not in copied]
        for d in list(others):
            twin = next((g for g in given if d.sym is not None and g.sym == d.sym), None)
            if twin is not None:
                given.remove(twin)
                others.remove(d)
        sym = given[0].sym if len(given) == 1 and all(is_one(d) for d in others) else None
        shape[infer] = Dim(numel(given, 0) // max(1, numel(others)), numel(given) // max(1, numel(others, 0)), sym)
    return [_reshaped(data, shape)]


def _transpose(attrs, args):
    rank = len(args[0].shape)
    perm = list(attrs.get("perm", range(rank - 1, -1, -1)))
    if sorted(perm) != list(range(rank)):
        raise Refused("Transpose with a permutation of another rank")
    return [_same_values(args[0], [args[0].shape[p] for p in perm], np.transpose, perm)]


def _expand(attrs, args):
    shape = broadcast(args[0].shape, _dims_from_values(args[1]))
    if args[0].lo is None:
        return [known(shape, args[0].dtype)]
    return [known(shape, args[0].dtype, args[0].lo, args[0].hi, args[0].syms)]


def _constant_of_shape(attrs, args):
    fill, dtype = attrs.get("value", (np.zeros(1), FLOAT))
    return [known(_dims_from_values(args[0]), dtype, fill.reshape(-1)[0])]


def _range(attrs, args):
    start, limit, delta = args
    (slo, shi), (llo, lhi), (dlo, dhi) = ((float(a.reshape(-1)[0]), float(b.reshape(-1)[0]))
                                          for a, b in (t.values() for t in args))
    if dlo <= 0 <= dhi or not all(map(math.isfinite, (slo, shi, llo, lhi, dlo, dhi))):
        raise Refused("Range with a step that may be 0, or no bound")
    if dlo > 0:
        most, least = math.ceil(max(0.0, lhi - slo) / dlo), math.ceil(max(0.0, llo - shi) / dhi)
    else:
        most, least = math.ceil(max(0.0, shi - llo) / -dhi), math.ceil(max(0.0, slo - lhi) / -dlo)
    if slo == shi and llo == lhi and dlo == dhi:
        return [known([Dim(most, most)], start.dtype, np.arange(slo, llo, dlo)[:most])]
    # 0, 1, ... up to a dimension's size: as long as that dimension.
    sym = limit.syms.reshape(-1)[0] if (slo, shi, dlo, dhi) == (0, 0, 1, 1) else None
    return [known([Dim(least, most, sym)], start.dtype)]


def _reduce(op: str):
    def rule(attrs, args):
        data = args[0]
        rank = len(data.shape)
        axes = attrs.get("axes")
        if axes is None and len(args) > 1 and args[1] is not None:
            axes = _ints(args[1])
        if not axes:
            if attrs.get("noop_with_empty_axes"):
                return [data]
            axes = list(range(rank))
        axes = sorted({_axis(a, rank) for a in axes})
        keep = attrs.get("keepdims", 1)
        shape = [ONE if i in axes else d for i, d in enumerate(data.shape) if keep or i not in axes]
        lo = hi = None
        # Sums and maxima are monotone; a product only over values that are never negative.
        if data.lo is not None and (op in ("ReduceSum", "ReduceMax") or op == "ReduceProd" and (data.lo >= 0).all()):
            function = {"ReduceSum": np.sum, "ReduceMax": np.max, "ReduceProd": np.prod}[op]
            lo, hi = (function(a, axis=tuple(axes), keepdims=bool(keep)) for a in (data.lo, data.hi))
        return [known(shape, data.dtype, lo, hi)]
    return rule


def _top_k(attrs, args):
    data, k = args
    lo, hi = k.values()
    axis = _axis(int(attrs.get("axis", -1)), len(data.shape))
    shape, d = list(data.shape), data.shape[axis]
    shape[axis] = Dim(max(0, min(int(lo.min()), d.lo)), max(0, min(int(hi.max()), d.hi)), k.syms.reshape(-1)[0])
    return [known(shape, data.dtype), known(shape, INT64)]


def _flatten(attrs, args):
    shape = args[0].shape
    axis = _axis(int(attrs.get("axis", 1)), len(shape) + 1)
    return [known([Dim(numel(part, 0), numel(part)) for part in (shape[:axis], shape[axis:])], args[0].dtype)]


# ---- arithmetic-heavy operators: (outputs, multiply-adds) --------------------------------------
def _matmul(op: str):
    def rule(attrs, args):
        a, b = (list(t.shape) for t in args[:2])
        if not a or not b:
            raise Refused(f"{op} of a scalar")
        a_vector, b_vector = len(a) == 1, len(b) == 1
        a, b = ([ONE] + a if a_vector else a), (b + [ONE] if b_vector else b)
        shape = broadcast(a[:-2], b[:-2]) + ([] if a_vector else [a[-2]]) + ([] if b_vector else [b[-1]])
        dtype = INT32 if op == "MatMulInteger" else args[0].dtype
        return [known(shape, dtype)], numel(shape) * a[-1].hi
    return rule


def _gemm(attrs, args):
    a, b = args[0].shape, args[1].shape
    if len(a) != 2 or len(b) != 2:
        raise Refused("Gemm of tensors that are not matrices")
    rows, inner = (a[1], a[0]) if attrs.get("transA") else (a[0], a[1])
    columns = b[0] if attrs.get("transB") else b[1]
    return [known([rows, columns], args[0].dtype)], rows.hi * columns.hi * inner.hi


def _lstm(attrs, args):
    x = args[0].shape
    hidden = int(attrs.get("hidden_size", 0))
    directions = 2 if attrs.get("direction", b"forward") in (b"bidirectional", "bidirectional") else 1
    if len(x) != 3 or hidden < 1:
        raise Refused("LSTM without a 3-D input or a hidden size")
    ways, width = Dim(directions, directions), Dim(hidden, hidden)
    if attrs.get("layout"):  # batch first
        steps, batch = x[1], x[0]
        y, state = [batch, steps, ways, width], [batch, ways, width]
    else:
        steps, batch = x[0], x[1]
        y, state = [steps, ways, batch, width], [ways, batch, width]
    work = steps.hi * batch.hi * directions * 4 * hidden * (x[2].hi + hidden)
    return [known(y, args[0].dtype), known(state, args[0].dtype), known(state, args[0].dtype)], work


def _layer_norm(attrs, args):
    shape = args[0].shape
    axis = _axis(int(attrs.get("axis", -1)), len(shape))
    statistics = shape[:axis] + [ONE] * (len(shape) - axis)
    return [known(shape, args[0].dtype), known(statistics, FLOAT), known(statistics, FLOAT)]


RULES = {
    "Shape": _shape, "Gather": _gather, "Concat": _concat, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze,
    "Slice": _slice, "Reshape": _reshape, "Transpose": _transpose, "Expand": _expand,
    "ConstantOfShape": _constant_of_shape, "Range": _range, "TopK": _top_k, "Flatten": _flatten,
    "ReduceSum": _reduce("ReduceSum"), "ReduceMax": _reduce("ReduceMax"), "ReduceProd": _reduce("ReduceProd"),
    "ReduceL2": _reduce("ReduceL2"), "LayerNormalization": _layer_norm,
    "DynamicQuantizeLinear": lambda attrs, args: [known(args[0].shape, UINT8), known([], FLOAT), known([], UINT8)],
    "GatherElements": lambda attrs, args: [known(args[1].shape, args[0].dtype)],
    "ScatterElements": lambda attrs, args: [known(args[0].shape, args[0].dtype)],
}
COSTLY = {"MatMul": _matmul("MatMul"), "MatMulInteger": _matmul("MatMulInteger"), "Gemm": _gemm,
          "LSTM": _lstm, "DynamicQuantizeLSTM": _lstm}
