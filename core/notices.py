"""``notice(message)``: a warning about a run or an input that is usable but probably not what the user meant, as a
``LabWarning`` through Python's warnings (``core`` never prints); the CLI shows each as one ``warning:`` line."""
import contextlib
import os
import sys
import warnings


class LabWarning(UserWarning):
    """Something worth a line to the user: training goes on."""


def notice(message: str) -> None:
    warnings.warn(message, LabWarning, stacklevel=2)


@contextlib.contextmanager
def native_stderr_dropped():
    """File descriptor 2 to /dev/null for the block: C++ libraries (the TorchScript exporter, Ray's core worker) write
    there past Python's warnings and logging, and the lab's failures are one line."""
    with contextlib.ExitStack() as restore:
        with contextlib.suppress(OSError, ValueError, AttributeError):  # no usable descriptor 2: nothing to hide
            sys.stderr.flush()
            saved = os.dup(2)
            restore.callback(os.close, saved)
            restore.callback(os.dup2, saved, 2)
            with open(os.devnull, "wb") as null:
                os.dup2(null.fileno(), 2)
        yield
