"""The plots of the HTML report, as inline markup: matplotlib figures saved as SVG (PNG for dense plots).

Example:
    >>> markup = distribution_figure("val_acc", [("algo", [0.80, 0.82, 0.81]), ("control", [0.81, 0.81, 0.81])])
    >>> markup.startswith("<svg") and markup.count('<g class="mark"><title>') >= 6
    True
    >>> label("cost_$_per_$_item"), label("bell\\x07"), label("_hidden")
    ('cost_$_per_$_item', 'bell\\\\x07', ' _hidden')
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np

from deviate_cb.errors import MissingDependencyError
from deviate_cb.report.text.safe import printable

__all__ = [
    "FG",
    "PALETTE",
    "Tips",
    "bar_figure",
    "curves_figure",
    "distribution_figure",
    "has_series",
    "heatmap_figure",
    "label",
    "matplotlib_or_error",
    "new_figure",
    "render",
]

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#8C8C8C")
FG = "#1b1f24"  # placeholder of the page's text colour: render() makes it var(--fg)
LINESTYLES = ("-", "--", "-.", ":")
_SVG_MARKS = 600  # a plot with more points than this is embedded as PNG: SVG would be megabytes
WIDTH, HEIGHT = 5.4, 3.1  # inches, at 100 dpi for PNG: two plots side by side on a wide page


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
        {
            "svg.fonttype": "none",
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "figure.facecolor": "none",
            "axes.facecolor": "none",
            "savefig.transparent": True,
            "text.color": FG,
            "axes.labelcolor": FG,
            "axes.edgecolor": FG,
            "xtick.color": FG,
            "ytick.color": FG,
            "grid.color": FG,
            "grid.alpha": 0.2,
            "legend.labelcolor": FG,
            "text.usetex": False,
        }
    )
    return plt


def new_figure(width: float = WIDTH, height: float = HEIGHT, **kwargs: Any) -> tuple[Any, Any, Any]:
    """``(pyplot, figure, axes)`` of a new figure of ``width`` x ``height`` inches (``subplots`` arguments)."""
    plt = matplotlib_or_error()
    fig, ax = plt.subplots(figsize=(width, height), **kwargs)
    return plt, fig, ax


def _horizontal(plt: Any) -> dict[str, Any]:
    """``boxplot``'s horizontal switch: ``orientation`` since matplotlib 3.10, ``vert`` before."""
    import matplotlib

    major, minor = (int(part) for part in matplotlib.__version__.split(".")[:2])
    return {"orientation": "horizontal"} if (major, minor) >= (3, 10) else {"vert": False}


def label(value: Any) -> str:
    """A stored name as matplotlib must get it to draw it as typed: control characters escaped, a leading ``_``
    kept (matplotlib hides legend labels that start with one); a ``$`` stays itself (math rendering is off)."""
    shown = printable(str(value))
    return " " + shown if shown.startswith("_") else shown


class Tips:
    """The hover texts of one figure's data marks: :meth:`url` gives the placeholder link of a mark."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def url(self, tip: str) -> str:
        self.texts.append(tip)
        return f"#tip-{len(self.texts) - 1}"

    def urls(self, tips: Sequence[str]) -> list[str]:
        return [self.url(t) for t in tips]


def render(plt: Any, fig: Any, title: str, tips: Optional[Tips] = None, marks: int = 0) -> str:
    """The figure as inline markup (``title`` its accessible label), every tipped mark given its ``<title>``;
    PNG on white when it has more than a few hundred ``marks``. Closes the figure."""
    import matplotlib
    from matplotlib.text import Text

    for artist in fig.findobj(Text):  # every text as typed: no math, a control character drawn as its escape
        artist.set_parse_math(False)
        artist.set_usetex(False)
        if _CONTROL.search(artist.get_text()):
            artist.set_text(_CONTROL.sub(_visible, artist.get_text()))
    buffer = io.BytesIO()
    try:
        # and the tick labels made while the figure is drawn: no mathtext for a `$`, no LaTeX
        with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
            if marks > _SVG_MARKS:
                fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight", transparent=False, facecolor="white")
                data = base64.b64encode(buffer.getvalue()).decode("ascii")
                return f'<img class="plot" alt="{_attr(title)}" src="data:image/png;base64,{data}">'
            fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    finally:
        plt.close(fig)
    svg = buffer.getvalue().decode("utf-8")
    start = svg.find("<svg")
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg[start:] if start >= 0 else svg, flags=re.S)
    texts = tips.texts if tips is not None else []

    def titled(match: re.Match[str]) -> str:
        index = int(match.group(1))
        tip = texts[index] if index < len(texts) else ""
        return f'<g class="mark"><title>{_attr(printable(tip))}</title>'

    svg = re.sub(r'<a xlink:href="#tip-(\d+)"[^>]*>', titled, svg).replace("</a>", "</g>")
    svg = _TEXT.sub(lambda m: m.group(1) + _CONTROL.sub(_visible, m.group(2)), svg)
    svg = _CONTROL_XML.sub(_visible, svg.replace(FG, "var(--fg)"))
    return svg.replace("<svg ", f'<svg role="img" aria-label="{_attr(printable(title))}" class="plot" ', 1)


# The text of an SVG element that shows it (drawn text, a hover title): no control character may be written there
_TEXT = re.compile(r"(<(?:text|tspan|title)\b[^>]*>)([^<]*)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # invalid anywhere in XML (tab, newline, CR are not)


def _visible(match: re.Match[str]) -> str:
    return printable(match.group(0))


def _attr(value: str) -> str:
    return html.escape(value, quote=True)


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _g(x: float) -> str:
    return f"{x:.4g}"


def has_series(curve: Any) -> bool:
    """Whether a group's :class:`~deviate_cb.report.rendering.html.curves.Curves` is a series: a run with more than one
    step (else the metric is one value per run, drawn as a strip of runs)."""
    if curve.replicas:
        return any(len(steps) > 1 for steps, _ in curve.replicas)
    return len(curve.steps) > 1


def _same(a: Any, b: Any) -> bool:
    return (
        a.steps.shape == b.steps.shape
        and bool(np.array_equal(a.steps, b.steps))
        and bool(np.array_equal(a.mean, b.mean))
        and bool(np.array_equal(a.std, b.std))
    )


def curves_figure(metric: str, variants: Sequence[tuple[str, Any]]) -> str:
    """Training curves of one metric: per variant, the replicas' series thin, the mean bold and a band of one
    std around it (``variants``: ``(name, Curves)`` of :mod:`deviate_cb.report.rendering.html.curves`). A variant whose
    curves coincide with an earlier one's is drawn dashed with markers and labelled ``identical to <variant>``."""
    plt, fig, ax = new_figure()
    tips = Tips()
    marks = 0
    for index, (variant, curve) in enumerate(variants):
        c, style = colour(index), LINESTYLES[index % len(LINESTYLES)]
        twin = next((name for name, other in variants[:index] if _same(curve, other)), None)
        for k, (steps, values) in enumerate(curve.replicas):
            line = ax.plot(steps, values, color=c, alpha=0.25, linewidth=0.7, linestyle=style)[0]
            line.set_url(tips.url(f"{variant}, replica #{k + 1} drawn: last {_g(values[-1])} at step {steps[-1]}"))
            marks += len(steps)
        band = ax.fill_between(
            curve.steps, curve.mean - curve.std, curve.mean + curve.std, color=c, alpha=0.18, linewidth=0
        )
        band.set_urls(
            [
                tips.url(
                    f"{variant}: mean ± 1 std over {curve.n_runs} runs; at the last step "
                    f"{_g(curve.mean[-1])} ± {_g(curve.std[-1])}"
                )
            ]
        )
        drawn = f", {len(curve.replicas)} drawn" if curve.n_runs > len(curve.replicas) else ""
        name = f"{label(variant)} (n={curve.n_runs}{drawn})" + (f", identical to {label(twin)}" if twin else "")
        every = max(1, len(curve.steps) // 12)
        mean = ax.plot(
            curve.steps,
            curve.mean,
            color=c,
            linewidth=1.8,
            label=name,
            linestyle="--" if twin else style,
            marker="o" if twin else None,
            markevery=every,
            markersize=4,
            markerfacecolor="none",
        )[0]
        mean.set_url(
            tips.url(
                f"{variant}: mean of {curve.n_runs} runs, {_g(curve.mean[0])} at step "
                f"{curve.steps[0]} to {_g(curve.mean[-1])} at step {curve.steps[-1]}"
                + (f"; identical to {twin}" if twin else "")
            )
        )
        marks += 3 * len(curve.steps)
    ax.set_xlabel("training step")
    ax.set_ylabel(f"{label(metric)} (mean ± 1 std band)")
    ax.legend(frameon=False, fontsize=8)
    ax.grid(True)
    return render(plt, fig, f"training curves of {metric}", tips, marks)


def _finite(values: Sequence[Any]) -> np.ndarray:
    return np.asarray([v for v in values if isinstance(v, (int, float)) and math.isfinite(v)], dtype=float)


def distribution_figure(
    metric: str,
    variants: Sequence[tuple[str, Sequence[float]]],
    *,
    xlabel: str = "",
    xlim: Optional[tuple] = None,
    level: Optional[float] = None,
    iqm: Optional[Mapping[str, tuple[Any, Any, Any]]] = None,
) -> str:
    """The per-run values of one metric per variant: every run a point (jittered), a box of the quartiles; with
    ``level``, under each variant's runs its mean with the Student-t interval, and its IQM with its
    interval where ``iqm`` (variant -> ``(iqm, low, high)``) has one."""
    from deviate_cb.stats.intervals import mean_confidence_interval

    iqm = iqm or {}
    shown = level is not None
    rows = 0.75 if shown else 0.55
    plt, fig, ax = new_figure(WIDTH, max(1.4, rows * len(variants) + 0.9))
    tips = Tips()
    rng = np.random.default_rng(0)  # fixed jitter: the same page for the same study
    marks = 0
    centre = -0.12 if shown else 0.0
    for index, (variant, values) in enumerate(variants):
        finite = _finite(values)
        if not finite.size:
            continue
        c, y0 = colour(index), index + centre
        y = y0 + rng.uniform(-0.12, 0.12, size=finite.size)
        points = ax.scatter(finite, y, s=14, color=c, alpha=0.8, linewidths=0, zorder=3)
        points.set_urls(tips.urls([f"{variant}: run {k + 1}: {_g(v)}" for k, v in enumerate(finite)]))
        box = ax.boxplot(
            finite,
            positions=[y0],
            **_horizontal(plt),
            widths=0.36 if shown else 0.5,
            showfliers=False,
            manage_ticks=False,
            medianprops={"color": FG},
            boxprops={"color": "#8C8C8C"},
            whiskerprops={"color": "#8C8C8C"},
            capprops={"color": "#8C8C8C"},
        )
        q1, median, q3 = np.percentile(finite, [25, 50, 75])
        summary = f"{variant}: {finite.size} runs, median {_g(median)}, quartiles {_g(q1)} to {_g(q3)}"
        for artist in (*box["boxes"], *box["medians"]):
            artist.set_url(tips.url(summary))
        marks += finite.size
        if level is not None:
            mean = float(finite.mean())
            std = float(finite.std(ddof=1)) if finite.size > 1 else math.nan
            interval = mean_confidence_interval(mean, std, finite.size, level)
            low, high = float(interval[0]), float(interval[1])
            ym = index + 0.2
            if math.isfinite(low) and high > low:
                ax.plot([low, high], [ym, ym], color=c, linewidth=2.4, solid_capstyle="butt")[0].set_url(
                    tips.url(f"{variant}: mean {_g(mean)}, {level:.0%} CI [{_g(low)}, {_g(high)}]")
                )
            ax.plot(
                [mean],
                [ym],
                "o",
                color=c,
                markersize=6,
                label=f"mean, {level:.0%} CI" if index == 0 else None,
                markeredgecolor=FG,
                markeredgewidth=0.6,
            )[0].set_url(tips.url(f"{variant}: mean {_g(mean)} [{_g(low)}, {_g(high)}] over {finite.size} runs"))
            point, lo, hi = iqm.get(variant, (None, None, None))
            if point is not None and math.isfinite(point):
                yi = index + 0.34
                if lo is not None and hi is not None and math.isfinite(lo) and hi > lo:
                    ax.plot([lo, hi], [yi, yi], color=c, linewidth=1.4, linestyle="--")[0].set_url(
                        tips.url(f"{variant}: IQM {_g(point)}, CI [{_g(lo)}, {_g(hi)}]")
                    )
                ax.plot(
                    [point],
                    [yi],
                    "D",
                    color=c,
                    markersize=5,
                    markerfacecolor="none",
                    label="IQM, CI" if index == 0 else None,
                )[0].set_url(tips.url(f"{variant}: IQM {_g(point)} [{_g(lo)}, {_g(hi)}]"))
    ax.set_yticks(range(len(variants)))
    ax.set_yticklabels([label(name) for name, _ in variants])
    ax.set_ylim(len(variants) - (0.45 if shown else 0.4), -0.6)  # the first variant on top, as in the table
    if xlim is not None:
        ax.set_xlim(*xlim)
    ax.set_xlabel(xlabel or f"{label(metric)} per run")
    if shown:
        ax.legend(
            frameon=False,
            fontsize=7.5,
            loc="lower left",
            bbox_to_anchor=(0.0, 1.0),
            ncol=2,
            borderaxespad=0.0,
            handletextpad=0.3,
        )
    ax.grid(True, axis="x")
    return render(plt, fig, f"distribution of {metric} per run", tips, marks)


def bar_figure(
    title: str,
    labels: Sequence[str],
    values: Sequence[float],
    *,
    xlabel: str,
    low: Optional[Sequence[float]] = None,
    high: Optional[Sequence[float]] = None,
    bar_colour: Optional[str] = None,
    ylabel: str = "",
    xlim: Optional[tuple] = None,
    unit: str = "",
) -> str:
    """Horizontal bars (one per label), with an interval when ``low``/``high`` are given; one ``bar_colour`` for
    all (bars of one kind, such as replicas), or a colour per bar; ``xlim`` shares a scale between figures."""
    plt, fig, ax = new_figure(WIDTH, max(1.4, 0.32 * len(labels) + 0.9))
    tips = Tips()
    y = np.arange(len(labels))
    heights = np.asarray(values, dtype=float)
    colours = [bar_colour] * len(labels) if bar_colour else [colour(i) for i in range(len(labels))]
    bars = ax.barh(y, heights, color=colours, alpha=0.85, height=0.6)
    for name, value, bar in zip(labels, heights, bars, strict=True):
        bar.set_url(tips.url(f"{name}: {_g(value)}{unit}"))
    if low is not None and high is not None:
        lo, hi = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
        errors = np.vstack([np.clip(heights - lo, 0, None), np.clip(hi - heights, 0, None)])
        ax.errorbar(heights, y, xerr=np.nan_to_num(errors), fmt="none", ecolor=FG, capsize=3, linewidth=1)
    ax.set_yticks(y)
    ax.set_yticklabels([label(name) for name in labels])
    ax.invert_yaxis()
    if xlim is not None:
        ax.set_xlim(*xlim)
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.grid(True, axis="x")
    return render(plt, fig, title, tips, len(labels))


def heatmap_figure(title: str, matrix: np.ndarray, labels: Sequence[str], *, colorbar: str) -> str:
    """A square matrix (churn between runs) as a heatmap with a labelled colour bar."""
    plt = matplotlib_or_error()
    size = min(6.0, 1.6 + 0.25 * len(labels))
    fig, ax = plt.subplots(figsize=(size + 1.0, size))
    tips = Tips()
    values = np.asarray(matrix, dtype=float)
    image = ax.imshow(values, cmap="viridis", interpolation="nearest")
    off = values[~np.eye(len(values), dtype=bool)] if values.ndim == 2 and len(values) > 1 else values.ravel()
    off = off[np.isfinite(off)]
    summary = f"{colorbar}: mean {_g(off.mean())}, min {_g(off.min())}, max {_g(off.max())}" if off.size else title
    image.set_url(tips.url(summary))
    step = max(1, len(labels) // 20)
    ticks = list(range(0, len(labels), step))
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    ax.set_xticklabels([label(labels[i]) for i in ticks], rotation=90)
    ax.set_yticklabels([label(labels[i]) for i in ticks])
    ax.set_xlabel("replica")
    ax.set_ylabel("replica")
    for spine in ax.spines.values():
        spine.set_visible(False)
    fig.colorbar(image, ax=ax, label=colorbar, fraction=0.046, pad=0.04)
    return render(plt, fig, title, tips, int(values.size))
