"""The HTML page of ``deviate compare``: the comparison table, and per metric the two groups' runs side by side.

:func:`compare_page` takes the rows of :func:`deviate_cb.report.comparison.compare_groups` and the runs of each
group; per compared metric it draws both distributions (every run a point, a box of the quartiles) and prints the
verdict under them, then the whole table (the columns of the terminal table). Strings are escaped as in
:mod:`deviate_cb.report.html.page`.

Example:
    >>> from deviate_cb.report.selection import RunValues
    >>> a = [RunValues({"variant": "a"}, {"acc": 0.80 + k / 100}) for k in range(3)]
    >>> b = [RunValues({"variant": "b"}, {"acc": 0.70 + k / 100}) for k in range(3)]
    >>> row = {"metric": "acc", "status": "compared", "verdict": "A is higher"}
    >>> page = compare_page([row], a, b, label_a="variant=a", label_b="variant=b", title="A vs B", notes=())
    >>> "A is higher" in page and page.startswith("<!DOCTYPE html>")
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from deviate_cb.report.html import figures
from deviate_cb.report.html.page import shell, table, text

__all__ = ["compare_page"]


def compare_page(
    rows: Sequence[Mapping[str, Any]],
    group_a: Sequence[Any],
    group_b: Sequence[Any],
    *,
    label_a: str,
    label_b: str,
    title: str,
    notes: Sequence[str],
    human: Mapping[str, Callable[[dict[str, Any]], str]] | None = None,
) -> str:
    """The page; ``group_a``/``group_b`` are :class:`~deviate_cb.report.selection.RunValues`."""
    body = [f"<h2>{text(title)}</h2>"]
    for row in rows:
        metric = str(row.get("metric"))
        body.append(f"<h3>{text(metric)}</h3>")
        if row.get("status") != "compared":
            body.append(f'<p class="note">not compared: {text(row.get("reason") or row.get("status"))}</p>')
            continue
        values = [
            (f"A: {label_a}", [run.values[metric] for run in group_a if metric in run.values]),
            (f"B: {label_b}", [run.values[metric] for run in group_b if metric in run.values]),
        ]
        body.append(f'<div class="figure">{figures.distribution_figure(metric, values)}</div>')
        body.append(f"<p><strong>{text(row.get('verdict', ''))}</strong></p>")
    if human:
        cells = [[render(dict(row)) for render in human.values()] for row in rows]
        body.append("<h2>All results</h2>" + table(list(human), cells))
    for note in notes:
        body.append(f'<p class="note">{text(note)}</p>')
    return shell("deviate-cb compare", text(f"A: {label_a} · B: {label_b}"), body)
