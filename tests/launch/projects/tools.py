"""Trainer functions for ``--trainer SPEC -- ARGS``: argv-reading, click and Hydra-style entry points."""

from __future__ import annotations

import functools
import sys

import click


def echo_argv() -> dict[str, float]:
    """Records the arguments it was given as metrics: ``--lr 0.5`` -> lr=0.5."""
    args = sys.argv[1:]
    return {args[i].lstrip("-"): float(args[i + 1]) for i in range(0, len(args), 2)}


@click.command()
@click.option("--lr", type=float, required=True)
def click_main(lr: float) -> None:
    """A click command: called with no argument, it reads sys.argv and ends with sys.exit(0)."""
    print(f"click lr={lr}")


def reads_config(fn):
    """A decorator like @hydra.main: the wrapper takes no required argument and builds ``cfg`` itself."""

    @functools.wraps(fn)
    def wrapper(cfg_passthrough=None):
        return fn(cfg_passthrough or {"lr": float(sys.argv[-1].split("=")[1])})

    return wrapper


@reads_config
def configured(cfg) -> dict[str, float]:
    return {"lr": cfg["lr"]}
