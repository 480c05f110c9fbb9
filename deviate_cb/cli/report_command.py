"""``deviate report``: the spread of every metric across the runs of each (experiment, variant) group."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from deviate_cb.cli._common import (
    add_output_arguments,
    add_per_run_arguments,
    check_html,
    output_to,
    per_run_options,
    say,
)
from deviate_cb.errors import UsageError
from deviate_cb.report.text.safe import printable, printable_errors
from deviate_cb.report.text.spreadsheet import counted_escapes, escape_note

__all__ = ["add_report"]


def add_report(commands: argparse._SubParsersAction) -> None:
    from deviate_cb.store.run_directory import STAGES

    p = commands.add_parser(
        "report",
        help="spread of every metric across the runs of each (experiment, variant) group",
        description="The report opens with the answers, per experiment and metric of interest (validation and test "
        "metrics by default): are the control runs bit-identical, how large is each variant's spread (std with its "
        "interval), what share of the seed spread implementation noise alone keeps, and how many runs per group "
        "detect --effect. Then per (experiment, variant) group and metric: n, mean, std (ddof=1), cv, min, max, "
        "range and a confidence interval of the std (Bonett's), over the completed runs under DIR. Runs that did not "
        "complete are listed apart and left out. When an experiment holds the variants impl and algo+impl (or "
        "control and algo), the table and md formats end with the variance decomposition: std(impl)/std(algo+impl) and "
        "std(control)/std(algo) per metric, with its F interval capped at 1; --decomposition makes csv and json "
        "write the decomposition rows instead of the per-group rows. When runs saved predictions or weights "
        "(DeviateCallback(predictions=..., weights=...)), the table and md formats end with a stability section per "
        "group: prediction churn, majority agreement, normalized weight distance, per-class and sub-group spread, "
        "the least stable samples; --stability makes csv and json write those rows instead. --table FILE --group-by "
        "COLUMN reports on results made elsewhere (CSV or Parquet, one row per run, every numeric column a metric). "
        "Problems the numbers alone hide (seeds or determinism switches not in effect, algo/algo+impl replicas that "
        "came out bit-identical, control replicas that differ, project seeds kept, nothing injected) are warned "
        "about on stderr and shown under their group in the table and md formats.",
    )
    p.add_argument(
        "dir", metavar="DIR", nargs="?", help="study directory (<DIR>/experiment=<e>/variant=<v>/replica=<k>/)"
    )
    p.add_argument("--table", metavar="FILE", help="a CSV or Parquet file with one row per run, instead of DIR")
    p.add_argument("--group-by", metavar="COLUMN", help="the --table column naming each run's group (variant)")
    p.add_argument(
        "--pool",
        action="store_true",
        help="with --table: pool rows of several configurations (other text columns differ) into a group on "
        "purpose (a warning says so); without it such a group is refused",
    )
    p.add_argument(
        "--decomposition",
        action="store_true",
        help="with --format csv or json: write the variance decomposition rows instead of the per-group rows (the "
        "table and md formats end with them; there the option is an error)",
    )
    p.add_argument(
        "--stability",
        action="store_true",
        help="with --format csv or json: write the stability rows (churn, weight distance, per-class and "
        "sub-group spread, unstable samples) instead of the per-group rows (the table and md formats end with "
        "them; there the option is an error)",
    )
    p.add_argument(
        "--timings",
        action="store_true",
        help="with --format csv or json: write the step-time rows (each group's spread of the runs' median "
        "training step time) instead of the per-group rows (the table and md formats end with them; there the "
        "option is an error)",
    )
    p.add_argument(
        "--headline",
        action="store_true",
        help="with --format csv or json: write the answers (control identical?, seed noise, implementation share, "
        "runs needed; json: one object per experiment and metric of interest) instead of the per-group rows (the "
        "table, md and html formats open with them; there the option is an error)",
    )
    p.add_argument(
        "--effect",
        metavar="EFFECT",
        default=None,
        help="the smallest difference worth reporting, for the runs-needed answer: a number in the metric's units "
        "(0.005) or a percentage of the mean (1%%, the default)",
    )
    p.add_argument(
        "--positive",
        type=int,
        default=1,
        metavar="CLASS",
        help="positive class of the sub-group false-positive/negative rates (default 1; one-vs-rest if multi-class)",
    )
    p.add_argument(
        "--iqm",
        action="store_true",
        help="add the interquartile mean across each group's runs (mean of the middle 50%%, as rliable) with its "
        "CI at --level (Yuen's trimmed-mean t): a column of table and md, iqm, iqm_ci_low and "
        "iqm_ci_high in csv and json",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of any bootstrap (default 0; the default intervals draw nothing)"
    )
    add_per_run_arguments(p)
    p.add_argument("--stage", choices=STAGES, default=None, help="only metrics of this stage")
    p.add_argument("--level", type=float, default=0.95, help="confidence level of the std interval (default 0.95)")
    add_output_arguments(p, "report")
    p.set_defaults(handler=_run_report)


# What the table and Markdown reports end with, for each option that picks the rows of csv and json
_SECTIONS = {
    "--decomposition": "variance decomposition",
    "--stability": "stability section",
    "--timings": "step times",
    "--headline": "answers",
}


def _run_report(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    check_html(args)  # before any reading: the missing extra is one line, not a traceback after minutes
    # csv: text a spreadsheet would run is escaped, and said so at the end; errors may quote stored names
    with counted_escapes() as escaped, printable_errors(), output_to(getattr(args, "output", None), out) as target:
        code = _report(args, target, err)
    if note := escape_note(escaped.count):
        say(err, "note", note)
    return code


def _report(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.report.answers.headline import build_headlines
    from deviate_cb.report.answers.records import parse_effect
    from deviate_cb.report.answers.summary import build_report
    from deviate_cb.report.reading.loading import excluded_line
    from deviate_cb.report.rendering.formats import print_table, render

    if not 0.0 < args.level < 1.0:
        raise UsageError(f"`--level` must be in (0, 1). Received: --level={args.level!r}.")
    if args.seed < 0:  # a bootstrap's seed
        raise UsageError(f"`--seed` must be a non-negative integer. Received: --seed={args.seed}.")
    per_run_options(args)
    effect = parse_effect(args.effect)
    decompose = args.decomposition or args.headline or args.format in ("table", "md", "html")
    chosen = [f"--{name}" for name in ("decomposition", "stability", "timings", "headline") if getattr(args, name)]
    if len(chosen) > 1:
        raise UsageError(
            f"give one of `--decomposition`, `--stability`, `--timings`, `--headline`. Received: {' '.join(chosen)}."
        )
    if args.timings and args.dir is None:
        raise UsageError("`--timings` needs DIR: it reads the runs' timings.parquet files.")
    if args.stability and args.dir is None:
        raise UsageError("`--stability` needs DIR: it reads the runs' predictions and weights files.")
    if chosen and args.format in ("table", "md", "html"):  # it would change nothing: refused rather than ignored
        raise UsageError(
            f"`{chosen[0]}` applies to --format csv or json; the table, Markdown and HTML reports already hold the "
            f"{_SECTIONS[chosen[0]]}. Received: {chosen[0]} with --format {args.format}."
        )
    if args.iqm and chosen:  # those write other rows than the per-group ones the IQM is added to
        raise UsageError(
            f"`--iqm` adds columns to the per-group rows, which `{chosen[0]}` replaces. Received: --iqm with "
            f"{chosen[0]}."
        )
    if args.table is not None:
        if args.dir is not None:
            raise UsageError(
                f"give either DIR or `--table`, not both. Received: DIR={args.dir!r}, --table={args.table!r}."
            )
        from deviate_cb.report.answers.summary import table_report

        report = table_report(
            args.table,
            args.group_by,
            level=args.level,
            metrics=args.metric or None,
            decompose=decompose,
            seed=args.seed,
            iqm=args.iqm,
            pool=args.pool,
        )
    elif args.dir is None:
        raise UsageError("the following arguments are required: DIR. See `deviate report --help`.")
    else:
        if args.group_by is not None:
            raise UsageError(f"`--group-by` needs `--table`. Received: --group-by={args.group_by!r} without --table.")
        if args.pool:  # a study's groups are one configuration each: a mixed one is not reported (see its warning)
            raise UsageError("`--pool` needs `--table`. Received: --pool without --table.")
        report = build_report(
            args.dir,
            aggregate=args.aggregate,
            directions=dict(args.direction),
            metrics=args.metric or None,
            stage=args.stage,
            level=args.level,
            decompose=decompose,
            seed=args.seed,
            iqm=args.iqm,
        )
    for line in report.warnings:
        say(err, "warning", printable(line))
    if args.format in ("csv", "json"):
        for run in report.excluded:
            say(err, "warning", printable(excluded_line(run)))
    stability = (
        _stability(args, report, err)
        if args.dir is not None and (args.stability or args.format in ("table", "md", "html"))
        else []
    )
    timing_groups = _timings(args, report, err) if args.timings or args.format in ("table", "md", "html") else []
    problems = _problems(args, report, err)  # last before the output: an error above prints nothing else
    answers = args.headline or args.format in ("table", "md", "html")
    headlines = (
        build_headlines(report, problems=problems, metrics=args.metric or None, effect=effect) if answers else []
    )
    sequences = _sequences(args) if args.format in ("table", "md", "html") else []
    if args.format == "html":
        out.write(_html(args, report, problems, stability, timing_groups, err, headlines, sequences))
    elif args.format == "table":
        _write_sequences(sequences, out, markdown=False)
        print_table(report, out, problems=problems, headlines=headlines)
        if timing_groups:
            from deviate_cb.report.answers.timings import write_timings_section

            write_timings_section(timing_groups, "table", out)
        if stability:
            from deviate_cb.report.rendering.stability import write_stability

            out.write("\n")
            write_stability(stability, "table", out)
        from deviate_cb.report.rendering.closing import (
            write_closing,  # the answers again, last: the tables pushed them up
        )

        table = ["--table", args.table, *(["--group-by", args.group_by] if args.group_by else [])]
        table += ["--pool"] if getattr(args, "pool", False) else []  # the page pools as this report did
        source = [args.dir] if args.dir is not None else table
        write_closing(headlines, sequences, ["deviate", "report", *source], out)
    elif args.headline:
        from deviate_cb.report.answers.records import HEADLINE_COLUMNS
        from deviate_cb.report.answers.sequential import answer_record, study_answers
        from deviate_cb.report.text.tables import render_records

        decided = study_answers(args.dir)  # the sequential decisions first, as in the terminal report
        if args.format == "json":
            found = [*decided, *(h.to_dict() for h in headlines)]
            out.write(json.dumps(found, indent=2, allow_nan=False) + "\n")
        else:
            records = [*map(answer_record, decided), *(r for h in headlines for r in h.records())]
            out.write(render_records(records, HEADLINE_COLUMNS, "csv"))
    elif args.timings:
        from deviate_cb.report.answers.timings import TIMING_COLUMNS, timing_rows
        from deviate_cb.report.text.tables import render_records

        out.write(render_records(timing_rows(timing_groups), TIMING_COLUMNS, args.format))
        if args.format == "json":
            out.write("\n")
    elif args.stability:
        from deviate_cb.report.answers.stability.rows import STABILITY_COLUMNS, stability_rows
        from deviate_cb.report.text.tables import render_records

        out.write(render_records(stability_rows(stability), STABILITY_COLUMNS, args.format))
        if args.format == "json":
            out.write("\n")
    elif args.decomposition and args.format in ("csv", "json"):
        from deviate_cb.report.answers.decomposition import DECOMPOSITION_COLUMNS, missing_note
        from deviate_cb.report.rendering.formats import decomposition_json
        from deviate_cb.report.text.tables import render_records

        if args.format == "json":
            out.write(decomposition_json(report) + "\n")
        else:
            rows = [d.as_dict() for d in report.decomposition]
            out.write(render_records(rows, DECOMPOSITION_COLUMNS, "csv"))
        note = missing_note(report.groups, report.decomposition)
        if note:  # the data stay data (a header, or []): why there are no rows goes to stderr
            say(err, "note", printable(note))
    else:
        if args.format == "md":
            _write_sequences(sequences, out, markdown=True)
        out.write(render(report, args.format, problems=problems, headlines=headlines))
        if args.format == "json":
            out.write("\n")
        if timing_groups and args.format == "md":
            from deviate_cb.report.answers.timings import write_timings_section

            write_timings_section(timing_groups, "md", out)
        if stability and args.format == "md":
            from deviate_cb.report.rendering.stability import write_stability

            write_stability(stability, "md", out)
    out.flush()
    return 0


def _html(
    args: argparse.Namespace,
    report: Any,
    problems: list[Any],
    stability: list[Any],
    timings: list[Any],
    err: IO[str],
    headlines: Any = (),
    sequences: Sequence[str] = (),
) -> str:
    """The report as one self-contained HTML page (:mod:`deviate_cb.report.rendering.html.build`, as ``Study.html``)."""
    from deviate_cb.report.rendering.html.build import html_report

    warnings: list[str] = []
    page = html_report(
        report,
        source=args.dir if args.dir is not None else args.table,
        problems=problems,
        stability=stability,
        timings=timings,
        headlines=headlines,
        warnings=warnings,
        curves=args.dir is not None,
        sequences=sequences,
    )
    for line in warnings:
        say(err, "warning", printable(line))
    return page


def _sequences(args: argparse.Namespace) -> list[str]:
    """The decisions of the study's sequences (``--until-decided``/``--until-precision``), one line each."""
    if args.dir is None:
        return []
    from deviate_cb.report.answers.sequential import sequence_lines, study_sequences

    return sequence_lines(study_sequences(Path(args.dir)))


def _write_sequences(lines: Sequence[str], out: IO[str], *, markdown: bool) -> None:
    """The sequences' decisions first: they answer "is A better" with the error rate the rounds kept."""
    from deviate_cb.report.answers.sequential import write_sequences

    write_sequences(lines, out, markdown=markdown)  # the section Study.text writes too, wrapped at the width


def _problems(args: argparse.Namespace, report: Any, err: IO[str]) -> list[Any]:
    """The problems of DIR's completed runs (none for --table), each also a warning on ``err``."""
    if args.dir is None:
        return []
    from deviate_cb.report.answers.findings import format_problem
    from deviate_cb.report.answers.problems import find_problems

    # The runs and rows the report read: no second walk, and no Parquet where the manifests hold the summaries
    problems = find_problems(report.completed, rows=report.rows)
    for problem in problems:
        say(err, "warning", printable(format_problem(problem)))
    return problems


def _stability(args: argparse.Namespace, report: Any, err: IO[str]) -> list[Any]:
    """The stability groups of DIR (empty when no run saved predictions or weights); warnings go to ``err``."""
    from deviate_cb.report.answers.stability.build import build_stability

    warnings: list[str] = []
    # The runs the report read: no second walk of DIR
    groups = build_stability(args.dir, positive=args.positive, warnings=warnings, runs=report.completed)
    for line in warnings:
        say(err, "warning", printable(line))
    return groups


def _timings(args: argparse.Namespace, report: Any, err: IO[str]) -> list[Any]:
    """The step-time groups of DIR's completed runs (empty for --table, or when no run timed its steps)."""
    if args.dir is None:
        return []
    from deviate_cb.report.answers.timings import build_timings

    warnings: list[str] = []
    groups = build_timings(report.completed, warnings=warnings)  # the runs the report read: no second walk
    for line in warnings:
        say(err, "warning", printable(line))
    return groups
