"""The skewness-widened Welch test and the boundary shapes of :mod:`~deviate_cb.stats.sequential`, vectorised.

Example:
    >>> [round(p, 4) for p in boundary_nominals(((5, 5), (10, 10)), 2.0, "pocock")]
    [0.0455, 0.0455]
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["boundary_nominals", "information_fractions", "welch_parts", "widened", "widened_p"]

Looks = tuple[tuple[int, int], ...]


def welch_parts(x: np.ndarray, y: np.ndarray, looks: Looks) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The difference of means, Welch's standard error and degrees of freedom, and the skewness of the
    studentized difference ``g = (k3_A / n_A^2 - k3_B / n_B^2) / SE^3`` (``k3`` each group's unbiased third
    cumulant) at each look: four ``(paths, looks)`` arrays, from prefix sums of the values, their squares and
    cubes, each row centred on its first value (a constant group is exactly 0: standard error 0, NaN dof).

    Example:
        >>> diff, se, dof, g = welch_parts(np.array([[1.0, 2.0, 3.0]]), np.array([[2.0, 3.0, 7.0]]), ((3, 3),))
        >>> float(diff[0, 0]), round(float(diff[0, 0] / se[0, 0]), 4), round(float(dof[0, 0]), 3)  # scipy's Welch
        (-2.0, -1.2247, 2.56)
        >>> round(float(g[0, 0]), 4)  # B's right skew: A-B leans left
        -0.6889
    """
    mean_a, var_a, k3_a, n_a = _moments(x, np.array([look[0] for look in looks], dtype=np.float64))
    mean_b, var_b, k3_b, n_b = _moments(y, np.array([look[1] for look in looks], dtype=np.float64))
    part_a, part_b = var_a / n_a, var_b / n_b
    se2 = part_a + part_b
    se = np.sqrt(se2)
    with np.errstate(divide="ignore", invalid="ignore"):
        dof = se2 * se2 / (part_a * part_a / (n_a - 1.0) + part_b * part_b / (n_b - 1.0))
        skew = (k3_a / (n_a * n_a) - k3_b / (n_b * n_b)) / (se2 * se)
    skew[se2 == 0] = 0.0
    return mean_a - mean_b, se, dof, skew


def _moments(x: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean, variance and unbiased third cumulant of the first ``n`` values of each row, for each ``n``."""
    origin = x[:, :1]
    c = x - origin
    index = sizes.astype(np.intp) - 1
    s1 = np.cumsum(c, axis=1)[:, index]
    s2 = np.cumsum(c * c, axis=1)[:, index]
    s3 = np.cumsum(c * c * c, axis=1)[:, index]
    m = s1 / sizes
    sq = np.maximum(s2 - sizes * m * m, 0.0)  # sum of squared deviations
    cube = s3 - m * (3.0 * s2 - 2.0 * sizes * m * m)  # sum of cubed deviations
    k3 = np.zeros_like(cube)
    np.multiply(cube, sizes / np.maximum((sizes - 1.0) * (sizes - 2.0), 1.0), out=k3, where=(sq > 0) & (sizes > 2))
    return origin + m, sq / (sizes - 1.0), k3, sizes


def widened(q: Any, a: Any) -> Any:
    """The half-width in standard errors of the skewness-widened interval: ``q + a (2 q^2 + 1)``, where ``q`` is
    the t quantile and ``a = kappa |g| / 6`` (the Cornish-Fisher term of the studentized mean difference: Hall
    1992, *The Bootstrap and Edgeworth Expansion*, section 2.6; Johnson 1978, JASA 73:536).

    Example:
        >>> widened(2.0, 0.0), widened(2.0, 0.1)
        (2.0, 2.9)
    """
    return q + a * (2.0 * q * q + 1.0)


def widened_p(t: np.ndarray, skew: np.ndarray, dof: np.ndarray, kappa: float) -> np.ndarray:
    """The two-sided p-value of the skewness-widened test: ``2 F_t(-q*)`` with ``q*`` solving
    ``|t| = q + a (2 q^2 + 1)``, ``a = kappa |skew| / 6`` (``|t| <= a``: 1, never rejected; NaN: 1). It is below
    a level ``p`` exactly when the interval ``d +- widened(t_{dof, 1-p/2}, a) SE`` excludes 0.

    Example:
        >>> widened_p(np.array([2.9]), np.array([0.075]), np.array([1e9]), 8.0).round(4).tolist()  # q* = 2
        [0.0455]
    """
    from scipy.special import stdtr

    a = kappa * np.abs(skew) / 6.0
    excess = np.abs(t) - a
    with np.errstate(invalid="ignore"):
        q = 2.0 * excess / (1.0 + np.sqrt(np.maximum(1.0 + 8.0 * a * excess, 0.0)))  # the stable root
        p = np.where(q > 0, 2.0 * stdtr(dof, -q), 1.0)
    return np.where(np.isfinite(p), p, 1.0)


def information_fractions(looks: Looks) -> np.ndarray:
    """Each look's information ``1 / (1/n_a + 1/n_b)`` over the last look's.

    Example:
        >>> information_fractions(((3, 3), (6, 6))).tolist()
        [0.5, 1.0]
    """
    info = np.array([1.0 / (1.0 / a + 1.0 / b) for a, b in looks])
    return info / info[-1]


def boundary_nominals(looks: Looks, constant: float, boundary: str) -> tuple[float, ...]:
    """Each look's nominal two-sided level: ``2 Phi(-C / sqrt(t_k))`` (``"obf"``, O'Brien & Fleming 1979,
    Biometrics 35:549, in the spending-free form of Jennison & Turnbull 2000, ch. 2) or ``2 Phi(-C)`` at every look
    (``"pocock"``), ``t_k`` the information fraction.

    Example:
        >>> [round(p, 4) for p in boundary_nominals(((3, 3), (6, 6)), 1.977, "obf")]
        [0.0052, 0.048]
    """
    from scipy.special import ndtr

    scale = np.sqrt(information_fractions(looks)) if boundary == "obf" else np.ones(len(looks))
    return tuple(float(p) for p in 2.0 * ndtr(-constant / scale))
