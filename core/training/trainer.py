"""One training loop for every model and loss: ``Trainer.run`` plans, steps, validates and stops for a reason.

It sees a model, an objective, a table of pairs and an optional ``validate(model, progress)`` hook, and knows nothing
of the family, the loss or the scoring; progress leaves only through callbacks (``on_train_start``, ``on_batch_end``,
``on_validation_progress``, ``on_validation_end``, ``on_epoch_end``, ``on_train_end``). A cancel is seen before
every step, inside a CPU step's forward pass (``StepStop``) and between validation batches.
"""
from __future__ import annotations

import math
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import torch

from core.device import resolve_device
from core.status import CANCELLED, DONE, FAILED
from core.text.pair_table import Batch, PairTable
from core.text.token_table import pad_widths
from core.training import distributed

LOSS_READ_EVERY_CUDA = 50  # read_loss_every's auto on CUDA: one host sync per 50 steps (about a second on an H100)


@dataclass
class TrainConfig:
    """The settings of one training loop; core.training.specs checks their values."""
    epochs: int = 3  # passes over the training batches
    batch_size: int = 64  # pairs per step and process; in-batch losses see all processes' pairs
    lr: float = 1e-3  # peak learning rate, reached after warm-up
    weight_decay: float = 0.0  # AdamW decoupled weight decay
    warmup_ratio: float = 0.1  # share of all steps spent warming up linearly; then linear decay to 0
    grad_clip: float = 1.0  # max gradient norm; 0 disables clipping
    seed: int = 0  # weights, batch order and dropout
    device: str = "auto"  # auto | cpu | cuda
    precision: str = "auto"  # auto | fp32 | bf16 | fp16 (see "mixed precision" below)
    # torch.compile the step's forward pass (CUDA graphs on CUDA, batches padded to a few fixed widths). Off by
    # default: its first steps compile for tens of seconds, which only GPU runs of minutes earn back.
    compile: bool = False
    patience: int = 2  # validations (epochs unless validate_every) without a better ROC AUC, then stop; 0 = off
    max_val_pairs: int = 5000  # validation pairs scored at each validation (a seeded subset if more)
    # Validate after every this many steps too (0 = once per epoch); best weights and patience then count
    # validations. A validation on an epoch's last step is that epoch's own (never scored twice).
    validate_every: int = 0
    validate_at_start: bool = False  # score the starting weights too: a fine-tune never ends worse than its start
    max_steps: int = 0  # stop after this many steps in all, ending with a validation (0 = no cap)
    max_minutes: float = 0.0  # stop (with a final validation) after this much training time; 0 = no cap
    length_buckets: bool = True  # batch pairs of similar length together: far less padding to compute
    # Steps between reading the loss back to the host (on CUDA a read waits for the GPU; between reads the host
    # runs ahead). A non-finite loss fails the run at the next read. 0 = auto: every step on the CPU,
    # every LOSS_READ_EVERY_CUDA steps on CUDA.
    read_loss_every: int = 0


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
    best_step: int = 0

    @property
    def pairs_per_second(self) -> float:
        return self.pairs_seen / self.seconds if self.seconds else 0.0


class TrainingError(RuntimeError):
    """A run that cannot go on (a non-finite loss, out of memory); the message says what to change."""


class _CancelledDuringValidation(Exception):
    """Raised through the validation hook by its progress callback when the run is cancelled."""


class Trainer:
    # Batches built ahead of a CUDA step on a thread (``built_ahead``); on the CPU the thread would compete with
    # the step for the same cores and the GIL, so each batch is built in the loop.
    batches_ahead_on_cuda = 4

    def __init__(self, model, objective: Callable, train: PairTable, config: TrainConfig,
                 validate: Callable[[torch.nn.Module, Callable[[int, int], None]], dict] | None = None,
                 callbacks: Sequence[object] = (), stop_event: threading.Event | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.model, self.objective, self.train_table, self.config = model, objective, train, config
        self.validation_hook = validate  # (model, progress) -> {"roc_auc": ...}; None: every epoch counts as best
        self.callbacks = list(callbacks)
        self.stop_event = stop_event or threading.Event()
        self.clock = clock  # seconds, for timings and the time budget (tests pass a fake one)
        self.context = distributed.current()
        self.device = resolve_device(config.device)
        if self.context.enabled and self.device.type == "cuda":
            self.device = torch.device("cuda", self.context.local_rank)
        self.batches_ahead = self.batches_ahead_on_cuda if self.device.type == "cuda" else 0
        # state the callbacks read
        self.epoch = self.step = self.total_steps = self.steps_per_epoch = self.pairs_seen = 0
        self.total_epochs = 0  # epochs the run plans, after the step cap
        self.validation_progress: tuple[int, int] | None = None  # (scored, to score) while validating
        self.loss, self.loss_step = float("nan"), 0  # the last loss read back to the host, and its step
        self.pairs_per_second = self.train_seconds = 0.0  # train_seconds: in training steps, validations left out
        self.epoch_results: list[EpochResult] = []
        self.validations: list[Validation] = []  # every validation so far; on_validation_end follows each
        self.best_metric, self.best_epoch, self.best_step = -math.inf, 0, 0
        self.outcome: TrainOutcome | None = None  # set when run() returns
        self._best_state: dict | None = None
        self._best_validation = 0  # 1-based index into validations; patience counts from it
        self._best_metrics: dict = {}
        # the step's parts, set by _plan
        self._module: torch.nn.Module = model  # what the steps call: the model, or its distributed/compiled wrapper
        self._autocast_plan = FP32
        self._optim: torch.optim.Optimizer | None = None
        self._scheduler: torch.optim.lr_scheduler.LambdaLR | None = None
        self._scaler: torch.amp.GradScaler | None = None  # enabled for fp16 only: its range underflows gradients
        self._cuda_graphs = False  # the module replays CUDA graphs (compiled with mode reduce-overhead)
        self._read_every = 1  # steps between loss reads
        self._unread_losses: list[torch.Tensor] = []  # 0-d losses on the device, steps not yet read back
        self._epoch_losses: list[float] = []  # this epoch's losses read so far
        self._widths: tuple[int, ...] | None = None  # the fixed batch widths of a compiled step; None: trimmed

    def cancel(self) -> None:
        self.stop_event.set()

    @property
    def cancelled(self) -> bool:
        return self.stop_event.is_set()

    def run(self) -> TrainOutcome:
        """Plan; then epoch by epoch, step and validate until a stop reason ends the run. The outcome says which,
        with the best validated weights back in the model. Raises TrainingError, before any callback, when the
        settings cannot train."""
        c = self.config
        first_epoch, planned_steps = self._plan()
        started = self.clock()  # the time budget and the run's seconds count from here
        self.train_seconds = 0.0
        # Ends a CPU step part-way on a cancel. Not where steps are fast (CUDA), compiled (the hooks would break the
        # graph) or run by several processes (one stopping part-way would leave the others waiting in a collective).
        in_step = StepStop(self.model, self.stop_event,
                           enabled=self.device.type == "cpu" and not (c.compile or self.context.enabled))
        status, stopped_early = DONE, False
        message = (f"stopped at the step cap of {c.max_steps:,} steps" if self.total_steps < planned_steps
                   else f"all {c.epochs} epoch(s) trained")
        self._emit("on_train_start")
        try:
            if c.validate_at_start and self.validation_hook is not None:
                self._validation(started)  # the starting weights: a candidate for the best, at step 0
            for epoch in range(1, self.total_epochs + 1):
                self.epoch, self._epoch_losses, out_of_time = epoch, [], False
                self.model.train()
                epoch_started = self.clock()
                rows_of_steps = first_epoch if epoch == 1 else self._epoch_batches(epoch - 1)
                left = rows_of_steps[: max(0, self.total_steps - self.step)]  # nothing built past the step cap
                for rows, batch in built_ahead(left, self._build_batch, self.batches_ahead):
                    if self._cancel_seen():
                        break
                    if self.step and self._out_of_time(started):  # at least one step, then the budget
                        out_of_time = True
                        break
                    step_started = self.clock()
                    with in_step:
                        self._train_step(batch)
                    if in_step.stopped:  # cancelled part-way: the step is dropped before any weight changed
                        break
                    self._count_step(len(rows), step_started)
                    self._emit("on_batch_end")
                    if self._validation_due():
                        if self._cancel_seen():  # asked before it began: not scored
                            break
                        self._validation(started)
                        self.model.train()  # the hook may leave the model in eval mode
                        if self._patience_spent():  # the epoch ends on this validation, and the run with it
                            break
                # the end of the epoch, whatever ended its steps
                self._read_losses(self.step)
                if self.cancelled:
                    status, message = CANCELLED, self._cancel_message(during_validation=False)
                    break
                last = self.validations[-1] if self.validations else None
                if last is not None and (last.step, last.epoch) == (self.step, epoch):
                    metrics = last.metrics  # scored at this very step inside the epoch: not scored twice
                else:
                    metrics = self._validation(started).metrics
                losses = self._epoch_losses
                self.epoch_results.append(EpochResult(epoch, float(np.mean(losses)) if losses else float("nan"),
                                                      metrics, self.clock() - epoch_started))
                self._emit("on_epoch_end")
                if self._patience_spent():
                    per_epoch = not c.validate_every
                    at = f"after epoch {epoch}" if per_epoch else f"at step {self.step:,} (epoch {epoch})"
                    stopped_early, message = True, (f"stopped {at}: validation ROC AUC did not improve for "
                                                    f"{c.patience} {'epoch' if per_epoch else 'validation'}(s)")
                    break
                # The validation just run is the final one when the budget ran out during this epoch.
                if out_of_time or (epoch < self.total_epochs and self._out_of_time(started)):
                    message = (f"stopped by the time budget of {c.max_minutes:g} min at step {self.step:,} "
                               f"of {self.total_steps:,}")
                    break
        except _CancelledDuringValidation:  # the losses of the steps before it were read when it began
            status, message = CANCELLED, self._cancel_message(during_validation=True)
        except TrainingError as error:
            status, message = FAILED, str(error)
        except torch.OutOfMemoryError as error:  # CUDA (and MPS) out of memory
            status, message = FAILED, (f"out of memory ({str(error).splitlines()[0]}); try a smaller batch size or "
                                       "a shorter max length")
        finally:
            in_step.remove()
        return self._outcome(status, message, stopped_early, started)

    def _plan(self) -> tuple[list[np.ndarray], int]:
        """Everything fixed before the first step, in the order that keeps a seeded run repeatable; returns epoch 1's
        batches (global rows) and the steps of all the epochs asked for, before the step cap."""
        c = self.config
        torch.manual_seed(c.seed)
        self.model.to(self.device)
        self._module = distributed.wrap(self.model, self.device, self.context,
                                        gather_outputs=self.objective.batch_kind == "duplicates")
        try:
            bf16 = self.device.type == "cuda" and torch.cuda.is_bf16_supported()
            self._autocast_plan = autocast_plan(self.device.type, c.precision, bf16)
        except ValueError as error:
            raise TrainingError(str(error)) from None
        self._read_every = c.read_loss_every or (LOSS_READ_EVERY_CUDA if self.device.type == "cuda" else 1)
        self._widths = self._batch_widths()
        if c.compile:  # the steps call the compiled wrapper (dynamic: one compilation for every batch shape)
            self._module = torch.compile(self._module, mode=compile_mode(self.device.type), dynamic=True)
        first_epoch = self._epoch_batches(0)  # drawn here: its length is the epoch's step count
        self.steps_per_epoch = len(first_epoch)
        if self.steps_per_epoch == 0:
            raise TrainingError(f"no training batch can be formed: the {self.objective.batch_kind} batches need at "
                                "least 2 suitable pairs (duplicate pairs for triplet/softmax)")
        planned = self.steps_per_epoch * c.epochs
        self.total_steps = min(planned, c.max_steps) if c.max_steps else planned
        self.total_epochs = math.ceil(self.total_steps / self.steps_per_epoch)
        # fused: all parameters updated in one pass, several times cheaper on the CPU for MiniLM
        fused = {"fused": True} if self.device.type in ("cpu", "cuda") else {}
        self._optim = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad], lr=c.lr, weight_decay=c.weight_decay, **fused)
        self._scheduler = warmup_then_linear_decay(self._optim, self.total_steps, c.warmup_ratio)
        self._scaler = torch.amp.GradScaler(self.device.type, enabled=self._autocast_plan.use_scaler)
        self._cuda_graphs = c.compile and compile_mode(self.device.type) == "reduce-overhead"
        return first_epoch, planned

    # ---- the step ------------------------------------------------------------------------------------------------
    def _train_step(self, batch: Batch) -> None:
        """One optimizer step, its loss queued on the device. Read every step (the CPU's auto), a non-finite loss
        fails before the update; read every few steps (CUDA's), nothing here waits for the device."""
        batch = batch.to(self.device)
        if self._cuda_graphs:  # a new step: the graphs may reuse the last step's output memory
            torch.compiler.cudagraph_mark_step_begin()
        plan = self._autocast_plan
        with torch.autocast(self.device.type, dtype=plan.dtype, enabled=plan.enabled):
            # (B, d), (B, d), (K, d)|None; a cross-encoder's (B,) logits, None, None
            outputs = [None if v is None else v.float() for v in self._module(batch.first, batch.second, batch.negatives)]
            loss = self.objective(outputs[0], outputs[1], batch.labels, outputs[2])
        self._unread_losses.append(loss.detach())
        if self._read_every == 1:
            self._read_losses(self.step + 1)
        optimizer, scaler = self._optim, self._scaler  # a disabled scaler passes everything through
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)  # clipping sees the true gradients
        if self.config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        scaler.step(optimizer)
        scaler.update()
        self._scheduler.step()

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
                raise TrainingError(f"the loss became {value} at step {first_step + offset}; try a lower learning "
                                    f"rate (now {self.config.lr:g})")
        self._epoch_losses.extend(values)
        self.loss, self.loss_step = values[-1], last_step

    def _count_step(self, pairs: int, step_started: float) -> None:
        """A finished step in the counters the callbacks read; its loss read back when a read is due."""
        self.step += 1
        # every step (the CPU's auto) reads inside the step, before the update
        if self._read_every > 1 and (self.step % self._read_every == 0 or self._validation_due()):
            self._read_losses(self.step)
        self.train_seconds += self.clock() - step_started
        self.pairs_seen += pairs
        self.pairs_per_second = self.pairs_seen / max(self.train_seconds, 1e-9)

    # ---- batches -------------------------------------------------------------------------------------------------
    def _epoch_batches(self, epoch: int) -> list[np.ndarray]:
        global_size = self.config.batch_size * self.context.world_size
        return self.train_table.index_batches(self.objective.batch_kind, global_size, self.config.seed + epoch,
                                              self.config.length_buckets)

    def _build_batch(self, rows: np.ndarray) -> Batch:
        batch = self.train_table.batch(distributed.local_slice(rows, self.context), self._widths)
        return batch.pin_memory() if self.device.type == "cuda" else batch

    def _batch_widths(self) -> tuple[int, ...] | None:
        """A compiled step's fixed batch widths (every table's texts fit the widest); None when not compiled."""
        if not self.config.compile:
            return None
        tables = [self.train_table.first, self.train_table.second, self.train_table.negative_texts]
        return pad_widths(max(t.ids.shape[1] for t in tables if t is not None))

    # ---- validation ----------------------------------------------------------------------------------------------
    def _validation_progress(self, done: int, total: int) -> None:
        self.validation_progress = (done, total)
        self._emit("on_validation_progress")
        if distributed.broadcast_flag(self.cancelled):
            self.stop_event.set()
            raise _CancelledDuringValidation

    def validate(self) -> dict:
        """The hook's metrics for the current weights ({} without one); ``_CancelledDuringValidation`` on a cancel."""
        if self.validation_hook is None:
            return {}
        try:
            return self.validation_hook(self.model, self._validation_progress)
        finally:
            self.validation_progress = None

    def _validation(self, started: float) -> Validation:
        """Score the current weights, record them, keep them if best, tell the callbacks (or raise as ``validate``)."""
        metrics = self.validate()
        record = Validation(self.step, self.epoch, self.train_seconds, self.clock() - started, metrics)
        self.validations.append(record)
        count = float(len(self.validations))  # without metrics every validation is the best so far
        value = record.metrics.get("roc_auc", count)
        if not math.isfinite(value):
            value = count
        if value > self.best_metric:
            self.best_metric, self.best_epoch, self.best_step = value, record.epoch, record.step
            self._best_validation, self._best_metrics = len(self.validations), record.metrics
            self._best_state = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
        self._emit("on_validation_end")
        return record

    def _validation_due(self) -> bool:
        every = self.config.validate_every
        return bool(every) and self.validation_hook is not None and self.step % every == 0

    # ---- stop reasons --------------------------------------------------------------------------------------------
    def _cancel_seen(self) -> bool:
        """The run is cancelled, seen by every process at the same step."""
        if distributed.broadcast_flag(self.cancelled):
            self.stop_event.set()
            return True
        return False

    def _out_of_time(self, started: float) -> bool:
        """True on every process once the time budget is spent (always False without one)."""
        budget = self.config.max_minutes * 60
        return bool(budget) and distributed.broadcast_flag(self.clock() - started >= budget)

    def _patience_spent(self) -> bool:
        return bool(self.config.patience) and len(self.validations) - self._best_validation >= self.config.patience

    def _cancel_message(self, during_validation: bool) -> str:
        """"cancelled at step 40 of 120; the best model so far (epoch 1) is kept", or that it had none yet."""
        where = f"cancelled at step {self.step:,} of {self.total_steps:,}"
        if not self.best_epoch:
            return f"{where}, {'during' if during_validation else 'before'} the first validation"
        per_epoch = not self.config.validate_every
        if during_validation:
            where += (f" while scoring the validation of epoch {self.epoch}" if per_epoch
                      else " while scoring a validation")
        best = f"epoch {self.best_epoch}" if per_epoch else f"step {self.best_step:,}, epoch {self.best_epoch}"
        return f"{where}; the best model so far ({best}) is kept"

    def _outcome(self, status: str, message: str, stopped_early: bool, started: float) -> TrainOutcome:
        """The run's outcome, the best validated weights back in the model; on_train_end is the last event."""
        if self._best_state is not None:
            self.model.load_state_dict(self._best_state)
        self.outcome = TrainOutcome(
            status=status, message=message, stopped_early=stopped_early,
            best_epoch=self.best_epoch, best_step=self.best_step, best_metrics=self._best_metrics,
            epochs=list(self.epoch_results), validations=list(self.validations), pairs_seen=self.pairs_seen,
            seconds=self.clock() - started)
        self._emit("on_train_end")
        return self.outcome

    def _emit(self, event: str) -> None:
        for callback in self.callbacks:
            handler = getattr(callback, event, None)
            if handler is not None:
                handler(self)


# ---- mixed precision: auto is bf16 on a CUDA device that has it (no scaler needed), fp16 with a GradScaler on other
# CUDA devices, fp32 on the CPU; bf16 may be asked for on the CPU too (how tests reach the autocast path).
@dataclass(frozen=True)
class AutocastPlan:
    enabled: bool  # run the forward pass under torch.autocast
    dtype: torch.dtype | None  # None when disabled (plain fp32)
    use_scaler: bool  # scale the loss with a GradScaler (fp16 only: its range underflows small gradients)


FP32 = AutocastPlan(False, None, False)


def autocast_plan(device_type: str, precision: str, bf16_supported: bool) -> AutocastPlan:
    """The plan for ``precision`` on ``device_type``; ValueError for fp16 off CUDA or bf16 on a GPU without it."""
    cuda = device_type == "cuda"
    if precision == "fp32" or (precision == "auto" and not cuda):
        return FP32
    if precision == "auto":
        return AutocastPlan(True, torch.bfloat16, False) if bf16_supported else AutocastPlan(True, torch.float16, True)
    if precision == "bf16":
        if cuda and not bf16_supported:
            raise ValueError("precision bf16 is not supported by this GPU; use fp16 or auto")
        return AutocastPlan(True, torch.bfloat16, False)
    if not cuda:
        raise ValueError(f"precision fp16 needs a CUDA device, not {device_type}; use bf16 or fp32 there")
    return AutocastPlan(True, torch.float16, True)


def compile_mode(device_type: str) -> str:
    """CUDA graphs on CUDA (its steps are bound by kernel launches), Inductor's default on the CPU."""
    return "reduce-overhead" if device_type == "cuda" else "default"


def warmup_then_linear_decay(optimizer, total_steps: int, warmup_ratio: float) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over ``warmup_ratio`` of ``total_steps``, then linear decay to 0 (BERT fine-tuning's)."""
    warmup = int(warmup_ratio * total_steps)
    total = max(1, total_steps)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


# ---- a cancel inside a CPU step --------------------------------------------------------------------------------
class StepCancelled(Exception):
    """Raised inside a training step, by a hook of ``StepStop``, once the run's stop flag is set."""


class StepStop:
    """Forward hooks on ``model`` that end a ``with``-block (a CPU step of seconds) at the next module once
    ``stop_event`` is set, before any weight changes; ``stopped`` says so. Never in the backward pass (an exception
    inside autograd can abort the process), never outside ``with``; ``enabled=False`` installs none."""

    def __init__(self, model: torch.nn.Module, stop_event: threading.Event, enabled: bool = True):
        self.stop_event = stop_event
        self.stopped = False  # a step was ended part-way: the run is cancelled
        self._inside = False
        self._handles = [module.register_forward_pre_hook(self._check) for module in model.modules()] if enabled else []

    def _check(self, *_) -> None:
        if self._inside and self.stop_event.is_set():
            raise StepCancelled

    def __enter__(self) -> "StepStop":
        self._inside = True
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        self._inside = False  # a StepCancelled is swallowed: the caller sees ``stopped``, drops the step, ends the run
        if kind is StepCancelled:
            self.stopped = True
            return True
        return False

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []


def built_ahead(items: Iterable, build: Callable, ahead: int) -> Iterator[tuple]:
    """``(item, build(item))`` for each of ``items`` in order, each built on one worker thread up to ``ahead`` items
    before the loop takes it (0: built in the loop). First in, first out, so what is trained does not change; an
    error of ``build`` is raised where its item would come, and leaving the loop stops the thread."""
    if ahead < 1:
        for item in items:
            yield item, build(item)
        return
    pool = ThreadPoolExecutor(1, thread_name_prefix="batches-ahead")
    pending: deque = deque()  # (item, future), oldest first
    try:
        for item in items:
            pending.append((item, pool.submit(build, item)))
            if len(pending) > ahead:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
