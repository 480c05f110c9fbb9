"""The ``deviate`` command: ``deviate report``, ``deviate compare`` and ``deviate power``.

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
    _add_compare(commands)
    _add_power(commands)
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
        "are listed apart and left out. When an experiment holds the variants impl and algo+impl (or control and "
        "algo), the table and md formats end with the variance decomposition: std(impl)/std(algo+impl) and "
        "std(control)/std(algo) per metric, with a bootstrap CI (seed --seed); --decomposition makes csv and json "
        "write the decomposition rows instead of the per-group rows. --table FILE --group-by COLUMN reports on "
        "results made elsewhere (CSV or Parquet, one row per run, every numeric column a metric).",
    )
    p.add_argument(
        "dir", metavar="DIR", nargs="?", help="study directory (<DIR>/experiment=<e>/variant=<v>/replica=<k>/)"
    )
    p.add_argument("--table", metavar="FILE", help="a CSV or Parquet file with one row per run, instead of DIR")
    p.add_argument("--group-by", metavar="COLUMN", help="the --table column naming each run's group (variant)")
    p.add_argument(
        "--decomposition",
        action="store_true",
        help="with --format csv or json: write the variance decomposition rows instead of the per-group rows",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the decomposition bootstrap (default 0)")
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
    decompose = args.decomposition or args.format in ("table", "md")
    if args.table is not None:
        if args.dir is not None:
            raise UsageError(
                f"give either DIR or `--table`, not both. Received: DIR={args.dir!r}, --table={args.table!r}."
            )
        from deviate_cb.report.table_input import table_report

        report = table_report(
            args.table,
            args.group_by,
            level=args.level,
            metrics=args.metric or None,
            decompose=decompose,
            seed=args.seed,
        )
    elif args.dir is None:
        raise UsageError("the following arguments are required: DIR. See `deviate report --help`.")
    else:
        if args.group_by is not None:
            raise UsageError(f"`--group-by` needs `--table`. Received: --group-by={args.group_by!r} without --table.")
        report = build_report(
            args.dir,
            aggregate=args.aggregate,
            directions=dict(args.direction),
            metrics=args.metric or None,
            stage=args.stage,
            level=args.level,
            decompose=decompose,
            seed=args.seed,
        )
    for line in report.warnings:
        _say(err, "warning", line)
    if args.format in ("csv", "json"):
        for run in report.excluded:
            _say(err, "warning", excluded_line(run))
    if args.format == "table":
        print_table(report, out)
    elif args.decomposition and args.format in ("csv", "json"):
        from deviate_cb.report.render import decomposition_json, render_records

        if args.format == "json":
            out.write(decomposition_json(report) + "\n")
        else:
            from deviate_cb.report.decomposition import DECOMPOSITION_COLUMNS

            rows = [d.as_dict() for d in report.decomposition]
            out.write(render_records(rows, DECOMPOSITION_COLUMNS, "csv"))
    else:
        out.write(render(report, args.format))
        if args.format == "json":
            out.write("\n")
    out.flush()
    return 0


def _add_sources(p: argparse.ArgumentParser, dirs: str) -> None:
    """Arguments shared by compare and power: where the runs come from and how each becomes one number."""
    from deviate_cb.stats.aggregate import AGGREGATES

    p.add_argument("dirs", metavar="DIR", nargs="*", help=dirs)
    p.add_argument(
        "--table",
        action="append",
        default=[],
        metavar="FILE",
        help="a CSV or Parquet file with one row per run (every numeric column a metric), instead of DIR",
    )
    p.add_argument("--group-by", metavar="COLUMN", help="the --table column naming each run's group")
    p.add_argument(
        "--metric", action="append", default=[], metavar="NAME", help="only these metrics (repeatable; fnmatch)"
    )
    p.add_argument("--aggregate", choices=AGGREGATES[:3], default="last", help="per-run reduction (default: last)")
    p.add_argument(
        "--direction",
        action="append",
        default=[],
        type=_direction,
        metavar="NAME=max|min",
        help="whether larger is better for a metric, for --aggregate best (repeatable; inferred from the name)",
    )
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")


def _load(args: argparse.Namespace, source: str, warnings: list[str]) -> list:
    """The completed runs of one DIR or one --table file, as RunValues; warnings are appended to ``warnings``."""
    from deviate_cb.report.runset import store_runs
    from deviate_cb.report.table_input import read_run_table

    if source in args.table:
        runs = read_run_table(source, args.group_by, warnings, args.metric or None)
    else:
        runs = store_runs(
            source,
            aggregate=args.aggregate,
            directions=dict(args.direction),
            metrics=args.metric or None,
            warnings=warnings,
        )
    return runs


def _terms(args: argparse.Namespace, texts: Sequence[str], option: str) -> list[tuple[str, str]]:
    from deviate_cb.report.runset import parse_term

    if args.group_by is not None:
        return [(args.group_by, t) if "=" not in t else parse_term(t, option) for t in texts]
    return [parse_term(t, option) for t in texts]


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise UsageError(f"`--alpha` must be in (0, 1). Received: --alpha={alpha!r}.")


def _add_compare(commands: argparse._SubParsersAction) -> None:
    from deviate_cb.report.render import FORMATS

    p = commands.add_parser(
        "compare",
        help="is A really better than B? every test and effect size, per metric",
        description="Compare two groups of completed runs, per metric present in both: means, the mean difference "
        "with a bootstrap CI, Welch's t (p raw and corrected across the metrics compared), Mann-Whitney U, Cohen's d "
        "and Hedges' g with CIs, P(A>B) with a bootstrap CI, the Brown-Forsythe variance test, Almost Stochastic "
        "Order's epsilon_min of A over B, and a verdict. Groups: `DIR --a KEY=VALUE --b KEY=VALUE` (any partition "
        "key; several --a terms are ANDed), `DIR_A DIR_B`, `--table A.csv --table B.csv`, or `--table ALL.csv "
        "--group-by COLUMN --a VALUE --b VALUE`. Metrics in one group only, or with fewer than 2 runs in a group, "
        "are listed with the reason.",
    )
    _add_sources(p, "one study directory (with --a/--b) or two (A then B)")
    p.add_argument("--a", action="append", default=[], metavar="KEY=VALUE", help="runs of group A (repeatable, ANDed)")
    p.add_argument("--b", action="append", default=[], metavar="KEY=VALUE", help="runs of group B (repeatable, ANDed)")
    p.add_argument(
        "--correction",
        choices=("holm", "bh", "bonferroni", "none"),
        default="holm",
        help="multiple-comparison correction across the metrics compared (default: holm)",
    )
    p.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstraps (default 0: reproducible)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    p.set_defaults(handler=_run_compare)


def _run_compare(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.report.comparison import COMPARE_COLUMNS, COMPARE_HUMAN, compare_groups
    from deviate_cb.report.render import render_records
    from deviate_cb.report.runset import select

    _check_alpha(args.alpha)
    if not 0.0 < args.level < 1.0:
        raise UsageError(f"`--level` must be in (0, 1). Received: --level={args.level!r}.")
    sources = [*args.dirs, *args.table]
    if args.dirs and args.table:
        raise UsageError(f"give DIR or `--table`, not both. Received: DIR={args.dirs[0]!r}, --table={args.table[0]!r}.")
    if len(sources) not in (1, 2):
        what = "DIR" if args.dirs else "--table"
        raise UsageError(f"`compare` takes one or two sources ({what}). Received: {len(sources)}.")
    a_terms, b_terms = _terms(args, args.a, "--a"), _terms(args, args.b, "--b")
    warnings: list[str] = []
    if len(sources) == 1:
        if not a_terms or not b_terms:
            raise UsageError("with one source, both `--a` and `--b` are required. Received: " + _received(args))
        runs = _load(args, sources[0], warnings)
        group_a, group_b = select(runs, a_terms, "--a"), select(runs, b_terms, "--b")
        label_a = " ".join(f"{k}={v}" for k, v in a_terms)
        label_b = " ".join(f"{k}={v}" for k, v in b_terms)
    else:
        runs_a, runs_b = _load(args, sources[0], warnings), _load(args, sources[1], warnings)
        group_a = select(runs_a, a_terms, "--a") if a_terms else runs_a
        group_b = select(runs_b, b_terms, "--b") if b_terms else runs_b
        label_a, label_b = sources
    if not group_a or not group_b:
        raise UsageError(f"group {'A' if not group_a else 'B'} holds no completed run. Received: " + _received(args))
    for line in warnings:
        _say(err, "warning", line)
    correction = None if args.correction == "none" else args.correction
    rows = compare_groups(group_a, group_b, alpha=args.alpha, correction=correction, level=args.level, seed=args.seed)
    for row in rows:
        if row["status"] == "skipped" and args.format in ("csv", "json"):
            _say(err, "warning", f"metric `{row['metric']}` not compared: {row['reason']}.")
    how = "" if args.table else f"  aggregate={args.aggregate}"
    title = f"A: {label_a} ({len(group_a)} runs)  vs  B: {label_b} ({len(group_b)} runs){how}"
    notes = (
        f"diff: mean(A) - mean(B) with {args.level:.0%} bootstrap CI; p: Welch t, p adj: {args.correction}; "
        "MW p: Mann-Whitney U (two-sided); var p: Brown-Forsythe; ASO eps: epsilon_min of A over B "
        "(< 0.2: A almost dominates).",
    )
    text = render_records(rows, COMPARE_COLUMNS, args.format, title=title, human=COMPARE_HUMAN, notes=notes, file=out)
    out.write(text + ("\n" if args.format == "json" else ""))
    out.flush()
    return 0


def _received(args: argparse.Namespace) -> str:
    return f"--a={args.a!r}, --b={args.b!r}."


def _add_power(commands: argparse._SubParsersAction) -> None:
    from deviate_cb.report.render import FORMATS

    p = commands.add_parser(
        "power",
        help="how many runs per group you need to detect a difference, from the spread measured",
        description="Per group (experiment, variant; or the --group-by column of --table) and metric: the measured "
        "std (ddof=1), the runs per group Welch's t-test needs to detect a difference of --effect (in the metric's "
        "units) at --power, and the power of the runs already made.",
    )
    _add_sources(p, "study directory")
    p.add_argument("--effect", type=float, required=True, help="difference of means to detect, in the metric's units")
    p.add_argument("--power", type=float, default=0.8, help="wanted power (default 0.8)")
    p.add_argument(
        "--group", action="append", default=[], metavar="KEY=VALUE", help="only runs with these keys (repeatable)"
    )
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    p.set_defaults(handler=_run_power)


def _run_power(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.report.comparison import POWER_COLUMNS, POWER_HUMAN, power_rows
    from deviate_cb.report.render import render_records
    from deviate_cb.report.runset import select

    _check_alpha(args.alpha)
    if not args.effect > 0:
        raise UsageError(f"`--effect` must be a positive number. Received: --effect={args.effect!r}.")
    if not 0.0 < args.power < 1.0:
        raise UsageError(f"`--power` must be in (0, 1). Received: --power={args.power!r}.")
    sources = [*args.dirs, *args.table]
    if len(sources) != 1:
        raise UsageError(f"`power` takes one DIR or one `--table`. Received: {len(sources)} sources.")
    warnings: list[str] = []
    runs = _load(args, sources[0], warnings)
    if args.group:
        runs = select(runs, _terms(args, args.group, "--group"), "--group")
    for line in warnings:
        _say(err, "warning", line)
    groups: dict[str, list] = {}
    for run in runs:
        if args.table:
            label = f"{args.group_by}={run.keys[args.group_by]}" if args.group_by else "all"
        else:
            label = f"experiment={run.keys['experiment']} variant={run.keys['variant']}"
        groups.setdefault(label, []).append(run)
    rows = power_rows(sorted(groups.items()), effect=args.effect, alpha=args.alpha, power=args.power)
    notes = tuple(r["summary"] for r in rows) if args.format in ("table", "md") else ()
    title = (
        f"power to detect a difference of {args.effect:g} (alpha {args.alpha:g}, Welch t, aggregate={args.aggregate})"
    )
    out.write(render_records(rows, POWER_COLUMNS, args.format, title=title, human=POWER_HUMAN, notes=notes, file=out))
    out.write("\n" if args.format == "json" else "")
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
