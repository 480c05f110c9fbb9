"""Almost Stochastic Order (ASO): is A almost stochastically larger than B?

Implemented from the definitions in Dror, Shlomov & Reichart (2019), "Deep Dominance - How to Properly
Compare Deep Neural Models" (ACL), which builds on del Barrio, Cuesta-Albertos & Matran (2018), and in
Ulmer, Hardmeier & Frellsen (2022), "deep-significance: Easy and Meaningful Significance Testing in the Age
of Neural Networks". Larger scores are better; for a loss, pass ``-loss``.

With ``F`` the empirical CDF of A (``n`` runs), ``G`` that of B (``m`` runs), and their quantile functions
``F^-1(t) = x_(ceil(n t))`` on ``t`` in (0, 1), the *violation ratio* is the share of the squared
2-Wasserstein distance where A lies below B::

    eps_W(F, G) = integral over {t : F^-1(t) < G^-1(t)} of (F^-1(t) - G^-1(t))^2 dt
                  / integral over (0, 1) of (F^-1(t) - G^-1(t))^2 dt

``eps_W = 0``: A is stochastically larger than B (every quantile at least as high); ``eps_W = 1``: B is.
Always ``eps_W(F, G) + eps_W(G, F) = 1``. When ``F^-1 = G^-1`` everywhere (identical samples) the ratio is
0/0; it is defined here as 0.5 (neither dominates), which keeps that identity. The integrals use the
midpoint rule on ``grid_size`` points ``t_i = (i - 1/2) / grid_size`` (default 1000), exact whenever the
breakpoints ``k/n`` and ``k/m`` fall between grid points (e.g. ``grid_size`` a multiple of ``n`` and ``m``).

``epsilon_min`` is the smallest ``eps`` for which the test of ``H0: eps_W(F, G) >= eps`` rejects at level
``alpha``: a one-sided upper ``1 - alpha`` confidence bound of ``eps_W``. Resampling A (``n``) and B (``m``)
independently ``n_resamples`` times gives ``eps*``; ``sigma_hat`` is the standard deviation (``ddof=1``) of
``sqrt(n m / (n + m)) (eps* - eps_W(F_n, G_m))``, and::

    eps_min = eps_W(F_n, G_m) - sqrt((n + m) / (n m)) * sigma_hat * Phi^-1(alpha)

(``Phi^-1(alpha) < 0``, so ``eps_min >= eps_W``), clipped to [0, 1]. Decision rule (Ulmer et al. 2022):
``eps_min < threshold`` (0.2 by default) means A is almost stochastically dominant over B; ``eps_min = 0``
is full stochastic dominance, ``eps_min = 1`` no dominance at all. For the reverse question, swap the
arguments. ``confidence_interval(level)`` is the one-sided interval ``(0, eps_W - sd(eps*) Phi^-1(1 - level))``
from the same resamples, so at ``level = 1 - alpha`` its upper end is ``eps_min``. With both groups constant
every resample is the sample itself: ``epsilon_min`` is NaN and nothing is decided (``settings["note"]``).

Example:
    >>> a = [0.86, 0.87, 0.88, 0.87, 0.89, 0.86, 0.88]
    >>> b = [0.84, 0.85, 0.83, 0.86, 0.85, 0.84, 0.87]
    >>> r = almost_stochastic_order(a, b, rng=0)
    >>> round(r.settings["violation_ratio"], 3), round(r.statistic, 3), r.settings["dominant"]
    (0.0, 0.002, True)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any, Union

import numpy as np

from deviate_cb.stats._checks import positive_int, resolve_rng
from deviate_cb.stats._groups import _group
from deviate_cb.stats._results import StatResult
from deviate_cb.stats._std import is_constant

__all__ = ["almost_stochastic_order", "violation_ratio"]

RngLike = Union[int, np.random.Generator, None]
_CELLS_PER_BATCH = 2_000_000  # bounds the memory of one batch of resampled quantile functions


def violation_ratio(a: Iterable[float], b: Iterable[float], grid_size: int = 1000) -> float:
    """``eps_W``: how much A fails to be stochastically larger than B (0 = A dominates, 1 = B dominates).

    Args:
        a: Scores of A, one per run (larger is better).
        b: Scores of B.
        grid_size: Points of the midpoint grid on (0, 1).

    Returns:
        The violation ratio in [0, 1]; 0.5 when the two empirical quantile functions are identical.

    Example:
        >>> violation_ratio([0.0, 3.0], [1.0, 1.0]), violation_ratio([1.0, 1.0], [0.0, 3.0])
        (0.2, 0.8)
    """
    x, y = _validate_samples(a, b)
    grid_size = positive_int(grid_size, "grid_size")
    t = _grid(grid_size)
    return float(_ratios(_quantiles(np.sort(x), t), _quantiles(np.sort(y), t)))


def almost_stochastic_order(
    a: Iterable[float],
    b: Iterable[float],
    alpha: float = 0.05,
    threshold: float = 0.2,
    n_resamples: int = 1000,
    rng: RngLike = None,
    *,
    grid_size: int = 1000,
) -> StatResult:
    """Almost Stochastic Order: ``epsilon_min`` of A over B, and whether A is almost dominant.

    Args:
        a: Scores of A, one per run (larger is better; at least two finite values, non-finite ones left out).
        b: Scores of B.
        alpha: Significance level; ``epsilon_min`` is the upper ``1 - alpha`` confidence bound of ``eps_W``.
        threshold: A is called almost stochastically dominant when ``epsilon_min < threshold``.
        n_resamples: Bootstrap resamples of each group.
        rng: An int seed or a ``numpy.random.Generator``; ``None`` draws fresh entropy, recorded as the seed.
        grid_size: Points of the midpoint grid on (0, 1) for the quantile functions.

    Returns:
        A :class:`StatResult` with ``test="almost_stochastic_order"``, ``epsilon_min`` as ``statistic``,
        ``level = 1 - alpha``, and in ``settings``: ``violation_ratio`` (``eps_W``), ``bootstrap_std`` (of
        ``eps*``), ``dominant``, ``threshold``, ``alpha``, ``n_a``, ``n_b``, ``n_resamples``, ``grid_size``,
        ``seed``.

    Example:
        >>> r = almost_stochastic_order([1.0, 2.0, 3.0, 4.0], [11.0, 12.0, 13.0, 14.0], rng=0)
        >>> r.statistic, r.settings["dominant"]
        (1.0, False)
        >>> almost_stochastic_order([11.0, 12.0, 13.0, 14.0], [1.0, 2.0, 3.0, 4.0], rng=0).statistic
        0.0
    """
    x, y, alpha, threshold, n_resamples, grid_size = _validate_aso(a, b, alpha, threshold, n_resamples, grid_size)
    generator, seed = resolve_rng(rng)
    from statistics import NormalDist

    t = _grid(grid_size)
    eps = float(_ratios(_quantiles(np.sort(x), t), _quantiles(np.sort(y), t)))
    boot = _bootstrap_ratios(x, y, t, n_resamples, generator)
    n, m = x.size, y.size
    sigma_hat = float(np.std(math.sqrt(n * m / (n + m)) * (boot - eps), ddof=1)) if n_resamples > 1 else 0.0
    scale = math.sqrt((n + m) / (n * m)) * sigma_hat  # = sd(eps*)

    def upper(level: float) -> float:
        return min(1.0, max(0.0, eps - scale * NormalDist().inv_cdf(1.0 - level)))

    eps_min = upper(1.0 - alpha)
    both_constant = is_constant(x) and is_constant(y)
    if both_constant:  # every resample is the sample: a zero-width bound that would claim from nothing
        eps_min = math.nan
    settings: dict[str, Any] = {
        "violation_ratio": eps,
        "bootstrap_std": scale,
        "dominant": eps_min < threshold,
        "threshold": threshold,
        "alpha": alpha,
        "n_a": int(n),
        "n_b": int(m),
        "n_resamples": n_resamples,
        "grid_size": grid_size,
        "seed": seed,
    }
    if both_constant:
        settings["note"] = "both groups are constant: no spread to bootstrap, so no bound and no decision"
        return StatResult(
            "almost_stochastic_order",
            eps_min,
            level=1.0 - alpha,
            settings=settings,
            interval=lambda lv: (0.0, math.nan),
        )
    return StatResult(
        "almost_stochastic_order", eps_min, level=1.0 - alpha, settings=settings, interval=lambda lv: (0.0, upper(lv))
    )


def _grid(grid_size: int) -> np.ndarray:
    return (np.arange(grid_size) + 0.5) / grid_size


def _quantiles(sorted_values: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Empirical quantile function ``x_(ceil(n t))`` at ``t`` (along the last axis)."""
    n = sorted_values.shape[-1]
    index = np.clip(np.ceil(n * t).astype(np.int64) - 1, 0, n - 1)
    return sorted_values[..., index]


def _ratios(qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
    diff = qa - qb
    squared = diff * diff
    violated = np.where(diff < 0, squared, 0.0).sum(axis=-1)
    total = squared.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, violated / np.where(total > 0, total, 1.0), 0.5)


def _bootstrap_ratios(
    x: np.ndarray, y: np.ndarray, t: np.ndarray, n_resamples: int, generator: np.random.Generator
) -> np.ndarray:
    sx, sy = np.sort(x), np.sort(y)
    batch = max(1, _CELLS_PER_BATCH // max(x.size, y.size, t.size))
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        # Sorting resampled indices of sorted data sorts the resample.
        ix = np.sort(generator.integers(0, x.size, size=(size, x.size)), axis=1)
        iy = np.sort(generator.integers(0, y.size, size=(size, y.size)), axis=1)
        out[start : start + size] = _ratios(_quantiles(sx[ix], t), _quantiles(sy[iy], t))
    return out


def _validate_samples(a: Iterable[float], b: Iterable[float]) -> tuple[np.ndarray, np.ndarray]:
    return _group(a, "a")[0], _group(b, "b")[0]


def _validate_aso(
    a: Iterable[float], b: Iterable[float], alpha: float, threshold: float, n_resamples: int, grid_size: int
) -> tuple[np.ndarray, np.ndarray, float, float, int, int]:
    x, y = _validate_samples(a, b)
    for name, value in (("alpha", alpha), ("threshold", threshold)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 < value < 1.0:
            raise ValueError(f"`{name}` must be a number in (0, 1). Received: {name}={value!r}.")
    n_resamples = positive_int(n_resamples, "n_resamples")
    grid_size = positive_int(grid_size, "grid_size")
    return x, y, float(alpha), float(threshold), n_resamples, grid_size
