"""Choosing where tensors live: "auto" takes CUDA when there is one."""
from __future__ import annotations

import torch

DEVICE_CHOICES = ("auto", "cpu", "cuda")


class DeviceError(ValueError):
    pass


def cuda_available() -> bool:
    return torch.cuda.is_available()


def resolve_device(name: str = "auto") -> torch.device:
    name = (name or "auto").lower()
    if name == "auto":
        return torch.device("cuda" if cuda_available() else "cpu")
    if name.startswith("cuda") or name == "gpu":
        if not cuda_available():
            raise DeviceError("a GPU was requested but PyTorch sees no CUDA device here; choose the CPU or auto")
        return torch.device("cuda" if name == "gpu" else name)
    if name == "cpu":
        return torch.device("cpu")
    raise DeviceError(f"unknown device {name!r}; expected one of {', '.join(DEVICE_CHOICES)}")


def describe_devices() -> str:
    if cuda_available():
        return f"CUDA: {torch.cuda.get_device_name(0)} ({torch.cuda.device_count()} device(s))"
    return "no CUDA device visible to PyTorch (CPU only)"
