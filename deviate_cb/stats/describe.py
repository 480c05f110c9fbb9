"""Across-run description of one metric: n, mean, std, CV, min, max, range, robust extras, and CIs.

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
    >>> describe([0.9, 0.9, 0.9]).std_note
    'cannot tell the std from 3 runs with only 1 distinct value'
    >>> low, high = describe([0.84, 0.85, 0.86, 0.81, 0.90], rng=0).iqm_confidence_interval(0.95)
    >>> bool(low <= 0.85 <= high)
    True
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import numpy as np

from deviate_cb.stats._checks import as_vector, check_rng, positive_int, seed_of
from deviate_cb.stats._std import guarded_std
from deviate_cb.stats.intervals import (
    ConfidenceInterval,
    bonett_std_interval,
    bootstrap_std_interval,
    check_ci_level,
    mean_confidence_interval,
    std_confidence_interval,
)
from deviate_cb.stats.iqm import iqm as iqm_result
from deviate_cb.stats.iqm import iqm_point
from deviate_cb.stats.precision import std_interval_note

__all__ = ["IQM_CI_METHODS", "STD_CI_METHODS", "Description", "describe"]

STD_CI_METHODS = ("bonett", "chi2", "bootstrap")
IQM_CI_METHODS = ("t", "bootstrap")


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
        iqm: Interquartile mean, ``scipy.stats.trim_mean(x, 0.25)`` (rliable's IQM); its interval:
            :meth:`iqm_confidence_interval`.
        ddof: Delta degrees of freedom of :attr:`std` (0 or 1).
        level: Confidence level of the default intervals (used by :meth:`to_dict`).
        std_ci: How the std's interval is computed: ``"bonett"`` (default), ``"chi2"`` or ``"bootstrap"``.
        n_resamples: Bootstrap resamples of the IQM's interval (``iqm_ci="bootstrap"``) and of the std's
            (``std_ci="bootstrap"``).
        seed: The seed those bootstraps use, so that every call gives the same interval.
        values: The finite values (for the IQM's interval and the bootstrap intervals).
        iqm_ci: How the IQM's interval is computed: ``"t"`` (Yuen's trimmed-mean t) or ``"bootstrap"``.
        by_design: The runs are bit-identical by design (the ``control`` variant): equal runs then have the std
            interval ``[0, 0]`` instead of no interval.
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
    std_ci: str = "bonett"
    n_resamples: int = 9999
    seed: Optional[int] = None
    values: Optional[tuple[float, ...]] = field(default=None, repr=False, compare=False)
    iqm_ci: str = "t"
    by_design: bool = False

    def confidence_interval(self, level: Optional[float] = None) -> ConfidenceInterval:
        """The confidence interval of the standard deviation at ``level`` (default: :attr:`level`).

        Bonett's by default; ``std_ci="chi2"`` the chi-square interval; ``std_ci="bootstrap"`` the BCa bootstrap
        with the stored :attr:`seed`, so repeated calls give the same interval. NaN where :attr:`std_note` says
        that no interval holds (fewer than 3 distinct values, or most runs equal and one or two apart). A
        description built from summary numbers (no :attr:`values`) gives the chi-square interval.

        Example:
            >>> describe([1.0, 2.0, 3.0]).confidence_interval(0.9).high > 1.0
            True
        """
        level = self.level if level is None else level
        if self.by_design and self.n >= 2 and self.range == 0:
            check_ci_level(level)
            return ConfidenceInterval(0.0, 0.0)
        if self.std_note:
            check_ci_level(level)
            return ConfidenceInterval(math.nan, math.nan)
        if self.std_ci == "bonett" and self.values is not None:
            check_ci_level(level)
            low, high = bonett_std_interval(np.asarray(self.values, dtype=np.float64), level)
            return ConfidenceInterval(float(low), float(high))
        if self.std_ci == "bootstrap":
            check_ci_level(level)
            return bootstrap_std_interval(self.values or (), self.ddof, level, self.n_resamples, self.seed)
        sample_std = self.std
        if self.ddof == 0 and self.n >= 2:
            sample_std = self.std * math.sqrt(self.n / (self.n - 1))
        return std_confidence_interval(sample_std, self.n, level)

    @property
    def std_note(self) -> str:
        """``""`` when the std's interval holds, else why not: "cannot tell the std from N runs with only K
        distinct values" (:func:`~deviate_cb.stats.precision.std_interval_note`); ``""`` without :attr:`values`.

        Example:
            >>> describe([0.0, 0.0, 0.0, 0.0, 0.0, 0.1]).std_note
            'cannot tell the std from 6 runs with only 2 distinct values'
        """
        if self.values is None or (self.by_design and self.n >= 2 and self.range == 0):
            return ""
        return std_interval_note(self.values)

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

    def iqm_confidence_interval(self, level: Optional[float] = None) -> ConfidenceInterval:
        """The interval of the IQM at ``level`` (default: :attr:`level`): :func:`~deviate_cb.stats.iqm.iqm` of
        :attr:`values` with one stratum.

        ``iqm_ci="t"`` (the default): Yuen's trimmed-mean t interval (Student's t interval of the mean for fewer
        than 4 runs; NaN for fewer than 2). ``iqm_ci="bootstrap"``: the percentile bootstrap with
        :attr:`n_resamples` and :attr:`seed`, so repeated calls give the same interval. NaN without values.

        Example:
            >>> d = describe([0.80, 0.84, 0.83, 0.86, 0.82, 0.85, 0.60, 0.84], rng=0)
            >>> d.iqm_confidence_interval(0.9) == d.iqm_confidence_interval(0.9)
            True
        """
        level = self.level if level is None else level
        check_ci_level(level)
        if not self.values:
            return ConfidenceInterval(math.nan, math.nan)
        method = "t" if self.iqm_ci == "t" else "bootstrap"
        result = iqm_result(self.values, level=level, n_resamples=self.n_resamples, rng=self.seed, method=method)
        low, high = result.confidence_interval(level)
        return ConfidenceInterval(low, high)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field and the three intervals at :attr:`level` (NaN becomes ``None``).

        Example:
            >>> out = describe([1.0, 2.0, 3.0]).to_dict()
            >>> out["std"], out["median"], out["std_ci"], round(out["mean_ci_high"], 4)
            (1.0, 2.0, 'bonett', 4.4841)
        """
        std_low, std_high = self.confidence_interval()
        mean_low, mean_high = self.mean_confidence_interval()
        iqm_low, iqm_high = self.iqm_confidence_interval()
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
            "iqm_ci": self.iqm_ci,
            "std_ci_low": float(std_low),
            "std_ci_high": float(std_high),
            "std_note": self.std_note,
            "mean_ci_low": float(mean_low),
            "mean_ci_high": float(mean_high),
            "iqm_ci_low": float(iqm_low),
            "iqm_ci_high": float(iqm_high),
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "by_design": self.by_design,
        }
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def describe(
    values: Iterable[float],
    *,
    ddof: int = 1,
    level: float = 0.95,
    std_ci: str = "bonett",
    n_resamples: int = 9999,
    rng: Union[int, np.random.Generator, None] = None,
    iqm_ci: str = "t",
    by_design: bool = False,
) -> Description:
    """Describe the spread of one metric across runs.

    Args:
        values: One number per run (for example the per-run aggregates). NaN and Inf are left out and
            counted in ``n_nonfinite``.
        ddof: Delta degrees of freedom of the std: 1 (sample std, the default) or 0 (population std).
        level: Confidence level in (0, 1) of the default intervals (:meth:`Description.to_dict`).
        std_ci: The std's interval: ``"bonett"`` (default, Bonett 2006: its width follows the runs' kurtosis),
            ``"chi2"`` (exact for normal values only) or ``"bootstrap"`` (``scipy.stats.bootstrap``, BCa).
        n_resamples: Bootstrap resamples of the IQM's interval and, with ``std_ci="bootstrap"``, of the std's.
        rng: Seed of the bootstraps: an int, a ``numpy.random.Generator`` (one seed is drawn from it) or
            ``None`` (fresh entropy). The seed is stored, so every interval of the result is reproducible.
            The global random state is never used.
        iqm_ci: The IQM's interval: ``"t"`` (default, Yuen's trimmed-mean t interval) or ``"bootstrap"``
            (percentile bootstrap, one stratum).
        by_design: The runs are bit-identical by design (the ``control`` variant): equal runs are then std 0
            with the interval ``[0, 0]``. Otherwise equal runs are std 0 with no interval (:attr:`Description.
            std_note`): a sample of equal runs does not show that the std is 0.

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
    if iqm_ci not in IQM_CI_METHODS:
        raise ValueError(f"`iqm_ci` must be 't' or 'bootstrap'. Received: iqm_ci={iqm_ci!r}.")
    if not isinstance(by_design, bool):
        raise ValueError(f"`by_design` must be True or False. Received: by_design={by_design!r}.")
    seed = seed_of(rng)
    settings: dict[str, Any] = {
        "ddof": ddof,
        "level": float(level),
        "std_ci": std_ci,
        "n_resamples": n_resamples,
        "seed": seed,
        "by_design": by_design,
    }
    finite = array[np.isfinite(array)]
    n = int(finite.size)
    n_nonfinite = int(array.size - n)
    if n == 0:
        nan = math.nan
        return Description(
            0, nan, nan, nan, nan, nan, nan, n_nonfinite, nan, nan, nan, **settings, values=(), iqm_ci=iqm_ci
        )
    # Shift by the first value: identical runs (a `control` group) then give std exactly 0 and mean exactly
    # their value, and the subtraction loses less precision when the spread is small relative to the mean.
    shifted = finite - finite[0]
    mean = float(finite[0] + np.mean(shifted))
    std = guarded_std(shifted, ddof) if n >= 2 else math.nan
    cv = std / abs(mean) if mean != 0 and math.isfinite(std) else math.nan
    low, high = float(np.min(finite)), float(np.max(finite))
    median = float(np.median(finite))
    q75, q25 = np.percentile(finite, [75.0, 25.0])
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
        iqm_point(finite),  # as scipy.stats.trim_mean(x, 0.25)
        **settings,
        values=tuple(finite.tolist()),
        iqm_ci=iqm_ci,
    )


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
    check_ci_level(level)
    if std_ci not in STD_CI_METHODS:
        raise ValueError(f"`std_ci` must be 'bonett', 'chi2' or 'bootstrap'. Received: std_ci={std_ci!r}.")
    positive_int(n_resamples, "n_resamples")
    check_rng(rng)
    return as_vector(values, "values")
