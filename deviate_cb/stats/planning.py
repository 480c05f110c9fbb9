"""What pilot runs say about the runs a comparison needs: the answer of ``deviate power`` and of the report's
"runs needed", planned on the std's upper confidence limit with Welch's exact power.

Example:
    >>> power_report([0.851, 0.847, 0.853, 0.849, 0.856, 0.846], effect=0.005).n_needed
    21
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

import numpy as np

from deviate_cb.stats.describe import describe
from deviate_cb.stats.pilot import RunsPlan, expected_power, plan_runs, std_upper_limit
from deviate_cb.stats.power import _MAX_RUNS, achieved_power, runs_needed

__all__ = ["PowerReport", "power_report"]


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
