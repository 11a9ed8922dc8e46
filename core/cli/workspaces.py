"""``python -m core workspaces``: the app's workspaces, each with its size and last use; idle ones removed.

An operator's command: a workspace's id is its only key, so the list is printed for whoever runs the server,
never shown in the app."""
from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

from core.cli.common import CliError, help_formatter, number, print_json


def cmd_workspaces(args) -> int:
    from core.saving.workspaces import list_workspaces, remove_idle_workspaces

    if not Path(args.root).is_dir():
        raise CliError(f"--root {args.root} is not a folder")
    now = time.time()
    usages = list_workspaces(args.root)
    removed = set() if args.remove_idle_days is None else {
        usage.id for usage in remove_idle_workspaces(args.root, args.remove_idle_days, now=now)}
    for usage in usages:
        print_json({"workspace": usage.id, "bytes": usage.bytes,
                    "last_used": datetime.fromtimestamp(usage.last_used, timezone.utc).isoformat(timespec="seconds"),
                    "idle_days": round((now - usage.last_used) / 86_400, 2), "removed": usage.id in removed})
    return 0


def add_parsers(sub) -> None:
    what = "list the app's workspaces (size, last use; least recently used first, one JSON line each); remove idle ones"
    parser = sub.add_parser("workspaces", help=what, description=what, formatter_class=help_formatter)
    parser.add_argument("--root", required=True,
                        help="the app's workspaces folder (its SIAMESE_LAB_WORKSPACES, workspaces/ by default)")
    days = number("a finite number of days, at least 0", 0, noun="number of days")
    parser.add_argument("--remove-idle-days", type=days, default=None, metavar="N",
                        help="remove the workspaces unused for more than N days (a visit counts as a use)")
    parser.set_defaults(func=cmd_workspaces)
