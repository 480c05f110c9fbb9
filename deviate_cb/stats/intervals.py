"""Confidence intervals of a standard deviation and of a mean, from summary numbers or by the bootstrap.

The standard deviation's interval comes from the chi-square distribution of ``(n-1) s^2 / sigma^2`` for
normally distributed values (``s`` with ``ddof=1``)::

    [ sqrt((n-1) s^2 / chi2.ppf(1 - a/2, n-1)),  sqrt((n-1) s^2 / chi2.ppf(a/2, n-1)) ],  a = 1 - level

The mean's is Student's t interval ``mean +- t.ppf(1 - a/2, n-1) s / sqrt(n)``. Both are vectorised over
their arguments. :func:`bootstrap_std_interval` is the BCa bootstrap (``scipy.stats.bootstrap``) of
``np.std(..., ddof=ddof)`` that :class:`~deviate_cb.stats.describe.Description` uses with
``std_ci="bootstrap"``.

SciPy (``scipy.special``, or ``scipy.stats`` for the bootstrap) is imported only when an interval is computed,
so importing this module stays cheap.

Example:
    >>> low, high = std_confidence_interval(1.0, 10, 0.95)
    >>> round(low, 4), round(high, 4)
    (0.6878, 1.8256)
    >>> mean_confidence_interval(0.0, 1.0, 1)
    ConfidenceInterval(low=nan, high=nan)
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple, Optional, Union

import numpy as np

__all__ = [
    "ArrayLike",
    "ConfidenceInterval",
    "bootstrap_std_interval",
    "check_ci_level",
    "mean_confidence_interval",
    "std_confidence_interval",
]

ArrayLike = Union[float, np.ndarray]


class ConfidenceInterval(NamedTuple):
    """A confidence interval, as in SciPy: ``low`` and ``high`` (unpacks as a pair)."""

    low: ArrayLike
    high: ArrayLike


def std_confidence_interval(std: ArrayLike, n: Union[int, np.ndarray], level: float = 0.95) -> ConfidenceInterval:
    """Chi-square confidence interval of a standard deviation (vectorised over ``std`` and ``n``).

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

    NaN with fewer than two values; ``(0.0, 0.0)`` when every value is the same (BCa is undefined there).

    Example:
        >>> bootstrap_std_interval((0.5, 0.5, 0.5), 1, 0.95, 999, 0)
        ConfidenceInterval(low=0.0, high=0.0)
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2:
        return ConfidenceInterval(math.nan, math.nan)
    if np.all(x == x[0]):  # every resample has std 0; BCa is undefined there
        return ConfidenceInterval(0.0, 0.0)
    from scipy.stats import bootstrap

    def statistic(sample: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.std(sample, ddof=ddof, axis=axis)

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
