"""The report page from its parts, for ``deviate report --format html`` and :class:`~deviate_cb.report.Study`.

Example:
    >>> svg = '<svg aria-label="runs of val_acc"></svg>'
    >>> page_figures(f'<h3>val_acc</h3><h4>experiment mlp</h4><figure class="figure" data-kind="strip">{svg}</figure>')
    {'runs of val_acc (experiment mlp)': '<svg aria-label="runs of val_acc"></svg>'}
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any, Optional

__all__ = ["html_report", "page_figures", "study_page"]

_PIECE = re.compile(
    r'<(h[234])\b[^>]*>(.*?)</\1>|<figure class="figure[^"]*"(?: data-kind="([^"]*)")?>(.*?)</figure>', re.S
)
_TAG = re.compile(r"<[^>]+>")
_LABEL = re.compile(r'(?:aria-label|alt)="([^"]*)"')


def html_report(
    report: Any,
    *,
    source: str,
    problems: Sequence[Any] = (),  # Problem objects
    stability: Sequence[Any] = (),
    timings: Sequence[Any] = (),
    headlines: Sequence[Any] = (),
    warnings: Optional[list[str]] = None,
    curves: bool = True,
    sequences: Sequence[str] = (),
) -> str:
    """The whole page: ``curves`` reads the completed runs' training curves (a ``--table`` report has none);
    files that cannot be read are named in ``warnings``, unless the report (``report.warnings``) or ``warnings``
    named them already: one warning per damaged file."""
    from deviate_cb.report.answers.findings import format_problem
    from deviate_cb.report.rendering.html.curves import read_curves
    from deviate_cb.report.rendering.html.page import report_page
    from deviate_cb.report.text.safe import unseen

    drawn = {}
    if curves:
        wanted = {(row.experiment, row.variant, row.metric) for row in report.rows}
        said: list[str] = []
        drawn = read_curves(report.completed, said, wanted=wanted)
        if warnings is not None:
            warnings += unseen(said, [*report.warnings, *warnings])
    return report_page(
        report,
        source=source,
        problems=[format_problem(problem) for problem in problems],
        curves=drawn,
        stability=stability,
        timings=timings,
        headlines=headlines,
        sequences=sequences,
    )


def study_page(study: Any) -> str:
    """The page of a :class:`~deviate_cb.report.study.Study`."""
    return html_report(
        study.report,
        source=study.source,
        problems=study.problems,
        stability=study.stability,
        timings=study.timings,
        headlines=study.headlines,
        warnings=study.warnings,
        sequences=study.sequence_lines,
    )


def page_figures(page: str) -> dict[str, str]:
    """Every figure of ``page`` (its SVG or ``<img>`` markup, caption left out), keyed by what it shows (its
    ``aria-label`` or ``alt`` text, else its kind) and the heading it stands under (the experiment, the group); a
    key met twice gets `` (2)``, `` (3)``, ..."""
    out: dict[str, str] = {}
    under = ""
    for match in _PIECE.finditer(page):
        level, heading, kind, body = match.groups()
        if level:
            under = html.unescape(" ".join(_TAG.sub(" ", heading).split())) if level == "h4" else ""
            continue
        label = _LABEL.search(body)
        what = html.unescape(label.group(1)) if label else (kind or "figure")
        key = f"{what} ({under})" if under.startswith("experiment ") and under not in what else what
        unique, n = key, 2
        while unique in out:
            unique, n = f"{key} ({n})", n + 1
        out[unique] = re.sub(r"<figcaption\b.*?</figcaption>", "", body, flags=re.S)
    return out
