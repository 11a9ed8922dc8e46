"""What a training run reports: each epoch's result, each validation, and the run's outcome (``Trainer.run``)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class EpochResult:
    epoch: int
    train_loss: float
    metrics: dict  # validation roc_auc, average_precision, accuracy, f1, threshold
    seconds: float


@dataclass
class Validation:
    step: int  # steps trained when the weights were scored
    epoch: int  # the epoch it fell in
    train_seconds: float  # time spent in training steps so far, validations left out: the curve's x
    seconds: float  # wall time since training started, validations included
    metrics: dict  # the hook's metrics ({} without a hook)


@dataclass
class TrainOutcome:
    status: str  # done | cancelled | failed (core.status)
    message: str  # what happened, e.g. why a done run stopped before its last epoch
    best_epoch: int  # the epoch of the best validation; 0 when none ran
    best_metrics: dict  # the best validation's metrics
    epochs: list[EpochResult] = field(default_factory=list)
    seconds: float = 0.0
    pairs_seen: int = 0
    stopped_early: bool = False  # done before its last epoch: validation stopped improving
    validations: list[Validation] = field(default_factory=list)  # every validation, in order
    best_step: int = 0  # the step of the best validation; 0 when none ran

    @property
    def pairs_per_second(self) -> float:
        return self.pairs_seen / self.seconds if self.seconds else 0.0
