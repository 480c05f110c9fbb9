"""Effect sizes for two groups of per-run values: Cohen's d, Hedges' g, P(A>B) and the mean difference.

Example:
    >>> d = cohens_d([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
    >>> d.statistic, round(prob_improvement([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]).statistic, 4)
    (-1.0, 0.2222)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from deviate_cb.stats._checks import check_rng
from deviate_cb.stats._groups import RngLike, Values, _check_bootstrap, _settings, _validate_pair
from deviate_cb.stats._results import StatResult, check_level
from deviate_cb.stats._roots import solve_decreasing
from deviate_cb.stats._std import guarded_var, guarded_var_along

__all__ = [
    "D_METHODS",
    "MEAN_DIFFERENCE_METHODS",
    "PROB_IMPROVEMENT_METHODS",
    "cohens_d",
    "hedges_g",
    "mean_difference",
    "prob_improvement",
]

MEAN_DIFFERENCE_METHODS = ("welch", "percentile", "basic", "BCa")
PROB_IMPROVEMENT_METHODS = ("normal", "percentile", "basic", "BCa")
D_METHODS = ("noncentral_t", "normal")


def cohens_d(a: Values, b: Values, level: float = 0.95, method: str = "noncentral_t") -> StatResult:
    """Cohen's d, ``(mean(a) - mean(b)) / pooled sd``, with the interval of Welch's test for delta.

    The interval (``method="noncentral_t"``) is for the population standardized difference
    ``delta = (mu_a - mu_b) / sigma``: the noncentrality ``lambda`` of Welch's statistic solves
    ``nct.cdf(t_w, df, lambda) = 1 - a/2`` (low end) and ``a/2`` (high end), and
    ``delta = lambda / sqrt(n_a n_b / (n_a + n_b))``. It excludes 0 exactly when Welch's two-sided test
    rejects at ``1 - level``. ``method="normal"`` is the older large-sample interval ``d -/+ z se`` with
    ``se = sqrt((n_a + n_b) / (n_a n_b) + d^2 / (2 (n_a + n_b)))`` (Hedges & Olkin).

    ``pvalue`` is NaN (an estimate, not a test). d and its interval are NaN when both groups are constant
    (pooled sd 0); with one constant group Welch's statistic uses the other group's spread alone and the
    interval stays finite. ``settings``: ``pooled_std``, ``welch_t``, ``df``, ``correction`` (1 for d),
    ``method``.

    Example:
        >>> r = cohens_d([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
        >>> float(r.statistic), [round(v, 3) for v in r.confidence_interval()], r.settings["method"]
        (-1.0, [-2.684, 0.785], 'noncentral_t')
    """
    x, y, n_bad = _validate_pair(a, b)
    return _effect_size("cohens_d", x, y, n_bad, check_level(level), 1.0, _check_method(method, D_METHODS))


def hedges_g(a: Values, b: Values, level: float = 0.95, method: str = "noncentral_t") -> StatResult:
    """Hedges' g: Cohen's d times ``J = 1 - 3 / (4 (n_a + n_b) - 9)``, the less biased estimate of delta.

    The interval is the same as :func:`cohens_d`'s: both estimate the population standardized difference
    delta, and the interval (from Welch's statistic, see :func:`cohens_d`) is for delta, not for a particular
    estimate. With ``method="normal"`` it is d's normal interval times J, as before.

    Example:
        >>> g = hedges_g([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
        >>> round(g.statistic, 6), g.confidence_interval() == cohens_d([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]).confidence_interval()
        (-0.8, True)
    """  # noqa: E501
    x, y, n_bad = _validate_pair(a, b)
    factor = 1.0 - 3.0 / (4.0 * (x.size + y.size) - 9.0)
    return _effect_size("hedges_g", x, y, n_bad, check_level(level), factor, _check_method(method, D_METHODS))


def prob_improvement(
    a: Values, b: Values, level: float = 0.95, n_resamples: int = 9999, rng: RngLike = None, method: str = "normal"
) -> StatResult:
    """Probability of improvement ``P(A>B)``: the share of pairs with ``a > b``, ties counting one half.

    The statistic equals ``U / (n_a n_b)``. The default interval (``method="normal"``) maps the interval of
    delta of :func:`cohens_d` through ``P(A>B) = Phi(delta / sqrt(2))`` (normal runs of a common spread):
    ``[Phi(delta_lo / sqrt 2), Phi(delta_hi / sqrt 2)]``, so it excludes 0.5 exactly when Welch's two-sided test
    rejects at ``1 - level``. When the rank estimate falls outside it, the interval is widened to hold it and
    ``settings["widened"]`` is True with a ``note`` (at the result's :attr:`level`; other levels widen the same
    way). NaN when both groups are constant. ``"percentile"``, ``"basic"`` and ``"BCa"`` are two-sample
    bootstraps (``scipy.stats.bootstrap``, unpaired), with ``n_resamples`` and ``seed`` in ``settings``.

    Example:
        >>> r = prob_improvement([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
        >>> round(r.statistic, 4), [round(v, 3) for v in r.confidence_interval()], r.settings["widened"]
        (0.2222, [0.029, 0.71], False)
        >>> prob_improvement([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], rng=0, method="percentile").settings["seed"]
        0
    """
    x, y, n_bad = _validate_pair(a, b)
    method = _check_method(method, PROB_IMPROVEMENT_METHODS)
    levels, codes = np.unique(np.concatenate([x, y]), return_inverse=True)
    data = (codes[: x.size].astype(np.float64), codes[x.size :].astype(np.float64))
    statistic = _p_improvement_codes(levels.size)
    if method != "normal":
        seed = _check_bootstrap(level, n_resamples, rng, method)
        return _bootstrap_result("prob_improvement", statistic, x, y, n_bad, level, n_resamples, seed, method, data)
    level = check_level(level)
    _check_unused_bootstrap(n_resamples, rng)
    p = float(statistic(*data))
    t, df = _welch_t_df(x, y)
    scale = _delta_scale(x.size, y.size)
    cache: dict[float, tuple[float, float]] = {}

    def unwidened(lvl: float) -> tuple[float, float]:
        if lvl not in cache:
            low, high = _delta_interval(np.array([t]), np.array([df]), scale, lvl)
            cache[lvl] = (_normal_cdf(float(low[0]) / math.sqrt(2.0)), _normal_cdf(float(high[0]) / math.sqrt(2.0)))
        return cache[lvl]

    def interval(lvl: float) -> tuple[float, float]:
        low, high = unwidened(lvl)
        return min(low, p), max(high, p)  # NaN stays NaN (both groups constant)

    settings = _settings(x, y, n_bad, method="normal", welch_t=t, df=df)
    low, high = unwidened(level)
    settings["widened"] = bool(not low <= p <= high and not math.isnan(low))
    if settings["widened"]:
        settings["note"] = (
            "the rank estimate lies outside Phi(delta/sqrt 2) of the delta interval (the runs do not look normal "
            "with one spread); the interval was widened to hold it"
        )
    if math.isnan(low):
        settings["note"] = "both groups are constant: no spread to build an interval from"
    return StatResult("prob_improvement", p, math.nan, level, settings, interval)


def mean_difference(
    a: Values, b: Values, level: float = 0.95, n_resamples: int = 9999, rng: RngLike = None, method: str = "welch"
) -> StatResult:
    """``mean(a) - mean(b)`` with Welch's t interval (the default) or a two-sample bootstrap interval.

    ``method="welch"``: ``diff -/+ t_{1-a/2, df} se``, the interval of :func:`~deviate_cb.stats.welch_t` (it
    excludes 0 exactly when Welch's two-sided test rejects at ``1 - level``); with both groups constant it is
    NaN (no spread to build it from: a zero-width interval would claim an exact difference). ``"percentile"``,
    ``"basic"``, ``"BCa"``: ``scipy.stats.bootstrap`` of the difference (unpaired), with ``n_resamples`` and
    ``seed`` in ``settings`` (the percentile bootstrap covers only about 83% at nominal 95% with 4 and 3 normal
    runs).

    Example:
        >>> r = mean_difference([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
        >>> float(r.statistic), [round(v, 4) for v in r.confidence_interval()], r.settings["df"]
        (-1.0, [-3.267, 1.267], 4.0)
        >>> mean_difference([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], rng=1, method="BCa").settings["seed"]
        1
    """
    x, y, n_bad = _validate_pair(a, b)
    method = _check_method(method, MEAN_DIFFERENCE_METHODS)
    if method != "welch":
        seed = _check_bootstrap(level, n_resamples, rng, method)
        return _bootstrap_result("mean_difference", _mean_diff, x, y, n_bad, level, n_resamples, seed, method, (x, y))
    level = check_level(level)
    _check_unused_bootstrap(n_resamples, rng)
    diff, se, df = (float(v) for v in _welch_parts(x, y))

    def interval(lvl: float) -> tuple[float, float]:
        if se == 0.0:  # both groups constant: no spread, so no interval (a zero-width one would claim exactness)
            return math.nan, math.nan
        low, high = _welch_interval(np.array(diff), np.array(se), np.array(df), lvl)
        return float(low), float(high)

    settings = _settings(x, y, n_bad, method="welch", se=se, df=df)
    if se == 0.0:
        settings["note"] = (
            "both groups are constant: no spread to build an interval from (NaN); Welch's test is NaN too"
        )
    return StatResult("mean_difference", diff, math.nan, level, settings, interval)


# --- the maths -------------------------------------------------------------------------------------------


def _check_method(method: object, allowed: tuple[str, ...]) -> str:
    if method not in allowed:
        names = ", ".join(repr(m) for m in allowed)
        raise ValueError(f"`method` must be one of {names}. Received: method={method!r}.")
    return str(method)


def _check_unused_bootstrap(n_resamples: object, rng: object) -> None:
    """The bootstrap arguments are still checked when the method does not resample (same messages)."""
    from deviate_cb.stats._checks import positive_int

    positive_int(n_resamples, "n_resamples")
    check_rng(rng)


def _welch_parts(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Difference of means, Welch's standard error and Welch-Satterthwaite df along the last axis (vectorised)."""
    na, nb = x.shape[-1], y.shape[-1]
    diff = np.mean(x, axis=-1) - np.mean(y, axis=-1)
    # guarded: equal values have variance 0 exactly (np.var of three 0.901 is 2e-32, and diff / se would be 1e13)
    va, vb = guarded_var_along(x) / na, guarded_var_along(y) / nb
    se2 = va + vb
    with np.errstate(divide="ignore", invalid="ignore"):
        df = se2**2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    return diff, np.sqrt(se2), df


def _welch_t_df(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    diff, se, df = _welch_parts(x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = diff / se
    return float(t), float(df)


def _welch_interval(diff: np.ndarray, se: np.ndarray, df: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Welch's t interval of the difference of means (vectorised); the point ``diff`` where ``se`` is 0."""
    from scipy.special import stdtrit

    with np.errstate(invalid="ignore"):
        half = np.where(se > 0, stdtrit(np.where(se > 0, df, 1.0), 0.5 + level / 2.0) * se, 0.0)
    return diff - half, diff + half


def _delta_scale(na: int, nb: int) -> float:
    """``sqrt(n_a n_b / (n_a + n_b))``: the noncentrality of Welch's statistic per unit of delta."""
    return math.sqrt(na * nb / (na + nb))


def _delta_interval(t: np.ndarray, df: np.ndarray, scale: float, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The interval of delta from Welch's ``t`` and ``df`` by inverting the noncentral t (vectorised).

    ``lambda_lo`` solves ``nct.cdf(t, df, lambda) = 1 - a/2`` and ``lambda_hi`` solves ``= a/2`` (the cdf
    decreases in lambda); NaN where ``t`` or ``df`` is not finite.
    """
    from scipy.special import nctdtr

    alpha = 1.0 - level
    t, df = np.asarray(t, dtype=np.float64), np.asarray(df, dtype=np.float64)
    ok = np.isfinite(t) & np.isfinite(df) & (df > 0)
    t_ok, df_ok = np.where(ok, t, np.nan), np.where(ok, df, 1.0)

    def cdf(lam: np.ndarray, index: np.ndarray) -> np.ndarray:
        t_i = t_ok.ravel()[index]
        with np.errstate(all="ignore"):
            value = nctdtr(df_ok.ravel()[index], lam, t_i)
        # SciPy gives NaN far in a tail (t far below lambda, e.g. t = -7, lambda = 7, df = 4.7): 0 or 1 there
        return np.where(np.isnan(value) & np.isfinite(lam), np.where(lam > t_i, 0.0, 1.0), value)

    step = 1.0 + 0.5 * np.abs(t_ok)
    low = solve_decreasing(cdf, np.full(t.shape, 1.0 - alpha / 2.0), t_ok, step)
    high = solve_decreasing(cdf, np.full(t.shape, alpha / 2.0), t_ok, step)
    return low / scale, high / scale


def _normal_cdf(v: float) -> float:
    return 0.5 * math.erfc(-v / math.sqrt(2.0))


def _effect_size(
    name: str, x: np.ndarray, y: np.ndarray, n_bad: tuple[int, int], level: float, factor: float, method: str
) -> StatResult:
    na, nb = x.size, y.size
    pooled = math.sqrt(((na - 1) * guarded_var(x) + (nb - 1) * guarded_var(y)) / (na + nb - 2))
    d = float((np.mean(x) - np.mean(y)) / pooled) if pooled > 0 else math.nan
    t, df = _welch_t_df(x, y)
    if not math.isfinite(d):
        t = math.nan
    cache: dict[float, tuple[float, float]] = {}

    def interval(lvl: float) -> tuple[float, float]:
        if lvl not in cache:
            if method == "normal":
                from scipy.special import ndtri

                se = math.sqrt((na + nb) / (na * nb) + d * d / (2.0 * (na + nb)))
                z = float(ndtri(0.5 + lvl / 2.0))
                cache[lvl] = (factor * (d - z * se), factor * (d + z * se))
            else:
                low, high = _delta_interval(np.array([t]), np.array([df]), _delta_scale(na, nb), lvl)
                cache[lvl] = (float(low[0]), float(high[0]))
        return cache[lvl]

    settings: dict[str, Any] = _settings(
        x, y, n_bad, pooled_std=pooled, correction=factor, method=method, welch_t=t, df=df
    )
    if not math.isfinite(d):
        settings["note"] = "both groups are constant (pooled sd 0): d is undefined"
    return StatResult(name, factor * d, math.nan, level, settings, interval)


def _p_improvement(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """P(A>B) along ``axis`` (ties count one half), from the values' positions among the pooled sorted values."""
    levels, codes = np.unique(np.concatenate([np.ravel(x), np.ravel(y)]), return_inverse=True)
    cx, cy = codes[: np.size(x)].reshape(np.shape(x)), codes[np.size(x) :].reshape(np.shape(y))
    return _p_improvement_codes(levels.size)(cx, cy, axis)


def _p_improvement_codes(k: int) -> Callable[..., np.ndarray]:
    """P(A>B) for integer codes in ``range(k)`` (the order of the values): counting, no sorting per resample."""

    def statistic(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        x, y = np.moveaxis(x, axis, -1), np.moveaxis(y, axis, -1)
        shape, na, nb = x.shape[:-1], x.shape[-1], y.shape[-1]
        cx, cy = x.reshape(-1, na).astype(np.intp), y.reshape(-1, nb).astype(np.intp)
        out = np.empty(cx.shape[0])
        for start in range(0, cx.shape[0], 1024):  # chunks bound the (rows, k) count table
            rows = slice(start, start + 1024)
            m = cy[rows].shape[0]
            counts = np.bincount((cy[rows] + k * np.arange(m)[:, None]).ravel(), minlength=m * k).reshape(m, k)
            # 2 * (#y below each code) + (#y at it): twice the score of an x with that code
            twice = 2 * (np.cumsum(counts, axis=-1) - counts) + counts
            out[rows] = np.take_along_axis(twice, cx[rows], axis=-1).sum(axis=-1) / (2.0 * na * nb)
        return out.reshape(shape) if shape else out[0]

    return statistic


def _mean_diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def _bootstrap_result(
    name: str,
    statistic: Callable[..., np.ndarray],
    x: np.ndarray,
    y: np.ndarray,
    n_bad: tuple[int, int],
    level: float,
    n_resamples: int,
    seed: int,
    method: str,
    data: tuple[np.ndarray, np.ndarray],
) -> StatResult:
    cache: dict[float, tuple[float, float]] = {}

    def interval(lvl: float) -> tuple[float, float]:
        if lvl not in cache:
            from scipy.stats import bootstrap

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # degenerate (constant) resamples: the interval is then a point
                res = bootstrap(
                    data,
                    statistic,
                    n_resamples=n_resamples,
                    paired=False,
                    vectorized=True,
                    confidence_level=lvl,
                    method=method,
                    rng=np.random.default_rng(seed),
                )
            cache[lvl] = (float(res.confidence_interval.low), float(res.confidence_interval.high))
        return cache[lvl]

    return StatResult(
        name,
        float(statistic(*data)),
        math.nan,
        level,
        _settings(x, y, n_bad, method=method, n_resamples=n_resamples, seed=seed),
        interval,
    )
