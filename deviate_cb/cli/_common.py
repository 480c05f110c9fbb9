"""Pieces every ``deviate`` subcommand shares: the program name, one-line messages, argument types."""

from __future__ import annotations

import argparse
from typing import IO

__all__ = ["PROG", "add_per_run_arguments", "direction_argument", "per_run_options", "say"]

PROG = "deviate"


def direction_argument(text: str) -> tuple[str, str]:
    """Parse ``--direction NAME=max|min``.

    Example:
        >>> direction_argument("val/loss=min")
        ('val/loss', 'min')
    """
    name, sep, direction = text.rpartition("=")
    if not sep or not name or direction not in ("max", "min"):
        raise argparse.ArgumentTypeError(f"expected NAME=max or NAME=min. Received: --direction={text!r}")
    return name, direction


def say(stream: IO[str], kind: str, message: str) -> None:
    """Write ``deviate: <kind>: <message>`` as one line."""
    stream.write(f"{PROG}: {kind}: {' '.join(message.split())}\n")
    stream.flush()


def add_per_run_arguments(p: argparse.ArgumentParser) -> None:
    """``--metric``, ``--aggregate`` and ``--direction``: which metrics, and how a run's series becomes one number
    (report, compare and power; :func:`per_run_options` checks them against ``--table``)."""
    from deviate_cb.stats.aggregation.spec import AGGREGATES

    p.add_argument(
        "--metric", action="append", default=[], metavar="NAME", help="only these metrics (repeatable; fnmatch)"
    )
    p.add_argument("--aggregate", choices=AGGREGATES, default=None, help="per-run reduction (default: last)")
    p.add_argument(
        "--direction",
        action="append",
        default=[],
        type=direction_argument,
        metavar="NAME=max|min",
        help="whether larger is better for a metric, for --aggregate best (repeatable; inferred from the name)",
    )


def per_run_options(args: argparse.Namespace) -> None:
    """Refuse ``--aggregate``/``--direction``/``--stage`` with ``--table``, then fill in ``--aggregate``'s default.

    They say how a run's long metrics become one number per run; the rows of a ``--table`` already are one
    number per run, so the options would be silently ignored.

    Example:
        >>> args = argparse.Namespace(table=None, aggregate=None, direction=[], stage=None)
        >>> per_run_options(args); args.aggregate
        'last'
    """
    from deviate_cb.errors import UsageError

    if args.table:
        given = [f"--aggregate={args.aggregate}"] if args.aggregate is not None else []
        given += [f"--direction={name}={how}" for name, how in getattr(args, "direction", [])]
        given += [f"--stage={args.stage}"] if getattr(args, "stage", None) is not None else []
        if given:
            raise UsageError(
                f"`{given[0].split('=')[0]}` does not apply to `--table`, whose rows already hold one value per run. "
                f"Received: {given[0]} with --table. Reduce the runs before writing the table, or give DIR instead."
            )
    if args.aggregate is None:
        args.aggregate = "last"
