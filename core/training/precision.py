"""How a training step computes: the autocast dtype and whether a gradient scaler is needed, per device.

``--precision auto`` takes bf16 on a CUDA device that supports it (bf16 keeps float32's exponent range,
so no scaler is needed), fp16 with a ``GradScaler`` on other CUDA devices, and fp32 on the CPU, where
autocast buys little on 2 cores. bf16 may still be asked for on the CPU (``torch.autocast("cpu")``
supports it), which is also how CI tests the autocast path without a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

PRECISIONS = ("auto", "fp32", "bf16", "fp16")


@dataclass(frozen=True)
class AutocastPlan:
    enabled: bool  # run the forward pass under torch.autocast
    dtype: torch.dtype | None  # the autocast dtype; None when disabled (plain fp32)
    use_scaler: bool  # scale the loss with a GradScaler (fp16 only: its range underflows small gradients)


FP32 = AutocastPlan(False, None, False)


def autocast_plan(device_type: str, precision: str, bf16_supported: bool) -> AutocastPlan:
    """The autocast plan for ``precision`` on a device of ``device_type`` ("cuda", "cpu").

    ``bf16_supported`` is ``torch.cuda.is_bf16_supported()`` on CUDA (ignored elsewhere: the CPU
    always has bf16 autocast). Raises ValueError for a combination that cannot run: fp16 off CUDA,
    bf16 on a CUDA device without it, an unknown precision.

    Example: ("cuda", "auto", True) -> bf16, no scaler; ("cuda", "auto", False) -> fp16 with a
    scaler; ("cpu", "auto", False) -> fp32.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    cuda = device_type == "cuda"
    if precision == "fp32" or (precision == "auto" and not cuda):
        return FP32
    if precision == "auto":
        return AutocastPlan(True, torch.bfloat16, False) if bf16_supported else AutocastPlan(True, torch.float16, True)
    if precision == "bf16":
        if cuda and not bf16_supported:
            raise ValueError("precision bf16 is not supported by this GPU; use fp16 or auto")
        return AutocastPlan(True, torch.bfloat16, False)
    if not cuda:
        raise ValueError(f"precision fp16 needs a CUDA device, not {device_type}; use bf16 or fp32 there")
    return AutocastPlan(True, torch.float16, True)


def device_autocast_plan(device: torch.device, precision: str) -> AutocastPlan:
    """``autocast_plan`` for ``device``, asking CUDA whether it supports bf16."""
    bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
    return autocast_plan(device.type, precision, bf16)


def compile_mode(device_type: str) -> str:
    """torch.compile's mode for a training step: CUDA graphs on CUDA (the steps there are bound by kernel
    launches), Inductor's default on the CPU (CUDA graphs mean nothing there)."""
    return "reduce-overhead" if device_type == "cuda" else "default"
