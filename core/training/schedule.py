"""The learning-rate schedule shared by the trainer and the cross-encoder's own loop
(``core.training.distillation``): linear warm-up, then linear decay to 0."""
from __future__ import annotations

import torch


def warmup_then_linear_decay(optimizer, total_steps: int, warmup_ratio: float) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning rate rises linearly over the first ``warmup_ratio`` of ``total_steps``, then falls
    linearly to 0 at the last step (the schedule of BERT fine-tuning)."""
    warmup = int(warmup_ratio * total_steps)
    total = max(1, total_steps)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
