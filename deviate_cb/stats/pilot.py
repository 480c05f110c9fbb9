"""Plans that show their own uncertainty: runs needed from a std measured on pilot runs, not known.

Example:
    >>> plan = plan_runs(1.0, 5, effect=1.0)
    >>> plan.runs_needed, plan.runs_at_estimate, round(plan.expected_power, 2), round(plan.std_upper, 3)
    (40, 17, 0.89, 1.558)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Optional

import numpy as np

from deviate_cb.stats.power import _validate_common, detectable_effect, runs_needed
from deviate_cb.stats.welch_power import _chi2_nodes, welch_power_function

__all__ = ["RunsPlan", "assured_detectable_effect", "expected_power", "plan_runs", "std_upper_limit"]

_CONFIDENCE = 0.8  # the default: Browne's (1995) 80% upper confidence limit


def std_upper_limit(std: float, n_pilot: int, confidence: float = _CONFIDENCE) -> float:
    """The one-sided ``confidence`` upper confidence limit of sigma from a std (``ddof=1``) of ``n_pilot`` runs.

    Exact for normal runs: ``P(U >= sigma) = confidence``.

    Example:
        >>> round(std_upper_limit(1.0, 5), 4), round(std_upper_limit(1.0, 50), 4)
        (1.5576, 1.0995)
    """
    n_pilot, confidence = _check_pilot(n_pilot, confidence)
    from scipy.special import chdtri

    k = n_pilot - 1
    return float(std) * math.sqrt(k / float(chdtri(k, confidence)))


def expected_power(
    n_a: int,
    n_b: int,
    std: float,
    n_pilot: int,
    *,
    effect: float,
    alpha: float = 0.05,
    alternative: str = "two-sided",
) -> float:
    """Power of Welch's t-test with ``n_a`` and ``n_b`` runs, averaged over the std's uncertainty.

    Both groups are taken to spread alike, with ``sigma = std / sqrt(Y)``, ``Y ~ chi2_{n_pilot-1} / (n_pilot-1)``.

    Example:
        >>> round(expected_power(17, 17, 1.0, 5, effect=1.0), 3), round(expected_power(17, 17, 1.0, 10**6, effect=1.0), 3)
        (0.685, 0.806)
    """  # noqa: E501
    std, _, effect, alpha, _, alternative = _validate_common(std, None, effect, alpha, 0.5, alternative)
    n_pilot, _ = _check_pilot(n_pilot, _CONFIDENCE)
    for name, n in (("n_a", n_a), ("n_b", n_b)):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 2:
            raise ValueError(f"`{name}` must be an integer of at least 2. Received: {name}={n!r}.")
    if std == 0.0:
        return 1.0
    y, w = _chi2_nodes(n_pilot - 1)
    curve = welch_power_function(int(n_a), int(n_b), 1.0, 1.0, alpha, alternative)
    return float(w @ curve(effect * np.sqrt(y) / std))  # the power at sigma depends on effect / sigma only


@dataclass(frozen=True)
class RunsPlan:
    """Runs per group for Welch's t-test, planned on a std measured on ``n_pilot`` runs.

    Attributes:
        runs_needed: The plan: runs per group at :attr:`std_upper` (``None`` above 10^9).
        confidence: The probability (normal runs) that :attr:`runs_needed` reaches :attr:`power`.
        expected_power: The power of :attr:`runs_needed` averaged over the std's uncertainty.
        runs_at_estimate: Runs per group at the measured std (the plan that treats it as the truth).
        expected_power_at_estimate: Its expected power (below :attr:`power`: the shortfall of that plan).
        runs_low, runs_high: Runs per group at the ends of the std's interval (``std_low``, ``std_high``).
        std, std_upper, std_low, std_high: The measured std, its upper confidence limit and its interval.
        n_pilot, effect, alpha, power, alternative: What was planned.
    """

    runs_needed: Optional[int]
    confidence: float
    expected_power: float
    runs_at_estimate: Optional[int]
    expected_power_at_estimate: float
    runs_low: Optional[int]
    runs_high: Optional[int]
    std: float
    std_upper: float
    std_low: float
    std_high: float
    n_pilot: int
    effect: float
    alpha: float
    power: float
    alternative: str = "two-sided"

    def summary(self) -> str:
        """The plan in words, with its uncertainty.

        Example:
            >>> plan_runs(1.0, 5, effect=1.0).summary()[:98]
            '40 runs per group (at the 80% upper confidence limit of the std, 1.56 for a measured 1 from 5 runs'
        """
        if self.runs_needed is None:
            return f"more than 10^9 runs per group at the {self.confidence:.0%} upper confidence limit of the std"
        span = _span(self.runs_low, self.runs_high)
        return (
            f"{self.runs_needed} runs per group (at the {self.confidence:.0%} upper confidence limit of the std, "
            f"{self.std_upper:.3g} for a measured {self.std:.3g} from {self.n_pilot} runs): at least "
            f"{self.power:.0%} power with {self.confidence:.0%} confidence, {self.expected_power:.0%} expected; at the "
            f"measured std {_runs(self.runs_at_estimate)} (only {self.expected_power_at_estimate:.0%} expected), "
            f"{span} across the std's interval [{self.std_low:.3g}, {self.std_high:.3g}]"
        )


def plan_runs(
    std: float,
    n_pilot: int,
    *,
    effect: float,
    alpha: float = 0.05,
    power: float = 0.8,
    confidence: float = _CONFIDENCE,
    std_interval: Optional[tuple[float, float]] = None,
    level: float = 0.95,
    alternative: str = "two-sided",
) -> RunsPlan:
    """Runs per group to detect ``effect`` with ``power``, planned on the ``confidence`` upper limit of the std.

    Args:
        std: The std (``ddof=1``) measured on the pilot runs (both groups taken to spread alike).
        n_pilot: The pilot runs it was measured on (at least 2).
        effect, alpha, power, alternative: As for :func:`~deviate_cb.stats.power.runs_needed`.
        confidence: The probability (normal runs) that the plan reaches ``power``; in (0, 1).
        std_interval: The std's interval the range is given at (the one printed beside the std); ``None``: the
            chi-square interval at ``level``.
        level: Of the chi-square interval when ``std_interval`` is ``None``.

    Example:
        >>> p = plan_runs(0.0034, 6, effect=0.005)
        >>> p.runs_needed, p.runs_at_estimate, (p.runs_low, p.runs_high), round(p.expected_power, 2)
        (17, 9, (5, 45), 0.89)
    """
    if not isinstance(std, bool) and isinstance(std, numbers.Real) and std == 0:
        raise ValueError("`std` must be positive (with no spread any difference is detected). Received: std=0.0.")
    std, _, effect, alpha, power, alternative = _validate_common(std, None, effect, alpha, power, alternative)
    n_pilot, confidence = _check_pilot(n_pilot, confidence)
    if std_interval is None:
        from deviate_cb.stats.intervals import std_confidence_interval

        chi2 = std_confidence_interval(std, n_pilot, level)
        low, high = float(chi2.low), float(chi2.high)
    else:
        low, high = float(std_interval[0]), float(std_interval[1])
    upper = std_upper_limit(std, n_pilot, confidence)
    kwargs = dict(effect=effect, alpha=alpha, power=power, alternative=alternative)

    def needed(s: float) -> Optional[int]:
        if not (math.isfinite(s) and s > 0):
            return 2 if s == 0 else None
        try:
            return runs_needed(s, **kwargs)  # type: ignore[arg-type]
        except ValueError:  # more than 10^9 runs per group
            return None

    n_plan, n_est = needed(upper), needed(std)

    def expected(n: Optional[int]) -> float:
        if n is None:
            return math.nan
        return expected_power(n, n, std, n_pilot, effect=effect, alpha=alpha, alternative=alternative)

    return RunsPlan(n_plan, confidence, expected(n_plan), n_est, expected(n_est), needed(low), needed(high), std,
                    upper, low, high, n_pilot, effect, alpha, power, alternative)  # fmt: skip


def assured_detectable_effect(
    n_a: int,
    n_b: int,
    std: float,
    n_pilot: int,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    confidence: float = _CONFIDENCE,
    alternative: str = "two-sided",
) -> float:
    """The smallest difference ``n_a`` and ``n_b`` runs detect with ``power``, at the std's upper limit: with
    probability ``confidence`` (normal runs) the runs made detect it with at least that power.

    Example:
        >>> round(assured_detectable_effect(10, 10, 1.0, 10), 3), round(detectable_effect(10, 10, 1.0), 3)
        (1.723, 1.332)
    """
    upper = std_upper_limit(std, n_pilot, confidence)
    return detectable_effect(n_a, n_b, upper, alpha=alpha, power=power, alternative=alternative)


def _check_pilot(n_pilot: object, confidence: object) -> tuple[int, float]:
    if isinstance(n_pilot, bool) or not isinstance(n_pilot, numbers.Integral) or n_pilot < 2:
        raise ValueError(f"`n_pilot` must be an integer of at least 2. Received: n_pilot={n_pilot!r}.")
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"`confidence` must be a number in (0, 1). Received: confidence={confidence!r}.")
    return int(n_pilot), float(confidence)


def _runs(n: Optional[int]) -> str:
    return "more than 10^9" if n is None else str(n)


def _span(low: Optional[int], high: Optional[int]) -> str:
    if low is not None and low == high:
        return f"{low}"
    return f"{_runs(low)} to {_runs(high)}"
