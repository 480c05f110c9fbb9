"""Confidence intervals of a standard deviation and of a mean: Bonett's, chi-square, t, and by the bootstrap.

Example:
    >>> low, high = std_confidence_interval(1.0, 10, 0.95)
    >>> round(low, 4), round(high, 4)
    (0.6878, 1.8256)
    >>> mean_confidence_interval(0.0, 1.0, 1)
    ConfidenceInterval(low=nan, high=nan)
    >>> low, high = bonett_std_interval([0.84, 0.85, 0.86, 0.81, 0.90, 0.83, 0.85, 0.86, 0.84, 0.82])
    >>> round(float(low), 4), round(float(high), 4)
    (0.0141, 0.0552)
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple, Optional, Union

import numpy as np

__all__ = [
    "ArrayLike",
    "ConfidenceInterval",
    "bonett_std_interval",
    "bootstrap_std_interval",
    "check_ci_level",
    "mean_confidence_interval",
    "std_confidence_interval",
    "std_kurtosis",
]

ArrayLike = Union[float, np.ndarray]


class ConfidenceInterval(NamedTuple):
    """A confidence interval, as in SciPy: ``low`` and ``high`` (unpacks as a pair)."""

    low: ArrayLike
    high: ArrayLike


def std_confidence_interval(std: ArrayLike, n: Union[int, np.ndarray], level: float = 0.95) -> ConfidenceInterval:
    """Chi-square confidence interval of a standard deviation (vectorised over ``std`` and ``n``).

    Exact for normal runs; it does not hold for skewed or heavy-tailed ones (0.39 at 36 lognormal(0, 1) runs):
    :func:`bonett_std_interval` does better there.

    Args:
        std: Sample standard deviation(s) (``ddof=1``).
        n: Number(s) of values each std was computed from.
        level: Confidence level in (0, 1).

    Returns:
        ``ConfidenceInterval(low, high)``; NaN where ``n < 2`` or ``std`` is not finite.

    Example:
        >>> low, high = std_confidence_interval(1.0, 10, 0.95)
        >>> round(low, 4), round(high, 4)
        (0.6878, 1.8256)
    """
    std_arr, n_arr = _validate_std_ci(std, n, level)
    # chdtri(df, p) is the chi-square quantile with upper-tail probability p, i.e. chi2.ppf(1 - p, df);
    # scipy.special loads in a third of the time of scipy.stats, which matters for a command-line tool.
    from scipy.special import chdtri

    alpha = 1.0 - level
    valid = (n_arr >= 2) & np.isfinite(std_arr)
    df = np.where(valid, n_arr - 1, 1).astype(np.float64)
    scale = df * np.where(valid, std_arr, 0.0) ** 2
    low = np.where(valid, np.sqrt(scale / chdtri(df, alpha / 2.0)), np.nan)
    high = np.where(valid, np.sqrt(scale / chdtri(df, 1.0 - alpha / 2.0)), np.nan)
    if low.ndim == 0:
        return ConfidenceInterval(float(low), float(high))
    return ConfidenceInterval(low, high)


def std_kurtosis(values: np.ndarray) -> np.ndarray:
    """Bonett's kurtosis estimate ``n sum((x - median)^4) / sum((x - mean)^2)^2`` along the last axis.

    3 for normal runs in the limit (larger for heavier tails); at least 1 (Cauchy-Schwarz); NaN where the values
    are all equal or fewer than 2. Vectorised: one estimate per row of a 2-D array.

    Example:
        >>> round(float(std_kurtosis(np.array([1.0, 2.0, 3.0, 4.0, 10.0]))), 3)
        4.838
    """
    x = np.asarray(values, dtype=np.float64)
    n = x.shape[-1]
    if n < 2:
        return np.full(x.shape[:-1], np.nan)
    centred = x - np.mean(x, axis=-1, keepdims=True)
    squares = np.sum(centred**2, axis=-1)
    fourth = np.sum((x - np.median(x, axis=-1, keepdims=True)) ** 4, axis=-1)
    constant = np.ptp(x, axis=-1) == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(constant, np.nan, n * fourth / np.where(constant, 1.0, squares) ** 2)


def bonett_std_interval(
    values: np.ndarray, level: float = 0.95, kurtosis: Optional[ArrayLike] = None
) -> ConfidenceInterval:
    """Bonett's (2006) confidence interval of the standard deviation, along the last axis of ``values``.

    Args:
        values: One run per value; a 2-D array gives one interval per row.
        level: Confidence level in (0, 1).
        kurtosis: The kurtosis the interval's width uses (one per row); ``None``: :func:`std_kurtosis` of the
            values. A larger value (say the largest estimate of several looks) widens the interval.

    Returns:
        ``ConfidenceInterval(low, high)`` for sigma; NaN where the values are all equal or fewer than 3 (no
        kurtosis: :func:`~deviate_cb.stats.precision.std_interval_note` says why), ``(0, inf)`` where ``n`` is
        not above the normal quantile (a level so high that the small-sample adjustment is undefined).

    Example:
        >>> low, high = bonett_std_interval(np.array([[1.0, 2.0, 3.0, 4.0, 6.0], [1.0, 1.0, 1.0, 1.0, 1.0]]))
        >>> np.round(low, 3).tolist(), np.round(high, 3).tolist()
        ([0.822, nan], [7.404, nan])
    """
    check_ci_level(level)
    x = np.asarray(values, dtype=np.float64)
    n = x.shape[-1] if x.ndim else 0
    shape = x.shape[:-1] if x.ndim else ()
    if n < 3:
        nan = np.full(shape, np.nan)
        return _interval(nan, nan)
    kurt = std_kurtosis(x) if kurtosis is None else np.broadcast_to(np.asarray(kurtosis, np.float64), shape)
    from scipy.special import ndtri

    z = float(ndtri(1.0 - (1.0 - level) / 2.0))
    centred = x - np.mean(x, axis=-1, keepdims=True)
    variance = np.sum(centred**2, axis=-1) / (n - 1)
    variance = np.where(np.ptp(x, axis=-1) == 0, np.nan, variance)
    if n - z <= 0.0:
        inf = np.where(np.isnan(variance), np.nan, np.inf)
        return _interval(np.where(np.isnan(variance), np.nan, 0.0), inf)
    c = n / (n - z)
    se = c * np.sqrt(np.maximum(kurt - (n - 3.0) / n, 0.0) / (n - 1.0))
    with np.errstate(invalid="ignore"):
        low = np.sqrt(c * variance * np.exp(-z * se))
        high = np.sqrt(c * variance * np.exp(z * se))
    return _interval(low, high)


def _interval(low: np.ndarray, high: np.ndarray) -> ConfidenceInterval:
    if np.ndim(low) == 0:
        return ConfidenceInterval(float(low), float(high))
    return ConfidenceInterval(low, high)


def mean_confidence_interval(
    mean: ArrayLike, std: ArrayLike, n: Union[int, np.ndarray], level: float = 0.95
) -> ConfidenceInterval:
    """Student's t confidence interval of a mean (vectorised over ``mean``, ``std`` and ``n``).

    Args:
        mean: Sample mean(s).
        std: Sample standard deviation(s) (``ddof=1``).
        n: Number(s) of values.
        level: Confidence level in (0, 1).

    Returns:
        ``ConfidenceInterval(mean - h, mean + h)`` with ``h = t.ppf(1 - a/2, n-1) std / sqrt(n)``; NaN where
        ``n < 2`` or ``std`` is not finite.

    Example:
        >>> low, high = mean_confidence_interval(0.0, 1.0, 10, 0.95)
        >>> round(low, 4), round(high, 4)
        (-0.7154, 0.7154)
    """
    mean_arr, std_arr, n_arr = _validate_mean_ci(mean, std, n, level)
    from scipy.special import stdtrit

    valid = (n_arr >= 2) & np.isfinite(std_arr) & np.isfinite(mean_arr)
    df = np.where(valid, n_arr - 1, 1).astype(np.float64)
    half = stdtrit(df, 1.0 - (1.0 - level) / 2.0) * np.where(valid, std_arr, 0.0) / np.sqrt(df + 1.0)
    low = np.where(valid, mean_arr - half, np.nan)
    high = np.where(valid, mean_arr + half, np.nan)
    if low.ndim == 0:
        return ConfidenceInterval(float(low), float(high))
    return ConfidenceInterval(low, high)


def bootstrap_std_interval(
    values: tuple[float, ...], ddof: int, level: float, n_resamples: int, seed: Optional[int]
) -> ConfidenceInterval:
    """BCa bootstrap interval of ``np.std(values, ddof=ddof)``, reproducible from ``seed``.

    NaN with fewer than two values and when every value is the same: every resample then has std 0, which
    shows nothing about the std (:func:`~deviate_cb.stats.precision.std_interval_note`).

    Example:
        >>> bootstrap_std_interval((0.5, 0.5, 0.5), 1, 0.95, 999, 0)
        ConfidenceInterval(low=nan, high=nan)
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2 or np.ptp(x) == 0:
        return ConfidenceInterval(math.nan, math.nan)
    from scipy.stats import bootstrap

    from deviate_cb.stats._std import guarded_std_along

    def statistic(sample: np.ndarray, axis: int = -1) -> np.ndarray:
        return guarded_std_along(sample, axis=axis, ddof=ddof)

    result = bootstrap(
        (x,),
        statistic,
        n_resamples=n_resamples,
        vectorized=True,
        confidence_level=level,
        rng=np.random.default_rng(seed),
    )
    ci = result.confidence_interval
    return ConfidenceInterval(float(ci.low), float(ci.high))


def check_ci_level(level: object) -> None:
    """Raise ``ValueError`` unless ``level`` is a real number in (0, 1).

    The check (and message) of the interval functions and of :func:`~deviate_cb.stats.describe.describe`.

    Example:
        >>> check_ci_level(0.95)
    """
    if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0.0 < float(level) < 1.0:
        raise ValueError(f"`level` must be in (0, 1). Received: level={level!r}.")


def _validate_std_ci(std: ArrayLike, n: Union[int, np.ndarray], level: float) -> tuple[np.ndarray, np.ndarray]:
    check_ci_level(level)
    n_arr = np.asarray(n)
    if n_arr.dtype.kind not in "iu" or np.any(n_arr < 0):
        raise ValueError(f"`n` must be a non-negative integer. Received: n={n!r}.")
    std_arr = np.asarray(std, dtype=np.float64)
    if np.any(std_arr < 0):
        raise ValueError(f"`std` must be non-negative. Received: std={std!r}.")
    return std_arr, n_arr


def _validate_mean_ci(
    mean: ArrayLike, std: ArrayLike, n: Union[int, np.ndarray], level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    std_arr, n_arr = _validate_std_ci(std, n, level)
    return np.asarray(mean, dtype=np.float64), std_arr, n_arr
