"""One optimizer step of the trainer, in two halves: the loss of a batch, then the update it gives.

The trainer reads (or queues) the loss between the halves: a loss read before the update is checked before it can
reach the weights. Neither half waits for the device: fused AdamW and the gradient scaler keep their inf checks on it.
"""
from __future__ import annotations

import contextlib
from typing import Callable

import torch

from core.text.pair_table import Batch
from core.training.precision import AutocastPlan


class TrainStep:
    """The forward pass (under autocast) and the objective, then zero_grad, the backward pass (scaled for fp16),
    gradient clipping, the optimizer step and the schedule's step."""

    def __init__(self, module: torch.nn.Module, model: torch.nn.Module, objective: Callable,
                 optimizer: torch.optim.Optimizer, scheduler, autocast: AutocastPlan, device: torch.device,
                 grad_clip: float, cuda_graphs: bool):
        self.module = module  # what the forward pass calls: the model, or its distributed/compiled wrapper
        self.model = model  # whose gradients are clipped
        self.objective = objective
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.autocast = autocast
        self.device = device
        self.grad_clip = grad_clip  # 0: no clipping
        self.cuda_graphs = cuda_graphs  # the module replays CUDA graphs (compiled with mode reduce-overhead)
        # fp16's range underflows small gradients: the scaler scales the loss up and the gradients back down
        self.scaler = torch.amp.GradScaler(device.type) if autocast.use_scaler else None

    def loss(self, batch: Batch) -> torch.Tensor:
        """The objective on ``batch``: a 0-d tensor on the device, its graph kept for ``update``."""
        batch = batch.to(self.device)
        if self.cuda_graphs:  # a new step: the graphs may reuse the last step's output memory
            torch.compiler.cudagraph_mark_step_begin()
        with self._autocast():
            v1, v2, vn = self.module(batch.first, batch.second, batch.negatives)  # (B, d), (B, d), (K, d)|None
            return self.objective(v1.float(), v2.float(), batch.labels, None if vn is None else vn.float())

    def update(self, loss: torch.Tensor) -> None:
        """The weights moved down ``loss``'s gradient, and the learning rate to its next step."""
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)  # clipping sees the true gradients
        else:
            loss.backward()
        if self.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()

    def _autocast(self):
        if not self.autocast.enabled:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast.dtype)
