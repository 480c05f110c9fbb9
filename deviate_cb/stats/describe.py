"""Across-run description of one metric: n, mean, std, CV, min, max, range, robust extras, and CIs.

The standard deviation uses ``ddof=1`` (the sample standard deviation) unless ``ddof=0`` is asked for (the
population standard deviation, as some papers report). Its default confidence interval comes from the
chi-square distribution of ``(n-1) s^2 / sigma^2`` for normally distributed values (``s`` with ``ddof=1``)::

    [ sqrt((n-1) s^2 / chi2.ppf(1 - a/2, n-1)),  sqrt((n-1) s^2 / chi2.ppf(a/2, n-1)) ],  a = 1 - level

It is an interval for the population ``sigma``, so it is the same whichever ``ddof`` the point estimate uses.
``std_ci="bootstrap"`` replaces it by ``scipy.stats.bootstrap`` (BCa) of ``np.std(..., ddof=ddof)``. The
confidence interval of the mean is Student's t interval ``mean +- t.ppf(1 - a/2, n-1) s / sqrt(n)``.

Robust extras: the median, the interquartile range ``np.percentile(x, 75) - np.percentile(x, 25)`` (NumPy's
default linear interpolation, as ``scipy.stats.iqr``) and the interquartile mean (IQM: the mean of the middle
50% of the sorted values, as in rliable, Agarwal et al. 2021; equal to ``scipy.stats.trim_mean(x, 0.25)``).

SciPy (``scipy.special``, or ``scipy.stats`` for the bootstrap) is imported only when an interval is computed,
so importing this module stays cheap.

Example:
    >>> d = describe([0.84, 0.85, 0.86, float("nan")])
    >>> d.n, d.n_nonfinite, round(d.mean, 3), round(d.std, 3)
    (3, 1, 0.85, 0.01)
    >>> low, high = d.confidence_interval(0.95)
    >>> bool(low < d.std < high)
    True
    >>> low, high = d.mean_confidence_interval(0.95)
    >>> bool(low < d.mean < high)
    True
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional, Union

import numpy as np

from deviate_cb.stats._checks import as_vector, check_rng, positive_int, seed_of

__all__ = [
    "STD_CI_METHODS",
    "ConfidenceInterval",
    "Description",
    "describe",
    "mean_confidence_interval",
    "std_confidence_interval",
]

ArrayLike = Union[float, np.ndarray]
STD_CI_METHODS = ("chi2", "bootstrap")


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
        std: Their standard deviation with ``ddof`` (default 1: the sample std); NaN when ``n < 2``.
        cv: Coefficient of variation ``std / |mean|``; NaN when the mean is 0 or ``n < 2``.
        min: Smallest value.
        max: Largest value.
        range: ``max - min``.
        n_nonfinite: Number of NaN/Inf values that were left out.
        median: The median.
        iqr: Interquartile range, ``np.percentile(x, 75) - np.percentile(x, 25)`` (linear interpolation).
        iqm: Interquartile mean, ``scipy.stats.trim_mean(x, 0.25)`` (rliable's IQM).
        ddof: Delta degrees of freedom of :attr:`std` (0 or 1).
        level: Confidence level of the default intervals (used by :meth:`to_dict`).
        std_ci: How the std's interval is computed: ``"chi2"`` or ``"bootstrap"``.
        n_resamples: Bootstrap resamples (``std_ci="bootstrap"`` only).
        seed: The seed the bootstrap uses, so that every call gives the same interval; ``None`` for chi2.
    """

    n: int
    mean: float
    std: float
    cv: float
    min: float
    max: float
    range: float
    n_nonfinite: int = 0
    median: float = math.nan
    iqr: float = math.nan
    iqm: float = math.nan
    ddof: int = 1
    level: float = 0.95
    std_ci: str = "chi2"
    n_resamples: int = 9999
    seed: Optional[int] = None
    values: Optional[tuple[float, ...]] = field(default=None, repr=False, compare=False)

    def confidence_interval(self, level: Optional[float] = None) -> ConfidenceInterval:
        """The confidence interval of the standard deviation at ``level`` (default: :attr:`level`).

        Chi-square by default; with ``std_ci="bootstrap"`` the BCa bootstrap with the stored :attr:`seed`, so
        repeated calls give the same interval. NaN when ``n < 2``.

        Example:
            >>> describe([1.0, 2.0, 3.0]).confidence_interval(0.9).high > 1.0
            True
        """
        level = self.level if level is None else level
        if self.std_ci == "bootstrap":
            _check_level(level)
            return _bootstrap_std_interval(self.values or (), self.ddof, level, self.n_resamples, self.seed)
        sample_std = self.std
        if self.ddof == 0 and self.n >= 2:
            sample_std = self.std * math.sqrt(self.n / (self.n - 1))
        return std_confidence_interval(sample_std, self.n, level)

    def mean_confidence_interval(self, level: Optional[float] = None) -> ConfidenceInterval:
        """Student's t confidence interval of the mean at ``level`` (default: :attr:`level`); NaN when ``n < 2``.

        Example:
            >>> low, high = describe([1.0, 2.0, 3.0]).mean_confidence_interval(0.95)
            >>> round(low, 4), round(high, 4)
            (-0.4841, 4.4841)
        """
        level = self.level if level is None else level
        sample_std = self.std
        if self.ddof == 0 and self.n >= 2:
            sample_std = self.std * math.sqrt(self.n / (self.n - 1))
        return mean_confidence_interval(self.mean, sample_std, self.n, level)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field and both intervals at :attr:`level` (NaN becomes ``None``).

        Example:
            >>> out = describe([1.0, 2.0, 3.0]).to_dict()
            >>> out["std"], out["median"], out["std_ci"], round(out["mean_ci_high"], 4)
            (1.0, 2.0, 'chi2', 4.4841)
        """
        std_low, std_high = self.confidence_interval()
        mean_low, mean_high = self.mean_confidence_interval()
        out: dict[str, Any] = {
            "n": self.n,
            "mean": self.mean,
            "std": self.std,
            "cv": self.cv,
            "min": self.min,
            "max": self.max,
            "range": self.range,
            "n_nonfinite": self.n_nonfinite,
            "median": self.median,
            "iqr": self.iqr,
            "iqm": self.iqm,
            "ddof": self.ddof,
            "level": self.level,
            "std_ci": self.std_ci,
            "std_ci_low": float(std_low),
            "std_ci_high": float(std_high),
            "mean_ci_low": float(mean_low),
            "mean_ci_high": float(mean_high),
        }
        if self.std_ci == "bootstrap":
            out["n_resamples"] = self.n_resamples
            out["seed"] = self.seed
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def describe(
    values: Iterable[float],
    *,
    ddof: int = 1,
    level: float = 0.95,
    std_ci: str = "chi2",
    n_resamples: int = 9999,
    rng: Union[int, np.random.Generator, None] = None,
) -> Description:
    """Describe the spread of one metric across runs.

    Args:
        values: One number per run (for example the per-run aggregates). NaN and Inf are left out and
            counted in ``n_nonfinite``.
        ddof: Delta degrees of freedom of the std: 1 (sample std, the default) or 0 (population std).
        level: Confidence level in (0, 1) of the default intervals (:meth:`Description.to_dict`).
        std_ci: The std's interval: ``"chi2"`` (default, assumes normal values) or ``"bootstrap"``
            (``scipy.stats.bootstrap``, BCa).
        n_resamples: Bootstrap resamples (``std_ci="bootstrap"`` only).
        rng: Seed of the bootstrap: an int, a ``numpy.random.Generator`` (one seed is drawn from it) or
            ``None`` (fresh entropy). The seed is stored, so every interval of the result is reproducible.
            The global random state is never used.

    Returns:
        A frozen :class:`Description`.

    Example:
        >>> d = describe([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
        >>> d.n, d.mean, round(d.std, 4), d.range
        (8, 5.0, 2.1381, 7.0)
        >>> describe([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], ddof=0).std
        2.0
        >>> d.median, d.iqr, d.iqm
        (4.5, 1.5, 4.5)
        >>> b = describe([0.81, 0.84, 0.83, 0.86, 0.82], std_ci="bootstrap", n_resamples=999, rng=0)
        >>> b.confidence_interval() == b.confidence_interval()
        True
    """
    array = _validate_describe(values, ddof, level, std_ci, n_resamples, rng)
    seed = seed_of(rng) if std_ci == "bootstrap" else None
    settings: dict[str, Any] = {
        "ddof": ddof,
        "level": float(level),
        "std_ci": std_ci,
        "n_resamples": n_resamples,
        "seed": seed,
    }
    finite = array[np.isfinite(array)]
    n = int(finite.size)
    n_nonfinite = int(array.size - n)
    if n == 0:
        nan = math.nan
        return Description(0, nan, nan, nan, nan, nan, nan, n_nonfinite, nan, nan, nan, **settings, values=())
    # Shift by the first value: identical runs (a `control` group) then give std exactly 0 and mean exactly
    # their value, and the subtraction loses less precision when the spread is small relative to the mean.
    shifted = finite - finite[0]
    mean = float(finite[0] + np.mean(shifted))
    std = float(np.std(shifted, ddof=ddof)) if n >= 2 else math.nan
    cv = std / abs(mean) if mean != 0 and math.isfinite(std) else math.nan
    low, high = float(np.min(finite)), float(np.max(finite))
    median = float(np.median(finite))
    q75, q25 = np.percentile(finite, [75.0, 25.0])
    # IQM as scipy.stats.trim_mean(x, 0.25): drop int(0.25 n) values at each end of the sorted values.
    cut = int(0.25 * n)
    middle = np.sort(shifted)[cut : n - cut]
    iqm = float(finite[0] + np.mean(middle))
    return Description(
        n,
        mean,
        std,
        cv,
        low,
        high,
        high - low,
        n_nonfinite,
        median,
        float(q75 - q25),
        iqm,
        **settings,
        values=tuple(finite.tolist()) if std_ci == "bootstrap" else None,
    )


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


def _bootstrap_std_interval(
    values: tuple[float, ...], ddof: int, level: float, n_resamples: int, seed: Optional[int]
) -> ConfidenceInterval:
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


def _check_level(level: object) -> None:
    if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0.0 < float(level) < 1.0:
        raise ValueError(f"`level` must be in (0, 1). Received: level={level!r}.")


def _validate_describe(
    values: Iterable[float],
    ddof: object,
    level: object,
    std_ci: object,
    n_resamples: object,
    rng: object,
) -> np.ndarray:
    if isinstance(ddof, bool) or ddof not in (0, 1):
        raise ValueError(f"`ddof` must be 0 or 1. Received: ddof={ddof!r}.")
    _check_level(level)
    if std_ci not in STD_CI_METHODS:
        raise ValueError(f"`std_ci` must be 'chi2' or 'bootstrap'. Received: std_ci={std_ci!r}.")
    positive_int(n_resamples, "n_resamples")
    check_rng(rng)
    return as_vector(values, "values")


def _validate_std_ci(std: ArrayLike, n: Union[int, np.ndarray], level: float) -> tuple[np.ndarray, np.ndarray]:
    _check_level(level)
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
