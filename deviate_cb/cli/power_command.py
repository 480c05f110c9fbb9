"""``deviate power``: how many runs per group are needed to detect a difference, from the spread measured.

Example:
    >>> import argparse, io
    >>> parser = argparse.ArgumentParser(); commands = parser.add_subparsers()
    >>> add_power(commands)
    >>> args = parser.parse_args(["power", "runs", "--effect", "0.1", "--power", "2"])
    >>> args.handler(args, io.StringIO(), io.StringIO())
    Traceback (most recent call last):
    ...
    deviate_cb.errors.UsageError: `--power` must be in (0, 1). Received: --power=2.0.
"""

from __future__ import annotations

import argparse
from typing import IO, Optional

from deviate_cb.cli._common import per_run_options, say
from deviate_cb.cli.sources import (
    add_sources,
    check_alpha,
    load_runs,
    one_group,
    parse_terms,
    pooled_words,
    say_pooled,
    warn_problems,
)
from deviate_cb.errors import UsageError
from deviate_cb.report.text.safe import printable, printable_errors
from deviate_cb.report.text.spreadsheet import counted_escapes, escape_note

__all__ = ["add_power"]


def add_power(commands: argparse._SubParsersAction) -> None:
    """Declare ``deviate power`` on the ``deviate`` subparsers."""
    from deviate_cb.report.rendering.formats import FORMATS

    p = commands.add_parser(
        "power",
        help="how many runs per group you need to detect a difference, from the spread measured",
        description="Per group (experiment, variant; or the --group-by column of --table) and metric: the measured "
        "std (ddof=1), the runs per group Welch's t-test needs to detect a difference of --effect (in the metric's "
        "units) at --power, planned on the std's 80% upper confidence limit (reached with 80% probability for normal "
        "runs; the sentence gives the expected power, the runs at the measured std and across the std's interval), "
        "and the power of the runs already made. With --budget, first a sentence per group and "
        "metric: what those runs cost in run-hours (the mean wall time, run.json duration_s, of the group's completed "
        "runs) and the smallest difference the runs the budget buys detect (half the budget to each of the two "
        "groups of a comparison). Each group must be one configuration (else refused, unless --pool).",
    )
    add_sources(p, "study directory")
    p.add_argument("--effect", type=float, help="difference of means to detect, in the metric's units")
    p.add_argument("--power", type=float, default=0.8, help="wanted power (default 0.8)")
    p.add_argument(
        "--budget",
        metavar="DURATION",
        help="run-hours to spend (20h, 90m, 3600s; a plain number is hours), split evenly between the two groups of "
        "a comparison: with it, what the runs needed cost (the mean measured wall time, run.json duration_s, of "
        "each group's completed runs) and the smallest difference the runs the budget buys detect; --effect may "
        "then be left out",
    )
    p.add_argument(
        "--group", action="append", default=[], metavar="KEY=VALUE", help="only runs with these keys (repeatable)"
    )
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    p.set_defaults(handler=_run_power)


def _run_power(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    with counted_escapes() as escaped, printable_errors():  # errors may quote stored names (partition values...)
        code = _power(args, out, err)
    if note := escape_note(escaped.count):  # csv: text a spreadsheet would run was escaped
        say(err, "note", note)
    return code


def _power(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.report.answers.comparison import POWER_COLUMNS, POWER_HUMAN, power_rows
    from deviate_cb.report.reading.selection import select
    from deviate_cb.report.text.tables import render_records

    check_alpha(args.alpha)
    per_run_options(args)
    budget_h = None
    if args.budget is not None:
        from deviate_cb.report.answers.budget import parse_budget

        budget_h = parse_budget(args.budget)
    elif args.effect is None:
        raise UsageError(
            "the following arguments are required: --effect. (With `--budget`, it may be left out: the smallest "
            "difference the budget detects is given.)"
        )
    if args.effect is not None and not args.effect > 0:
        raise UsageError(f"`--effect` must be a positive number. Received: --effect={args.effect!r}.")
    if not 0.0 < args.power < 1.0:
        raise UsageError(f"`--power` must be in (0, 1). Received: --power={args.power!r}.")
    sources = [*args.dirs, *args.table]
    if len(sources) != 1:
        raise UsageError(f"`power` takes one DIR or one `--table`. Received: {len(sources)} sources.")
    warnings: list[str] = []
    runs = load_runs(args, sources[0], warnings)
    if args.group:
        runs = select(runs, parse_terms(args, args.group, "--group"), "--group")
    groups: dict[str, list] = {}
    for run in runs:
        if args.table:
            label = f"{args.group_by}={run.keys[args.group_by]}" if args.group_by else "all"
        else:
            label = f"experiment={run.keys['experiment']} variant={run.keys['variant']}"
        groups.setdefault(label, []).append(run)
    received = " ".join(f"--group {t}" for t in args.group) or (
        sources[0] if args.group_by is None else f"--group-by {args.group_by}"
    )
    pooled = {}
    for label, group in groups.items():  # each group one configuration
        fix = (
            "Add {key}=... to --group (one of: {values})"
            if args.group
            else "Pick one with --group {key}=... (one of: {values})"
        )
        words = one_group(args, group, "--group", received, subject=f"group {label} holds", fix=fix)
        if words:
            pooled[label] = words
    for line in warnings:
        say(err, "warning", printable(line))
    warn_problems(args, [(sources[0], runs)], err)
    for label, words in pooled.items():
        say_pooled(err, f"group {label}", words)
    if budget_h is not None:
        return _power_budget(args, sources[0], dict(sorted(groups.items())), budget_h, out, pooled)
    rows = power_rows(sorted(groups.items()), effect=args.effect, alpha=args.alpha, power=args.power, pool=args.pool)
    notes = tuple(r["summary"] for r in rows) if args.format in ("table", "md") else ()
    title = (
        f"power to detect a difference of {args.effect:g} (alpha {args.alpha:g}, Welch t, aggregate={args.aggregate})"
        + _pooled_groups(pooled)
    )
    out.write(render_records(rows, POWER_COLUMNS, args.format, title=title, human=POWER_HUMAN, notes=notes, file=out))
    out.write("\n" if args.format == "json" else "")
    out.flush()
    return 0


def _pooled_groups(pooled: dict[str, str]) -> str:
    """``; group G: POOLED with --pool: ...`` per group that pools configurations, for a title."""
    return "".join(f"; group {label}{pooled_words(words)}" for label, words in sorted(pooled.items()))


def _power_budget(
    args: argparse.Namespace,
    source: str,
    groups: dict[str, list],
    budget_h: float,
    out: IO[str],
    pooled: Optional[dict[str, str]] = None,
) -> int:
    """``power --budget``: a sentence per group and metric first (the runs needed for --effect, what they cost,
    what the budget buys and detects), then the table with the cost and budget columns (``pooled``: the groups
    that pool configurations, with --pool)."""
    from deviate_cb.report.answers.budget import (
        BUDGET_COLUMNS,
        BUDGET_NOTE,
        budget_rows,
        format_hours,
        spread_rows,
        wall_times,
    )
    from deviate_cb.report.answers.comparison import POWER_COLUMNS, POWER_HUMAN, power_rows
    from deviate_cb.report.text.tables import render_records
    from deviate_cb.report.text.terminal import make_console, print_wrapped

    if args.effect is not None:
        base = power_rows(list(groups.items()), effect=args.effect, alpha=args.alpha, power=args.power, pool=args.pool)
    else:
        base = spread_rows(groups, alpha=args.alpha, power=args.power)
    times = {} if args.table else wall_times(source)
    rows = budget_rows(
        base, groups, times, budget_h=budget_h, budget_text=f"{budget_h:.4g} h", table=bool(args.table)
    )  # fmt: skip
    for row in rows:
        row["pooled"] = (pooled or {}).get(row["group"])
    columns = (*POWER_COLUMNS, *BUDGET_COLUMNS)
    if args.format in ("csv", "json"):
        out.write(render_records(rows, columns, args.format) + ("\n" if args.format == "json" else ""))
        out.flush()
        return 0
    lead = [r["budget_summary"] for r in rows]
    human = {
        **POWER_HUMAN,
        "per run": lambda r: "-" if r["run_s"] is None else format_hours(r["run_s"]),
        "cost (run-h)": lambda r: "-" if r["cost_h"] is None else f"{r['cost_h']:.3g}",
        "budget runs": lambda r: "-" if r["budget_runs"] is None else str(r["budget_runs"]),
        "budget detects": lambda r: "-" if r["budget_effect"] is None else f"{r['budget_effect']:.2g}",  # as worded
    }
    what = "a difference" if args.effect is None else f"a difference of {args.effect:g}"
    title = (
        f"power to detect {what} and what {budget_h:.4g} run-hours buy (alpha {args.alpha:g}, Welch t, "
        f"aggregate={args.aggregate}){_pooled_groups(pooled or {})}"
    )
    notes = (BUDGET_NOTE,)  # each group's sentences are the lead above (budget_summary holds the power summary)
    if args.format == "md":
        from deviate_cb.report.text.safe import markdown

        out.write("\n\n".join(markdown(line) for line in lead) + "\n\n")
    else:
        console = make_console(out)
        for line in lead:
            print_wrapped(console, line)
        console.print()
    text = render_records(rows, columns, args.format, title=title, human=human, notes=notes, file=out)
    out.write(text)
    out.flush()
    return 0
