"""Across-run description of one metric: n, mean, std, CV, min, max, range, and a CI of the std.

The standard deviation is the sample standard deviation (``ddof=1``). Its confidence interval comes from
the chi-square distribution of ``(n-1) s^2 / sigma^2`` for normally distributed values::

    [ sqrt((n-1) s^2 / chi2.ppf(1 - a/2, n-1)),  sqrt((n-1) s^2 / chi2.ppf(a/2, n-1)) ],  a = 1 - level

SciPy (``scipy.special``) is imported only when an interval is computed, so importing this module stays cheap.

Example:
    >>> d = describe([0.84, 0.85, 0.86, float("nan")])
    >>> d.n, d.n_nonfinite, round(d.mean, 3), round(d.std, 3)
    (3, 1, 0.85, 0.01)
    >>> low, high = d.confidence_interval(0.95)
    >>> bool(low < d.std < high)
    True
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple, Union

import numpy as np

__all__ = ["ConfidenceInterval", "Description", "describe", "std_confidence_interval"]

ArrayLike = Union[float, np.ndarray]


class ConfidenceInterval(NamedTuple):
    """A confidence interval, as in SciPy: ``low`` and ``high`` (unpacks as a pair)."""

    low: ArrayLike
    high: ArrayLike


@dataclass(frozen=True)
class Description:
    """Summary of one metric across runs (non-finite values are left out and counted).

    Attributes:
        n: Number of finite values.
        mean: Their mean.
        std: Their sample standard deviation (``ddof=1``); NaN when ``n < 2``.
        cv: Coefficient of variation ``std / |mean|``; NaN when the mean is 0 or ``n < 2``.
        min: Smallest value.
        max: Largest value.
        range: ``max - min``.
        n_nonfinite: Number of NaN/Inf values that were left out.
    """

    n: int
    mean: float
    std: float
    cv: float
    min: float
    max: float
    range: float
    n_nonfinite: int = 0

    def confidence_interval(self, level: float = 0.95) -> ConfidenceInterval:
        """The chi-square confidence interval of the standard deviation at confidence ``level``.

        Example:
            >>> describe([1.0, 2.0, 3.0]).confidence_interval(0.9).high > 1.0
            True
        """
        return std_confidence_interval(self.std, self.n, level)


def describe(values: Iterable[float]) -> Description:
    """Describe the spread of one metric across runs.

    Args:
        values: One number per run (for example the per-run aggregates). NaN and Inf are left out and
            counted in ``n_nonfinite``.

    Returns:
        A frozen :class:`Description`.

    Example:
        >>> d = describe([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
        >>> d.n, d.mean, round(d.std, 4), d.range
        (8, 5.0, 2.1381, 7.0)
    """
    array = _validate_describe(values)
    finite = array[np.isfinite(array)]
    n = int(finite.size)
    n_nonfinite = int(array.size - n)
    if n == 0:
        nan = math.nan
        return Description(0, nan, nan, nan, nan, nan, nan, n_nonfinite)
    # Shift by the first value: identical runs (a `control` group) then give std exactly 0 and mean exactly
    # their value, and the subtraction loses less precision when the spread is small relative to the mean.
    shifted = finite - finite[0]
    mean = float(finite[0] + np.mean(shifted))
    std = float(np.std(shifted, ddof=1)) if n >= 2 else math.nan
    cv = std / abs(mean) if mean != 0 and math.isfinite(std) else math.nan
    low, high = float(np.min(finite)), float(np.max(finite))
    return Description(n, mean, std, cv, low, high, high - low, n_nonfinite)


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


def _validate_describe(values: Iterable[float]) -> np.ndarray:
    if isinstance(values, (str, bytes)):
        raise TypeError(f"`values` must be numbers. Received: values={values!r}.")
    try:
        array = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`values` must be numbers. Received: values of type {type(values).__name__} ({exc}).") from exc
    if array.ndim != 1:
        raise ValueError(f"`values` must be one-dimensional. Received: values with shape {array.shape}.")
    return array


def _validate_std_ci(std: ArrayLike, n: Union[int, np.ndarray], level: float) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0.0 < float(level) < 1.0:
        raise ValueError(f"`level` must be in (0, 1). Received: level={level!r}.")
    n_arr = np.asarray(n)
    if n_arr.dtype.kind not in "iu" or np.any(n_arr < 0):
        raise ValueError(f"`n` must be a non-negative integer. Received: n={n!r}.")
    std_arr = np.asarray(std, dtype=np.float64)
    if np.any(std_arr < 0):
        raise ValueError(f"`std` must be non-negative. Received: std={std!r}.")
    return std_arr, n_arr
