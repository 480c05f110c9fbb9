"""Power analysis: how many runs per group detect a given difference, and the power of the runs made.

Welch's t-test (``runs_needed``, ``achieved_power``): the power is computed exactly for normal data by
:func:`~deviate_cb.stats.welch_power.welch_power`, which integrates the test's rejection probability over the
distribution of the two sample variances (the Welch-Satterthwaite degrees of freedom and the standard error
the test uses are estimated from them). The usual shortcut, the noncentral t with the degrees of freedom of the
*true* standard deviations ``s_a``, ``s_b``::

    two-sided:         P(T > t_{1-alpha/2, df}) + P(T < -t_{1-alpha/2, df}),   T ~ nct(df, effect / se)
    greater / less:    P(T > t_{1-alpha, df})
    se = sqrt(s_a^2/n_a + s_b^2/n_b),   df = se^4 / ((s_a^2/n_a)^2/(n_a-1) + (s_b^2/n_b)^2/(n_b-1))

reads low at very unequal group sizes (5.7 points at ``n = (3, 20)`` with equal spreads: 35.7% for a
simulated 41.3%; 16 points at ``n = (2, 20)``) and high by under a point at balanced sizes (0.6 points at
``n = (10, 10)``); it is not used here.

``effect`` is the size of the difference of means to detect (positive); for a one-sided test it is taken in
the tested direction, so ``"greater"`` and ``"less"`` have the same power. ``runs_needed`` is the smallest
``n`` per group (equal groups) whose power reaches ``power``, found by bisection (the power grows with n).
``detectable_effect`` inverts the power the other way: the smallest difference of means the runs made detect
with the wanted power (root finding on the effect; the power grows with it). ``power_curve`` gives the power
at several numbers of runs per group, for a "runs needed" figure.

These functions take the std they are given as the truth. A std measured on a few pilot runs is not:
:func:`power_report` (``deviate power``, the report's "runs needed") plans on its upper confidence limit with
:func:`~deviate_cb.stats.pilot.plan_runs` (the plan reaches the wanted power with 80% probability for normal
runs) and gives the expected power and the range of runs needed across the std's interval beside it.

Noether (1987) for the Mann-Whitney test (``noether_runs``): to detect ``P(A > B) = p`` with a fraction
``c`` of the runs in one group, the total is ``N = (z_{1-alpha/2} + z_{power})^2 / (12 c (1-c) (p - 1/2)^2)``;
with equal groups (``c = 1/2``) each group needs ``ceil(N / 2)`` runs.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import numpy as np

from deviate_cb.stats.describe import describe
from deviate_cb.stats.welch_power import welch_power, welch_power_function

if TYPE_CHECKING:
    from deviate_cb.stats.pilot import RunsPlan

__all__ = [
    "PowerReport",
    "achieved_power",
    "detectable_effect",
    "noether_runs",
    "power_curve",
    "power_report",
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


@dataclass(frozen=True)
class PowerReport:
    """What pilot runs say about the number of runs a comparison needs, with the std's uncertainty.

    Attributes:
        n_needed: Runs per group for Welch's t-test to detect ``effect`` with ``power``, planned on the upper
            confidence limit of the std (:func:`~deviate_cb.stats.pilot.plan_runs`; two groups: each at the
            ``sqrt(confidence)`` limit, so that both hold with ``confidence``): for normal runs it reaches
            ``power`` with probability ``confidence``.
        achieved_power: Power of the runs already made (``n_a`` and ``n_b``) at the measured std.
        std_a: Measured standard deviation (``ddof=1``) of group A.
        std_b: Of group B (``std_a`` when only one group was given).
        n_a: Finite pilot runs in group A.
        n_b: In group B (``n_a`` when only one group was given).
        effect: Difference of means to detect.
        alpha: Significance level.
        power: Wanted power.
        alternative: ``"two-sided"``, ``"greater"`` or ``"less"``.
        n_at_estimate: Runs per group at the measured std (the plan that takes it for the truth).
        confidence: The probability the plan reaches ``power`` (normal runs).
        plan: The one-group plan (expected power, the range across the std's interval); ``None`` for two groups.
        expected_power_now: The power of the runs made averaged over the std's uncertainty (one group).
    """

    n_needed: int
    achieved_power: float
    std_a: float
    std_b: float
    n_a: int
    n_b: int
    effect: float
    alpha: float
    power: float
    alternative: str = "two-sided"
    n_at_estimate: Optional[int] = None
    confidence: float = 0.8
    plan: Optional[RunsPlan] = None
    expected_power_now: float = math.nan

    def summary(self) -> str:
        """One sentence for people.

        Example:
            >>> power_report([0.851, 0.847, 0.853, 0.849, 0.856, 0.846], effect=0.005).summary()[:66]
            'To detect a difference of 0.005 at 80% power (alpha 0.05): 21 runs'
        """
        same_std, same_n = self.std_a == self.std_b, self.n_a == self.n_b
        runs = f"{self.n_a} runs you have" if same_n else f"{self.n_a} and {self.n_b} runs you have"
        head = f"To detect a difference of {self.effect:g} at {self.power:.0%} power (alpha {self.alpha:g}): "
        if self.plan is not None:
            expected = f", {self.expected_power_now:.0%} expected" if math.isfinite(self.expected_power_now) else ""
            return (
                f"{head}{self.plan.summary()}. The {runs} give {self.achieved_power:.0%} power at the measured std"
                f"{expected}. The confidence and expected powers hold for normal runs (heavier tails: optimistic)."
            )
        std = f"std {self.std_a:.2g}" if same_std else f"std {self.std_a:.2g} and {self.std_b:.2g}"
        return (
            f"{head}{self.n_needed} runs per group at the upper confidence limits of the two stds (measured {std}): at "
            f"least {self.power:.0%} power with {self.confidence:.0%} confidence for normal runs; at the measured "
            f"stds {self.n_at_estimate}. The {runs} give {self.achieved_power:.0%} power at the measured stds."
        )


def power_report(
    values_a: Iterable[float],
    values_b: Optional[Iterable[float]] = None,
    *,
    effect: float,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: str = "two-sided",
    confidence: float = 0.8,
) -> PowerReport:
    """Runs needed and power achieved, from pilot runs (one value per run; non-finite values left out).

    The runs needed are planned on the std's upper confidence limit, not on the std as if it were known (see
    :mod:`deviate_cb.stats.pilot`): from 5 runs, planning at the measured std falls short of the wanted power
    in more than half of the cases.

    Args:
        values_a: Pilot runs of group A (at least two finite values).
        values_b: Pilot runs of group B; ``None`` assumes B spreads like A and has as many runs.
        effect: Difference of means to detect (positive).
        alpha: Significance level.
        power: Wanted power.
        alternative: ``"two-sided"``, ``"greater"`` or ``"less"``.
        confidence: The probability (normal runs) that the plan reaches ``power``.

    Returns:
        A frozen :class:`PowerReport`; ``.summary()`` says it in one sentence.

    Example:
        >>> r = power_report([0.851, 0.847, 0.853, 0.849, 0.856, 0.846], effect=0.005)
        >>> r.n_needed, r.n_at_estimate, round(r.std_a, 4)
        (21, 11, 0.0038)
    """
    from deviate_cb.stats.pilot import expected_power, plan_runs, std_upper_limit

    stds, sizes = [], []
    for name, values in (("values_a", values_a), ("values_b", values_b)):
        if values is None:
            continue
        if isinstance(values, (str, bytes)):
            raise TypeError(f"`{name}` must be numbers. Received: {name}={values!r}.")
        d = describe(np.asarray(values, dtype=np.float64) if isinstance(values, np.ndarray) else values)
        if d.n < 2:
            raise ValueError(f"`{name}` must hold at least two finite values. Received: {d.n}.")
        stds.append(d.std)
        sizes.append(d.n)
    std_b = stds[-1] if len(stds) == 2 else None
    n_b = sizes[-1]
    at_estimate = runs_needed(stds[0], std_b, effect=effect, alpha=alpha, power=power, alternative=alternative)
    got = achieved_power(sizes[0], n_b, stds[0], std_b, effect=effect, alpha=alpha, alternative=alternative)
    common = (stds[0], stds[-1], sizes[0], n_b, float(effect), float(alpha), float(power), alternative)
    if std_b is None and stds[0] > 0:
        plan = plan_runs(stds[0], sizes[0], effect=effect, alpha=alpha, power=power, confidence=confidence,
                         alternative=alternative)  # fmt: skip
        if plan.runs_needed is None:
            raise ValueError(f"`effect` is too small to detect with fewer than {_MAX_RUNS} runs. Received: {effect}.")
        now = expected_power(sizes[0], n_b, stds[0], sizes[0], effect=effect, alpha=alpha, alternative=alternative)
        return PowerReport(plan.runs_needed, got, *common, at_estimate, plan.confidence, plan, now)
    each = math.sqrt(confidence)  # both limits hold with probability `confidence`
    upper_a = std_upper_limit(stds[0], sizes[0], each)
    upper_b = std_upper_limit(stds[-1], n_b, each)
    if upper_a == 0 and upper_b == 0:
        n = 2
    else:
        n = runs_needed(upper_a, upper_b, effect=effect, alpha=alpha, power=power, alternative=alternative)
    return PowerReport(n, got, *common, at_estimate, float(confidence))


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
