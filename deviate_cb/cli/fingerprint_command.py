"""``deviate fingerprint``: this machine's fingerprint, as a table or JSON.

Example:
    >>> import argparse, io, json
    >>> parser = argparse.ArgumentParser(); commands = parser.add_subparsers()
    >>> add_fingerprint(commands)
    >>> args = parser.parse_args(["fingerprint", "--format", "json", "--no-import"])
    >>> out = io.StringIO(); args.handler(args, out, io.StringIO())
    0
    >>> sorted(json.loads(out.getvalue()))[:3]
    ['blas', 'collected_at', 'cpu']
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
from typing import IO, Any

from deviate_cb.errors import UsageError

__all__ = ["add_fingerprint", "fingerprint_rows"]

_IMPORTABLE = ("torch", "tensorflow", "keras", "jax", "lightning")


def add_fingerprint(commands: Any) -> None:
    """Declare ``deviate fingerprint`` on the ``deviate`` subparsers."""
    parser = commands.add_parser(
        "fingerprint",
        help="print this machine's hardware/software fingerprint",
        description="The fingerprint a run records (GPUs, driver, CUDA, cuDNN, NCCL, library versions, threads, "
        "determinism switches). torch is imported first when installed, so that its run-time facts are filled in; "
        "--import tensorflow (or keras, jax, lightning, torch; repeatable) imports those instead.",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table", help="output format (default table)")
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="FRAMEWORK",
        help=f"import a framework first: one of {', '.join(_IMPORTABLE)} (repeatable)",
    )
    parser.add_argument("--no-import", action="store_true", help="import no framework: installed versions only")
    parser.set_defaults(handler=_run_fingerprint)


def _run_fingerprint(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.fingerprint.collect import collect_fingerprint

    imports = list(args.imports)
    if not imports and not args.no_import and importlib.util.find_spec("torch") is not None:
        imports = ["torch"]
    for name in imports if not args.no_import else []:
        if name not in _IMPORTABLE:
            raise UsageError(f"`--import` must be one of {', '.join(_IMPORTABLE)}. Received: --import={name}.")
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise UsageError(f"`--import {name}`: {name} is not installed ({exc}).") from exc
    fingerprint = collect_fingerprint()
    if args.format == "json":
        out.write(json.dumps({k: v for k, v in fingerprint.items() if k != "flat"}, indent=2, default=str) + "\n")
    else:
        _print_table(fingerprint, out)
    out.flush()
    return 0


def fingerprint_rows(fingerprint: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, value) rows for display: absent sections as one row with their reason; ISA flags counted.

    Example:
        >>> fingerprint_rows({"seed": 1, "cuda": {"present": False, "reason": "no NVIDIA driver", "runtime": None}})
        [('seed', '1'), ('cuda', 'absent: no NVIDIA driver')]
    """
    from deviate_cb.fingerprint.collect import flatten

    rows: list[tuple[str, str]] = []
    for section, value in fingerprint.items():
        if section == "flat":
            continue
        if isinstance(value, dict) and value.get("present") is False:
            rows.append((section, f"absent: {value.get('reason')}"))
        elif isinstance(value, dict):
            for field, item in flatten(value, f"{section}.").items():
                if field.endswith(".present"):
                    continue
                if field == "cpu.flags" and isinstance(item, str):
                    item = f"{len(item.split())} flags (--format json lists them)"
                rows.append((field, _text(item)))
        else:
            rows.append((section, _text(value)))
    return rows


def _text(value: Any) -> str:
    return "-" if value is None else value if isinstance(value, str) else json.dumps(value, default=str)


def _print_table(fingerprint: dict[str, Any], out: IO[str]) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(title="deviate fingerprint", box=box.SIMPLE_HEAD)
    table.add_column("field", no_wrap=True)
    table.add_column("value", overflow="fold")
    for field, value in fingerprint_rows(fingerprint):
        table.add_row(field, value, style="dim" if value.startswith("absent:") else None)
    Console(file=out, width=120 if not out.isatty() else None, soft_wrap=False).print(table)
