"""Pieces every ``deviate`` subcommand shares: the program name, one-line messages, argument types."""

from __future__ import annotations

import argparse
from typing import IO

__all__ = ["PROG", "direction_argument", "per_run_options", "say"]

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
