"""Effect sizes for two groups of per-run values: Cohen's d, Hedges' g, P(A>B) and the mean difference.

Cohen's d and Hedges' g come with a normal-approximation interval; the probability of improvement and the
mean difference with a bootstrap interval (``scipy.stats.bootstrap``). Resampling takes ``rng`` (an int seed,
a ``numpy.random.Generator`` or ``None``); the seed used is recorded in ``settings["seed"]`` and reused when the
interval is recomputed for another level. The global random state is never touched.

Example:
    >>> d = cohens_d([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
    >>> d.statistic, round(prob_improvement([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], rng=0).statistic, 4)
    (-1.0, 0.2222)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np

from deviate_cb.stats._groups import RngLike, Values, _check_bootstrap, _settings, _validate_pair
from deviate_cb.stats._results import StatResult, check_level

__all__ = ["cohens_d", "hedges_g", "mean_difference", "prob_improvement"]


def cohens_d(a: Values, b: Values, level: float = 0.95) -> StatResult:
    """Cohen's d, ``(mean(a) - mean(b)) / pooled sd``, with a normal-approximation interval.

    The interval is ``d -/+ z * se`` with ``se = sqrt((n_a + n_b) / (n_a n_b) + d^2 / (2 (n_a + n_b)))``
    (Hedges & Olkin's large-sample standard error). ``pvalue`` is NaN (an estimate, not a test); d is NaN
    when both groups are constant (pooled sd 0).

    Example:
        >>> r = cohens_d([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
        >>> float(r.statistic), [round(v, 4) for v in r.confidence_interval()]
        (-1.0, [-2.6974, 0.6974])
    """
    x, y, n_bad = _validate_pair(a, b)
    return _effect_size("cohens_d", x, y, n_bad, check_level(level), 1.0)


def hedges_g(a: Values, b: Values, level: float = 0.95) -> StatResult:
    """Hedges' g: Cohen's d times ``J = 1 - 3 / (4 (n_a + n_b) - 9)``; the interval is d's interval times J.

    Example:
        >>> round(hedges_g([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]).statistic, 6)
        -0.8
    """
    x, y, n_bad = _validate_pair(a, b)
    return _effect_size("hedges_g", x, y, n_bad, check_level(level), 1.0 - 3.0 / (4.0 * (x.size + y.size) - 9.0))


def prob_improvement(
    a: Values, b: Values, level: float = 0.95, n_resamples: int = 9999, rng: RngLike = None, method: str = "percentile"
) -> StatResult:
    """Probability of improvement ``P(A>B)``: the share of pairs with ``a > b``, ties counting one half.

    Equals ``U / (n_a n_b)``. The interval is a two-sample bootstrap (``scipy.stats.bootstrap``, unpaired);
    the default ``method="percentile"`` stays defined with ties and with groups that never overlap, where
    BCa's acceleration degenerates to NaN.

    Example:
        >>> r = prob_improvement([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], rng=0)
        >>> round(r.statistic, 4), r.settings["seed"]
        (0.2222, 0)
    """
    x, y, n_bad = _validate_pair(a, b)
    seed = _check_bootstrap(level, n_resamples, rng, method)
    # P(A>B) depends only on the order of the values: resample their codes (same draws, no per-resample sort)
    levels, codes = np.unique(np.concatenate([x, y]), return_inverse=True)
    data = (codes[: x.size].astype(np.float64), codes[x.size :].astype(np.float64))
    statistic = _p_improvement_codes(levels.size)
    return _bootstrap_result("prob_improvement", statistic, x, y, n_bad, level, n_resamples, seed, method, data)


def mean_difference(
    a: Values, b: Values, level: float = 0.95, n_resamples: int = 9999, rng: RngLike = None, method: str = "percentile"
) -> StatResult:
    """``mean(a) - mean(b)`` with a two-sample bootstrap interval (percentile by default; ``BCa`` selectable).

    Example:
        >>> r = mean_difference([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], rng=1)
        >>> float(r.statistic), r.confidence_interval() == r.confidence_interval()
        (-1.0, True)
    """
    x, y, n_bad = _validate_pair(a, b)
    seed = _check_bootstrap(level, n_resamples, rng, method)
    return _bootstrap_result("mean_difference", _mean_diff, x, y, n_bad, level, n_resamples, seed, method, (x, y))


# --- the maths -------------------------------------------------------------------------------------------


def _effect_size(
    name: str, x: np.ndarray, y: np.ndarray, n_bad: tuple[int, int], level: float, factor: float
) -> StatResult:
    na, nb = x.size, y.size
    pooled = math.sqrt(((na - 1) * np.var(x, ddof=1) + (nb - 1) * np.var(y, ddof=1)) / (na + nb - 2))
    d = float((np.mean(x) - np.mean(y)) / pooled) if pooled > 0 else math.nan
    se = math.sqrt((na + nb) / (na * nb) + d * d / (2.0 * (na + nb)))

    def interval(lvl: float) -> tuple[float, float]:
        from scipy.special import ndtri

        z = float(ndtri(0.5 + lvl / 2.0))
        return factor * (d - z * se), factor * (d + z * se)

    return StatResult(
        name,
        factor * d,
        math.nan,
        level,
        _settings(x, y, n_bad, pooled_std=pooled, correction=factor, ci="normal"),
        interval,
    )


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
