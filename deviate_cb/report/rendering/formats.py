"""Write a :class:`~deviate_cb.report.answers.summary.Report` as a terminal table, Markdown, CSV or JSON.

Example:
    >>> from deviate_cb.report.answers.summary import Report, ReportRow
    >>> row = ReportRow("mlp", "algo", "val_acc", "last", 3, 0.82, 0.02, 0.0244, 0.8, 0.84, 0.04, 0.01, 0.13)
    >>> print(render(Report((row,), ()), "csv").splitlines()[1])
    mlp,algo,val_acc,last,3,0.82,0.02,0.0244,0.8,0.84,0.04,0.01,0.13,0
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from typing import IO, Any, Optional

from deviate_cb.report.answers.findings import Problem, format_problem
from deviate_cb.report.answers.summary import COLUMNS, IQM_COLUMNS, Report, ReportRow
from deviate_cb.report.reading.configurations import NOT_POOLED
from deviate_cb.report.reading.loading import exit_text
from deviate_cb.report.text.safe import percent, printable, printable_message
from deviate_cb.report.text.spreadsheet import safe_cell
from deviate_cb.report.text.tables import is_nan, md_cell
from deviate_cb.report.text.terminal import make_console, print_fitted, print_wrapped
from deviate_cb.stats._results import json_value

__all__ = [
    "FORMATS",
    "decomposition_json",
    "print_table",
    "render",
    "to_csv",
    "to_json",
    "to_markdown",
]

FORMATS = ("table", "md", "csv", "json")
_HUMAN = ("metric", "n", "mean", "std", "std CI", "cv", "min", "max", "range")


def render(report: Report, fmt: str, *, problems: Sequence[Problem] = (), headlines: Sequence[Any] = ()) -> str:
    """The report as text in format ``md``, ``csv`` or ``json`` (``table`` renders without colour).

    ``problems`` are shown by ``table`` and ``md`` (``csv`` and ``json`` hold the rows only).

    Example:
        >>> from deviate_cb.report.answers.summary import Report
        >>> render(Report((), ()), "json")
        '[]'
    """
    if fmt not in FORMATS:
        raise ValueError(f"`fmt` must be one of {', '.join(FORMATS)}. Received: fmt={fmt!r}.")
    if fmt == "table":
        buffer = io.StringIO()
        print_table(report, buffer, width=160, problems=problems, headlines=headlines)
        return buffer.getvalue()
    if fmt == "md":
        return to_markdown(report, problems=problems, headlines=headlines)
    return {"csv": to_csv, "json": to_json}[fmt](report)


def to_json(report: Report) -> str:
    """A JSON list with one object per row; NaN and Inf become ``null``."""
    rows = [{k: json_value(v) for k, v in row.as_dict().items()} for row in report.rows]
    return json.dumps(rows, indent=2, allow_nan=False) if rows else "[]"


def to_csv(report: Report) -> str:
    """CSV with a header row of :data:`COLUMNS`; NaN is an empty cell, floats keep full precision; a text cell
    that begins like a spreadsheet formula gets a leading ``'``
    (:func:`~deviate_cb.report.text.spreadsheet.safe_cell`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS + (IQM_COLUMNS if _with_iqm(report) else ()))
    for row in report.rows:
        writer.writerow(["" if is_nan(v) else safe_cell(v) for v in row.as_dict().values()])
    return buffer.getvalue()


def to_markdown(report: Report, *, problems: Sequence[Problem] = (), headlines: Sequence[Any] = ()) -> str:
    """A Markdown document: the answers (``headlines``), the statistics table, the problems, then the runs left
    out of the statistics."""
    level = _level(report.level)
    lines = ["# deviate report", ""]
    for h in headlines:  # the answers first
        lines += [f"**{md_cell(h.title())}**", ""]
        lines += [f"- {md_cell(sentence)}" for sentence in h.sentences]
        lines += [f"- *note*: {md_cell(note)}" for note in h.notes]
        lines.append("")
    lines += [
        f"Per-run aggregate: `{report.aggregate}`. std: sample standard deviation (ddof=1); "
        f"std CI: {level} Bonett interval; cv: std / |mean|. Metrics in the same order in every group: those the "
        "answers are about first, then the others, each by name." + _iqm_note(report),
        "",
        "| " + " | ".join(("experiment", "variant", *_headers(report))) + " |",
        "|" + "---|" * (len(_headers(report)) + 2),
    ]
    for row in report.rows:
        lines.append("| " + " | ".join(md_cell(c) for c in (row.experiment, row.variant, *_human_cells(row))) + " |")
    if problems:
        lines += ["", "## Problems", ""]
        lines += [f"- **{problem.kind}**: {md_cell(format_problem(problem))}" for problem in problems]
    if report.excluded:
        lines += [
            "",
            "## Runs left out of the statistics",
            "",
            "| experiment | variant | replica | status | exit code | error |",
        ]
        lines.append("|---|---|---|---|---|---|")
        for run in report.excluded:  # the error: a message, its colours dropped
            error = printable_message(run.error or "")
            cells = (run.experiment, run.variant, run.replica, run.status, exit_text(run), error)
            lines.append("| " + " | ".join(md_cell(c) for c in cells) + " |")
    if report.decomposition:
        lines += ["", "## Variance decomposition", "", _DECOMPOSITION_NOTE.format(level=level), ""]
        lines.append("| " + " | ".join(_DECOMPOSITION_HUMAN) + " |")
        lines.append("|" + "---|" * len(_DECOMPOSITION_HUMAN))
        for d in report.decomposition:
            lines.append("| " + " | ".join(md_cell(c) for c in _decomposition_cells(d)) + " |")
    return "\n".join(lines) + "\n"


def print_table(
    report: Report,
    file: Optional[IO[str]] = None,
    *,
    width: Optional[int] = None,
    problems: Sequence[Problem] = (),
    headlines: Sequence[Any] = (),
) -> None:
    """Print the report with rich: the answers (``headlines``: :mod:`deviate_cb.report.answers.headline`), one table per
    (experiment, variant) group, then the runs left out.

    Each of ``problems`` is printed once, under the table of its first group, as ``problem: ...`` wrapped at the
    width and continued indented; a problem of a group the report does not show is printed in a "Problems"
    section after the tables. Every table fits
    ``width`` (default: ``COLUMNS``, else the terminal's, else 160): one too wide is printed as several tables of
    consecutive columns, each starting with the metric (:func:`~deviate_cb.report.text.terminal.print_fitted`).
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    # No markup: a stored name such as `loss[train]` or `x[/y]` is text. The width: `width`, else COLUMNS or the
    # terminal's, else 160; a table wider than that is split by columns (report.terminal.print_fitted).
    console = make_console(file, width=width)
    groups = report.groups or tuple(sorted({(r.experiment, r.variant, 0) for r in report.rows}))
    shown = {(experiment, variant) for experiment, variant, _ in groups}

    def print_problems(chosen: Sequence[Problem]) -> None:
        for problem in chosen:  # wrapped at the width, continued indented
            print_wrapped(
                console, printable(format_problem(problem)), first="problem: ", indent="  ", style="bold yellow"
            )

    for h in headlines:  # the answers first, every line wrapped at the width
        console.print(Text(printable(h.title()), style="bold"))
        for sentence in h.sentences:
            print_wrapped(console, printable(sentence), first="  ", indent="    ")
        for note in h.notes:
            print_wrapped(console, printable(note), first="  note: ", indent="    ", style="yellow")
        console.print()
    for experiment, variant, n_completed in groups:
        rows = [r for r in report.rows if (r.experiment, r.variant) == (experiment, variant)]
        unpooled = sum(
            r.status == NOT_POOLED and (r.experiment, r.variant) == (experiment, variant) for r in report.excluded
        )
        runs = f"{n_completed} completed run{'s' if n_completed != 1 else ''}, " if report.groups else ""
        if unpooled:  # completed, but not one configuration: never pooled
            runs = f"{unpooled} completed runs of different configurations, "
        title = printable(f"experiment={experiment}  variant={variant}  ({runs}aggregate={report.aggregate})")
        mine = [p for p in problems if (p.experiment, p.variant) == (experiment, variant)]
        if not rows:
            why = (
                "not reported: pooling them would count the difference as noise"
                if unpooled
                else "no metrics from completed runs"
            )
            console.print(Text(f"{title}: {why}.", style="bold"))
            print_problems(mine)
            if mine:
                console.print()
            continue
        nonfinite = any(r.n_nonfinite for r in rows)
        console.print(Text(title, style="bold"))  # wrapped where the terminal is narrow, never cut
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for i, header in enumerate((*_headers(report), *(("non-finite",) if nonfinite else ()))):
            table.add_column(header, justify="left" if i == 0 else "right", no_wrap=True)
        for row in rows:
            table.add_row(*_human_cells(row), *((str(row.n_nonfinite),) if nonfinite else ()))
        print_fitted(console, table)
        print_problems(mine)
        console.print()
    others = [p for p in problems if (p.experiment, p.variant) not in shown]
    if others:
        console.print(Text("Problems", style="bold"))
        print_problems(others)
        console.print()
    if report.excluded:
        console.print(Text("Runs left out of the statistics", style="bold"))
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for header in ("experiment", "variant", "replica", "status", "exit code", "error"):
            table.add_column(header, overflow="fold")
        for run in report.excluded:  # the error: a message, its colours dropped
            error = printable_message(run.error or "")
            cells = (run.experiment, run.variant, run.replica, run.status, exit_text(run), error)
            table.add_row(*map(printable, cells))
        print_fitted(console, table, keep=3)  # each part names the run
        console.print()
    if report.decomposition:
        console.print(Text("Variance decomposition", style="bold"))
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for i, header in enumerate(_DECOMPOSITION_HUMAN):
            table.add_column(header, justify="left" if i < 3 else "right", no_wrap=i < 7)
        for d in report.decomposition:
            table.add_row(*map(printable, _decomposition_cells(d)))
        print_fitted(console, table, keep=2)
        console.print(_DECOMPOSITION_NOTE.format(level=_level(report.level)), style="dim")
        console.print()
    console.print(
        f"std: sample standard deviation (ddof=1); std CI: {_level(report.level)} Bonett interval; "
        "cv: std / |mean|." + _iqm_note(report),
        style="dim",
    )


_DECOMPOSITION_HUMAN = ("experiment", "metric", "pair", "n", "std narrow", "std wide", "share", "share CI", "note")
_DECOMPOSITION_NOTE = (
    "share: std(narrow) / std(wide) (ddof=1); impl / algo+impl is the part of the spread implementation noise "
    "alone keeps, control / algo the part left with every seed fixed and determinism on (not implementation noise: "
    "control fixes that too); share CI: {level} kurtosis-adjusted interval (Bonett 2006; F below 4 runs), not capped: "
    "a share significantly above 1 means the set-up needs checking (said in the note). The variance share is the "
    "share squared (JSON/CSV)."
)


def _decomposition_cells(d: Any) -> tuple[str, ...]:
    ci = "-" if is_nan(d.share_ci_low) else f"[{_num(d.share_ci_low)}, {_num(d.share_ci_high)}]"
    n = f"{d.n_narrow} / {d.n_wide}"
    share = "-" if is_nan(d.share) else f"{d.share:.3f}"
    return (d.experiment, d.metric, d.pair, n, _num(d.std_narrow), _num(d.std_wide), share, ci, d.note)


def decomposition_json(report: Report) -> str:
    """The decomposition rows as a JSON list (keys of ``DECOMPOSITION_COLUMNS``; NaN becomes ``null``)."""
    rows = [{k: json_value(v) for k, v in d.as_dict().items()} for d in report.decomposition]
    return json.dumps(rows, indent=2, allow_nan=False) if rows else "[]"


def _human_cells(row: ReportRow) -> tuple[str, ...]:
    ci = "-" if is_nan(row.std_ci_low) else f"[{_num(row.std_ci_low)}, {_num(row.std_ci_high)}]"
    cv = percent(row.cv)
    stats = (row.mean, row.std)
    metric = printable(row.metric)
    low, high = (math.nan if x is None else x for x in (row.iqm_ci_low, row.iqm_ci_high))
    iqm = () if row.iqm is None else (f"{_num(row.iqm)} [{_num(low)}, {_num(high)}]",)
    return (metric, str(row.n), *map(_num, stats), ci, cv, _num(row.min), _num(row.max), _num(row.range), *iqm)


def _with_iqm(report: Report) -> bool:
    """Whether the rows hold the IQM (``deviate report --iqm``)."""
    return any(row.iqm is not None for row in report.rows)


def _headers(report: Report) -> tuple[str, ...]:
    return (*_HUMAN, "IQM [CI]") if _with_iqm(report) else _HUMAN


def _iqm_note(report: Report) -> str:
    if not _with_iqm(report):
        return ""
    level = _level(report.level)
    return (
        f" IQM: interquartile mean across the runs (mean of the middle 50%), {level} CI by Yuen's trimmed-mean t "
        "(Student's t below 4 runs)."
    )


def _level(level: float) -> str:
    return f"{level * 100:.6g}%"


def _num(x: float) -> str:
    return "-" if is_nan(x) else f"{x:.4g}"
