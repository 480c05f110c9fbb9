"""The ``deviate`` command: ``deviate report DIR`` (more subcommands follow the same pattern).

Each subcommand is a pair of functions: ``_add_<name>(subparsers)`` declares its arguments and
``_run_<name>(args, out, err)`` does the work and returns the exit status. Exit status 0 is success and 2 a
usage error, reported as one line on stderr (``deviate: error: ...``), never a traceback; warnings go to
stderr as ``deviate: warning: ...`` lines.

Example:
    >>> main(["report", "/nonexistent/runs"])
    2
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import IO, NoReturn, Optional

from deviate_cb.errors import UsageError

__all__ = ["build_parser", "main"]

PROG = "deviate"


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors become :class:`UsageError` (one line, exit 2) instead of usage dumps."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{' '.join(message.split())}. See `{self.prog} --help`.")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``deviate`` with one subparser per subcommand."""
    parser = _Parser(prog=PROG, description="Measure the variance of deep-learning training runs.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    _add_report(commands)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run ``deviate`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit status."""
    out, err = sys.stdout, sys.stderr
    try:
        args = build_parser().parse_args(argv)
        return int(args.handler(args, out, err))
    except UsageError as exc:
        _say(err, "error", str(exc))
        return 2
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        _say(err, "error", "interrupted.")
        return 130
    except BrokenPipeError:  # `deviate report runs | head`: stop quietly, also at interpreter exit
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        return 0


def _add_report(commands: argparse._SubParsersAction) -> None:
    from deviate_cb.report.render import FORMATS
    from deviate_cb.stats.aggregate import AGGREGATES
    from deviate_cb.store import STAGES

    p = commands.add_parser(
        "report",
        help="spread of every metric across the runs of each (experiment, variant) group",
        description="Per (experiment, variant) group and metric: n, mean, std (ddof=1), cv, min, max, range and a "
        "chi-square confidence interval of the std, over the completed runs under DIR. Runs that did not complete "
        "are listed apart and left out.",
    )
    p.add_argument("dir", metavar="DIR", help="study directory (<DIR>/experiment=<e>/variant=<v>/replica=<k>/)")
    p.add_argument("--aggregate", choices=AGGREGATES, default="last", help="per-run reduction (default: last)")
    p.add_argument(
        "--direction",
        action="append",
        default=[],
        type=_direction,
        metavar="NAME=max|min",
        help="whether larger is better for a metric, for --aggregate best (repeatable; inferred from the name)",
    )
    p.add_argument(
        "--metric", action="append", default=[], metavar="NAME", help="only these metrics (repeatable; fnmatch)"
    )
    p.add_argument("--stage", choices=STAGES, default=None, help="only metrics of this stage")
    p.add_argument("--level", type=float, default=0.95, help="confidence level of the std interval (default 0.95)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    p.set_defaults(handler=_run_report)


def _run_report(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.report.render import excluded_line, print_table, render
    from deviate_cb.report.summary import build_report

    if not 0.0 < args.level < 1.0:
        raise UsageError(f"`--level` must be in (0, 1). Received: --level={args.level!r}.")
    report = build_report(
        args.dir,
        aggregate=args.aggregate,
        directions=dict(args.direction),
        metrics=args.metric or None,
        stage=args.stage,
        level=args.level,
    )
    for line in report.warnings:
        _say(err, "warning", line)
    if args.format in ("csv", "json"):
        for run in report.excluded:
            _say(err, "warning", excluded_line(run))
    if args.format == "table":
        print_table(report, out)
    else:
        out.write(render(report, args.format))
        if args.format == "json":
            out.write("\n")
    out.flush()
    return 0


def _direction(text: str) -> tuple[str, str]:
    name, sep, direction = text.rpartition("=")
    if not sep or not name or direction not in ("max", "min"):
        raise argparse.ArgumentTypeError(f"expected NAME=max or NAME=min. Received: --direction={text!r}")
    return name, direction


def _say(stream: IO[str], kind: str, message: str) -> None:
    stream.write(f"{PROG}: {kind}: {' '.join(message.split())}\n")
    stream.flush()


if __name__ == "__main__":
    raise SystemExit(main())
