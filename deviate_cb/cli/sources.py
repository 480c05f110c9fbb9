"""The runs ``deviate compare`` and ``deviate power`` read: their arguments, their loading from a study directory
or a ``--table`` file, and the checks and warnings on the groups they form.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import IO, Any

from deviate_cb.cli._common import add_per_run_arguments, say
from deviate_cb.errors import UsageError
from deviate_cb.report.text.safe import printable

__all__ = [
    "add_sources",
    "check_alpha",
    "load_runs",
    "one_group",
    "parse_terms",
    "pooled_words",
    "say_pooled",
    "warn_problems",
]


def add_sources(p: argparse.ArgumentParser, dirs: str) -> None:
    """Arguments shared by compare and power: where the runs come from and how each becomes one number."""
    p.add_argument("dirs", metavar="DIR", nargs="*", help=dirs)
    p.add_argument(
        "--table",
        action="append",
        default=[],
        metavar="FILE",
        help="a CSV or Parquet file with one row per run (every numeric column a metric), instead of DIR",
    )
    p.add_argument("--group-by", metavar="COLUMN", help="the --table column naming each run's group")
    add_per_run_arguments(p)
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    p.add_argument(
        "--pool",
        action="store_true",
        help="pool runs of several configurations into one group on purpose (the output says so); without it, a "
        "group whose runs differ in a key other than the replica (e.g. two variants), or in their recorded "
        "configuration, is refused",
    )


def load_runs(args: argparse.Namespace, source: str, warnings: list[str]) -> list:
    """The completed runs of one DIR or one --table file, as RunValues; warnings are appended to ``warnings``."""
    from deviate_cb.report.reading.selection import store_runs
    from deviate_cb.report.reading.table_input import read_run_table

    if source in args.table:
        runs = read_run_table(source, args.group_by, warnings, args.metric or None)
    else:
        runs = store_runs(
            source,
            aggregate=args.aggregate,
            directions=dict(args.direction),
            metrics=args.metric or None,
            warnings=warnings,
            mixed=True,  # a group of replicas of several configurations: refused or pooled by one_group
        )
    return runs


def one_group(args: argparse.Namespace, runs: Sequence[Any], option: str, received: str, **how: str) -> str:
    """Refuse a group of several configurations (one line: what the option matched and what to do), unless
    ``--pool``; then the words that say what it pools."""
    from deviate_cb.report.reading.group_identity import one_configuration

    return one_configuration(runs, option=option, received=received, pool=args.pool, **how)


def say_pooled(err: IO[str], what: str, pooled: str) -> None:
    """Warn on ``err`` that the group ``what`` pools configurations (``pooled``: :func:`one_group`'s words), if so."""
    if pooled:
        say(err, "warning", printable(f"{what} {pooled} (--pool): its spread counts their difference as noise."))


def warn_problems(args: argparse.Namespace, chosen: Sequence[tuple[str, Sequence[Any]]], err: IO[str]) -> None:
    """Warn on ``err`` about the problems of the groups compared: per DIR source, the (experiment, variant)
    groups of its runs in ``chosen`` (``(source, runs)`` pairs). ``--table`` sources have none."""
    from deviate_cb.report.answers.findings import format_problem
    from deviate_cb.report.answers.problems import study_problems

    lines: dict[str, None] = {}  # in order, each once (the same DIR may be given twice)
    for source, runs in chosen:
        if source in args.table:
            continue
        groups = {(r.keys.get("experiment"), r.keys.get("variant")) for r in runs}
        # The values compare and power read: compared where a run's manifest and footer hold no summary
        values = {(r.keys.get("experiment"), r.keys.get("variant"), r.keys.get("replica")): r.values for r in runs}
        for problem in study_problems(source, values=values):
            if any((g.experiment, g.variant) in groups for g in problem.groups):
                lines[format_problem(problem)] = None
    for line in lines:
        say(err, "warning", printable(line))


def parse_terms(args: argparse.Namespace, texts: Sequence[str], option: str) -> list[tuple[str, str]]:
    """The ``KEY=VALUE`` terms of ``option``; with ``--group-by``, a bare ``VALUE`` is a value of that column.

    Example:
        >>> parse_terms(argparse.Namespace(group_by="arm"), ["b", "seed=1"], "--a")
        [('arm', 'b'), ('seed', '1')]
    """
    from deviate_cb.report.reading.selection import parse_term

    if args.group_by is not None:
        return [(args.group_by, t) if "=" not in t else parse_term(t, option) for t in texts]
    return [parse_term(t, option) for t in texts]


def check_alpha(alpha: float) -> None:
    """Refuse a significance level outside (0, 1) (:class:`~deviate_cb.errors.UsageError`).

    Example:
        >>> check_alpha(1.5)
        Traceback (most recent call last):
        ...
        deviate_cb.errors.UsageError: `--alpha` must be in (0, 1). Received: --alpha=1.5.
    """
    if not 0.0 < alpha < 1.0:
        raise UsageError(f"`--alpha` must be in (0, 1). Received: --alpha={alpha!r}.")


def pooled_words(pooled: str, lead: str = ": ") -> str:
    """``: POOLED with --pool: 2 configurations: ...`` for a title, ``""`` for a group of one configuration.

    Example:
        >>> pooled_words("pools 2 configurations", "; ")
        '; POOLED with --pool: 2 configurations'
    """
    return f"{lead}POOLED with --pool: {pooled.removeprefix('pools ')}" if pooled else ""
