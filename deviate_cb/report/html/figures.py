"""The plots of the HTML report, as inline markup: matplotlib figures saved as SVG (PNG for dense plots).

Colours are the Okabe-Ito palette (distinguishable with every common colour-vision deficiency), figures are drawn
on white and the page shows them on light cards, so they read the same in light and dark viewers. Axes are
labelled with what they measure and its unit where there is one (training steps, seconds, fraction of samples).
matplotlib is imported when a figure is first made, with the ``Agg`` backend (no display needed); without it
:func:`matplotlib_or_error` says in one line which extra to install.

Example:
    >>> markup = distribution_figure("val_acc", [("algo", [0.80, 0.82, 0.81]), ("control", [0.81, 0.81, 0.81])])
    >>> markup.startswith("<svg") or markup.startswith("<img")
    True
"""

from __future__ import annotations

import base64
import io
import math
import re
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from deviate_cb.errors import MissingDependencyError

__all__ = [
    "PALETTE",
    "bar_figure",
    "curves_figure",
    "distribution_figure",
    "heatmap_figure",
    "matplotlib_or_error",
]

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
_SVG_MARKS = 600  # a plot with more points than this is embedded as PNG: SVG would be megabytes
_WIDTH, _HEIGHT = 5.4, 3.1  # inches, at 100 dpi for PNG: two plots side by side on a wide page


def matplotlib_or_error() -> Any:
    """``matplotlib.pyplot`` with the Agg backend; :class:`MissingDependencyError` naming the extra when absent."""
    try:
        import matplotlib
    except ImportError:
        raise MissingDependencyError(
            "`--format html` draws its plots with matplotlib, which is not installed. "
            "Install it with: pip install 'deviate-cb[report]'"
        ) from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False, "axes.spines.right": False,
         "figure.facecolor": "white", "axes.facecolor": "white", "savefig.facecolor": "white"}
    )  # fmt: skip
    return plt


def _markup(plt: Any, fig: Any, marks: int, title: str) -> str:
    """The figure as inline markup (its ``title`` as the accessible label); closes the figure."""
    buffer = io.BytesIO()
    try:
        if marks > _SVG_MARKS:
            fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
            data = base64.b64encode(buffer.getvalue()).decode("ascii")
            return f'<img class="plot" alt="{_attr(title)}" src="data:image/png;base64,{data}">'
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    finally:
        plt.close(fig)
    text = buffer.getvalue().decode("utf-8")
    start = text.find("<svg")
    body = re.sub(r"<metadata>.*?</metadata>", "", text[start:] if start >= 0 else text, flags=re.S)
    return body.replace("<svg ", f'<svg role="img" aria-label="{_attr(title)}" class="plot" ', 1)


def _attr(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def _colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def curves_figure(metric: str, variants: Sequence[tuple[str, Any]]) -> str:
    """Training curves of one metric: per variant, the replicas' series thin, the mean bold and a band of one
    std around it (``variants``: ``(name, Curves)`` of :mod:`deviate_cb.report.html.curves`)."""
    plt = matplotlib_or_error()
    fig, ax = plt.subplots(figsize=(_WIDTH, _HEIGHT))
    marks = 0
    for index, (variant, curve) in enumerate(variants):
        colour = _colour(index)
        for steps, values in curve.replicas:
            ax.plot(steps, values, color=colour, alpha=0.25, linewidth=0.7)
            marks += len(steps)
        ax.fill_between(curve.steps, curve.mean - curve.std, curve.mean + curve.std, color=colour, alpha=0.18,
                        linewidth=0)  # fmt: skip
        drawn = f", {len(curve.replicas)} drawn" if curve.n_runs > len(curve.replicas) else ""
        label = f"{variant} (n={curve.n_runs}{drawn})"
        ax.plot(curve.steps, curve.mean, color=colour, linewidth=1.8, label=label)
        marks += 3 * len(curve.steps)
    ax.set_xlabel("training step")
    ax.set_ylabel(f"{metric} (mean ± 1 std band)")
    ax.legend(frameon=False, fontsize=8)
    ax.grid(alpha=0.25)
    return _markup(plt, fig, marks, f"training curves of {metric}")


def distribution_figure(metric: str, variants: Sequence[tuple[str, Sequence[float]]]) -> str:
    """The per-run values of one metric per variant: every run a point (jittered), a box of the quartiles."""
    plt = matplotlib_or_error()
    fig, ax = plt.subplots(figsize=(_WIDTH, max(1.4, 0.55 * len(variants) + 0.9)))
    rng = np.random.default_rng(0)  # fixed jitter: the same page for the same study
    marks = 0
    for index, (_, values) in enumerate(variants):
        finite = np.asarray([v for v in values if isinstance(v, (int, float)) and math.isfinite(v)], dtype=float)
        if not finite.size:
            continue
        y = index + rng.uniform(-0.15, 0.15, size=finite.size)
        ax.scatter(finite, y, s=12, color=_colour(index), alpha=0.75, linewidths=0, zorder=3)
        ax.boxplot(finite, positions=[index], vert=False, widths=0.5, showfliers=False, manage_ticks=False,
                   medianprops={"color": "black"}, boxprops={"color": "#555555"}, whiskerprops={"color": "#555555"},
                   capprops={"color": "#555555"})  # fmt: skip
        marks += finite.size
    ax.set_yticks(range(len(variants)))
    ax.set_yticklabels([name for name, _ in variants])
    ax.set_ylim(len(variants) - 0.4, -0.6)  # the first variant on top, as in the legend and the table
    ax.set_xlabel(f"{metric} per run")
    ax.grid(alpha=0.25, axis="x")
    return _markup(plt, fig, marks, f"distribution of {metric} per run")


def bar_figure(
    title: str, labels: Sequence[str], values: Sequence[float], *, xlabel: str,
    low: Optional[Sequence[float]] = None, high: Optional[Sequence[float]] = None, colour: Optional[str] = None,
    ylabel: str = "",
) -> str:  # fmt: skip
    """Horizontal bars (one per label), with an interval when ``low``/``high`` are given; one ``colour`` for all
    (bars of one kind, such as replicas), or a colour per bar."""
    plt = matplotlib_or_error()
    fig, ax = plt.subplots(figsize=(_WIDTH, max(1.4, 0.32 * len(labels) + 0.9)))
    y = np.arange(len(labels))
    heights = np.asarray(values, dtype=float)
    colours = [colour] * len(labels) if colour else [_colour(i) for i in range(len(labels))]
    ax.barh(y, heights, color=colours, alpha=0.85, height=0.6)
    if low is not None and high is not None:
        lo, hi = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
        errors = np.vstack([np.clip(heights - lo, 0, None), np.clip(hi - heights, 0, None)])
        ax.errorbar(heights, y, xerr=np.nan_to_num(errors), fmt="none", ecolor="black", capsize=3, linewidth=1)
    ax.set_yticks(y)
    ax.set_yticklabels(list(labels))
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.grid(alpha=0.25, axis="x")
    return _markup(plt, fig, len(labels), title)


def heatmap_figure(title: str, matrix: np.ndarray, labels: Sequence[str], *, colorbar: str) -> str:
    """A square matrix (churn between runs) as a heatmap with a labelled colour bar."""
    plt = matplotlib_or_error()
    size = min(6.0, 1.6 + 0.25 * len(labels))
    fig, ax = plt.subplots(figsize=(size + 1.0, size))
    image = ax.imshow(np.asarray(matrix, dtype=float), cmap="viridis", interpolation="nearest")
    step = max(1, len(labels) // 20)
    ticks = list(range(0, len(labels), step))
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    ax.set_xticklabels([labels[i] for i in ticks], rotation=90)
    ax.set_yticklabels([labels[i] for i in ticks])
    ax.set_xlabel("replica")
    ax.set_ylabel("replica")
    for spine in ax.spines.values():
        spine.set_visible(False)
    fig.colorbar(image, ax=ax, label=colorbar, fraction=0.046, pad=0.04)
    return _markup(plt, fig, int(np.asarray(matrix).size), title)
