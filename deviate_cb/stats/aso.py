"""Almost Stochastic Order (ASO): is A almost stochastically larger than B?

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
