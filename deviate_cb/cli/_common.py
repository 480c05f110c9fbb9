"""Pieces every ``deviate`` subcommand shares: the program name, one-line messages, argument types."""

from __future__ import annotations

import argparse
from typing import IO

__all__ = ["PROG", "direction_argument", "say"]

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
