"""The HTML page of ``deviate compare``: is A really better than B, per metric, in words and in figures.

Example:
    >>> from deviate_cb.report.reading.selection import RunValues
    >>> a = [RunValues({"variant": "a"}, {"acc": 0.80 + k / 100}) for k in range(3)]
    >>> b = [RunValues({"variant": "b"}, {"acc": 0.70 + k / 100}) for k in range(3)]
    >>> row = {"metric": "acc", "status": "compared", "verdict": "A is higher", "p_a_gt_b": 1.0,
    ...        "p_a_gt_b_ci_low": 0.8, "p_a_gt_b_ci_high": 1.0, "cohens_d": 10.0, "cohens_d_ci_low": 3.0,
    ...        "cohens_d_ci_high": 17.0}
    >>> page = compare_page([row], a, b, label_a="variant=a", label_b="variant=b", title="A vs B", notes=())
    >>> "A is higher" in page and 'data-kind="poi"' in page and 'data-kind="forest"' in page
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from deviate_cb.report.rendering.html import answer_figures, figures
from deviate_cb.report.rendering.html.markup import figure, interval, number, shell, table, text

__all__ = ["compare_curves", "compare_page", "sequential_note"]


def compare_curves(groups: Sequence[tuple[str, str, Sequence[Any]]], warnings: list[str]) -> dict[str, list]:
    """``metric -> [(group name, Curves)]``: the training curves of each group's runs, ``groups`` being
    ``(name, study directory, RunValues)`` triples (a run is found by its experiment, variant and replica)."""
    from deviate_cb.report.reading.runs import find_runs
    from deviate_cb.report.rendering.html.curves import read_curves

    found: dict[str, dict[tuple[str, str, str], Any]] = {}
    chosen = []
    for name, directory, runs in groups:
        if directory not in found:
            records = find_runs(Path(directory), warnings)
            found[directory] = {(r.experiment, r.variant, str(r.replica)): r for r in records if r.completed}
        for run in runs:
            key = tuple(str(run.keys.get(k)) for k in ("experiment", "variant", "replica"))
            record = found[directory].get(key)  # type: ignore[arg-type]
            if record is not None:
                chosen.append(dataclasses.replace(record, experiment="", variant=name))
    out: dict[str, list] = {}
    for (_, name, metric), curves in read_curves(chosen, warnings).items():
        out.setdefault(metric, []).append((name, curves))
    order = [name for name, _, _ in groups]
    return {m: sorted(lines, key=lambda line: order.index(line[0])) for m, lines in out.items()}


def compare_page(
    rows: Sequence[Mapping[str, Any]],
    group_a: Sequence[Any],
    group_b: Sequence[Any],
    *,
    label_a: str,
    label_b: str,
    title: str,
    notes: Sequence[str],
    human: Optional[Mapping[str, Callable[[dict[str, Any]], str]]] = None,
    curves: Optional[Mapping[str, Sequence[tuple[str, Any]]]] = None,
    level: float = 0.95,
) -> str:
    """The page; ``group_a``/``group_b`` are :class:`~deviate_cb.report.reading.selection.RunValues`; ``curves`` (from
    :func:`compare_curves`, named ``A`` and ``B``) adds the training curves. ``human`` is the terminal's column
    set, kept for callers; the page prints its own narrower table."""
    del human  # the terminal's columns are too many for a page: the table below groups them
    compared = [row for row in rows if row.get("status") == "compared"]
    body = [f"<h2>{text(title)}</h2>", _answers(rows)]
    if compared:
        poi = answer_figures.probability_figure(compared)
        forest = answer_figures.forest_figure(compared)
        body.append(
            '<div class="pair">'
            + figure(
                poi, "P(A>B): the chance a run of A beats a run of B, with its interval; 0.5: no difference.", "poi"
            )
            + figure(forest, "Cohen's d of A - B with its interval; 0: no difference.", "forest")
            + "</div>"
        )
        body.append("<h2>Results</h2>" + _results_table(compared))
    body.append("<h2>Per metric</h2>")
    names = {"A": f"A: {label_a}", "B": f"B: {label_b}"}
    for index, row in enumerate(rows):
        metric = str(row.get("metric"))
        body.append(f'<h3 id="c{index}">{text(metric)}</h3>')
        if row.get("status") != "compared":
            body.append(f'<p class="note">not compared: {text(row.get("reason") or row.get("status"))}</p>')
            continue
        body.append(_verdicts(row))
        plots = []
        lines = [(names.get(name, name), c) for name, c in (curves or {}).get(metric, ())]
        if lines and any(figures.has_series(c) for _, c in lines):
            caption = "Both groups' training curves: every replica thin, the mean bold, a band of one std."
            plots.append(figure(figures.curves_figure(metric, lines), caption, "curves"))
        values = [
            (names["A"], [run.values[metric] for run in group_a if metric in run.values]),
            (names["B"], [run.values[metric] for run in group_b if metric in run.values]),
        ]
        caption = f"Each run's value, a box of the quartiles; under them the mean with its {level:.0%} interval."
        markup = figures.distribution_figure(metric, values, level=level)
        plots.append(figure(markup, caption, "distribution"))
        body.append(f'<div class="pair">{"".join(plots)}</div>')
    for note in notes:
        body.append(f'<p class="note">{text(note)}</p>')
    return shell("deviate-cb compare", text(f"A: {label_a} · B: {label_b}"), body)


def _sentences(row: Mapping[str, Any]) -> list[tuple[str, str]]:
    location, spread = row.get("location_verdict"), row.get("spread_verdict")
    if location or spread:
        return [(k, str(v)) for k, v in (("means", location), ("spread", spread)) if v]
    return [("verdict", str(row.get("verdict") or row.get("reason") or ""))]


def _verdicts(row: Mapping[str, Any]) -> str:
    items = "".join(f'<li><span class="badge">{kind}</span>{text(s)}</li>' for kind, s in _sentences(row))
    return f'<ul class="answers">{items}</ul>'


def sequential_note(rows: Sequence[Mapping[str, Any]]) -> str:
    """The note of groups replicated until a sequential test decided, as ``compare`` prints it
    (:func:`deviate_cb.report.answers.sequential.compare_note`, in each row's ``sequential_note``); ``""`` when none.

    Example:
        >>> sequential_note([{"metric": "acc", "sequential_note": "these groups were replicated"}])
        'these groups were replicated'
        >>> sequential_note([{"metric": "acc", "sequential_note": float("nan")}]), sequential_note([])
        ('', '')
    """
    notes = [row.get("sequential_note") for row in rows]
    return next((note for note in notes if isinstance(note, str) and note), "")


def _answers(rows: Sequence[Mapping[str, Any]]) -> str:
    """Per metric one line: the short verdict (the sentences are in the metric's section); first, the sequential
    test's note when the groups were replicated until it decided: its decision is the one that holds its error
    rate."""
    items = []
    note = sequential_note(rows)
    if note:
        items.append(f'<li class="warn sequential"><span class="badge">note</span>{text(note)}</li>')
    for index, row in enumerate(rows):
        metric = f'<a href="#c{index}">{text(row.get("metric"))}</a>'
        if row.get("status") != "compared":
            items.append(f"<li>{metric}: not compared: {text(row.get('reason') or '')}</li>")
        else:
            items.append(f"<li>{metric}: {text(row.get('verdict') or '')}</li>")
    return f'<section id="answers"><h2>Answers</h2><ul class="answers">{"".join(items)}</ul></section>'


def _ci(row: Mapping[str, Any], key: str) -> str:
    value = row.get(key)
    if value is None:
        return "—"
    return f"{number(value)} {interval(row.get(key + '_ci_low'), row.get(key + '_ci_high'), 3)}"


def _results_table(rows: Sequence[Mapping[str, Any]]) -> str:
    header = ["metric", "n A/B", "mean A", "mean B", "diff [CI]", "p adj", "d [CI]", "P(A>B) [CI]"]
    header += ["std A/B [CI]", "spread p adj", "ASO eps"]
    cells = []
    for row in rows:
        cells.append(
            [
                text(row.get("metric")),
                f"{row.get('n_a')}/{row.get('n_b')}",
                number(row.get("mean_a")),
                number(row.get("mean_b")),
                _ci(row, "mean_diff"),
                number(row.get("welch_p_corrected")),
                _ci(row, "cohens_d"),
                _ci(row, "p_a_gt_b"),
                _ci(row, "spread_ratio"),
                number(row.get("spread_p_corrected", row.get("variance_p"))),
                number(row.get("aso_epsilon_min")),
            ]
        )
    return table(header, cells, [False] + [True] * (len(header) - 1), raw=True)
