"""The HTML page of ``deviate report``: one self-contained file (plots and styles inline, nothing fetched).

:func:`report_page` lays out, for a study of any size:

- a summary: groups with their completed and other runs, the problems the numbers alone hide
  (:mod:`deviate_cb.report.problems`) and every warning (fingerprint differences, unreadable files);
- per metric and experiment: the training curves of the replicas of each variant with the mean and a one-std
  band (:mod:`deviate_cb.report.html.curves`), the distribution of the per-run values per variant, and the table
  of n, mean, std with its confidence interval, CV, min and max;
- the variance decomposition (share of the spread due to implementation noise, with its interval) as bars;
- stability, when recorded: the churn matrix as a heatmap, the per-class std, sub-group rates, the samples that
  flip most, the weight distance;
- the step times per replica, with the caveats of the step-time section;
- the runs left out of the statistics, with their status and error.

Every user-provided string (experiment, variant, metric, class and group names, errors, paths) goes through
:func:`text`: control characters escaped (:func:`deviate_cb.report.text.printable`), then HTML-escaped, so a
metric called ``<b>acc</b>`` shows as those characters. The page follows the viewer's light or dark scheme; the
plots sit on light cards in both.

Example:
    >>> text("<b>acc</b>\\x1b[31m")
    '&lt;b&gt;acc&lt;/b&gt;\\\\x1b[31m'
"""

from __future__ import annotations

import datetime as _dt
import html
import math
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from deviate_cb.report.html import figures
from deviate_cb.report.text import printable

__all__ = ["STYLE", "number", "report_page", "shell", "table", "text"]

_MAX_BARS = 40  # replicas drawn as one bar each; more are drawn as a distribution

STYLE = """
:root { color-scheme: light dark; --fg: #1b1f24; --bg: #ffffff; --muted: #5b6470; --line: #d7dce2;
        --card: #ffffff; --accent: #0072B2; --warn: #8a4b00; --warnbg: #fff4e0; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6e8eb; --bg: #15181c; --muted: #a3abb5; --line: #39404a; --card: #f7f7f5; --accent: #56B4E9;
          --warn: #ffcf8a; --warnbg: #3a2a10; }
}
* { box-sizing: border-box; }
body { margin: 0; padding: 1.5rem 2rem 3rem; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
       color: var(--fg); background: var(--bg); max-width: 1200px; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid var(--line); }
h3 { margin: 1.6rem 0 .4rem; } h4 { margin: 1rem 0 .3rem; color: var(--muted); font-weight: 600; }
.meta, .note { color: var(--muted); font-size: .9rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .88rem; }
th, td { border-bottom: 1px solid var(--line); padding: .25rem .6rem; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.figure { background: var(--card); border-radius: 8px; padding: .4rem; margin: .4rem 0; display: inline-block;
          max-width: 100%; border: 1px solid var(--line); }
.figure svg, .figure img { max-width: 100%; height: auto; display: block; }
.pair { display: flex; flex-wrap: wrap; gap: .8rem; align-items: flex-start; }
ul.problems li { background: var(--warnbg); color: var(--warn); padding: .2rem .5rem; margin: .2rem 0;
                 border-radius: 4px; list-style: none; }
nav a { color: var(--accent); margin-right: .8rem; } code { font-size: .9em; }
.error { font-family: ui-monospace, monospace; font-size: .82rem; white-space: pre-wrap; max-width: 60rem; }
"""


def text(value: Any) -> str:
    """A stored string made safe for the page: control characters escaped, then HTML-escaped."""
    return html.escape(printable(str(value)), quote=True)


def number(value: Any, digits: int = 4) -> str:
    """A number for a table cell: ``digits`` significant digits; NaN and None as a dash.

    Example:
        >>> number(0.123456), number(float("nan")), number(12)
        ('0.1235', '—', '12')
    """
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return text(value)
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "—" if math.isnan(value) else ("∞" if value > 0 else "-∞")
    return f"{value:.{digits}g}"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[bool] = ()) -> str:
    """An HTML table; cells are numbers (formatted) or text (escaped); ``numeric`` right-aligns columns."""
    right = list(numeric) + [False] * (len(header) - len(numeric))
    head = "".join(f'<th class="{"num" if r else ""}">{text(h)}</th>' for h, r in zip(header, right, strict=True))
    body = []
    for row in rows:
        cells = []
        for value, r in zip(row, right, strict=True):
            shown = number(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else text(value)
            cells.append(f'<td class="{"num" if r else ""}">{shown}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _figure(markup: str) -> str:
    return f'<div class="figure">{markup}</div>'


def shell(title: str, subtitle: str, body: Sequence[str]) -> str:
    """The whole page: ``<head>`` with the styles, a title, ``body`` sections."""
    from deviate_cb import __version__

    made = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)}</title><style>{STYLE}</style></head><body>"
        f'<header><h1>{text(title)}</h1><div class="meta">{subtitle} · made {made} by deviate-cb {text(__version__)}'
        "</div></header>" + "".join(body) + "</body></html>\n"
    )


def report_page(
    report: Any,
    *,
    source: str,
    problems: Sequence[str] = (),
    curves: Optional[Mapping[tuple[str, str, str], Any]] = None,
    stability: Sequence[Any] = (),
    timings: Sequence[Any] = (),
    timing_notes: Sequence[str] = (),
) -> str:
    """The page of a :class:`~deviate_cb.report.summary.Report` (see the module docstring)."""
    from deviate_cb.report.render import excluded_line

    metrics = list(dict.fromkeys(row.metric for row in report.rows))
    body = [_summary(report, problems)]
    if metrics:
        links = " ".join(f'<a href="#m{i}">{text(m)}</a>' for i, m in enumerate(metrics))
        body.append(f"<h2>Metrics</h2><nav>{links}</nav>")
        for index, metric in enumerate(metrics):
            body.append(_metric_section(report, metric, index, curves or {}))
    if report.decomposition:
        body.append(_decomposition_section(report.decomposition))
    if stability:
        body.append(_stability_section(stability))
    if timings:
        body.append(_timings_section(timings, timing_notes))
    if report.excluded:
        rows = [(r.experiment, r.variant, r.replica, r.status, excluded_line(r)) for r in report.excluded]
        body.append("<h2>Runs left out</h2>" + table(["experiment", "variant", "replica", "status", "why"], rows))
    subtitle = f"{text(source)} · {report.n_runs} run(s) · per-run value: {text(report.aggregate)}"
    return shell("deviate-cb report", subtitle, body)


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
    if problems:
        items = "".join(f"<li>{text(line)}</li>" for line in problems)
        parts.append(f'<h3>Problems</h3><ul class="problems">{items}</ul>')
    if report.warnings:
        items = "".join(f"<li>{text(line)}</li>" for line in report.warnings)
        parts.append(f'<h3>Warnings</h3><ul class="problems">{items}</ul>')
    return "".join(parts)


def _metric_section(report: Any, metric: str, index: int, curves: Mapping[tuple[str, str, str], Any]) -> str:
    rows = [row for row in report.rows if row.metric == metric]
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
        if lines:
            plots.append(_figure(figures.curves_figure(metric, lines)))
        values = [(row.variant, report.values.get((experiment, row.variant, metric), ())) for row in mine]
        if any(v for _, v in values):
            plots.append(_figure(figures.distribution_figure(metric, values)))
        parts.append(f'<div class="pair">{"".join(plots)}</div>')
        level = f"{report.level:.0%}"
        table_rows = [
            (
                row.variant,
                row.n,
                row.mean,
                row.std,
                f"[{number(row.std_ci_low)}, {number(row.std_ci_high)}]",
                row.cv,
                row.min,
                row.max,
            )
            for row in mine
        ]
        parts.append(
            table(
                ["variant", "n", "mean", "std", f"std {level} CI", "CV", "min", "max"],
                table_rows,
                [False, True, True, True, True, True, True, True],
            )
        )
    return "".join(parts)


def _decomposition_section(rows: Sequence[Any]) -> str:
    parts = [
        "<h2>Variance decomposition</h2>",
        '<p class="note">Share of the spread due to implementation noise: std(narrow) / std(wide) '
        "(impl / algo+impl, control / algo), with its bootstrap interval.</p>",
    ]
    for experiment in dict.fromkeys(row.experiment for row in rows):
        mine = [row for row in rows if row.experiment == experiment]
        labels = [f"{row.metric} ({row.narrow} / {row.wide})" for row in mine]
        markup = figures.bar_figure(
            f"variance decomposition of {experiment}",
            labels,
            [row.share for row in mine],
            low=[row.share_ci_low for row in mine],
            high=[row.share_ci_high for row in mine],
            xlabel="std(narrow) / std(wide), with interval",
        )
        parts.append(f"<h4>experiment {text(experiment)}</h4>{_figure(markup)}")
    return "".join(parts)


def _stability_section(groups: Sequence[Any]) -> str:
    parts = ["<h2>Stability</h2>"]
    for group in groups:
        parts.append(f"<h3>{text(group.experiment)} · {text(group.variant)}</h3>")
        parts.append(
            f'<p class="note">{group.n_runs} run(s), {group.n_samples} sample(s), snapshot {text(group.snapshot)}</p>'
        )
        if group.churn is not None:
            churn = group.churn
            labels = [str(k) for k in range(churn.n_runs)]
            parts.append(
                f"<p>Prediction churn between runs: mean {number(churn.mean)}, min {number(churn.min)}, "
                f"max {number(churn.max)}.</p>"
            )
            parts.append(
                _figure(
                    figures.heatmap_figure(
                        "prediction churn between runs",
                        churn.matrix,
                        labels,
                        colorbar="fraction of samples predicted differently",
                    )
                )
            )
        if group.per_class is not None:
            pc = group.per_class
            names = [str(c) for c in pc.classes]
            parts.append(
                _figure(
                    figures.bar_figure(
                        "per-class std of accuracy",
                        names,
                        list(pc.std),
                        xlabel="std of the class's accuracy across runs",
                        ylabel="class",
                    )
                )
            )
        for labelling, rates in group.subgroups.items():
            header = list(rates.rows[0].keys()) if rates.rows else []
            if header:
                parts.append(f"<h4>sub-groups by {text(labelling)}</h4>")
                parts.append(
                    table(header, [[row[h] for h in header] for row in rates.rows], [h != "group" for h in header])
                )
        if group.instability is not None:
            inst = group.instability
            flipping = [i for i in range(len(inst.sample)) if inst.flip_rate[i] > 0][:10]
            if flipping:
                rows = [(inst.sample[i], inst.majority[i], inst.flip_rate[i], inst.entropy[i]) for i in flipping]
                parts.append("<h4>samples that flip most</h4>")
                parts.append(table(["sample", "majority", "flip rate", "entropy"], rows, [True, True, True, True]))
            else:
                parts.append('<p class="note">No sample is predicted differently by any run.</p>')
        if group.weights is not None:
            w = group.weights
            parts.append(
                f"<p>Normalized weight distance between runs ({text(w.method)}): mean {number(w.mean)}, "
                f"min {number(w.min)}, max {number(w.max)}.</p>"
            )
        for note in group.notes:
            parts.append(f'<p class="note">{text(note)}</p>')
    return "".join(parts)


def _timings_section(groups: Sequence[Any], notes: Sequence[str]) -> str:
    parts = [
        "<h2>Step times</h2>",
        '<p class="note">Each replica\'s median training step (profiled steps left out).</p>',
    ]
    for group in groups:
        replicas = sorted(group.medians, key=lambda r: (len(str(r)), str(r)))
        if len(replicas) <= _MAX_BARS:
            markup = figures.bar_figure(
                f"median step time of {group.experiment} {group.variant}",
                [f"replica {r}" for r in replicas],
                [group.medians[r] for r in replicas],
                xlabel="median training step (seconds)",
                colour=figures.PALETTE[0],
            )
        else:  # too many replicas for a bar each: their distribution
            values = [(str(group.variant), [group.medians[r] for r in replicas])]
            markup = figures.distribution_figure("median training step (seconds)", values)
        spread = number(group.slowest_over_fastest_pct, 3)
        parts.append(f"<h4>{text(group.experiment)} · {text(group.variant)}: slowest vs fastest +{spread}%</h4>")
        parts.append(_figure(markup))
        caveats = "".join(f"<li>caveat: {text(line)}</li>" for line in getattr(group, "caveats", ()))
        if caveats:
            parts.append(f'<ul class="problems">{caveats}</ul>')
    if notes:
        items = "".join(f"<li>{text(line)}</li>" for line in notes)
        parts.append(f'<ul class="problems">{items}</ul>')
    return "".join(parts)
