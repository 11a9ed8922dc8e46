"""``python -m core workspaces``: the app's workspaces under a root folder, each with its size and last use,
least recently used first; with ``--remove-idle-days N``, those unused for more than N days are removed.

An operator's command: a workspace is a person's data, models and labels, and its id is its only key, so the
list is printed for whoever runs the server, never shown in the app.
"""
from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone
from pathlib import Path

from core.cli.common import CliError, help_formatter, print_json


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of days, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of days, at least 0, got {text!r}")
    return value


def cmd_workspaces(args) -> int:
    from core.saving.workspaces import list_workspaces, remove_idle_workspaces

    if not Path(args.root).is_dir():
        raise CliError(f"--root {args.root} is not a folder")
    now = time.time()
    usages = list_workspaces(args.root)
    removed = set()
    if args.remove_idle_days is not None:
        removed = {usage.id for usage in remove_idle_workspaces(args.root, args.remove_idle_days, now=now)}
    for usage in usages:
        print_json({"workspace": usage.id, "bytes": usage.bytes,
                    "last_used": datetime.fromtimestamp(usage.last_used, timezone.utc).isoformat(timespec="seconds"),
                    "idle_days": round((now - usage.last_used) / 86_400, 2), "removed": usage.id in removed})
    return 0


def add_parsers(sub) -> None:
    """Register ``workspaces`` on the subparsers ``sub``."""
    parser = sub.add_parser("workspaces", help="list the app's workspaces (size, last use); remove idle ones",
                            formatter_class=help_formatter,
                            description="The app's workspaces under --root, each with its size and last use, least "
                                        "recently used first (one JSON line each); with --remove-idle-days N, those "
                                        "unused for more than N days are removed.")
    parser.add_argument("--root", required=True,
                        help="the app's workspaces folder (its SIAMESE_LAB_WORKSPACES, workspaces/ by default)")
    parser.add_argument("--remove-idle-days", type=_days, default=None, metavar="N",
                        help="remove the workspaces unused for more than N days (a visit counts as a use)")
    parser.set_defaults(func=cmd_workspaces)
