"""``deviate status DIR``: per replica, the manifest status and (on Slurm) the job id and its live state.

Example:
    >>> import argparse, io
    >>> parser = argparse.ArgumentParser(); commands = parser.add_subparsers()
    >>> add_status(commands)
    >>> args = parser.parse_args(["status", "/nonexistent"])
    >>> args.handler(args, io.StringIO(), io.StringIO())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    deviate_cb.errors.UsageError: `DIR` must be an existing run directory (...). Received: /nonexistent.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import fields, replace
from pathlib import Path
from typing import IO, Any

from deviate_cb.cli._common import say
from deviate_cb.errors import UsageError
from deviate_cb.report.text.safe import printable, printable_errors

__all__ = ["add_status"]


def add_status(commands: Any) -> None:
    """Declare ``deviate status`` on the ``deviate`` subparsers."""
    parser = commands.add_parser(
        "status",
        help="show each replica's state (and its Slurm job) in a run directory",
        description="Per replica: manifest status, backend, cluster job id and live state, host, duration; then, "
        "on stderr, a warning per problem of the completed replicas (seeds or determinism switches not in effect, "
        "algo/algo+impl replicas that came out bit-identical, control replicas that differ, project seeds kept, "
        "nothing injected).",
    )
    parser.add_argument("dir", metavar="DIR", help="the --out directory of deviate-replicate")
    parser.add_argument("--no-cluster", action="store_true", help="do not ask Slurm (squeue/sacct): manifests only")
    parser.set_defaults(handler=_run_status)


def _run_status(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.launch.status import collect_status, format_status

    root = Path(args.dir)
    if not root.is_dir():
        raise UsageError(
            f"`DIR` must be an existing run directory (the --out of deviate-replicate). Received: {args.dir}."
        )
    try:
        os.scandir(root).close()
    except PermissionError:
        raise UsageError(f"`DIR` cannot be read (permission denied). Received: {args.dir}.") from None
    warnings: list[str] = []
    with printable_errors():
        rows = collect_status(root, ask_cluster=not args.no_cluster, warnings=warnings)
        if not rows:  # the usage error below would hide why (folders that cannot be read, links)
            for line in warnings:
                say(err, "warning", printable(line))
        # Directory names and manifest strings (host, backend, status) are printed with control characters escaped
        text: dict[str, Any]
        shown = []
        for row in rows:
            text = {f.name: printable(getattr(row, f.name)) for f in fields(row) if f.type in ("str", str)}
            shown.append(replace(row, **text))
        out.write(format_status(shown, printable(args.dir)) + "\n")
    out.flush()
    for line in warnings:
        say(err, "warning", printable(line))
    from deviate_cb.report.answers.findings import format_problem
    from deviate_cb.report.answers.problems import study_problems

    for problem in study_problems(root):  # the completed replicas' manifests (and footers where needed)
        say(err, "warning", printable(format_problem(problem)))
    return 0
