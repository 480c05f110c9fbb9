"""The bias of a difference estimated where a sequential study stopped, and the estimate adjusted for it.

Example:
    >>> from deviate_cb.stats.sequential import plan_looks, plan_sequential
    >>> plan = plan_sequential(plan_looks(3, 3, 2, 15))
    >>> adjusted = bias_adjusted(plan, 1.5, 1.0, 1.0)  # stopped with A-B = 1.5, both groups' std 1
    >>> 0.8 < adjusted < 1.5
    True
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from deviate_cb.stats.boundaries import welch_parts, widened
from deviate_cb.stats.stopping import null_paths

__all__ = ["bias_adjusted", "stopped_mean"]

_PATHS = 20_000


@functools.lru_cache(maxsize=32)
def _half_widths(plan: Any, sd_a: float, sd_b: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The null differences and the plan's half-widths on ``_PATHS`` normal paths with these spreads (seeded)."""
    from scipy.special import stdtrit

    rng = np.random.default_rng(np.random.SeedSequence([seed, 27, 3]))
    parts = []
    for x, y in null_paths(plan.looks, "normal", _PATHS, rng):
        diff, se, dof, skew = welch_parts(sd_a * x, sd_b * y, plan.looks)
        with np.errstate(invalid="ignore"):
            q = stdtrit(dof, 1.0 - np.array(plan.nominals) / 2.0)
            parts.append((diff, widened(q, plan.kappa * np.abs(skew) / 6.0) * se))
    return np.concatenate([d for d, _ in parts]), np.concatenate([h for _, h in parts])


def stopped_mean(plan: Any, theta: float, sd_a: float, sd_b: float, seed: int = 0) -> float:
    """The mean difference A-B where ``plan`` stops, over normal studies with true difference ``theta`` and stds
    ``sd_a``, ``sd_b`` (its bias is this less ``theta``).

    Example:
        >>> from deviate_cb.stats.sequential import plan_sequential
        >>> plan = plan_sequential(((3, 3), (6, 6), (9, 9)))
        >>> round(stopped_mean(plan, 0.0, 1.0, 1.0), 2)  # no difference: no bias, by symmetry
        0.0
    """
    null, half = _half_widths(plan, float(sd_a), float(sd_b), seed)
    diff = null + theta
    stop = np.abs(diff) > half
    if plan.effect is not None:
        stop |= np.abs(diff) + half < plan.effect
    stop[:, -1] = True
    at = np.argmax(stop, axis=1)
    return float(np.mean(diff[np.arange(at.size), at]))


def bias_adjusted(plan: Any, estimate: float, sd_a: float, sd_b: float, seed: int = 0) -> float:
    """Whitehead's (1986) bias-adjusted difference: the ``theta`` whose stopped mean is ``estimate``.

    ``sd_a``, ``sd_b``: the groups' observed standard deviations (the simulation's spreads); ``nan`` where either
    is 0 or not finite.

    Example:
        >>> from deviate_cb.stats.sequential import plan_sequential
        >>> plan = plan_sequential(((3, 3), (6, 6), (9, 9)))
        >>> abs(round(bias_adjusted(plan, 0.0, 1.0, 1.0), 2))
        0.0
    """
    if not (math.isfinite(estimate) and 0 < sd_a < math.inf and 0 < sd_b < math.inf):
        return math.nan
    n_a, n_b = plan.looks[0]
    scale = math.sqrt(sd_a**2 / n_a + sd_b**2 / n_b)  # the first look's standard error: the widest
    low, high = estimate - 10.0 * scale, estimate + 10.0 * scale
    for _ in range(50):
        mid = 0.5 * (low + high)
        if stopped_mean(plan, mid, sd_a, sd_b, seed) < estimate:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)
