"""``deviate bench``: the determinism overhead of built-in models or a user step function, on this machine.

Example:
    >>> import argparse, io
    >>> parser = argparse.ArgumentParser(); commands = parser.add_subparsers()
    >>> add_bench(commands)
    >>> args = parser.parse_args(["bench", "--windows", "0"])
    >>> args.handler(args, io.StringIO(), io.StringIO())
    Traceback (most recent call last):
    ...
    deviate_cb.errors.UsageError: `--windows` must be an integer >= 1. Received: --windows=0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO, Any

from deviate_cb.errors import UsageError

__all__ = ["add_bench"]


def add_bench(commands: Any) -> None:
    """Declare ``deviate bench`` on the ``deviate`` subparsers."""
    from deviate_cb.bench.models import KERAS_MODELS, TORCH_MODELS

    parser = commands.add_parser(
        "bench",
        help="measure what deterministic tooling costs (steps/s off vs on, per-op times)",
        description="Steps per second with determinism off and on, measured as interleaved off/on windows after a "
        "warm-up (torch: one process; Keras on TensorFlow: alternating fresh processes), the median on/off ratio with "
        "an order-statistic confidence interval, and the ops whose time changed most (profiler windows). Models: "
        f"{', '.join(TORCH_MODELS)} (torch) and {', '.join(KERAS_MODELS)} (Keras on TensorFlow), or all; "
        "--trainer mod:fn benchmarks your own torch step: fn(device=..., batch_size=...) returns (model, step), "
        "step() running one training step.",
    )
    parser.add_argument(
        "--model",
        action="append",
        default=None,
        metavar="NAME",
        help="a built-in model, or all (repeatable; default small_cnn unless --trainer is given)",
    )
    parser.add_argument(
        "--trainer", metavar="MOD:FN", help="a torch step factory: fn(device, batch_size) -> (model, step)"
    )
    parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu or cuda (default auto)")
    parser.add_argument("--windows", type=int, default=None, help="off/on window pairs (default 6; Keras models: 2)")
    parser.add_argument("--steps-per-window", type=int, default=10, help="timed steps per window (default 10)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per mode first (default 5)")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size (default 32)")
    parser.add_argument("--profile-steps", type=int, default=3, help="profiled steps per mode; 0: no op breakdown")
    parser.add_argument("--level", type=float, default=0.95, help="confidence level of the ratio's CI (default 0.95)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the model and data (default 0)")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="output format (default table)")
    parser.add_argument("--out", metavar="DIR", help="also store the results: DIR/experiment=bench/variant=<model>/...")
    parser.set_defaults(handler=_run_bench)


def _run_bench(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.bench import ALL_MODELS, run_bench
    from deviate_cb.bench.results import print_table, to_json, write_results
    from deviate_cb.cli._common import say

    models = args.model if args.model is not None else ([] if args.trainer else ["small_cnn"])
    if "all" in models:
        models = list(ALL_MODELS)
    for flag, value, low in (
        ("--windows", args.windows, 1),
        ("--steps-per-window", args.steps_per_window, 1),
        ("--warmup", args.warmup, 0),
        ("--batch-size", args.batch_size, 1),
        ("--profile-steps", args.profile_steps, 0),
    ):
        if value is not None and value < low:
            raise UsageError(f"`{flag}` must be an integer >= {low}. Received: {flag}={value}.")
    if not 0 < args.level < 1:
        raise UsageError(f"`--level` must be between 0 and 1. Received: --level={args.level}.")
    if args.out is not None and Path(args.out).exists() and not Path(args.out).is_dir():
        raise UsageError(f"`--out` must be a directory. Received: --out={args.out} (a file).")
    results = run_bench(
        models,
        trainer=args.trainer,
        device=args.device,
        windows=6 if args.windows is None else args.windows,
        keras_windows=2 if args.windows is None else args.windows,  # Keras pays a process start per window
        steps_per_window=args.steps_per_window,
        warmup=args.warmup,
        batch_size=args.batch_size,
        profile_steps=args.profile_steps,
        seed=args.seed,
        level=args.level,
    )
    if args.format == "json":
        out.write(to_json(results) + "\n")
    else:
        print_table(results, out)
    if args.out is not None:
        paths = write_results(Path(args.out), results, argv=["deviate", *sys.argv[1:]])
        say(err, "info", f"stored {len(paths)} result(s) under {args.out}")
    out.flush()
    return 0
