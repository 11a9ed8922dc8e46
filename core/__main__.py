import signal
import sys

# A Ctrl-C that lands inside numpy's or torch's own import can be swallowed by a broad `except` in
# their import machinery and leave a half-initialised module behind (CI saw "numpy has no attribute
# matrix" seconds later). So the libraries every command loads anyway are imported with the
# interrupt held back, and a Ctrl-C received meanwhile ends the run cleanly right after.
_interrupted = []
_previous = signal.signal(signal.SIGINT, lambda signum, frame: _interrupted.append(signum))
try:
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import torch  # noqa: F401

    from core.cli.main import main
finally:
    signal.signal(signal.SIGINT, _previous)
if _interrupted:
    print("error: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
