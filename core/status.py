"""The one status vocabulary of a training run, shared by the trainer, the job queue, the CLI and the pages: a run
is ``waiting`` (queued), ``running``, then ``done`` (planned epochs, patience or the step cap), ``cancelled`` (the best
model kept) or ``failed``; a server stop ends it ``interrupted``, a queued one ``not started``. Older folders record
a done run as ``completed`` or ``early_stopped``."""
WAITING, RUNNING, DONE, CANCELLED, FAILED = "waiting", "running", "done", "cancelled", "failed"
INTERRUPTED, NOT_STARTED = "interrupted", "not started"
FINISHED = (DONE, CANCELLED, FAILED, INTERRUPTED, NOT_STARTED)

