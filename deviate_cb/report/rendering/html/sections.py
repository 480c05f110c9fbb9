"""The stability and step-time sections of the HTML report (:func:`stability_section`, :func:`timings_section`).

Example:
    >>> from deviate_cb.report.answers.timings import TimingGroup
    >>> groups = [TimingGroup("mlp", "algo", {"0": 0.010, "1": 0.012}, 100.0),
    ...           TimingGroup("mlp", "control", {"0": 0.011, "1": 0.2}, 100.0)]
    >>> page = timings_section(groups, [])
    >>> "slowest vs fastest +20.0%" in page and "slowest vs fastest +1718.2%" in page
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deviate_cb.report.answers.stability.rows import shown_per_class, shown_subgroup_rows
from deviate_cb.report.rendering.html import figures
from deviate_cb.report.rendering.html.markup import figure, number, signed_percent, table, text

__all__ = ["stability_section", "timings_section"]

_MAX_BARS = 40  # replicas drawn as one bar each; more are drawn as a distribution


def stability_section(groups: Sequence[Any]) -> str:
    """Per group: the churn heatmap, per-class std, sub-group rates, samples that flip most, weight distance."""
    parts = ["<h2>Stability</h2>"]
    for group in groups:
        parts.append(f"<h3>{text(group.experiment)} · {text(group.variant)}</h3>")
        parts.append(
            f'<p class="note">{group.n_runs} run(s), {group.n_samples} sample(s), snapshot {text(group.snapshot)}</p>'
        )
        plots = []
        if group.churn is not None:
            churn = group.churn
            parts.append(
                f"<p>Prediction churn between runs: mean {number(churn.mean)}, min {number(churn.min)}, "
                f"max {number(churn.max)}.</p>"
            )
            markup = figures.heatmap_figure(
                "prediction churn between runs",
                churn.matrix,
                [str(k) for k in range(churn.n_runs)],
                colorbar="fraction of samples predicted differently",
            )
            plots.append(figure(markup, "Churn: the fraction of samples two runs predict differently.", "heatmap"))
        if group.per_class is not None:
            pc = group.per_class
            markup = figures.bar_figure(
                "per-class std of accuracy",
                [str(c) for c in pc.classes],
                shown_per_class(pc).std,  # rounding residue (1e-16 where runs agree) drawn as 0, as the tables show it
                xlabel="std of the class's accuracy across runs",
                ylabel="class",
            )
            plots.append(figure(markup, "Per class: how much its accuracy varies across runs.", "bars"))
        if plots:
            parts.append(f'<div class="pair">{"".join(plots)}</div>')
        if getattr(group, "sampling", None) is not None:  # the test set's own sampling spread, in words
            parts.append(f"<p>{text(group.sampling.sentence())}</p>")
        for labelling, rates in group.subgroups.items():
            shown = shown_subgroup_rows(rates.rows)  # residue as 0, as the terminal and Markdown tables show it
            header = list(shown[0].keys()) if shown else []
            if header:
                parts.append(f"<h4>sub-groups by {text(labelling)}</h4>")
                parts.append(table(header, [[row[h] for h in header] for row in shown], [h != "group" for h in header]))
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


def _replica_key(replica: Any) -> tuple[int, str]:
    return (len(str(replica)), str(replica))


def timings_section(groups: Sequence[Any], notes: Sequence[str]) -> str:
    """Each group's replicas' median step times, on one time axis shared by every group."""
    parts = [
        "<h2>Step times</h2>",
        '<p class="note">Each replica\'s median training step (profiled steps left out); every group on the same '
        "time axis.</p>",
    ]
    largest = max((max(g.medians.values()) for g in groups if g.medians), default=0.0)
    shared = (0.0, largest * 1.08 if largest > 0 else 1.0)
    plots = []
    for group in groups:
        replicas = sorted(group.medians, key=_replica_key)
        name = f"{group.experiment} · {group.variant}"
        if len(replicas) <= _MAX_BARS:
            markup = figures.bar_figure(
                f"median step time of {name}",
                [f"replica {r}" for r in replicas],
                [group.medians[r] for r in replicas],
                xlabel="median training step (seconds)",
                bar_colour=figures.PALETTE[0],
                xlim=shared,
                unit=" s",
            )
        else:  # too many replicas for a bar each: their distribution
            values = [(str(group.variant), [group.medians[r] for r in replicas])]
            markup = figures.distribution_figure(
                "median training step", values, xlabel="median training step (seconds)", xlim=shared
            )
        spread = signed_percent(group.slowest_over_fastest_pct)
        heading = f"<h4>{text(name)}: slowest vs fastest {spread}</h4>"
        caveats = "".join(f"<li>caveat: {text(line)}</li>" for line in getattr(group, "caveats", ()))
        warned = f'<ul class="problems">{caveats}</ul>' if caveats else ""
        plots.append(f"<div>{heading}{figure(markup, kind='step times')}{warned}</div>")
    parts.append(f'<div class="pair">{"".join(plots)}</div>')
    if notes:
        items = "".join(f"<li>{text(line)}</li>" for line in notes)
        parts.append(f'<ul class="problems">{items}</ul>')
    return "".join(parts)
