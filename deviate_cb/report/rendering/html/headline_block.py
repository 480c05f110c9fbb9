"""The answers at the top of the HTML report: each :class:`~deviate_cb.report.answers.records.Headline`'s sentences.

Example:
    >>> from deviate_cb.report.answers.headline import build_headlines
    >>> from deviate_cb.report.answers.summary import Report, ReportRow
    >>> rows = (ReportRow("mlp", "control", "val_acc", "last", 3, 0.9, 0.0, 0.0, 0.9, 0.9, 0.0, 0.0, 0.0),)
    >>> report = Report(rows, (), groups=(("mlp", "control", 3),), values={("mlp", "control", "val_acc"): (0.9,) * 3})
    >>> block = headline_section(build_headlines(report))
    >>> '<li class="ok"><span class="badge">✓ identical</span>control: the 3 runs are bit-identical' in block
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deviate_cb.report.rendering.html.answer_figures import plannable, power_figure
from deviate_cb.report.rendering.html.markup import figure, text

__all__ = ["headline_section"]

_MARKS = {
    "identical": ("ok", "✓ identical"),
    "identical as printed": ("ok", "✓ identical as printed"),
    "differs": ("warn", "⚠ differs"),
}


def headline_section(headlines: Sequence[Any], anchors: dict[str, str] | None = None) -> str:
    """The "Answers" section: one block per headline (``anchors``: metric -> id of its section, linked), then
    per experiment the runs-needed curves of its metrics
    (:func:`~deviate_cb.report.rendering.html.answer_figures.power_figure`)."""
    if not headlines:
        return ""
    parts = ['<section id="answers"><h2>Answers</h2>']
    for experiment in dict.fromkeys(h.experiment for h in headlines):
        mine = [h for h in headlines if h.experiment == experiment]
        for headline in mine:
            parts.append(_block(headline, anchors or {}))
        plans = [(h.metric, h.runs) for h in mine if plannable(h.runs)]
        markup = power_figure(f"runs needed in experiment {experiment}", plans)
        if markup is not None:
            first = plans[0][1]
            caption = (
                f"Runs needed, experiment {experiment}: the power of Welch's t-test (alpha {first.alpha:g}) against "
                "the runs per group, per metric at its measured spread and the difference worth reporting; dot: "
                f"the runs needed for {first.power:.0%}; square: the runs made."
            )
            parts.append(figure(markup, caption, "power"))
    parts.append("</section>")
    return "".join(parts)


def _block(headline: Any, anchors: dict[str, str]) -> str:
    name = text(headline.metric)
    target = anchors.get(headline.metric)
    title = f'<a href="#{target}">{name}</a>' if target else name
    items = []
    for index, sentence in enumerate(headline.sentences):
        if index == 0 and sentence.startswith("control"):
            kind, badge = _MARKS.get(headline.control or "", ("", ""))
            cls = f' class="{kind}"' if kind else ""
            mark = f'<span class="badge">{badge}</span>' if badge else ""
            items.append(f"<li{cls}>{mark}{text(sentence)}</li>")
        else:
            items.append(f"<li>{text(sentence)}</li>")
    for note in getattr(headline, "notes", ()):
        items.append(f'<li class="warn"><span class="badge">note</span>{text(note)}</li>')
    heading = f'<h3 class="answer">{title} <span class="meta">experiment {text(headline.experiment)}</span></h3>'
    return f'{heading}<ul class="answers">{"".join(items)}</ul>'
