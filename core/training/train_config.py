"""``TrainConfig``: the settings of one training loop (``core.training.trainer.Trainer``), checked when made."""
from __future__ import annotations

from dataclasses import InitVar, dataclass

from core.training.precision import PRECISIONS


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
    # auto | fp32 | bf16 | fp16 (core.training.precision): auto is bf16 on a CUDA device that has it, fp16 with a
    # gradient scaler on other CUDA devices, fp32 on the CPU.
    precision: str = "auto"
    # torch.compile the step's forward pass (CUDA graphs on CUDA; batches then padded to a few fixed widths). Off by
    # default: on a GPU it makes MiniLM's steps several times faster, but its first steps compile for tens of
    # seconds, which only runs of minutes earn back (the minilm-quora-gpu preset turns it on); on 2 CPU cores it
    # gave no reliable gain (bench/compile_speed.py; figures in docs/BENCHMARKS.md).
    compile: bool = False
    patience: int = 2  # validations (epochs unless validate_every) without a better ROC AUC, then stop; 0 = off
    max_val_pairs: int = 5000  # validation pairs scored at each validation (a seeded subset if more)
    # Steps are counted over the whole run, so a one-epoch MiniLM run draws a curve, not one point.
    # When set, the best weights and patience count validations, not epochs; a validation falling on
    # an epoch's last step is that epoch's own (never scored twice).
    validate_every: int = 0  # validate after every this many steps too (0 = once per epoch)
    # Also score the starting weights before any step: a fine-tune of a pretrained encoder then never keeps weights
    # that validate worse than where it started (the pipeline turns it on for pretrained starts).
    validate_at_start: bool = False
    max_steps: int = 0  # stop after this many steps in all, ending with a validation (0 = no cap)
    max_minutes: float = 0.0  # stop (with a final validation) after this much training time; 0 = no cap
    length_buckets: bool = True  # batch pairs of similar length together: far less padding to compute
    # Steps between reading the loss back to the host. On CUDA each read waits for the GPU to finish the queued
    # steps (a host sync), so between reads the host runs ahead, building and queueing the next batches. The
    # progress callbacks see the last loss read; a non-finite loss fails the run at the next read, naming its
    # step. 0 = auto: every step on the CPU (free there), every LOSS_READ_EVERY_CUDA steps on CUDA.
    read_loss_every: int = 0
    # The switch configs saved before ``precision`` carry: False (no autocast) reads as precision fp32.
    amp: InitVar[bool | None] = None

    def __post_init__(self, amp: bool | None):
        if amp is False and self.precision == "auto":
            self.precision = "fp32"
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.optimizer not in ("adam", "adamw"):
            raise ValueError(f"optimizer must be adam or adamw, got {self.optimizer!r}")
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not self.lr > 0:
            raise ValueError("lr must be positive")
        if not self.max_minutes >= 0:
            raise ValueError("max_minutes must be 0 (no cap) or positive")
        if self.read_loss_every < 0:
            raise ValueError("read_loss_every must be 0 (auto) or positive")
        if self.validate_every < 0:
            raise ValueError("validate_every must be 0 (once per epoch) or positive")
