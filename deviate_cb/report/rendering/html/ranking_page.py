"""The HTML page of ``deviate compare DIR --by KEY``: the k groups ranked per metric by Almost Stochastic Order.

Example:
    >>> from deviate_cb.report.answers.ranking import rank_metrics, split_by
    >>> from deviate_cb.report.reading.selection import RunValues
    >>> runs = [RunValues({"variant": v}, {"acc": x}) for v, base in (("a", 0.80), ("b", 0.90), ("c", 0.85))
    ...         for x in (base, base + 0.01, base + 0.02, base + 0.01, base + 0.015)]  # 5 runs: a claim can hold
    >>> page = ranking_page(rank_metrics(split_by(runs, "variant"), seed=0), title="by variant", key="variant")
    >>> 'data-kind="heatmap"' in page and "b &gt; c &gt; a" in page
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deviate_cb.report.rendering.html.answer_figures import matrix_figure
from deviate_cb.report.rendering.html.markup import figure, shell, table, text

__all__ = ["ranking_page"]


def _order(ranked: Any) -> str:
    """The ranking in words (:func:`deviate_cb.report.answers.ranking.order_text`)."""
    from deviate_cb.report.answers.ranking import order_text

    return order_text(ranked.result)


def _direction(direction: str) -> str:
    return {"max": "larger is better", "min": "smaller is better"}.get(direction, "larger taken as better")


def ranking_page(rankings: Sequence[Any], *, title: str, key: str, notes: Sequence[str] = ()) -> str:
    """The page (see the module docstring); ``key`` is the partition key the groups are the values of."""
    body = [f"<h2>{text(title)}</h2>", "<h2>Answers</h2>"]
    items = []
    for index, ranked in enumerate(rankings):
        link = f'<a href="#r{index}">{text(ranked.metric)}</a>'
        said = _order(ranked) if ranked.result is not None else f"not compared: {ranked.reason}"
        items.append(f"<li>{link} ({text(_direction(ranked.direction))}): {text(said)}</li>")
    body.append(f'<ul class="answers">{"".join(items)}</ul>')
    for index, ranked in enumerate(rankings):
        body.append(f'<h3 id="r{index}">{text(ranked.metric)}</h3>')
        r = ranked.result
        if r is None:
            body.append(f'<p class="note">not compared: {text(ranked.reason)}</p>')
            continue
        body.append(f'<ul class="answers"><li>{text(_order(ranked))}</li></ul>')
        order = [r.groups.index(name) for name in r.ranking]
        matrix = r.eps_min[order][:, order]
        markup = matrix_figure(
            f"eps_min between the groups of {ranked.metric}",
            matrix,
            list(r.ranking),
            threshold=r.threshold,
            colorbar=f"eps_min of row over column (< {r.threshold:g}: row almost dominates)",
        )
        caption = (
            f"eps_min of the row's group over the column's at confidence 1 - {r.alpha:g}/{r.n_comparisons} "
            f"(Bonferroni over the {r.n_comparisons} ordered pairs); framed: below {r.threshold:g}, the row almost "
            "stochastically dominates the column."
        )
        rows = [
            (rank, r.groups[i], ranked.n.get(r.groups[i], 0), ranked.means.get(r.groups[i]), r.wins[i])
            for rank, i in enumerate(order, start=1)
        ]
        summary = table([f"rank ({key})", "group", "n", "mean", "dominates"], rows, [True, False, True, True, True])
        body.append(f'<div class="pair">{figure(markup, caption, "heatmap")}<div>{summary}</div></div>')
        if ranked.direction == "min":
            body.append('<p class="note">Smaller is better for this metric: ASO ran on the negated values.</p>')
        elif ranked.direction == "max?":
            body.append(
                f'<p class="note">Direction of {text(ranked.metric)} unknown: larger taken as better '
                "(--direction NAME=min flips it).</p>"
            )
        if ranked.left_out:
            body.append(f'<p class="note">Left out (fewer than 2 finite runs): {text(", ".join(ranked.left_out))}.</p>')
    for note in notes:
        body.append(f'<p class="note">{text(note)}</p>')
    return shell("deviate-cb compare --by", text(f"groups: the values of {key}"), body)
