"""The HTML page of ``deviate report``: one self-contained file (plots and styles inline, nothing fetched).

Example:
    >>> from deviate_cb.report.answers.summary import Report, ReportRow
    >>> rows = (ReportRow("mlp", "algo", "test_$acc$", "last", 3, 0.9, 0.01, 0.0111, 0.89, 0.91, 0.02, 0.005,
    ...                   0.06),)
    >>> values = {("mlp", "algo", "test_$acc$"): (0.89, 0.9, 0.91)}
    >>> report = Report(rows, (), groups=(("mlp", "algo", 3),), values=values)
    >>> page = report_page(report, source="runs")
    >>> "test_$acc$" in page and "1.11%" in page and 'data-kind="strip"' in page
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from deviate_cb.report.rendering.html import answer_figures, figures
from deviate_cb.report.rendering.html.headline_block import headline_section
from deviate_cb.report.rendering.html.markup import figure, interval, percent, shell, table, text
from deviate_cb.report.rendering.html.sections import stability_section, timings_section

__all__ = ["metric_order", "report_page"]

_OPEN_ITEMS = 3  # a list of problems or warnings longer than this is folded
_OPEN_CHARS = 1200


def report_page(
    report: Any,
    *,
    source: str,
    problems: Sequence[str] = (),
    curves: Optional[Mapping[tuple[str, str, str], Any]] = None,
    stability: Sequence[Any] = (),
    timings: Sequence[Any] = (),
    timing_notes: Sequence[str] = (),
    headlines: Sequence[Any] = (),
    sequences: Sequence[str] = (),
) -> str:
    """The page of a :class:`~deviate_cb.report.answers.summary.Report` (see the module docstring); ``headlines``: the
    :class:`~deviate_cb.report.answers.records.Headline` list of the report, shown first, after the decisions of the
    studies replicated until decided (``sequences``: :func:`deviate_cb.report.answers.sequential.sequence_lines`)."""
    from deviate_cb.report.reading.loading import excluded_line

    metrics = metric_order(report.rows, [h.metric for h in headlines])
    anchors = {metric: f"m{i}" for i, metric in enumerate(metrics)}
    body = [headline_section(headlines, anchors)]  # the answers, then why, then what is wrong with the study
    if sequences:
        items = "".join(f"<li>{text(line)}</li>" for line in sequences)
        body.insert(0, f"<h2>Replicated until decided</h2><ul>{items}</ul>")
    if report.decomposition:
        body.append(_decomposition_section(report.decomposition, report.level, metrics))
    body.append(_summary(report, problems))
    if metrics:
        links = " ".join(f'<a href="#m{i}">{text(m)}</a>' for i, m in enumerate(metrics))
        body.append(f"<h2>Metrics</h2><nav>{links}</nav>")
        for index, metric in enumerate(metrics):
            body.append(_metric_section(report, metric, index, curves or {}))
    if stability:
        body.append(stability_section(stability))
    if timings:
        body.append(timings_section(timings, timing_notes))
    if report.excluded:
        rows = [(r.experiment, r.variant, r.replica, r.status, excluded_line(r)) for r in report.excluded]
        body.append("<h2>Runs left out</h2>" + table(["experiment", "variant", "replica", "status", "why"], rows))
    subtitle = f"{text(source)} · {report.n_runs} run(s) · per-run value: {text(report.aggregate)}"
    return shell("deviate-cb report", subtitle, body)


def metric_order(rows: Sequence[Any], answered: Sequence[str]) -> list[str]:
    """The page's metrics in the order of the report's rows
    (:func:`~deviate_cb.report.answers.summary.describe_series`), the metrics the answers are about (``answered``: the
    headlines' metrics, the metrics of interest) moved first, so that each part of the page (answers, decomposition,
    per-metric sections) lists them in the same order.

    Example:
        >>> from types import SimpleNamespace as Row
        >>> rows = [Row(metric=m) for m in ("train_loss", "lr", "val_acc", "train_loss", "val_loss")]
        >>> metric_order(rows, ["val_acc", "val_loss"])
        ['val_acc', 'val_loss', 'train_loss', 'lr']
    """
    first = set(answered)
    return list(dict.fromkeys(row.metric for row in sorted(rows, key=lambda row: row.metric not in first)))


def _summary(report: Any, problems: Sequence[str]) -> str:
    other: dict[tuple[str, str], dict[str, int]] = {}
    for run in report.excluded:
        counts = other.setdefault((run.experiment, run.variant), {})
        counts[run.status] = counts.get(run.status, 0) + 1
    rows = []
    for experiment, variant, completed in report.groups:
        left = other.get((experiment, variant), {})
        rows.append((experiment, variant, completed, ", ".join(f"{n} {s}" for s, n in sorted(left.items())) or "—"))
    experiments = len({g[0] for g in report.groups})
    variants = len({g[1] for g in report.groups})
    parts = [
        "<h2>Summary</h2>",
        f"<p>{experiments} experiment(s), {variants} variant(s), {sum(g[2] for g in report.groups)} completed run(s), "
        f"{len(report.excluded)} not completed.</p>",
        table(["experiment", "variant", "completed", "not completed"], rows, [False, False, True, False]),
    ]
    parts.append(_folded("Problems", problems))
    parts.append(_folded("Warnings", report.warnings))
    return "".join(parts)


def _folded(title: str, lines: Sequence[str]) -> str:
    """``lines`` as a list under ``title`` with their count; closed (a click opens it) when long: more than
    :data:`_OPEN_ITEMS` lines or :data:`_OPEN_CHARS` characters.

    Example:
        >>> _folded("Problems", ["a"]).startswith('<details class="problems" open><summary><h3>Problems (1)</h3>')
        True
        >>> _folded("Problems", ["a"] * 4).startswith('<details class="problems"><summary>'), _folded("Warnings", [])
        (True, '')
    """
    if not lines:
        return ""
    items = "".join(f"<li>{text(line)}</li>" for line in lines)
    short = len(lines) <= _OPEN_ITEMS and sum(len(line) for line in lines) <= _OPEN_CHARS
    return (
        f'<details class="problems"{" open" if short else ""}><summary><h3>{text(title)} ({len(lines)})</h3></summary>'
        f'<ul class="problems">{items}</ul></details>'
    )


def _metric_section(
    report: Any,
    metric: str,
    index: int,
    curves: Mapping[tuple[str, str, str], Any],
) -> str:
    rows = [row for row in report.rows if row.metric == metric]
    level = f"{report.level:.0%}"
    parts = [f'<h3 id="m{index}">{text(metric)}</h3>']
    for experiment in dict.fromkeys(row.experiment for row in rows):
        mine = [row for row in rows if row.experiment == experiment]
        parts.append(f"<h4>experiment {text(experiment)}</h4>")
        plots = []
        lines = [
            (row.variant, curves[(experiment, row.variant, metric)])
            for row in mine
            if (experiment, row.variant, metric) in curves
        ]
        series = any(figures.has_series(curve) for _, curve in lines)
        if series:
            caption = "Every replica thin (a bounded number drawn), the mean bold, a band of one std."
            plots.append(figure(figures.curves_figure(metric, lines), caption, "curves"))
        values = {row.variant: report.values.get((experiment, row.variant, metric), ()) for row in mine}
        if any(values.values()):
            iqm = {r.variant: (r.iqm, r.iqm_ci_low, r.iqm_ci_high) for r in mine if r.iqm is not None}
            caption = f"Each run's value, a box of the quartiles; under them the mean with its {level} Student-t "
            caption += "interval" + (", the IQM with its interval (Yuen)" if iqm else "") + "."
            if lines and not series:
                caption += " One value per run: no curve to draw."
            markup = figures.distribution_figure(metric, list(values.items()), level=report.level, iqm=iqm)
            plots.append(figure(markup, caption, "distribution" if series else "strip"))
        parts.append(f'<div class="pair">{"".join(plots)}</div>')
        parts.append(_metric_table(mine, level))
    return "".join(parts)


def _metric_table(rows: Sequence[Any], level: str) -> str:
    iqm = any(row.iqm is not None for row in rows)
    header = ["variant", "n", "mean", "std", f"std {level} CI", "CV", "min", "max"]
    if iqm:
        header += ["IQM", "IQM CI"]
    cells = []
    for row in rows:
        cell = [
            row.variant,
            row.n,
            row.mean,
            row.std,
            interval(row.std_ci_low, row.std_ci_high),
            percent(row.cv),
            row.min,
            row.max,
        ]
        if iqm:
            cell += [row.iqm, interval(row.iqm_ci_low, row.iqm_ci_high)]
        cells.append(cell)
    return table(header, cells, [False] + [True] * (len(header) - 1))


def _decomposition_section(rows: Sequence[Any], level: float, metrics: Sequence[str] = ()) -> str:
    parts = [
        "<h2>Variance decomposition</h2>",
        '<p class="note">std(narrow) / std(wide) per metric, with its '
        f"{level:.0%} interval (kurtosis-adjusted, not capped: a share significantly above 1 means the set-up needs "
        "checking, "
        "named in the note). impl / algo+impl: the implementation noise share, the part of the seed "
        "spread implementation noise alone keeps. control / algo: what is left of the spread with every seed "
        "fixed and determinism on (not implementation noise). A ratio of 0 means the narrow variant's runs are "
        "identical.</p>",
    ]
    rank = {metric: index for index, metric in enumerate(metrics)}
    for experiment in dict.fromkeys(row.experiment for row in rows):
        mine = [row for row in rows if row.experiment == experiment]
        pairs = list(dict.fromkeys(row.pair for row in mine))  # each pair's rows together, metrics as in the page
        mine.sort(key=lambda row: (pairs.index(row.pair), rank.get(row.metric, len(rank))))
        markup = answer_figures.decomposition_figure(experiment, mine)
        caption = "Blue: impl / algo+impl (implementation noise share); orange: control / algo (left with every "
        caption += "seed fixed). Intervals drawn within [0, 1]."
        parts.append(f"<h4>experiment {text(experiment)}</h4>{figure(markup, caption, 'decomposition')}")
        cells = [
            (
                r.metric,
                f"{r.narrow} / {r.wide}",
                f"{r.n_narrow} / {r.n_wide}",
                r.std_narrow,
                r.std_wide,
                "—" if r.share != r.share else f"{r.share:.3f}",
                interval(r.share_ci_low, r.share_ci_high),
                r.note,
            )
            for r in mine
        ]
        header = ["metric", "pair", "n", "std narrow", "std wide", "ratio", f"{level:.0%} CI", "note"]
        parts.append(table(header, cells, [False, False, True, True, True, True, True, False]))
    return "".join(parts)
