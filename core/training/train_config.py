"""``TrainConfig``: the settings of one training loop (``core.training.trainer.Trainer``), checked when made."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TrainConfig:
    epochs: int = 3  # passes over the training batches
    batch_size: int = 64  # pairs per step and process; in-batch losses see all processes' pairs
    lr: float = 1e-3  # peak learning rate, reached after warm-up
    weight_decay: float = 0.0  # AdamW decoupled weight decay
    optimizer: str = "adamw"  # adam | adamw
    warmup_ratio: float = 0.1  # share of all steps spent warming up linearly; then linear decay to 0
    grad_clip: float = 1.0  # max gradient norm; 0 disables clipping
    seed: int = 0  # weights, batch order and dropout
    device: str = "auto"  # auto | cpu | cuda
    amp: bool = True  # float16 autocast on CUDA (ignored on CPU)
    patience: int = 2  # validations (epochs unless validate_every) without a better ROC AUC, then stop; 0 = off
    max_val_pairs: int = 5000  # validation pairs scored at each validation (a seeded subset if more)
    # Steps are counted over the whole run, so a one-epoch MiniLM run draws a curve, not one point.
    # When set, the best weights and patience count validations, not epochs; a validation falling on
    # an epoch's last step is that epoch's own (never scored twice).
    validate_every: int = 0  # validate after every this many steps too (0 = once per epoch)
    max_steps: int = 0  # stop after this many steps in all, ending with a validation (0 = no cap)
    max_minutes: float = 0.0  # stop (with a final validation) after this much training time; 0 = no cap
    length_buckets: bool = True  # batch pairs of similar length together: far less padding to compute

    def __post_init__(self):
        if self.optimizer not in ("adam", "adamw"):
            raise ValueError(f"optimizer must be adam or adamw, got {self.optimizer!r}")
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not self.lr > 0:
            raise ValueError("lr must be positive")
        if not self.max_minutes >= 0:
            raise ValueError("max_minutes must be 0 (no cap) or positive")
        if self.validate_every < 0:
            raise ValueError("validate_every must be 0 (once per epoch) or positive")
