"""One training loop for every model and loss.

The trainer sees a ``PairEncoder`` (``embed_pair``), an objective (``objective(v1, v2, labels)``), a source of batches
and, optionally, a ``validate(model, progress) -> metrics`` hook run at the end of every epoch (and every
``validate_every`` steps); it knows nothing of the model family, the loss, or how validation is scored. It records
every validation (``trainer.validations``), keeps the best weights by the hook's ``roc_auc``, stops at the step cap or
the time budget (after a final validation), and turns cancellation, a non-finite loss and out of memory into an
outcome. A step waits neither for the device (the loss is read back every ``read_loss_every`` steps) nor, on CUDA, for
the host (the next batches are built on a thread, ``core.training.prefetch``); a compiled step gets batches padded to
a few fixed widths. Progress leaves only through callbacks (``on_train_start``, ``on_batch_end``,
``on_validation_progress``, ``on_validation_end``, ``on_epoch_end``, ``on_train_end``). A cancel is seen before every
step, inside a CPU step's forward pass (``core.training.step_stop``) and between validation batches. Messages name
settings, never CLI flags (``core.training.stop_reasons``).
"""
from __future__ import annotations

import math
import threading
import time
from typing import Callable, Sequence

import numpy as np
import torch

from core.device import resolve_device
from core.status import CANCELLED, DONE, FAILED
from core.text.pair_table import Batch, PairTable
from core.text.token_table import pad_widths
from core.training import distributed
from core.training.precision import FP32, compile_mode, device_autocast_plan
from core.training.prefetch import built_ahead
from core.training.schedule import warmup_then_linear_decay
from core.training.outcome import EpochResult, TrainOutcome, Validation
from core.training.run_plan import EpochEnd, RunEnd, RunPlan
from core.training.step_stop import StepStop
from core.training.stop_reasons import (budget_message, cancel_message, early_stop_message, no_batch_message,
                                        non_finite_loss_message, out_of_memory_message, planned_end_message)
from core.training.train_config import TrainConfig
from core.training.train_step import TrainStep


LOSS_READ_EVERY_CUDA = 50  # read_loss_every's auto on CUDA: one host sync per 50 steps (about a second on an H100)


class TrainingError(RuntimeError):
    """A run that cannot go on (a non-finite loss, out of memory); the message says what to change."""


class _CancelledDuringValidation(Exception):
    """Raised through the validation hook by its progress callback when the run is cancelled."""


class Trainer:
    # Batches built ahead of a CUDA step on a background thread (core.training.prefetch); a few cover the jitter
    # of a step, each waiting batch holding only its ids and masks. On the CPU the thread would compete with the
    # step for the same cores and the GIL: each batch is built in the loop (``batches_ahead`` 0).
    batches_ahead_on_cuda = 4

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
        self.batches_ahead = self.batches_ahead_on_cuda if self.device.type == "cuda" else 0
        # state the callbacks read
        self.epoch = 0
        self.step = 0
        self.total_steps = 0
        self.total_epochs = 0  # epochs the run plans, after the step cap
        self.steps_per_epoch = 0
        self.validation_progress: tuple[int, int] | None = None  # (scored, to score) while validating
        self.loss = float("nan")  # the last loss read back to the host (read_loss_every)
        self.loss_step = 0  # the step whose loss ``loss`` is
        self.pairs_seen = 0
        self.pairs_per_second = 0.0
        self.train_seconds = 0.0  # spent in training steps, validations left out
        self.epoch_results: list[EpochResult] = []
        self.validations: list[Validation] = []  # every validation so far; on_validation_end follows each
        self.best_metric = -math.inf
        self.best_epoch = 0
        self.best_step = 0
        self.outcome: TrainOutcome | None = None  # set when run() returns
        self._best_state: dict | None = None
        self._best_validation = 0  # 1-based index into validations; patience counts from it
        self._best_metrics: dict = {}
        self._module: torch.nn.Module = model  # what the steps call: the model, or its distributed/compiled wrapper
        self._autocast_plan = FP32  # set from config.precision and the device when run() starts
        self._read_every = 1  # steps between loss reads, set from config.read_loss_every and the device
        self._unread_losses: list[torch.Tensor] = []  # 0-d losses on the device, steps not yet read back
        self._epoch_losses: list[float] = []  # this epoch's losses read so far
        self._widths: tuple[int, ...] | None = None  # the fixed batch widths of a compiled step; None: trimmed

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

    def _step_batches(self, epoch_rows: list[np.ndarray]):
        """(global rows, this process's batch) for each step the run has left in the epoch, in order. The batches
        are built, and for a CUDA device page-locked, on a background thread a few steps ahead: on a fast GPU the
        host is what a step waits for, and this work need not be on the step's path."""
        left = epoch_rows[: max(0, self.total_steps - self.step)]  # nothing built past the step cap
        return built_ahead(left, self._build_batch, self.batches_ahead)

    def _build_batch(self, rows: np.ndarray) -> Batch:
        batch = self.train_table.batch(distributed.local_slice(rows, self.context), self._widths)
        return batch.pin_memory() if self.device.type == "cuda" else batch

    def _optimizer(self) -> torch.optim.Optimizer:
        params = [p for p in self.model.parameters() if p.requires_grad]
        c = self.config
        # The fused kernels update all parameters in one pass: a MiniLM fine-tune's optimizer step is several
        # times cheaper on the CPU (bench/finetune_vs_peer.py).
        fused = {"fused": True} if self.device.type in ("cpu", "cuda") else {}
        if c.optimizer == "adam":
            return torch.optim.Adam(params, lr=c.lr, weight_decay=c.weight_decay, **fused)
        return torch.optim.AdamW(params, lr=c.lr, weight_decay=c.weight_decay, **fused)

    def _schedule(self, optimizer) -> torch.optim.lr_scheduler.LambdaLR:
        return warmup_then_linear_decay(optimizer, self.total_steps, self.config.warmup_ratio)

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
        return cancel_message(self.step, self.total_steps, self.epoch, self.best_epoch, self.best_step,
                              not self.config.validate_every, during_validation)

    def _train_step(self, batch: Batch, step: TrainStep) -> None:
        """One optimizer step, its loss queued as a 0-d tensor on the device. Reading every step (the CPU's
        auto) checks the loss before the update, so a non-finite loss never reaches the weights; reading every
        few steps (CUDA's), nothing here waits for the device, and a non-finite loss fails the run at the next
        read with the best validated weights."""
        loss = step.loss(batch)
        self._unread_losses.append(loss.detach())
        if self._read_every == 1:
            self._read_losses(self.step + 1)
        step.update(loss)

    def _read_losses(self, last_step: int) -> None:
        """Read the queued losses of the steps up to ``last_step`` back (one host sync on CUDA) into this
        epoch's losses and ``loss``. Raises TrainingError at the first non-finite one, naming its step."""
        if not self._unread_losses:
            return
        values = torch.stack(self._unread_losses).float().tolist()
        self._unread_losses.clear()
        first_step = last_step - len(values) + 1
        for offset, value in enumerate(values):
            if not math.isfinite(value):
                raise TrainingError(non_finite_loss_message(value, first_step + offset, self.config.lr))
        self._epoch_losses.extend(values)
        self.loss, self.loss_step = values[-1], last_step

    def _batch_widths(self) -> tuple[int, ...] | None:
        """A compiled step's fixed batch widths (every table's texts fit the widest); None when not compiled."""
        if not self.config.compile:
            return None
        tables = [self.train_table.first, self.train_table.second, self.train_table.negative_texts]
        return pad_widths(max(t.ids.shape[1] for t in tables if t is not None))

    def _remember_if_best(self, record: Validation) -> None:
        # Without validation metrics every validation counts as the best so far (once per epoch,
        # the count is the epoch).
        count = float(len(self.validations))
        value = record.metrics.get("roc_auc", count)
        if not math.isfinite(value):
            value = count
        if value > self.best_metric:
            self.best_metric, self.best_epoch, self.best_step = value, record.epoch, record.step
            self._best_validation, self._best_metrics = len(self.validations), record.metrics
            self._best_state = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}

    def _validation(self, started: float) -> Validation:
        """Score the current weights, record them, keep them if best, tell the callbacks.

        Raises ``_CancelledDuringValidation`` as ``validate`` does."""
        metrics = self.validate()
        record = Validation(self.step, self.epoch, self.train_seconds, self.clock() - started, metrics)
        self.validations.append(record)
        self._remember_if_best(record)
        self._emit("on_validation_end")
        return record

    def _validation_due(self) -> bool:
        """A validation inside the epoch is due after this step (only with a hook to score it)."""
        every = self.config.validate_every
        return bool(every) and self.validation_hook is not None and self.step % every == 0

    def _patience_spent(self) -> bool:
        """``patience`` validations in a row have not beaten the best one."""
        return bool(self.config.patience) and len(self.validations) - self._best_validation >= self.config.patience

    def _early_stop_message(self) -> str:
        return early_stop_message(self.step, self.epoch, self.config.patience, not self.config.validate_every)

    # ---- the loop ------------------------------------------------------------------------------
    def run(self) -> TrainOutcome:
        """Plan, then train epoch by epoch until one ends the run; the outcome, with the best weights kept."""
        plan = self._plan()
        ending = RunEnd(DONE, planned_end_message(self.total_steps, plan.planned_steps, self.config.max_steps,
                                                  self.config.epochs))
        self._emit("on_train_start")
        try:
            if self.config.validate_at_start and self.validation_hook is not None:
                self._validation(plan.started)  # the starting weights: a candidate for the best, at step 0
            for epoch in range(1, self.total_epochs + 1):
                self.epoch = epoch
                self.model.train()
                epoch_started = self.clock()
                ended = self._epoch_steps(plan)
                stop = self._end_of_epoch(ended, epoch_started, plan.started)
                if stop is not None:
                    ending = stop
                    break
        except _CancelledDuringValidation:  # in the starting weights' validation
            ending = RunEnd(CANCELLED, self._cancel_message(during_validation=True))
        except TrainingError as error:
            ending = RunEnd(FAILED, str(error))
        except torch.OutOfMemoryError as error:  # CUDA (and MPS) out of memory
            ending = RunEnd(FAILED, out_of_memory_message(error))
        finally:
            plan.inside_steps.remove()
        return self._outcome(ending, plan.started)

    def _plan(self) -> RunPlan:
        """Everything fixed before the first step, in the order that keeps a seeded run repeatable: the seed, the
        model on its device behind the step's wrapper, epoch 1's batches, the step counts, the optimizer. Raises
        TrainingError (before any callback) when the settings cannot train."""
        c = self.config
        torch.manual_seed(c.seed)
        self.model.to(self.device)
        # In-batch losses need every process's vectors as negatives: the wrapper gathers them.
        self._module = distributed.wrap(self.model, self.device, self.context,
                                        gather_outputs=self.objective.batch_kind == "duplicates")
        try:
            self._autocast_plan = device_autocast_plan(self.device, c.precision)
        except ValueError as error:
            raise TrainingError(str(error)) from None
        self._read_every = c.read_loss_every or (LOSS_READ_EVERY_CUDA if self.device.type == "cuda" else 1)
        self._widths = self._batch_widths()
        if c.compile:  # the steps call the compiled wrapper; validation and saving use the model itself
            # dynamic: one compilation for every batch shape (bench/compile_speed.py: no recompiles then); the
            # fixed widths keep the shapes, and so the CUDA graphs recorded, to a few.
            self._module = torch.compile(self._module, mode=compile_mode(self.device.type), dynamic=True)
        first_epoch = self._epoch_batches(0)  # drawn here: its length is the epoch's step count
        self.steps_per_epoch = len(first_epoch)
        if self.steps_per_epoch == 0:
            raise TrainingError(no_batch_message(self.objective.batch_kind))
        planned = self.steps_per_epoch * c.epochs
        self.total_steps = min(planned, c.max_steps) if c.max_steps else planned
        self.total_epochs = math.ceil(self.total_steps / self.steps_per_epoch)
        optimizer = self._optimizer()
        step = TrainStep(self._module, self.model, self.objective, optimizer, self._schedule(optimizer),
                         self._autocast_plan, self.device, c.grad_clip,
                         cuda_graphs=c.compile and compile_mode(self.device.type) == "reduce-overhead")
        started = self.clock()
        self.train_seconds = 0.0
        inside_steps = StepStop(self.model, self.stop_event,
                                enabled=self.device.type == "cpu" and not (c.compile or self.context.enabled))
        return RunPlan(first_epoch, planned, step, inside_steps, started)

    def _epoch_steps(self, plan: RunPlan) -> EpochEnd:
        """The steps of epoch ``self.epoch``, each followed by on_batch_end and any validation due; why they ended."""
        self._epoch_losses = []
        rows_of_steps = plan.first_epoch if self.epoch == 1 else self._epoch_batches(self.epoch - 1)
        for rows, batch in self._step_batches(rows_of_steps):
            if distributed.broadcast_flag(self.cancelled):  # every process sees the cancel at the same step
                self.stop_event.set()
                return EpochEnd.CANCEL
            if self.step >= self.total_steps:  # max_steps reached inside this epoch
                return EpochEnd.MAX_STEPS
            if self.step and self._out_of_time(plan.started):  # at least one step, then the budget
                return EpochEnd.BUDGET
            step_started = self.clock()
            with plan.inside_steps:
                self._train_step(batch, plan.step)
            if plan.inside_steps.stopped:  # cancelled part-way: the step is dropped before any weight changed
                return EpochEnd.CANCEL
            self._count_step(len(rows), step_started)
            self._emit("on_batch_end")
            if self._validation_due():
                ended = self._validation_in_epoch(plan.started)
                if ended is not None:
                    return ended
        return EpochEnd.ALL_STEPS

    def _count_step(self, pairs: int, step_started: float) -> None:
        """A finished step in the counters the callbacks read; its loss read back when a read is due."""
        self.step += 1
        # every step (the CPU's auto) reads inside the step, before the update
        if self._read_every > 1 and (self.step % self._read_every == 0 or self._validation_due()):
            self._read_losses(self.step)
        self.train_seconds += self.clock() - step_started
        self.pairs_seen += pairs
        self.pairs_per_second = self.pairs_seen / max(self.train_seconds, 1e-9)

    def _validation_in_epoch(self, started: float) -> EpochEnd | None:
        """The validation due after this step; why the epoch ends on it, or None to go on stepping."""
        if distributed.broadcast_flag(self.cancelled):  # asked before it began: not scored
            self.stop_event.set()
            return EpochEnd.CANCEL
        try:
            self._validation(started)
        except _CancelledDuringValidation:
            return EpochEnd.CANCELLED_IN_VALIDATION
        self.model.train()  # the hook may leave the model in eval mode
        # Patience spent: the epoch ends here, on this validation, and the run with it.
        return EpochEnd.PATIENCE if self._patience_spent() else None

    def _end_of_epoch(self, ended: EpochEnd, epoch_started: float, started: float) -> RunEnd | None:
        """The epoch's validation (unless its last step was just scored), its EpochResult and on_epoch_end; how the
        run ends here, or None to go on to the next epoch."""
        self._read_losses(self.step)  # the epoch's last steps, whatever ended it
        if self.cancelled:
            in_validation = ended is EpochEnd.CANCELLED_IN_VALIDATION
            return RunEnd(CANCELLED, self._cancel_message(during_validation=in_validation))
        last = self.validations[-1] if self.validations else None
        if last is not None and (last.step, last.epoch) == (self.step, self.epoch):
            metrics = last.metrics  # scored at this very step inside the epoch: not scored twice
        else:
            try:
                metrics = self._validation(started).metrics
            except _CancelledDuringValidation:
                return RunEnd(CANCELLED, self._cancel_message(during_validation=True))
        losses = self._epoch_losses
        self.epoch_results.append(EpochResult(self.epoch, float(np.mean(losses)) if losses else float("nan"),
                                              metrics, self.clock() - epoch_started))
        self._emit("on_epoch_end")
        if self._patience_spent():
            return RunEnd(DONE, self._early_stop_message(), stopped_early=True)
        # The validation just run is the final one when the budget ran out during this epoch.
        if ended is EpochEnd.BUDGET or (self.epoch < self.total_epochs and self._out_of_time(started)):
            return RunEnd(DONE, budget_message(self.config.max_minutes, self.step, self.total_steps))
        return None

    def _outcome(self, ending: RunEnd, started: float) -> TrainOutcome:
        """The run's outcome, the best validated weights back in the model; on_train_end is the last event."""
        if self._best_state is not None:
            self.model.load_state_dict(self._best_state)
        self.outcome = TrainOutcome(
            status=ending.status, message=ending.message, stopped_early=ending.stopped_early,
            best_epoch=self.best_epoch, best_step=self.best_step, best_metrics=self._best_metrics,
            epochs=list(self.epoch_results), validations=list(self.validations), pairs_seen=self.pairs_seen,
            seconds=self.clock() - started)
        self._emit("on_train_end")
        return self.outcome
