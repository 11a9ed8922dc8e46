"""The one status vocabulary of a training run, shared by the trainer, the job queue, the CLI and the pages.

A run is ``waiting`` (queued in the app), then ``running``, then ends ``done`` (every planned epoch,
or stopped early by patience or the step cap: the outcome's message says which), ``cancelled``
(by the user; the best model so far is kept) or ``failed`` (the message says what to change). A server stop ends
a running run as Cancel would, ``interrupted``, and a queued one ``not started``.
Model folders saved before this vocabulary record a done run as ``completed`` or ``early_stopped``.
"""
WAITING, RUNNING, DONE, CANCELLED, FAILED = "waiting", "running", "done", "cancelled", "failed"
INTERRUPTED, NOT_STARTED = "interrupted", "not started"
FINISHED = (DONE, CANCELLED, FAILED, INTERRUPTED, NOT_STARTED)

