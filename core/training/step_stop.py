"""Ending a training step part-way when its run is cancelled.

The trainer checks its stop flag between steps; on the CPU one step of a transformer can take seconds, so a cancel
would wait for the step to end. ``StepStop`` hooks the model instead: before every module's forward pass a set stop
flag raises ``StepCancelled``, which ends the step before its backward pass and its weight update. A cancel that
comes during the backward pass waits for the step to end: an exception raised inside PyTorch's autograd engine (a
gradient hook) can leave the process to abort when it exits. The hooks act only inside ``with step_stop:`` (the
training step), never while validation or anything else runs the model, and ``remove()`` takes them off the model
when the run ends.
"""
from __future__ import annotations

import threading

import torch


class StepCancelled(Exception):
    """Raised inside a training step, by a hook of ``StepStop``, once the run's stop flag is set."""


class StepStop:
    """Hooks on ``model`` that end a ``with``-block (a training step) at the next module's forward pass once
    ``stop_event`` is set; ``stopped`` says so.

    ``enabled=False`` installs nothing (the context then does nothing): where steps are fast (CUDA), compiled (the
    hooks would break the graph) or run by several processes (one process stopping part-way would leave the others
    waiting for it in a collective)."""

    def __init__(self, model: torch.nn.Module, stop_event: threading.Event, enabled: bool = True):
        self.stop_event = stop_event
        self.stopped = False  # a step was ended part-way: the run is cancelled
        self._inside = False
        self._handles = []
        if enabled:
            self._handles = [module.register_forward_pre_hook(self._check) for module in model.modules()]

    def _check(self, *_) -> None:
        if self._inside and self.stop_event.is_set():
            raise StepCancelled

    def __enter__(self) -> "StepStop":
        self._inside = True
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        """Swallows ``StepCancelled`` (then ``stopped`` is True): the caller drops the step and ends the run."""
        self._inside = False
        if kind is StepCancelled:
            self.stopped = True
            return True
        return False

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
