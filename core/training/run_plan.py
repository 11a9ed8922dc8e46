"""What the parts of ``Trainer.run`` hand each other: the plan fixed before the first step (``RunPlan``), why an
epoch's steps ended (``EpochEnd``) and how the run ends (``RunEnd``)."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from core.training.step_stop import StepStop
from core.training.train_step import TrainStep


@dataclass
class RunPlan:
    first_epoch: list[np.ndarray]  # epoch 1's batches (global rows), drawn first: their count is an epoch's steps
    planned_steps: int  # steps of all the epochs asked for, before the step cap
    step: TrainStep  # one optimizer step: the wrapped model, the optimizer, its schedule and gradient scaler
    inside_steps: StepStop  # ends a step part-way on a cancel (CPU steps only)
    started: float  # the trainer's clock when the plan was made: the time budget and the run's seconds count from it


class EpochEnd(enum.Enum):
    """Why an epoch's steps ended."""

    ALL_STEPS = "every batch of the epoch was stepped"
    MAX_STEPS = "the step cap was reached inside the epoch"
    BUDGET = "the time budget ran out"
    CANCEL = "cancelled before a step, part-way through one, or before a validation began"
    CANCELLED_IN_VALIDATION = "cancelled while a validation scored"
    PATIENCE = "a validation inside the epoch spent the patience"


class RunEnd(NamedTuple):
    """How a run ends: the outcome's status and message."""

    status: str  # core.status: done | cancelled | failed
    message: str  # core.training.stop_reasons says why, in the words the CLI and the pages show
    stopped_early: bool = False  # done before its last epoch: validation stopped improving
