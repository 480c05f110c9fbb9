"""Is A really better than B? Tests, effect sizes and their intervals for two groups of per-run values.

Example:
    >>> c = compare([0.84, 0.85, 0.86, 0.85], [0.80, 0.82, 0.81, 0.83], rng=0)
    >>> round(c.welch_t.pvalue, 4), round(c.prob_improvement.statistic, 3)
    (0.0057, 1.0)
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from deviate_cb.stats._groups import (
    RngLike,
    Values,
    _check_alternative,
    _check_bootstrap,
    _settings,
    _validate_pair,
)
from deviate_cb.stats._results import StatResult, check_level
from deviate_cb.stats._std import guarded_std, is_constant
from deviate_cb.stats.effect_size import cohens_d, hedges_g, mean_difference, prob_improvement
from deviate_cb.stats.spread import spread_ratio

__all__ = ["Comparison", "compare", "mann_whitney_u", "student_t", "variance_test", "welch_t"]


def welch_t(a: Values, b: Values, alternative: str = "two-sided", level: float = 0.95) -> StatResult:
    """Welch's t-test of ``mean(a) - mean(b)`` (unequal variances), with the t interval of the difference.

    Example:
        >>> r = welch_t([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
        >>> round(r.statistic, 4), round(r.pvalue, 4), r.settings["equal_var"]
        (-1.2247, 0.2879, False)
    """
    x, y, n_bad = _validate_pair(a, b)
    return _t_test(x, y, n_bad, _check_alternative(alternative), check_level(level), equal_var=False)


def student_t(a: Values, b: Values, alternative: str = "two-sided", level: float = 0.95) -> StatResult:
    """Student's t-test of ``mean(a) - mean(b)`` (pooled variance), with the t interval of the difference.

    Example:
        >>> round(student_t([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]).confidence_interval().high, 4)
        1.267
    """
    x, y, n_bad = _validate_pair(a, b)
    return _t_test(x, y, n_bad, _check_alternative(alternative), check_level(level), equal_var=True)


def mann_whitney_u(a: Values, b: Values, alternative: str = "two-sided") -> StatResult:
    """Mann-Whitney U test (two-sided by default); the statistic is U of ``a`` (``P(A>B) * n_a * n_b``).

    Example:
        >>> r = mann_whitney_u([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
        >>> float(r.statistic), r.settings["alternative"]
        (2.0, 'two-sided')
    """
    x, y, n_bad = _validate_pair(a, b)
    alternative = _check_alternative(alternative)
    from scipy.stats import mannwhitneyu

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = mannwhitneyu(x, y, alternative=alternative, method="auto")
    return StatResult(
        "mann_whitney_u",
        float(res.statistic),
        float(res.pvalue),
        math.nan,
        _settings(x, y, n_bad, alternative=alternative, method="auto"),
    )


def variance_test(a: Values, b: Values, center: str = "median", alternative: str = "two-sided") -> StatResult:
    """Do A and B differ in spread? Brown-Forsythe (``center="median"``) or Levene (``center="mean"``).

    Two-sided: ``scipy.stats.levene`` (statistic W). One-sided (``"less"``: A is less variable than B;
    ``"greater"``: more variable): the pooled t-test on the absolute deviations from each group's center
    (statistic t; for two groups W = t^2, so the one-sided p is half the two-sided p when t has the tested
    sign). NaN when both groups are constant.

    Example:
        >>> r = variance_test([0.0, 1.0, 2.0, 1.0], [0.0, 4.0, 8.0, 4.0], alternative="less")
        >>> r.settings["statistic_name"], round(r.pvalue, 4)
        ('t', 0.1272)
    """
    x, y, n_bad = _validate_pair(a, b)
    alternative = _check_alternative(alternative)
    if center not in ("median", "mean"):
        raise ValueError(f"`center` must be one of 'median', 'mean'. Received: center={center!r}.")
    from scipy.stats import levene, ttest_ind

    name = "brown_forsythe" if center == "median" else "levene"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if alternative == "two-sided":
            res, stat_name = levene(x, y, center=center), "W"
        else:
            mid = np.median if center == "median" else np.mean
            res = ttest_ind(np.abs(x - mid(x)), np.abs(y - mid(y)), equal_var=True, alternative=alternative)
            stat_name = "t"
    return StatResult(
        "variance_test",
        float(res.statistic),
        float(res.pvalue),
        math.nan,
        _settings(x, y, n_bad, alternative=alternative, center=center, method=name, statistic_name=stat_name),
    )


@dataclass(frozen=True)
class Comparison:
    """Everything :func:`compare` computes for two groups (each test a :class:`StatResult`).

    Attributes:
        welch_t, student_t, mann_whitney_u, variance_test: Tests (``pvalue`` set).
        cohens_d, hedges_g, prob_improvement, mean_difference: Estimates with intervals (``pvalue`` NaN) that
            agree with Welch's test: each excludes "no effect" exactly when ``welch_t`` rejects two-sided at
            ``1 - level``.
        spread_ratio: ``std_a / std_b`` with the two-sided Brown-Forsythe p-value and the interval inverting it.
        almost_stochastic_order: ``epsilon_min`` of A over B in the metric's direction (``settings["direction"]``;
            ``settings["dominant"]``: below the threshold; NaN and not dominant when both groups are constant).
        n_a, n_b, mean_a, mean_b, std_a, std_b: Finite values per group, their mean and std (ddof=1).
        n_nonfinite_a, n_nonfinite_b: NaN/Inf values left out.
        alpha: Significance level for :meth:`to_dict`'s ``reject`` flags.
        notes: What constant groups leave to say, in words (two constant groups: the values and run counts, and
            that nothing is inferred from them).
    """

    welch_t: StatResult
    student_t: StatResult
    mann_whitney_u: StatResult
    cohens_d: StatResult
    hedges_g: StatResult
    prob_improvement: StatResult
    mean_difference: StatResult
    variance_test: StatResult
    spread_ratio: StatResult
    almost_stochastic_order: StatResult
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    std_a: float
    std_b: float
    n_nonfinite_a: int = 0
    n_nonfinite_b: int = 0
    alpha: float = 0.05
    notes: tuple[str, ...] = ()

    def results(self) -> dict[str, StatResult]:
        """The results by name, in a fixed order."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.type in ("StatResult", StatResult)}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the group summaries, ``notes``, and each result's ``to_dict()`` plus ``reject``."""
        out: dict[str, Any] = {
            f.name: getattr(self, f.name) for f in fields(self) if f.type not in ("StatResult", StatResult)
        }
        out["notes"] = list(self.notes)
        out = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}
        results = {}
        for name, r in self.results().items():
            d = r.to_dict()
            d["reject"] = None if d["pvalue"] is None else bool(r.pvalue <= self.alpha)
            results[name] = d
        out["results"] = results
        return out


def compare(
    a: Values,
    b: Values,
    alpha: float = 0.05,
    level: float = 0.95,
    rng: RngLike = None,
    alternative: str = "two-sided",
    n_resamples: int = 9999,
    variance_alternative: str = "two-sided",
    aso_threshold: float = 0.2,
    aso_resamples: int = 1000,
    mean_difference_method: str = "welch",
    prob_improvement_method: str = "normal",
    direction: str = "max",
) -> Comparison:
    """Compare two groups of per-run values with every test and estimate of this module.

    Args:
        a, b: One value per run for each group (NaN/Inf left out and counted; at least 2 finite each).
        alpha: Significance level for the ``reject`` flags of :meth:`Comparison.to_dict`, and ASO's ``alpha``.
        level: Confidence level of the intervals.
        rng: Seed for the bootstraps and ASO (an int, a Generator, or None: fresh entropy, recorded).
        alternative: For the t-tests and Mann-Whitney U (``"greater"``: A is larger than B).
        n_resamples: Bootstrap resamples of P(A>B) and of the mean difference, when a bootstrap method is chosen.
        variance_alternative: For the Brown-Forsythe test (``"less"``: A is less variable than B).
        aso_threshold: A almost stochastically dominates B when ``epsilon_min`` is below it (Ulmer et al. 2022:
            0.2).
        aso_resamples: Bootstrap resamples of ASO.
        mean_difference_method: The mean difference's interval: ``"welch"`` (Welch's t interval, the default) or
            a bootstrap, ``"percentile"``, ``"basic"``, ``"BCa"``.
        prob_improvement_method: P(A>B)'s interval: ``"normal"`` (from Welch's test, the default) or a bootstrap.
        direction: ``"max"`` (larger is better, the default) or ``"min"`` (a loss): ASO takes larger as better,
            so with ``"min"`` it runs on the negated values and ``epsilon_min`` says how far A is from being
            *better* (lower) than B; recorded in ``almost_stochastic_order.settings["direction"]``.

    With both groups constant (every run of each gives one value, compared exactly: ``np.std`` of equal floats
    is not always 0) nothing is inferred: the t-tests' p-values, d, g and every interval built from a spread are
    NaN, ASO decides nothing, and ``notes`` says in words what the runs show.

    Example:
        >>> c = compare([1.0, 2.0, 3.0, float("nan")], [2.0, 3.0, 4.0], rng=0)
        >>> c.n_a, c.n_nonfinite_a, float(c.cohens_d.statistic), c.to_dict()["results"]["welch_t"]["reject"]
        (3, 1, -1.0, False)
        >>> c.almost_stochastic_order.settings["dominant"], round(c.student_t.pvalue, 4)
        (False, 0.2879)
    """
    x, y, n_bad = _validate_pair(a, b)
    _check_alternative(alternative)
    _check_alternative(variance_alternative, "variance_alternative")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ValueError(f"`alpha` must be a number in (0, 1). Received: alpha={alpha!r}.")
    seed = _check_bootstrap(level, n_resamples, rng, "percentile")
    from deviate_cb.stats.aso import almost_stochastic_order

    direction = _check_direction(direction)
    sign = -1.0 if direction == "min" else 1.0  # ASO takes larger as better: a loss is compared negated
    aso = almost_stochastic_order(sign * x, sign * y, alpha, aso_threshold, aso_resamples, seed)
    aso = replace(aso, settings={**aso.settings, "direction": direction})
    std_a, std_b = guarded_std(x), guarded_std(y)  # exactly 0 for equal values (np.std leaves 1e-16)
    notes = _constant_notes(x, y)
    return Comparison(
        welch_t=welch_t(x, y, alternative, level),
        student_t=student_t(x, y, alternative, level),
        mann_whitney_u=mann_whitney_u(x, y, alternative),
        cohens_d=cohens_d(x, y, level),
        hedges_g=hedges_g(x, y, level),
        prob_improvement=prob_improvement(x, y, level, n_resamples, seed, prob_improvement_method),
        mean_difference=mean_difference(x, y, level, n_resamples, seed, mean_difference_method),
        variance_test=variance_test(x, y, "median", variance_alternative),
        spread_ratio=spread_ratio(x, y, level),
        almost_stochastic_order=aso,
        n_a=int(x.size),
        n_b=int(y.size),
        mean_a=float(np.mean(x)),
        mean_b=float(np.mean(y)),
        std_a=std_a,
        std_b=std_b,
        n_nonfinite_a=n_bad[0],
        n_nonfinite_b=n_bad[1],
        alpha=float(alpha),
        notes=notes,
    )


# --- the maths -------------------------------------------------------------------------------------------


def _t_test(
    x: np.ndarray, y: np.ndarray, n_bad: tuple[int, int], alternative: str, level: float, equal_var: bool
) -> StatResult:
    from scipy.stats import ttest_ind

    name = "student_t" if equal_var else "welch_t"
    estimate = float(np.mean(x) - np.mean(y))
    if is_constant(x) and is_constant(y):  # no spread to test against: no p-value, no interval (not a point)
        note = "both groups are constant: there is no spread to test the difference against"
        settings = _settings(
            x, y, n_bad, alternative=alternative, equal_var=equal_var, df=math.nan, estimate=estimate, note=note
        )
        return StatResult(name, math.nan, math.nan, level, settings, lambda lvl: (math.nan, math.nan))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = ttest_ind(x, y, equal_var=equal_var, alternative=alternative)

    def interval(lvl: float) -> tuple[float, float]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ci = res.confidence_interval(lvl)
        return float(ci.low), float(ci.high)

    return StatResult(
        name,
        float(res.statistic),
        float(res.pvalue),
        level,
        _settings(
            x,
            y,
            n_bad,
            alternative=alternative,
            equal_var=equal_var,
            df=float(res.df),
            estimate=estimate,
        ),
        interval,
    )


def _check_direction(direction: object) -> str:
    if direction not in ("max", "min"):
        raise ValueError(f"`direction` must be 'max' or 'min'. Received: direction={direction!r}.")
    return str(direction)


def _constant_notes(x: np.ndarray, y: np.ndarray) -> tuple[str, ...]:
    """What constant groups leave to say, in words (compared exactly, not through ``np.std``)."""
    const_a, const_b = is_constant(x), is_constant(y)
    if const_a and const_b:
        va, vb = f"{float(x[0]):.6g}", f"{float(y[0]):.6g}"
        if float(x[0]) == float(y[0]):
            return (f"both groups constant and equal: every run of A and B gave {va}; no spread to test against.",)
        return (
            f"both groups constant: A {va} in all {x.size} runs, B {vb} in all {y.size}: no spread to test against "
            "(no p-value, effect size or interval); the difference is exact only if the runs are bit-identical by "
            "design (control).",
        )
    return tuple(
        f"`{g}` is constant (all {v.size} runs {float(v[0]):.6g}): the tests use the other group's spread alone."
        for g, v, c in (("a", x, const_a), ("b", y, const_b))
        if c
    )
