"""Power analysis: how many runs per group detect a given difference, and the power of the runs made.

Example:
    >>> runs_needed(1.0, effect=1.0)
    17
    >>> round(achieved_power(17, 17, 1.0, effect=1.0), 3)
    0.806
    >>> round(achieved_power(3, 20, 1.0, effect=1.5), 3)
    0.413
    >>> noether_runs(0.75)
    21
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Optional

import numpy as np

from deviate_cb.stats.welch_power import welch_power, welch_power_function

__all__ = [
    "achieved_power",
    "detectable_effect",
    "noether_runs",
    "power_curve",
    "runs_needed",
]

_ALTERNATIVES = ("two-sided", "greater", "less")
_MAX_RUNS = 10**9


def achieved_power(
    n_a: int,
    n_b: int,
    std_a: float,
    std_b: Optional[float] = None,
    *,
    effect: float,
    alpha: float = 0.05,
    alternative: str = "two-sided",
) -> float:
    """Power of Welch's t-test with the runs already made (exact for normal data; see the module's notes).

    Args:
        n_a: Runs in group A (at least 2).
        n_b: Runs in group B (at least 2).
        std_a: Standard deviation (``ddof=1``) of group A.
        std_b: Standard deviation of group B; ``None`` uses ``std_a``.
        effect: Difference of means to detect (positive).
        alpha: Significance level.
        alternative: ``"two-sided"``, ``"greater"`` or ``"less"``.

    Returns:
        The probability that the test rejects when the true difference is ``effect``.

    Example:
        >>> round(achieved_power(10, 10, 0.0034, effect=0.005), 2)
        0.87
    """
    std_a, std_b, effect, alpha, _, alternative = _validate_common(std_a, std_b, effect, alpha, 0.5, alternative)
    for name, n in (("n_a", n_a), ("n_b", n_b)):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 2:
            raise ValueError(f"`{name}` must be an integer of at least 2. Received: {name}={n!r}.")
    return welch_power(int(n_a), int(n_b), std_a, std_b, effect, alpha, alternative)


def runs_needed(
    std_a: float,
    std_b: Optional[float] = None,
    *,
    effect: float,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: str = "two-sided",
) -> int:
    """Smallest number of runs per group for Welch's t-test to detect ``effect`` with the given power.

    Args:
        std_a: Standard deviation (``ddof=1``) of group A, e.g. measured on pilot runs.
        std_b: Standard deviation of group B; ``None`` uses ``std_a``.
        effect: Difference of means to detect (positive).
        alpha: Significance level.
        power: Wanted power, in (0, 1).
        alternative: ``"two-sided"``, ``"greater"`` or ``"less"``.

    Returns:
        ``n`` runs per group (at least 2): ``achieved_power(n, n, ...) >= power > achieved_power(n - 1, ...)``.

    Example:
        >>> runs_needed(0.0034, effect=0.005), runs_needed(0.0034, 0.0068, effect=0.005, alternative="greater")
        (9, 16)
    """
    std_a, std_b, effect, alpha, power, alternative = _validate_common(std_a, std_b, effect, alpha, power, alternative)

    def enough(n: int) -> bool:
        return welch_power(n, n, std_a, std_b, effect, alpha, alternative) >= power

    if enough(2):
        return 2
    low, high = 2, 4  # enough(low) is False; grow `high` until enough(high).
    while not enough(high):
        if high >= _MAX_RUNS:
            raise ValueError(f"`effect` is too small to detect with fewer than {_MAX_RUNS} runs. Received: {effect}.")
        low, high = high, min(2 * high, _MAX_RUNS)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


def detectable_effect(
    n_a: int,
    n_b: int,
    std_a: float,
    std_b: Optional[float] = None,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: str = "two-sided",
) -> float:
    """Smallest difference of means that Welch's t-test detects with ``power`` from ``n_a`` and ``n_b`` runs.

    The inverse of :func:`achieved_power` in ``effect`` (exact for normal data), found with Brent's method on
    :func:`~deviate_cb.stats.welch_power.welch_power_function` (a few milliseconds).

    Args:
        n_a: Runs in group A (at least 2).
        n_b: Runs in group B (at least 2).
        std_a: Standard deviation (``ddof=1``) of group A.
        std_b: Standard deviation of group B; ``None`` uses ``std_a``.
        alpha: Significance level.
        power: Wanted power, in (alpha, 1) for a two-sided test, (alpha, 1) for a one-sided one.
        alternative: ``"two-sided"``, ``"greater"`` or ``"less"``.

    Returns:
        ``effect`` with ``achieved_power(n_a, n_b, std_a, std_b, effect=effect, ...) == power`` (to ``1e-10``).

    Example:
        >>> effect = detectable_effect(10, 10, 1.0)
        >>> round(effect, 4), round(achieved_power(10, 10, 1.0, effect=effect), 6)
        (1.3321, 0.8)
    """
    std_a, std_b, _, alpha, power, alternative = _validate_common(std_a, std_b, 1.0, alpha, power, alternative)
    n_a, n_b = _check_runs(n_a, "n_a"), _check_runs(n_b, "n_b")
    if power <= alpha:
        raise ValueError(
            f"`power` must be above `alpha` (a test rejects with probability alpha at no effect). Received: "
            f"power={power!r}, alpha={alpha!r}."
        )
    from scipy.optimize import brentq

    curve = welch_power_function(n_a, n_b, std_a, std_b, alpha, alternative)
    sigma = math.sqrt(std_a**2 / n_a + std_b**2 / n_b)

    def gap(effect: float) -> float:
        return float(curve(np.array([effect]))[0]) - power

    high = 4.0 * sigma
    while gap(high) < 0:  # the power tends to 1 as the effect grows
        high *= 2.0
    return float(brentq(gap, 0.0, high, xtol=1e-12 * sigma, rtol=1e-10))


def power_curve(
    std_a: float,
    std_b: Optional[float],
    effect: float,
    ns: Iterable[int],
    alpha: float = 0.05,
    alternative: str = "two-sided",
) -> np.ndarray:
    """Power of Welch's t-test to detect ``effect`` with ``n`` runs in each group, for each ``n`` in ``ns``.

    Args:
        std_a: Standard deviation (``ddof=1``) of group A.
        std_b: Standard deviation of group B; ``None`` uses ``std_a``.
        effect: Difference of means to detect (positive).
        ns: Runs per group (each at least 2).
        alpha: Significance level.
        alternative: ``"two-sided"``, ``"greater"`` or ``"less"``.

    Returns:
        A float array of the powers, one per ``n`` (``achieved_power(n, n, ...)``).

    Example:
        >>> [round(float(p), 3) for p in power_curve(1.0, None, 1.0, [5, 17, 40])]
        [0.265, 0.806, 0.993]
    """
    std_a, std_b, effect, alpha, _, alternative = _validate_common(std_a, std_b, effect, alpha, 0.5, alternative)
    if isinstance(ns, (str, bytes)):
        raise TypeError(f"`ns` must be integers. Received: ns={ns!r}.")
    sizes = [_check_runs(n, "ns") for n in ns]
    return np.array([welch_power(n, n, std_a, std_b, effect, alpha, alternative) for n in sizes], dtype=np.float64)


def _check_runs(n: object, name: str) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 2:
        raise ValueError(f"`{name}` must be an integer of at least 2. Received: {name}={n!r}.")
    return int(n)


def noether_runs(p_improvement: float, alpha: float = 0.05, power: float = 0.8, alternative: str = "two-sided") -> int:
    """Noether's (1987) runs per group for the Mann-Whitney test to detect ``P(A > B) = p_improvement``.

    Args:
        p_improvement: The probability of improvement to detect, in (0, 1) and not 0.5.
        alpha: Significance level.
        power: Wanted power, in (0, 1).
        alternative: ``"two-sided"`` uses ``z_{1-alpha/2}``; ``"greater"``/``"less"`` use ``z_{1-alpha}``.

    Returns:
        ``ceil(N / 2)`` with ``N = (z_a + z_{power})^2 / (3 (p - 1/2)^2)`` (equal groups, ``c = 1/2``).

    Example:
        >>> noether_runs(0.75), noether_runs(0.6), noether_runs(0.25, alpha=0.01, power=0.9)
        (21, 131, 40)
    """
    _, _, _, alpha, power, alternative = _validate_common(1.0, None, 1.0, alpha, power, alternative)
    if (
        isinstance(p_improvement, bool)
        or not isinstance(p_improvement, numbers.Real)
        or not 0.0 < p_improvement < 1.0
        or p_improvement == 0.5
    ):
        raise ValueError(f"`p_improvement` must be in (0, 1) and not 0.5. Received: p_improvement={p_improvement!r}.")
    from statistics import NormalDist

    z = NormalDist().inv_cdf
    z_alpha = z(1.0 - alpha / 2.0) if alternative == "two-sided" else z(1.0 - alpha)
    c = 0.5
    total = (z_alpha + z(power)) ** 2 / (12.0 * c * (1.0 - c) * (float(p_improvement) - 0.5) ** 2)
    return max(2, math.ceil(total / 2.0))


def _validate_common(
    std_a: float, std_b: Optional[float], effect: float, alpha: float, power: float, alternative: str
) -> tuple[float, float, float, float, float, str]:
    def real(value: object) -> bool:
        return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)

    for name, value in (("std_a", std_a), ("std_b", std_b)):
        if value is not None and (not real(value) or value < 0):
            raise ValueError(f"`{name}` must be a non-negative number. Received: {name}={value!r}.")
    std_b = std_a if std_b is None else std_b
    if std_a == 0 and std_b == 0:
        raise ValueError(
            "`std_a` and `std_b` must not both be 0 (with no spread any difference is detected). "
            f"Received: std_a={std_a!r}, std_b={std_b!r}."
        )
    if not real(effect) or effect <= 0:
        raise ValueError(f"`effect` must be a positive number. Received: effect={effect!r}.")
    if not real(alpha) or not 0.0 < alpha < 1.0:
        raise ValueError(f"`alpha` must be a number in (0, 1). Received: alpha={alpha!r}.")
    if not real(power) or not 0.0 < power < 1.0:
        raise ValueError(f"`power` must be a number in (0, 1). Received: power={power!r}.")
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"`alternative` must be one of {_ALTERNATIVES}. Received: alternative={alternative!r}.")
    return float(std_a), float(std_b), float(effect), float(alpha), float(power), alternative
