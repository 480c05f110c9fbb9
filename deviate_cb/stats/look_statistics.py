"""The test statistics of one sequential look: the skewness-widened Welch interval of the mean difference and the
Brown-Forsythe interval of the spread ratio.
"""

from __future__ import annotations

import math

import numpy as np

from deviate_cb.stats._std import guarded_var

__all__ = ["mean_look", "spread_look"]


def mean_look(x: np.ndarray, y: np.ndarray, nominal: float, kappa: float) -> tuple[float, float, float, float]:
    """The mean difference A-B, the skewness-widened Welch test's p-value and the repeated interval
    ``d +- widened(q, a) SE`` at two-sided level ``nominal`` (``kappa``: the skewness term's inflation).

    Returns:
        ``(difference, p-value, low, high)``; ``(d, nan, -inf, inf)`` when both groups are constant.

    Example:
        >>> d, p, low, high = mean_look(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 2.0]), 0.05, 0.0)
        >>> d, round(low, 3), round(high, 3)
        (1.0, -1.267, 3.267)
    """
    from scipy.special import stdtrit

    from deviate_cb.stats.boundaries import widened, widened_p

    var_a, var_b = guarded_var(x), guarded_var(y)  # equal runs have variance 0 exactly
    part_a, part_b = var_a / x.size, var_b / y.size
    se = math.sqrt(part_a + part_b)
    diff = float(np.mean(x) - np.mean(y))
    if se == 0:
        return diff, math.nan, -math.inf, math.inf
    dof = (part_a + part_b) ** 2 / (part_a**2 / (x.size - 1) + part_b**2 / (y.size - 1))
    skew = _skew(x, y, se)
    half = float(widened(float(stdtrit(dof, 1.0 - nominal / 2.0)), kappa * abs(skew) / 6.0)) * se
    pvalue = float(widened_p(np.array(diff / se), np.array(skew), np.array(dof), kappa))
    return diff, pvalue, diff - half, diff + half


def _skew(x: np.ndarray, y: np.ndarray, se: float) -> float:
    """``(k3_A / n_A^2 - k3_B / n_B^2) / SE^3``, ``k3`` the unbiased third cumulant (0 for a constant group)."""
    parts = []
    for v in (x, y):
        n = v.size
        centred = v - np.mean(v)
        k3 = n / ((n - 1) * (n - 2)) * float(np.sum(centred**3)) if n > 2 and guarded_var(v) > 0 else 0.0
        parts.append(k3 / n**2)
    return (parts[0] - parts[1]) / se**3


def spread_look(x: np.ndarray, y: np.ndarray, nominal: float) -> tuple[float, float, float, float]:
    """The ratio std(A)/std(B), Brown-Forsythe's p-value and the interval that inverts it at ``1 - nominal``."""
    from deviate_cb.stats.spread import spread_ratio

    result = spread_ratio(x, y, level=1.0 - nominal)
    low, high = result.confidence_interval()
    return float(result.statistic), float(result.pvalue), float(low), float(high)
