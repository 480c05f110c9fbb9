"""Write a :class:`~deviate_cb.report.summary.Report` as a terminal table, Markdown, CSV or JSON.

Example:
    >>> from deviate_cb.report.summary import Report, ReportRow
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

from deviate_cb.report.configurations import NOT_POOLED
from deviate_cb.report.findings import Problem, format_problem
from deviate_cb.report.runs import RunRecord
from deviate_cb.report.spreadsheet import safe_cell
from deviate_cb.report.summary import COLUMNS, IQM_COLUMNS, Report, ReportRow
from deviate_cb.report.terminal import make_console, print_fitted, print_wrapped
from deviate_cb.report.text import markdown, percent, printable, printable_message

__all__ = [
    "FORMATS",
    "decomposition_json",
    "excluded_line",
    "print_table",
    "render",
    "render_records",
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
        >>> from deviate_cb.report.summary import Report
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
    rows = [{k: _json_value(v) for k, v in row.as_dict().items()} for row in report.rows]
    return json.dumps(rows, indent=2, allow_nan=False) if rows else "[]"


def to_csv(report: Report) -> str:
    """CSV with a header row of :data:`COLUMNS`; NaN is an empty cell, floats keep full precision; a text cell
    that begins like a spreadsheet formula gets a leading ``'`` (:func:`~deviate_cb.report.spreadsheet.safe_cell`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS + (IQM_COLUMNS if _with_iqm(report) else ()))
    for row in report.rows:
        writer.writerow(["" if _is_nan(v) else safe_cell(v) for v in row.as_dict().values()])
    return buffer.getvalue()


def to_markdown(report: Report, *, problems: Sequence[Problem] = (), headlines: Sequence[Any] = ()) -> str:
    """A Markdown document: the answers (``headlines``), the statistics table, the problems, then the runs left
    out of the statistics."""
    level = _level(report.level)
    lines = ["# deviate report", ""]
    for h in headlines:  # the answers first
        lines += [f"**{_md(h.title())}**", ""]
        lines += [f"- {_md(sentence)}" for sentence in h.sentences]
        lines += [f"- *note*: {_md(note)}" for note in h.notes]
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
        lines.append("| " + " | ".join(_md(c) for c in (row.experiment, row.variant, *_human_cells(row))) + " |")
    if problems:
        lines += ["", "## Problems", ""]
        lines += [f"- **{problem.kind}**: {_md(format_problem(problem))}" for problem in problems]
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
            cells = (run.experiment, run.variant, run.replica, run.status, _exit(run), error)
            lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    if report.decomposition:
        lines += ["", "## Variance decomposition", "", _DECOMPOSITION_NOTE.format(level=level), ""]
        lines.append("| " + " | ".join(_DECOMPOSITION_HUMAN) + " |")
        lines.append("|" + "---|" * len(_DECOMPOSITION_HUMAN))
        for d in report.decomposition:
            lines.append("| " + " | ".join(_md(c) for c in _decomposition_cells(d)) + " |")
    return "\n".join(lines) + "\n"


def print_table(
    report: Report,
    file: Optional[IO[str]] = None,
    *,
    width: Optional[int] = None,
    problems: Sequence[Problem] = (),
    headlines: Sequence[Any] = (),
) -> None:
    """Print the report with rich: the answers (``headlines``: :mod:`deviate_cb.report.headline`), one table per
    (experiment, variant) group, then the runs left out.

    Each of ``problems`` is printed once, under the table of its first group, as ``problem: ...`` wrapped at the
    width and continued indented; a problem of a group the report does not show is printed in a "Problems"
    section after the tables. Every table fits
    ``width`` (default: ``COLUMNS``, else the terminal's, else 160): one too wide is printed as several tables of
    consecutive columns, each starting with the metric (:func:`~deviate_cb.report.terminal.print_fitted`).
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
            cells = (run.experiment, run.variant, run.replica, run.status, _exit(run), error)
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
    ci = "-" if _is_nan(d.share_ci_low) else f"[{_num(d.share_ci_low)}, {_num(d.share_ci_high)}]"
    n = f"{d.n_narrow} / {d.n_wide}"
    share = "-" if _is_nan(d.share) else f"{d.share:.3f}"
    return (d.experiment, d.metric, d.pair, n, _num(d.std_narrow), _num(d.std_wide), share, ci, d.note)


def decomposition_json(report: Report) -> str:
    """The decomposition rows as a JSON list (keys of ``DECOMPOSITION_COLUMNS``; NaN becomes ``null``)."""
    rows = [{k: _json_value(v) for k, v in d.as_dict().items()} for d in report.decomposition]
    return json.dumps(rows, indent=2, allow_nan=False) if rows else "[]"


def render_records(
    records: list[dict[str, Any]],
    columns: tuple[str, ...],
    fmt: str,
    *,
    title: str = "",
    human: Optional[dict[str, Any]] = None,
    notes: tuple[str, ...] = (),
    file: Optional[IO[str]] = None,
    below: tuple[str, ...] = (),
    keep: int = 1,
) -> str:
    r"""Flat records as ``json`` (a list of objects), ``csv`` (``columns``; formula-like text escaped), ``md`` or
    ``table``.

    ``human`` maps a header to a function of the record giving the cell, for ``md`` and ``table``; ``table``
    is printed to ``file`` (rich) and returns ``""``. It fits the terminal's width (split by columns, each part
    starting with the first ``keep`` columns, where it is too wide: :func:`~deviate_cb.report.terminal.print_fitted`);
    columns of short cells never wrap, the first column and columns of long text fold. The headers in ``below``
    (a sentence per record, such as a verdict) are printed under the table instead, one line per record after
    its first cell, where they are read whole.

    Example:
        >>> render_records([{"metric": "acc", "p": float("nan")}], ("metric", "p"), "csv")
        'metric,p\nacc,\n'
    """
    if fmt == "json":
        rows = [{k: _json_value(r.get(k)) for k in columns} for r in records]
        return json.dumps(rows, indent=2, allow_nan=False) if rows else "[]"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([safe_cell(c) for c in columns])
        for r in records:  # text a spreadsheet would run as a formula gets a leading ' (numbers never change)
            writer.writerow(["" if r.get(k) is None or _is_nan(r.get(k)) else safe_cell(r.get(k)) for k in columns])
        return buffer.getvalue()
    cells = human or {c: (lambda r, c=c: _cell(r.get(c))) for c in columns}
    if fmt == "md":
        lines = [f"# {markdown(title)}", ""] if title else []
        lines.append("| " + " | ".join(map(_md, cells)) + " |")
        lines.append("|" + "---|" * len(cells))
        lines += ["| " + " | ".join(_md(f(r)) for f in cells.values()) + " |" for r in records]
        lines += ["", *map(markdown, notes)] if notes else []
        return "\n".join(lines) + "\n"
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console = make_console(file)
    if title:
        console.print(Text(printable(title), style="bold"))
    shown = {header: f for header, f in cells.items() if header not in below}
    texts = [[printable(f(r)) for f in shown.values()] for r in records]
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for i, header in enumerate(shown):
        long = i == 0 or any(len(row[i]) > _LONG_CELL for row in texts)  # the name, or long text: may fold
        table.add_column(header, justify="left" if i == 0 else "right", overflow="fold", no_wrap=not long)
    for row in texts:
        table.add_row(*row)
    print_fitted(console, table, keep=keep)
    labels = [row[0] if row else "" for row in texts]
    width = max(map(len, labels), default=0)
    for header in (h for h in below if h in cells):
        console.print()
        console.print(Text(header, style="bold"))
        for label, r in zip(labels, records, strict=True):  # wrapped at the width, continued under the text
            first = f"  {label:<{width}}  "
            print_wrapped(console, printable(cells[header](r)), first=first, indent=" " * min(len(first), 24))
    for note in notes:
        console.print(printable(note), style="dim")
    return ""


_LONG_CELL = 40  # a column holding a longer cell (a list of names, a sentence) may wrap


def _cell(x: Any) -> str:
    if x is None or _is_nan(x):
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def excluded_line(run: RunRecord) -> str:
    """One line describing a run left out of the statistics.

    Example:
        >>> from pathlib import Path
        >>> excluded_line(RunRecord(Path("r"), "mlp", "algo", "3", "failed", 1, "RuntimeError: boom"))
        'experiment=mlp variant=algo replica=3 left out of the statistics: failed (exit code 1): RuntimeError: boom'
    """
    detail = f" (exit code {_exit(run)})" if run.exit_code is not None else f" ({run.signal})" if run.signal else ""
    error = f": {printable_message(run.error)}" if run.error else ""
    where = f"experiment={run.experiment} variant={run.variant} replica={run.replica}"
    return f"{where} left out of the statistics: {run.status}{detail}{error}"


def _human_cells(row: ReportRow) -> tuple[str, ...]:
    ci = "-" if _is_nan(row.std_ci_low) else f"[{_num(row.std_ci_low)}, {_num(row.std_ci_high)}]"
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
    return "-" if _is_nan(x) else f"{x:.4g}"


def _exit(run: RunRecord) -> str:
    """The exit status as shown: the code, the signal's name, or both (``-9 (SIGKILL)``)."""
    code = "" if run.exit_code is None else str(run.exit_code)
    if run.signal:
        return f"{code} ({run.signal})" if code else run.signal
    return code


def _md(cell: Any) -> str:
    """Markdown text, or a table cell: control characters escaped (so a newline cannot end the row), HTML
    escaped (:func:`~deviate_cb.report.text.markdown`), ``|`` escaped."""
    return markdown(cell).replace("|", "\\|")


def _is_nan(x: Any) -> bool:
    return isinstance(x, float) and not math.isfinite(x)


def _json_value(x: Any) -> Any:
    return None if _is_nan(x) else x
