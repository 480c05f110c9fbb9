"""Figures that show the answer, in the style of rliable: estimates with their intervals, not bare numbers.

Example:
    >>> svg = dot_whisker_figure("d", ["acc", "loss"], [0.5, -1.2], [0.1, -2.0], [0.9, -0.4], xlabel="d", ref=0.0)
    >>> svg.startswith("<svg") and svg.count('class="mark"') == 4
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from deviate_cb.report.rendering.html.figures import FG, LINESTYLES, WIDTH, Tips, colour, label, new_figure, render

__all__ = [
    "decomposition_figure",
    "dot_whisker_figure",
    "forest_figure",
    "matrix_figure",
    "plannable",
    "power_figure",
    "probability_figure",
]


def _g(x: Any) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.4g}"


def _ok(x: Any) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def dot_whisker_figure(
    title: str,
    labels: Sequence[str],
    points: Sequence[Any],
    lows: Sequence[Any],
    highs: Sequence[Any],
    *,
    xlabel: str,
    ref: Optional[float] = None,
    xlim: Optional[tuple[float, float]] = None,
    words: Optional[Sequence[str]] = None,
    what: str = "",
    colours: Optional[Sequence[str]] = None,
) -> str:
    """One row per label: a point with its interval as a whisker; a dotted reference line at ``ref``; where a
    point is missing, its ``words`` are written in the row instead."""
    plt, fig, ax = new_figure(WIDTH, max(1.3, 0.42 * len(labels) + 0.9))
    tips = Tips()
    if ref is not None:
        ax.axvline(ref, color=FG, linewidth=0.9, linestyle=":")
    for i, (name, x, lo, hi) in enumerate(zip(labels, points, lows, highs, strict=True)):
        c = colours[i] if colours else colour(0)
        word = words[i] if words else ""
        if _ok(lo) and _ok(hi):
            line = ax.plot([lo, hi], [i, i], color=c, linewidth=2.2, solid_capstyle="butt")[0]
            line.set_url(tips.url(f"{name}: interval [{_g(lo)}, {_g(hi)}]"))
        if _ok(x):
            dot = ax.plot([x], [i], "o", color=c, markersize=6)[0]
            interval = f" [{_g(lo)}, {_g(hi)}]" if _ok(lo) and _ok(hi) else ""
            dot.set_url(tips.url(f"{name}: {what}{_g(x)}{interval}" + (f" ({word})" if word else "")))
        if word:
            left = xlim[0] if xlim else (ref if ref is not None else 0.0)
            note = ax.annotate(
                label(word), (left, i), xytext=(4, 7), textcoords="offset points", fontsize=7.5, color=FG, va="bottom"
            )
            note.set_url(tips.url(f"{name}: {word}"))
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels([label(name) for name in labels])
    ax.set_ylim(len(labels) - 0.4, -0.6)
    if xlim is not None:
        ax.set_xlim(*xlim)
    ax.set_xlabel(xlabel)
    ax.grid(True, axis="x")
    return render(plt, fig, title, tips, len(labels))


def _powers(runs: Any, ns: np.ndarray) -> np.ndarray:
    """Welch's power at ``ns`` runs per group (the stats layer's ``power_curve`` when it has one)."""
    import deviate_cb.stats as stats

    curve = getattr(stats, "power_curve", None)
    if curve is not None:
        try:
            return np.asarray(curve(runs.std, runs.std, runs.effect, ns, runs.alpha, "two-sided"), dtype=float)
        except (TypeError, ValueError):
            pass
    return np.asarray(
        [stats.achieved_power(int(n), int(n), runs.std, effect=runs.effect, alpha=runs.alpha) for n in ns]
    )


def plannable(runs: Any) -> bool:
    """Whether a :class:`~deviate_cb.report.answers.records.RunsNeeded` has a curve to draw (a spread, an effect)."""
    return runs is not None and _ok(runs.std) and runs.std > 0 and _ok(runs.effect) and runs.effect > 0


def power_figure(title: str, plans: Sequence[tuple[str, Any]]) -> Optional[str]:
    """Power of Welch's t-test against runs per group, one curve per ``(metric, RunsNeeded)`` at its measured
    spread and effect, with the wanted power, the runs needed and the runs made marked (``None`` when no plan
    has a spread and an effect to draw)."""
    plans = [(metric, runs) for metric, runs in plans if plannable(runs)]
    if not plans:
        return None
    top = max(max(10, int(1.5 * (r.runs_per_group or 0)), int(1.5 * r.n_now)) for _, r in plans)
    log = top > 200
    ns = (
        np.unique(np.geomspace(2, top, 60).round().astype(int))
        if log
        else np.unique(np.linspace(2, top, min(top - 1, 60)).round().astype(int))
    )
    plt, fig, ax = new_figure()
    tips = Tips()
    wanted = plans[0][1].power
    ax.axhline(wanted, color=FG, linewidth=0.9, linestyle=":")
    for i, (metric, runs) in enumerate(plans):
        c, style = colour(i), LINESTYLES[i % len(LINESTYLES)]
        powers = _powers(runs, ns)
        curve = ax.plot(ns, powers, color=c, linewidth=1.6, linestyle=style, label=label(metric))[0]
        curve.set_url(
            tips.url(
                f"{metric}: power to detect {_g(runs.effect)} ({runs.effect_basis}) at std {_g(runs.std)} of "
                f"{runs.variant}: {powers[0]:.0%} with {ns[0]} runs per group, {powers[-1]:.0%} with {ns[-1]}"
            )
        )
        needed = runs.runs_per_group
        if needed is not None:
            at = float(_powers(runs, np.asarray([needed]))[0])
            ax.plot([needed], [at], "o", color=c, markersize=7, markeredgecolor=FG, markeredgewidth=0.6)[0].set_url(
                tips.url(
                    f"{metric}: runs needed {needed} per group for {runs.power:.0%} power, planned on the std's "
                    f"{getattr(runs, 'confidence', 0.8):.0%} upper confidence limit ({at:.0%} at the measured std)"
                )
            )
        if _ok(runs.power_now):
            ax.plot(
                [runs.n_now], [runs.power_now], "s", color=c, markersize=6, markerfacecolor="none", markeredgewidth=1.4
            )[0].set_url(
                tips.url(
                    f"{metric}: the {runs.n_now} runs made per group: {runs.power_now:.0%} power for {_g(runs.effect)}"
                )
            )
    if log:
        from matplotlib.ticker import FuncFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # 10, 100: no mathtext
    ax.set_ylim(0, 1.03)
    ax.set_xlabel("runs per group" + (" (log scale)" if log else ""))
    ax.set_ylabel(f"power (dotted: {wanted:.0%})")
    ax.legend(frameon=False, fontsize=7.5, loc="lower right")
    ax.grid(True)
    return render(plt, fig, title, tips, len(ns) * len(plans))


def _zero_word(row: Any) -> str:
    if row.narrow == "impl":
        return "impl runs identical: no implementation noise measured"
    if row.narrow == "control":
        return "control runs identical: nothing left with every seed fixed"
    return f"{row.narrow} runs identical: ratio 0"


def decomposition_figure(experiment: str, rows: Sequence[Any]) -> str:
    """The decomposition rows of one experiment: each std ratio with its interval (not clipped at 1: an interval
    above 1 is a set-up problem, said in a word) on ``[0, max(1.05, largest end)]``; a word for a ratio of 0
    (identical narrow runs) or an undefined one."""
    labels, points, lows, highs, words = [], [], [], [], []
    for row in rows:
        labels.append(f"{row.metric} ({row.narrow} / {row.wide})")
        share = row.share
        if _ok(share) and share == 0:
            words.append(_zero_word(row))
        elif not _ok(share):
            words.append("undefined: " + (row.note or f"{row.wide} runs without spread"))
        else:
            words.append("set-up problem: spreads more than the seeds" if row.note.startswith("set-up problem") else "")
        points.append(share if _ok(share) else None)
        lows.append(max(row.share_ci_low, 0.0) if _ok(row.share_ci_low) else None)
        highs.append(max(row.share_ci_high, 0.0) if _ok(row.share_ci_high) else None)
    largest = max([p for p in (*points, *highs) if p is not None] or [0.0])
    colours = [colour(0) if row.narrow == "impl" else colour(1) for row in rows]
    return dot_whisker_figure(
        f"variance decomposition of {experiment}",
        labels,
        points,
        lows,
        highs,
        ref=1.0,
        xlim=(0.0, max(1.05, largest * 1.05)),
        words=words,
        colours=colours,
        what="std ratio ",
        xlabel="std(narrow) / std(wide) with interval (dotted: 1)",
    )


def probability_figure(rows: Sequence[Any]) -> str:
    """P(A>B) with its interval per compared metric (``compare_groups`` rows), 0.5 marked."""
    return dot_whisker_figure(
        "probability of improvement",
        [str(r.get("metric")) for r in rows],
        [r.get("p_a_gt_b") for r in rows],
        [r.get("p_a_gt_b_ci_low") for r in rows],
        [r.get("p_a_gt_b_ci_high") for r in rows],
        ref=0.5,
        xlim=(0.0, 1.0),
        what="P(A>B) ",
        xlabel="P(A > B): a run of A beats a run of B (dotted: 0.5, no difference)",
    )


def forest_figure(rows: Sequence[Any]) -> str:
    """Cohen's d with its interval per compared metric (``compare_groups`` rows), 0 marked."""
    return dot_whisker_figure(
        "effect sizes",
        [str(r.get("metric")) for r in rows],
        [r.get("cohens_d") for r in rows],
        [r.get("cohens_d_ci_low") for r in rows],
        [r.get("cohens_d_ci_high") for r in rows],
        ref=0.0,
        what="Cohen's d ",
        colours=[colour(2)] * len(rows),
        xlabel="Cohen's d of A - B with interval (dotted: 0, no difference)",
    )


def matrix_figure(title: str, matrix: Any, names: Sequence[str], *, threshold: float, colorbar: str) -> str:
    """A small k x k matrix (``eps_min`` of the row's group over the column's) as annotated cells, each with its
    value on hover; cells below ``threshold`` (the row almost dominates the column) framed."""
    from matplotlib.patches import Rectangle

    values = np.asarray(matrix, dtype=float)
    k = len(names)
    size = min(7.0, 1.6 + 0.5 * k)
    plt, fig, ax = new_figure(size + 1.2, size)
    tips = Tips()
    cmap = plt.get_cmap("viridis")
    for i in range(k):
        for j in range(k):
            v = values[i, j]
            if i == j or not math.isfinite(v):
                blank = Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="#8C8C8C", alpha=0.2, edgecolor="none")
                ax.add_patch(blank)
                blank.set_url(tips.url(f"{names[i]} against itself" if i == j else f"{names[i]} over {names[j]}: -"))
                continue
            cell = Rectangle(
                (j - 0.5, i - 0.5),
                1,
                1,
                facecolor=cmap(min(max(v, 0.0), 1.0)),
                edgecolor=FG if v < threshold else "none",
                linewidth=2,
            )
            ax.add_patch(cell)
            dominates = "almost dominates" if v < threshold else "does not almost dominate"
            cell.set_url(
                tips.url(f"eps_min of {names[i]} over {names[j]}: {v:.3f} ({names[i]} {dominates} {names[j]})")
            )
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color="white" if v < 0.6 else "black")
    ax.set_xlim(-0.5, k - 0.5)
    ax.set_ylim(k - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.set_xticks(range(k))
    ax.set_yticks(range(k))
    ax.set_xticklabels([label(n) for n in names], rotation=45, ha="right")
    ax.set_yticklabels([label(n) for n in names])
    ax.set_xlabel("over group (column)")
    ax.set_ylabel("group (row)")
    for spine in ax.spines.values():
        spine.set_visible(False)
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    fig.colorbar(ScalarMappable(Normalize(0, 1), cmap), ax=ax, label=colorbar, fraction=0.046, pad=0.04)
    return render(plt, fig, title, tips, k * k)
