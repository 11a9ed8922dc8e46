"""One training loop for every model and loss.

The trainer sees a ``PairEncoder`` (``embed_pair``), an objective (``objective(v1, v2, labels)``), a
source of batches and, optionally, a ``validate(model, progress) -> metrics`` hook called once per
epoch, which calls ``progress(done, total)`` as it scores; it knows nothing of the model family, the
loss, or how validation is scored. It runs the loop, keeps the best weights by the hook's
``roc_auc``, stops at the step cap or the time budget (each time after a final validation), and
turns cancellation, a non-finite loss and out of memory into an outcome. Progress leaves the loop
only through callbacks: ``on_train_start``, ``on_batch_end``, ``on_validation_progress``,
``on_epoch_end``, ``on_train_end``, each called with the trainer. Cancellation is a flag checked
before every step and between the validation hook's batches, so it takes effect within one step.
Messages name settings, never CLI flags: wording for users is the CLI's and the pages' job.
"""
from __future__ import annotations

import copy
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np
import torch

from core import distributed
from core.device import resolve_device
from core.pair_table import Batch, PairTable
from core.status import CANCELLED, DONE, FAILED


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
    patience: int = 2  # epochs without a better validation ROC AUC before stopping; 0 disables
    max_val_pairs: int = 5000  # validation pairs scored after each epoch (a seeded subset if more)
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


class TrainingError(RuntimeError):
    """A run that cannot go on (a non-finite loss, out of memory); the message says what to change."""


class _CancelledDuringValidation(Exception):
    """Raised through the validation hook by its progress callback when the run is cancelled."""


@dataclass
class EpochResult:
    epoch: int
    train_loss: float
    metrics: dict  # validation roc_auc, average_precision, accuracy, f1, threshold
    seconds: float


@dataclass
class TrainOutcome:
    status: str  # done | cancelled | failed (core.status)
    message: str  # what happened, e.g. why a done run stopped before its last epoch
    best_epoch: int  # 0 when no epoch finished
    best_metrics: dict
    epochs: list[EpochResult] = field(default_factory=list)
    seconds: float = 0.0
    pairs_seen: int = 0
    stopped_early: bool = False  # done before its last epoch: validation stopped improving

    @property
    def pairs_per_second(self) -> float:
        return self.pairs_seen / self.seconds if self.seconds else 0.0


class Trainer:
    def __init__(
        self,
        model,
        objective: Callable,
        train: PairTable,
        config: TrainConfig,
        validate: Callable[[torch.nn.Module, Callable[[int, int], None]], dict] | None = None,
        callbacks: Sequence[object] = (),
        stop_event: threading.Event | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.model = model
        self.objective = objective
        self.train_table = train
        # (model, progress) -> {"roc_auc": ..., ...}; None: every epoch counts as best
        self.validation_hook = validate
        self.config = config
        self.callbacks = list(callbacks)
        self.stop_event = stop_event or threading.Event()
        self.clock = clock  # seconds, for timings and the time budget (tests pass a fake one)
        self.context = distributed.current()
        self.device = resolve_device(config.device)
        if self.context.enabled and self.device.type == "cuda":
            self.device = torch.device("cuda", self.context.local_rank)
        # state the callbacks read
        self.epoch = 0
        self.step = 0
        self.total_steps = 0
        self.total_epochs = 0  # epochs the run plans, after the step cap
        self.steps_per_epoch = 0
        self.validation_progress: tuple[int, int] | None = None  # (scored, to score) while validating
        self.loss = float("nan")
        self.pairs_seen = 0
        self.pairs_per_second = 0.0
        self.epoch_results: list[EpochResult] = []
        self.best_metric = -math.inf
        self.best_epoch = 0
        self.outcome: TrainOutcome | None = None  # set when run() returns
        self._best_state: dict | None = None
        self._module: torch.nn.Module = model  # what the steps call: the model, or its distributed wrapper

    # ---- control -----------------------------------------------------------------------------
    def cancel(self) -> None:
        self.stop_event.set()

    @property
    def cancelled(self) -> bool:
        return self.stop_event.is_set()

    def _emit(self, event: str) -> None:
        for callback in self.callbacks:
            handler = getattr(callback, event, None)
            if handler is not None:
                handler(self)

    # ---- pieces --------------------------------------------------------------------------------
    def _epoch_batches(self, epoch: int) -> list[np.ndarray]:
        global_size = self.config.batch_size * self.context.world_size
        return self.train_table.index_batches(self.objective.batch_kind, global_size, self.config.seed + epoch,
                                              self.config.length_buckets)

    def _optimizer(self) -> torch.optim.Optimizer:
        params = [p for p in self.model.parameters() if p.requires_grad]
        c = self.config
        # The fused kernels update all parameters in one pass: the optimizer step of a MiniLM
        # fine-tune went from ~170 ms to ~33 ms on 2 CPU cores (bench/finetune_vs_peer.py).
        fused = {"fused": True} if self.device.type in ("cpu", "cuda") else {}
        if c.optimizer == "adam":
            return torch.optim.Adam(params, lr=c.lr, weight_decay=c.weight_decay, **fused)
        return torch.optim.AdamW(params, lr=c.lr, weight_decay=c.weight_decay, **fused)

    def _schedule(self, optimizer) -> torch.optim.lr_scheduler.LambdaLR:
        warmup = int(self.config.warmup_ratio * self.total_steps)
        total = max(1, self.total_steps)

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            return max(0.0, (total - step) / max(1, total - warmup))

        return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    def validate(self) -> dict:
        """The validation hook's metrics for the current weights ({} without a hook).

        Raises ``_CancelledDuringValidation`` when the run is cancelled while the hook scores."""
        if self.validation_hook is None:
            return {}
        try:
            return self.validation_hook(self.model, self._validation_progress)
        finally:
            self.validation_progress = None

    def _validation_progress(self, done: int, total: int) -> None:
        self.validation_progress = (done, total)
        self._emit("on_validation_progress")
        if distributed.broadcast_flag(self.cancelled):
            self.stop_event.set()
            raise _CancelledDuringValidation

    def _out_of_time(self, started: float) -> bool:
        """True on every process once the time budget is spent (always False without one)."""
        budget = self.config.max_minutes * 60
        return bool(budget) and distributed.broadcast_flag(self.clock() - started >= budget)

    def _cancel_message(self, during_validation: bool) -> str:
        where = f"cancelled at step {self.step:,} of {self.total_steps:,}"
        if not self.best_epoch:
            return f"{where}, {'during' if during_validation else 'before'} the first validation"
        if during_validation:
            where += f" while scoring the validation of epoch {self.epoch}"
        return f"{where}; the best model so far (epoch {self.best_epoch}) is kept"

    def _train_step(self, batch: Batch, optimizer, scheduler, scaler) -> float:
        batch = batch.to(self.device)
        with torch.autocast(device_type=self.device.type, dtype=torch.float16, enabled=scaler is not None):
            v1, v2, vn = self._module(batch.first, batch.second, batch.negatives)  # (B, d), (B, d), (K, d)|None
            loss = self.objective(v1.float(), v2.float(), batch.labels, None if vn is None else vn.float())
        value = float(loss.detach())
        if not math.isfinite(value):
            raise TrainingError(
                f"the loss became {value} at step {self.step + 1}; try a lower learning rate (now {self.config.lr:g})"
            )
        optimizer.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
        else:
            loss.backward()
        if self.config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        scheduler.step()
        return value

    def _remember_if_best(self, metrics: dict, epoch: int) -> bool:
        # Without validation every finished epoch counts as the best so far.
        value = metrics.get("roc_auc", float(epoch))
        if not math.isfinite(value):
            value = float(epoch)
        if value > self.best_metric:
            self.best_metric, self.best_epoch = value, epoch
            self._best_state = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
            return True
        return False

    # ---- the loop ------------------------------------------------------------------------------
    def run(self) -> TrainOutcome:
        c = self.config
        torch.manual_seed(c.seed)
        self.model.to(self.device)
        # In-batch losses need every process's vectors as negatives: the wrapper gathers them.
        self._module = distributed.wrap(self.model, self.device, self.context,
                                        gather_outputs=self.objective.batch_kind == "duplicates")
        first_epoch = self._epoch_batches(0)
        self.steps_per_epoch = len(first_epoch)
        if self.steps_per_epoch == 0:
            raise TrainingError(
                f"no training batch can be formed: the {self.objective.batch_kind} batches need at least 2 "
                "suitable pairs (duplicate pairs for triplet/softmax)"
            )
        planned = self.steps_per_epoch * c.epochs
        self.total_steps = min(planned, c.max_steps) if c.max_steps else planned
        self.total_epochs = math.ceil(self.total_steps / self.steps_per_epoch)
        optimizer = self._optimizer()
        scheduler = self._schedule(optimizer)
        scaler = torch.amp.GradScaler("cuda") if (c.amp and self.device.type == "cuda") else None
        status, stopped_early = DONE, False
        message = (f"stopped at the step cap of {c.max_steps:,} steps" if self.total_steps < planned
                   else f"all {c.epochs} epoch(s) trained")
        started = self.clock()
        train_seconds = 0.0
        self._emit("on_train_start")
        try:
            for epoch in range(1, self.total_epochs + 1):
                self.epoch = epoch
                self.model.train()
                epoch_started = self.clock()
                losses = []
                out_of_time = False
                for rows in first_epoch if epoch == 1 else self._epoch_batches(epoch - 1):
                    if distributed.broadcast_flag(self.cancelled):
                        self.stop_event.set()
                        break
                    if self.step >= self.total_steps:  # max_steps reached inside this epoch
                        break
                    if self.step and self._out_of_time(started):  # at least one step, then the budget
                        out_of_time = True
                        break
                    local_rows = distributed.local_slice(rows, self.context)
                    step_started = self.clock()
                    self.loss = self._train_step(self.train_table.batch(local_rows), optimizer, scheduler, scaler)
                    train_seconds += self.clock() - step_started
                    losses.append(self.loss)
                    self.step += 1
                    self.pairs_seen += len(rows)
                    self.pairs_per_second = self.pairs_seen / max(train_seconds, 1e-9)
                    self._emit("on_batch_end")
                if self.cancelled:
                    status, message = CANCELLED, self._cancel_message(during_validation=False)
                    break
                try:
                    metrics = self.validate()
                except _CancelledDuringValidation:
                    status, message = CANCELLED, self._cancel_message(during_validation=True)
                    break
                improved = self._remember_if_best(metrics, epoch)
                result = EpochResult(epoch, float(np.mean(losses)) if losses else float("nan"), metrics,
                                     self.clock() - epoch_started)
                self.epoch_results.append(result)
                self._emit("on_epoch_end")
                if not improved and c.patience and epoch - self.best_epoch >= c.patience:
                    status, stopped_early, message = DONE, True, (
                        f"stopped after epoch {epoch}: validation ROC AUC did not improve for {c.patience} epoch(s)")
                    break
                # The validation just run is the final one when the budget ran out during this epoch.
                if out_of_time or (epoch < self.total_epochs and self._out_of_time(started)):
                    message = (f"stopped by the time budget of {c.max_minutes:g} min at step {self.step:,} "
                               f"of {self.total_steps:,}")
                    break
        except TrainingError as error:
            status, message = FAILED, str(error)
        except torch.OutOfMemoryError as error:  # CUDA (and MPS) out of memory
            status, message = FAILED, (
                f"out of memory ({str(error).splitlines()[0]}); try a smaller batch size or a shorter max length")
        if self._best_state is not None:
            self.model.load_state_dict(self._best_state)
        self.outcome = TrainOutcome(
            status=status,
            message=message,
            best_epoch=self.best_epoch,
            best_metrics=self.epoch_results[self.best_epoch - 1].metrics if self.best_epoch else {},
            epochs=list(self.epoch_results),
            seconds=self.clock() - started,
            pairs_seen=self.pairs_seen,
            stopped_early=stopped_early,
        )
        self._emit("on_train_end")
        return self.outcome
