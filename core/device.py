"""Choosing where tensors live: "auto" takes CUDA when there is one."""
from __future__ import annotations

import re

import torch

DEVICE_CHOICES = ("auto", "cpu", "cuda")
# What a training step may compute in (core.training.trainer.autocast_plan): here, not beside the trainer, so that
# the CLI's parser lists them without importing training.
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DEVICE_PATTERN = re.compile(r"^(auto|cpu|gpu|cuda(:\d{1,3})?)$")  # cuda:N names one GPU of several


class DeviceError(ValueError):
    pass


def cuda_available() -> bool:
    return torch.cuda.is_available()


def checked_device_name(name: str) -> str:
    """``name`` lowercased if it is auto, cpu, gpu, cuda or cuda:N, else DeviceError (not whether it is here)."""
    lowered = (name or "auto").strip().lower()
    if not DEVICE_PATTERN.match(lowered):
        raise DeviceError(f"unknown device {name!r}; expected one of {', '.join(DEVICE_CHOICES)} or cuda:N")
    return lowered


def resolve_device(name: str = "auto") -> torch.device:
    name = checked_device_name(name)
    if name == "auto":
        return torch.device("cuda" if cuda_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if not cuda_available():
        raise DeviceError("a GPU was requested but PyTorch sees no CUDA device here; choose the CPU or auto")
    device = torch.device("cuda" if name == "gpu" else name)
    if device.index is not None and device.index >= torch.cuda.device_count():
        raise DeviceError(f"{name} names a GPU that is not here: PyTorch sees {torch.cuda.device_count()} "
                          f"(cuda:0 to cuda:{torch.cuda.device_count() - 1})")
    return device

