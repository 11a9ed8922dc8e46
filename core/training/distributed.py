"""Multi-process training under ``torchrun --nproc_per_node N -m core train ...``: each global batch split into N
equal slices, the model in DistributedDataParallel and, for the in-batch losses, every rank's vectors all-gathered
with autograd, so negatives come from the whole global batch as in one process (the losses never gather).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0  # index on this machine (selects the GPU)

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


SINGLE = DistContext()


def init_from_env(device: str = "auto") -> DistContext:
    """Join the process group torchrun describes in the environment (a no-op otherwise)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return SINGLE
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = device != "cpu" and torch.cuda.is_available()
    if not dist.is_initialized():  # nccl refuses CPU tensors, and the run's flags (broadcast_flag) live on the CPU
        dist.init_process_group(backend="cpu:gloo,cuda:nccl" if use_cuda else "gloo")
    if use_cuda:
        torch.cuda.set_device(local_rank)
    return DistContext(rank, world_size, local_rank)


def current() -> DistContext:
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return DistContext(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))
    return SINGLE


def local_slice(rows, context: DistContext):
    """This rank's equal share of a global batch of row indices (the remainder is dropped)."""
    if not context.enabled:
        return rows
    share = len(rows) // context.world_size
    return rows[context.rank * share : (context.rank + 1) * share]


def gather_batch(v: torch.Tensor) -> torch.Tensor:
    """Every rank's (b, d) vectors as the global (W*b, d), keeping gradients. Each rank computes the same loss L;
    the all-gather's backward gives each local slice W * dL/dv, and DDP's average over W ranks divides W out again:
    exactly dL/dtheta of one process on the whole batch."""
    context = current()
    if not context.enabled:
        return v
    from torch.distributed._functional_collectives import all_gather_single_autograd

    return all_gather_single_autograd(v.contiguous(), 0, dist.group.WORLD)


class GatheredOutputs(torch.nn.Module):
    """A DDP model (its hooks fire, gradients averaged) whose v1, v2 come back all-gathered; extra negatives pass
    through (hard negatives are refused across processes)."""

    def __init__(self, ddp: torch.nn.Module):
        super().__init__()
        self.ddp = ddp

    def forward(self, first, second, negatives=None):
        v1, v2, vn = self.ddp(first, second, negatives)  # (b, d), (b, d), (K, d) | None
        return gather_batch(v1), gather_batch(v2), vn  # (W*b, d), (W*b, d), (K, d) | None


def wrap(model: torch.nn.Module, device: torch.device, context: DistContext,
         gather_outputs: bool = False) -> torch.nn.Module:
    """The module to train through: the model itself in one process; else in DDP, with ``gather_outputs`` (the
    in-batch losses) its vectors all-gathered. Labelled per-pair losses need no gather."""
    if not context.enabled:
        return model
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index if device.index is not None else context.local_rank] if device.type == "cuda" else None
    ddp = DistributedDataParallel(model, device_ids=ids)
    return GatheredOutputs(ddp) if gather_outputs else ddp


def broadcast_flag(flag: bool) -> bool:
    """True on every rank when any rank says so (a cancel on rank 0 stops them all at once)."""
    context = current()
    if not context.enabled:
        return flag
    t = torch.tensor([1.0 if flag else 0.0])  # on the CPU: init_from_env's group always has gloo for it
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)
