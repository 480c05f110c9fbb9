"""The words of ``deviate compare`` that carry numbers of their own: which metrics the correction is over, the
skew caveat, what Brown-Forsythe could detect, and the P(A>B) decision of ``--on improvement``.

Example:
    >>> improvement_verdict({"p_a_gt_b": 0.96, "p_a_gt_b_ci_low": 0.8, "p_a_gt_b_ci_high": 1.0, "level": 0.95})
    'A better: P(A>B) 0.96 [0.8, 1] (95% CI), its lower bound above 0.75'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np

from deviate_cb.report.text.tables import cell
from deviate_cb.stats.improvement_look import DEFAULT_THRESHOLD

__all__ = [
    "IMPROVEMENT_THRESHOLD",
    "SKEWED",
    "family_text",
    "improvement_verdict",
    "metrics_of_interest",
    "power_words",
    "skew_note",
    "skewness",
]

SKEWED = 1.0  # |sample skewness| above which a group is called skewed (see skew_note)
IMPROVEMENT_THRESHOLD = DEFAULT_THRESHOLD  # Bouthillier et al. (2021), as --until-decided --on improvement: one number


def metrics_of_interest(names: Sequence[str], patterns: Optional[Sequence[str]]) -> list[str]:
    """The metrics of interest among ``names``: the ``--metric`` patterns', else the headline metrics."""
    from types import SimpleNamespace

    from deviate_cb.report.answers.headline import headline_metrics

    if not names:
        return []
    return headline_metrics(SimpleNamespace(rows=[SimpleNamespace(metric=n) for n in names]), patterns or None)


def skewness(x: Sequence[float], y: Sequence[float]) -> dict[str, float]:
    """Each group's adjusted sample skewness (G1; NaN below 3 runs or without spread)."""
    from scipy.stats import skew

    from deviate_cb.stats._std import is_constant

    def one(v: Sequence[float]) -> float:
        return float(skew(np.asarray(v), bias=False)) if len(v) >= 3 and not is_constant(v) else math.nan

    return {"skewness_a": one(x), "skewness_b": one(y)}


def family_text(row: Mapping[str, Any], m: int) -> str:
    if row.get("family") == "other":
        return f"the {m} other metric{'s' if m != 1 else ''} compared"
    return f"the {m} metric{'s' if m != 1 else ''} of interest"


def skew_note(row: Mapping[str, Any]) -> str:
    """The caveat where Welch's interval may undercover: a group with sample skewness above :data:`SKEWED`.

    Simulated coverage of the printed 95% interval (20,000 data sets per case): normal, t(3), lognormal with
    equal spreads, lognormal against normal and tied accuracies (binomial(200, 0.9) / 200) all cover 94.5-98%
    at 5, 10 and 20 runs per group; lognormal runs with 3:1 spreads cover 87-90% and 10% diverged runs (shifted
    by 10 sd) 81-89%. Few runs cannot show the skew reliably (at 5 runs the flag is raised for about 78% of the
    lognormal 3:1 data sets and 49% of normal ones; at 20 runs 98% and 11%), so the caveat is a warning, not a
    guarantee in either direction.
    """
    skews = [(g, row.get(f"skewness_{g.lower()}")) for g in ("A", "B")]
    skewed = [(g, v) for g, v in skews if v is not None and not math.isnan(v) and abs(v) > SKEWED]
    if not skewed:
        return ""
    which = ", ".join(f"{g} {v:+.2g}" for g, v in skewed)
    return (
        f"; skewed runs (sample skewness {which}): the interval may undercover at this n (simulated 81-90% at a "
        "nominal 95% for lognormal runs with 3:1 spreads or 10% diverged runs)"
    )


def power_words(row: Mapping[str, Any], alpha: float) -> str:
    """What Brown-Forsythe can detect at these sizes (normal runs, simulated power), in numbers."""
    from deviate_cb.stats.spread import detectable_spread_ratio, spread_power

    n_a, n_b = row["n_a"], row["n_b"]
    three = spread_power(n_a, n_b, 3.0, alpha)
    ratio = detectable_spread_ratio(n_a, n_b, alpha, 0.8)
    if math.isinf(ratio):
        return (
            f"; at {n_a}/{n_b} runs it detects a 3x std ratio only {three:.0%} of the time and no ratio with 80% "
            "power (normal runs, simulated): this cannot show that the spreads are alike"
        )
    return (
        f"; at {n_a}/{n_b} runs it detects a 3x std ratio {three:.0%} of the time and needs a ratio of "
        f"{ratio:.2g}x for 80% power (normal runs, simulated): smaller differences may go unseen"
    )


def improvement_verdict(row: Mapping[str, Any], threshold: float = IMPROVEMENT_THRESHOLD) -> str:
    """The decision on P(A>B) (Bouthillier et al. 2021, "Accounting for variance in machine learning
    benchmarks"): A is better when the lower end of P(A>B)'s interval is above ``threshold``, B when the upper
    end is below ``1 - threshold``; else not decided. For a lower-is-better metric (``direction "min"``) "better"
    is P(A<B) = 1 - P(A>B).

    The interval is the one printed (Welch's noncentral t mapped through Phi(delta / sqrt 2), widened to hold the
    rank estimate), at ``level``. Simulated at P(A>B) = 0.75 exactly (4,000 data sets each, 5, 10 and 20 runs),
    "A better" was decided 1.9-2.2% of the time for normal runs, 2.7-3.2% with 3:1 spreads, at most 1.9% for
    t(3) and lognormal runs: below ``(1 - level) / 2`` plus a point, and below ``alpha`` everywhere
    (``tests/report/test_compare_improvement.py``).

    Example:
        >>> improvement_verdict({"p_a_gt_b": 0.7, "p_a_gt_b_ci_low": 0.4, "p_a_gt_b_ci_high": 0.9, "level": 0.95})
        'not decided: P(A>B) 0.7 [0.4, 0.9] (95% CI) is neither above 0.75 nor below 0.25 with 95% confidence'
    """
    p, low, high = row.get("p_a_gt_b"), row.get("p_a_gt_b_ci_low"), row.get("p_a_gt_b_ci_high")
    lv = f"{row['level']:.0%}"
    if p is None or low is None or high is None or any(math.isnan(v) for v in (p, low, high)):
        return "not decided: P(A>B) has no interval (both groups constant: no spread to build one from)"
    if row.get("direction") == "min":  # lower is better: A is better where it is lower
        p, low, high, name = 1.0 - p, 1.0 - high, 1.0 - low, "P(A<B)"
    else:
        name = "P(A>B)"
    shown = f"{name} {cell(p)} [{cell(low)}, {cell(high)}] ({lv} CI)"
    lower = " (lower is better)" if row.get("direction") == "min" else ""
    if low > threshold:
        return f"A better{lower}: {shown}, its lower bound above {threshold:g}"
    if high < 1.0 - threshold:
        return f"B better{lower}: {shown}, its upper bound below {1.0 - threshold:g}"
    return f"not decided: {shown} is neither above {threshold:g} nor below {1.0 - threshold:g} with {lv} confidence"
