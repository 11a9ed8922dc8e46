"""``python -m core``: the parser built from the command modules, and ``main(argv)``, the one error boundary:
every expected failure, a user's or the machine's, is one ``error: ...`` line and exit status 2."""
from __future__ import annotations

import argparse
import errno
import sys

from core.cli import calibrate, corpus, dedup, export, predict, score, suggest, train, workspaces
from core.cli.common import CliError, CliParser, help_formatter
from core.data import DataError
from core.device import DeviceError
from core.export.formats import ExportError
from core.export.onnx_backend import OnnxBackendError
from core.saving import ForeignFilesError, ModelLoadError, OutputError

EXIT_USAGE = 2
# The library's own failures, each a message a user can act on: one line, whichever command meets them.
USER_ERRORS = (CliError, DataError, DeviceError, ExportError, OnnxBackendError, ForeignFilesError, ModelLoadError)
# The commands in the order --help lists them.
COMMAND_MODULES = (train, predict, calibrate, corpus, export, score, dedup, suggest, workspaces)


def build_parser() -> argparse.ArgumentParser:
    parser = CliParser(prog="python -m core", formatter_class=help_formatter,
                       description="Siamese networks for duplicate questions: train, evaluate, predict.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CliParser)
    for module in COMMAND_MODULES:
        module.add_parsers(sub)
    return parser


def _show_lab_warnings() -> None:
    """core's LabWarnings print as one ``warning: ...`` line; every other warning as Python shows it."""
    import warnings

    from core.notices import LabWarning

    default = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, LabWarning):
            print(f"warning: {one_line(message)}", file=sys.stderr)
        else:
            default(message, category, filename, lineno, file, line)

    warnings.showwarning = show


# What the machine refuses whatever the command: a full disk or quota, a file too large for the file system,
# a read-only file system, no permission. Any command may meet them; each is one line, like bad input,
# because every writer has already removed its temporaries and left the old target whole.
ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM}


def one_line(text) -> str:
    """``text`` with control and line-break characters escaped, so a quoted file's text prints as one line."""
    return "".join(ch if ch.isprintable() or ch == " " else ascii(ch)[1:-1] for ch in str(text))


def main(argv=None) -> int:
    _show_lab_warnings()
    args = None
    try:
        args = build_parser().parse_args(argv)  # inside the try: building it imports torch, which Ctrl-C may cut
        return args.func(args)
    except USER_ERRORS as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    except OutputError as error:  # a model folder's --out (train, calibrate, export), or a run under --runs
        hint = "; add --overwrite to replace it" if error.reason == "model_exists" else ""
        problem = error.problem.replace("; replacing it needs overwrite", "")
        where = f"--out {error.path}: {problem}{hint}" if getattr(args, "out", None) else str(error)
        print(f"error: {one_line(where)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as error:
        if error.errno not in ENVIRONMENT_ERRNOS:
            raise  # a bug, not the machine: the traceback is what a report needs
        where = f" ({error.filename})" if error.filename else ""
        print(f"error: {one_line(error.strerror or error)}{one_line(where)}; nothing was replaced", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except ModuleNotFoundError as error:  # only the commands that search need FAISS; the others start without it
        if error.name != "faiss":
            raise
        print("error: this command searches with FAISS, which is not installed: pip install 'faiss-cpu>=1.9' "
              "(requirements.txt)", file=sys.stderr)
        return EXIT_USAGE
