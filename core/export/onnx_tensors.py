"""A tensor as ``core.export.onnx_bounds`` knows it before a graph runs, and the element-wise operators.

Each dimension is a ``Dim``: an interval ``lo`` .. ``hi`` and, when it is known to be one of the
input's dimensions, that dimension's name (``sym``), so that ``(batch, sequence, 384)`` reshaped to
``(batch, sequence, -1, 32)`` gives 12, not anything up to 384 x batch x sequence / 32. A small tensor
of a known shape (shapes, axes, counts: at most ``VALUE_LIMIT`` elements) also carries its values as
element-wise intervals, and for each value the name of the dimension it equals, if any: so arithmetic
on a shape (``Shape`` -> ``Gather`` -> ``Concat`` -> ``Reshape``) keeps a bound. Interval arithmetic
holds for every input in the intervals, so no input the backend feeds makes a tensor larger than the
walk says.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

VALUE_LIMIT = 64  # elements: a tensor this small and of a known shape carries its values
FLOAT, UINT8, INT32, INT64, BOOL = 1, 2, 6, 7, 9  # onnx.TensorProto data types
INTEGERS = {2, 3, 4, 5, 6, 7, 9, 12, 13}
ITEMSIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}


class Refused(Exception):
    """A graph whose sizes cannot be bounded; the message says why."""


class Dim(NamedTuple):
    lo: int
    hi: int
    sym: object = None  # two dimensions with the same sym have the same size at run time


ONE = Dim(1, 1)
Shape = list[Dim]


def is_one(d: Dim) -> bool:
    return d.lo == d.hi == 1


@dataclass
class Tensor:
    """``shape``: a ``Dim`` per dimension; ``lo`` / ``hi``: the values' bounds (float64 arrays of the
    exact shape), or None when the values are unknown (data, or too large to follow); ``syms``: for
    each value, the sym of the dimension it equals, or None."""
    shape: Shape
    dtype: int
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    syms: np.ndarray | None = None

    def values(self) -> tuple[np.ndarray, np.ndarray]:
        if self.lo is None:
            raise Refused("a size computed from the data, not from the input's shape")
        return self.lo, self.hi

    def exact(self) -> np.ndarray:
        """The values, which must be known exactly (an axis, a permutation, a slice's bounds)."""
        lo, hi = self.values()
        if not np.array_equal(lo, hi):
            raise Refused("an axis or an index that is not a constant")
        return lo

    @property
    def bytes(self) -> int:
        return numel(self.shape) * ITEMSIZE.get(self.dtype, 8)


def exact_shape(shape: Shape) -> bool:
    return all(d.lo == d.hi for d in shape)


def numel(shape: Shape, end: int = 1) -> int:
    """The most (``end=1``) or fewest (``end=0``) elements a tensor of ``shape`` holds."""
    return math.prod(d[end] for d in shape)


def no_syms(shape: list[int]) -> np.ndarray:
    return np.full(shape, None, dtype=object)


def known(shape: Shape, dtype: int, lo=None, hi=None, syms=None) -> Tensor:
    """A tensor of ``shape`` whose values lie in ``lo`` .. ``hi`` (kept only when it is small and its
    shape exact; ``hi`` defaults to ``lo``), ``syms`` naming the dimensions they equal."""
    shape = [d if isinstance(d, Dim) else Dim(int(d[0]), int(d[1])) for d in shape]
    if any(d.lo < 0 or d.hi < d.lo for d in shape):  # a negative size would hide others in a sum
        raise Refused("a tensor of negative size")
    if lo is None or not exact_shape(shape) or numel(shape) > VALUE_LIMIT:
        return Tensor(shape, dtype)
    dims = [d.lo for d in shape]
    lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), dims)
    hi = lo if hi is None else np.broadcast_to(np.asarray(hi, dtype=np.float64), dims)
    syms = no_syms(dims) if syms is None else np.broadcast_to(np.asarray(syms, dtype=object), dims)
    return Tensor(shape, dtype, lo, hi, syms)


def constant(array: np.ndarray, dtype: int) -> Tensor:
    return known([Dim(n, n) for n in array.shape], dtype, array if array.size <= VALUE_LIMIT else None)


def merge(dims: list[Dim]) -> Dim:
    """Dimensions that must agree (or be 1): the largest bounds, and their sym if they all share one."""
    syms = {d.sym for d in dims}
    return Dim(max(d.lo for d in dims), max(d.hi for d in dims), syms.pop() if len(syms) == 1 else None)


def broadcast(*shapes: Shape) -> Shape:
    """numpy's broadcasting over intervals: a dimension known to be 1 takes the other's size."""
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = [s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0]
        out.append(merge([d for d in dims if not is_one(d)] or [ONE]))
    return out


# ---- element-wise operators --------------------------------------------------------------------
def _corners(function, a: tuple, b: tuple):
    results = [function(x, y) for x in a for y in b]
    return np.minimum.reduce(results), np.maximum.reduce(results)


def _arithmetic(op: str, a: Tensor, b: Tensor, integer: bool, fmod: bool):
    (alo, ahi), (blo, bhi) = a.values(), b.values()
    if op == "Add":
        return alo + blo, ahi + bhi
    if op == "Sub":
        return alo - bhi, ahi - blo
    if op == "Mul":
        return _corners(np.multiply, (alo, ahi), (blo, bhi))
    if ((blo <= 0) & (bhi >= 0)).any():
        raise Refused(f"{op} by a number that may be 0")
    if op == "Div":
        lo, hi = _corners(np.divide, (alo, ahi), (blo, bhi))
        return (np.trunc(lo), np.trunc(hi)) if integer else (lo, hi)
    # Mod: exact on exact values, else within the divisor's size either side of 0.
    if np.array_equal(alo, ahi) and np.array_equal(blo, bhi):
        value = (np.fmod if fmod or not integer else np.mod)(alo, blo)
        return value, value
    bound = np.maximum(np.abs(blo), np.abs(bhi)) + 0 * alo
    return -bound, bound


def _logical(op: str, args: list[Tensor]):
    """True (1) or false (0) where the intervals decide it, else anything from 0 to 1."""
    (alo, ahi), *rest = [t.values() for t in args]
    if op == "Not":
        return 1 - ahi, 1 - alo
    if op == "IsNaN":
        return np.zeros_like(alo), np.where(np.isfinite(alo) & (alo == ahi), 0.0, 1.0)
    blo, bhi = rest[0]
    if op == "And":
        return np.minimum(alo, blo), np.minimum(ahi, bhi)
    if op == "GreaterOrEqual":
        return (alo >= bhi).astype(np.float64), (ahi >= blo).astype(np.float64)
    same = (args[0].syms == args[1].syms) & (args[0].syms != None)  # noqa: E711 - element-wise
    lo = ((alo == ahi) & (blo == bhi) & (alo == blo)) | same
    hi = ~((ahi < blo) | (bhi < alo))
    return lo.astype(np.float64), hi.astype(np.float64)


def _passing(op: str, args: list[Tensor | None], dtype: int):
    """Identity, Cast, Relu and Clip: monotone, so the bounds go through them."""
    lo, hi = args[0].values()
    if op == "Relu":
        lo, hi = np.maximum(lo, 0), np.maximum(hi, 0)
    elif op == "Clip":
        if len(args) > 1 and args[1] is not None:
            lo, hi = np.maximum(lo, args[1].values()[0]), np.maximum(hi, args[1].values()[0])
        if len(args) > 2 and args[2] is not None:
            lo, hi = np.minimum(lo, args[2].values()[1]), np.minimum(hi, args[2].values()[1])
    elif op == "Cast" and dtype == BOOL:
        lo, hi = (lo > 0) | (hi < 0), (lo != 0) | (hi != 0)
        lo, hi = lo.astype(np.float64), hi.astype(np.float64)
    elif op == "Cast" and dtype in INTEGERS:
        lo, hi = np.floor(lo), np.ceil(hi)  # the cast truncates towards 0: inside these
    return lo, hi


# The shape of the first input (the others are parameters); the rest broadcast all their inputs.
_FIRST_SHAPE = {"Cast", "Identity", "Relu", "Clip", "Erf", "IsNaN", "Not", "Softmax", "DequantizeLinear"}
_RESULT_TYPE = {"Equal": BOOL, "GreaterOrEqual": BOOL, "And": BOOL, "Not": BOOL, "IsNaN": BOOL,
                "DequantizeLinear": FLOAT}
ELEMENTWISE = ("Add", "Sub", "Mul", "Div", "Mod", "Equal", "GreaterOrEqual", "And", "Not", "IsNaN", "Where",
               "Identity", "Cast", "Relu", "Clip", "Erf", "Softmax", "DequantizeLinear")


def elementwise(op: str, attrs: dict, args: list[Tensor | None]) -> list[Tensor]:
    """One element-wise operator: the broadcast shape, and the values where they can be followed."""
    present = [t for t in args if t is not None]
    shape = present[0].shape if op in _FIRST_SHAPE else broadcast(*[t.shape for t in present])
    dtype = int(attrs["to"]) if op == "Cast" else _RESULT_TYPE.get(op, present[1 if op == "Where" else 0].dtype)
    syms = None
    try:
        if op in ("Add", "Sub", "Mul", "Div", "Mod"):
            lo, hi = _arithmetic(op, args[0], args[1], dtype in INTEGERS, bool(attrs.get("fmod")))
        elif op in ("Equal", "GreaterOrEqual", "And", "Not", "IsNaN"):
            lo, hi = _logical(op, present)
        elif op == "Where":
            (clo, chi), (xlo, xhi), (ylo, yhi) = (t.values() for t in args)
            if np.array_equal(clo, chi):
                lo, hi = np.where(clo != 0, xlo, ylo), np.where(clo != 0, xhi, yhi)
                syms = np.where(clo != 0, args[1].syms, args[2].syms)
            else:
                lo, hi = np.minimum(xlo, ylo), np.maximum(xhi, yhi)
        elif op in ("Identity", "Cast", "Relu", "Clip"):
            lo, hi = _passing(op, args, dtype)
            syms = args[0].syms if op in ("Identity", "Cast") and dtype != BOOL else None
        else:
            lo = hi = None
    except Refused:  # values unknown: the tensor still has its shape
        lo = hi = None
    return [known(shape, dtype, lo, hi, syms)]
