"""How much of the spread across runs implementation noise alone explains.

Example:
    >>> r = decompose([0.80, 0.82, 0.81, 0.83], [0.78, 0.84, 0.80, 0.86])
    >>> round(r.statistic, 3), [round(v, 3) for v in r.confidence_interval()], r.settings["method"]
    (0.354, [0.116, 1.078], 'bonett')
    >>> round(r.settings["variance_share"], 3), [round(v, 3) for v in variance_share_interval(r)]
    (0.125, [0.013, 1.161])
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Optional, Union

import numpy as np

from deviate_cb.stats._checks import check_rng, positive_int, resolve_rng
from deviate_cb.stats._groups import _group
from deviate_cb.stats._results import StatResult, check_level
from deviate_cb.stats._std import guarded_std, guarded_std_along, n_distinct

__all__ = [
    "ABOVE_ONE_NOTE",
    "DECOMPOSE_METHODS",
    "bonett_share_interval",
    "decompose",
    "f_share_interval",
    "share_kurtoses",
    "variance_share_interval",
]

RngLike = Union[int, np.random.Generator, None]
DECOMPOSE_METHODS = ("bonett", "F", "BCa", "percentile", "basic")
_MIN_BONETT = 4  # runs per group below which no kurtosis can be estimated: the F interval is used
ABOVE_ONE_NOTE = (
    "the impl runs spread more than the algo+impl runs (the interval lies above 1), which a sound set-up rules "
    "out: implementation noise is part of the seed runs' spread. Check that both variants ran on the same machines "
    "and software, that the variants are not mislabelled, and that the impl runs did not all take one unlucky seed"
)


def decompose(
    impl: Iterable[float],
    algo_impl: Iterable[float],
    level: float = 0.95,
    n_resamples: int = 1000,
    rng: RngLike = None,
    *,
    method: str = "bonett",
) -> StatResult:
    """Share of the across-run spread due to implementation noise: the std ratio ``std(impl) / std(algo_impl)``.

    Args:
        impl: One value per run from runs that share every seed (or ``control`` runs).
        algo_impl: One value per run from runs with different seeds (or ``algo`` runs).
        level: Confidence level of the default interval.
        n_resamples: Bootstrap resamples (bootstrap methods only).
        rng: An int seed or a ``numpy.random.Generator``; ``None`` draws fresh entropy, recorded as the seed
            (bootstrap methods only).
        method: ``"bonett"`` (the default: the kurtosis-adjusted log-ratio interval, see the module's notes),
            ``"F"`` (exact for normal runs only) or a bootstrap interval, ``"BCa"``, ``"percentile"``, ``"basic"``.

    Returns:
        A :class:`StatResult` with ``test="decompose"``, the std ratio as ``statistic`` (NaN, with a ``note``
        setting, when ``algo_impl`` has no spread), for ``"bonett"`` and ``"F"`` the two-sided p-value of equal
        spreads, and ``std_impl``, ``std_algo_impl``, ``variance_share``, group sizes, ``method``,
        ``exceeds_one``, ``above_one`` (``"bonett"``/``"F"``), and for the bootstraps ``n_resamples`` and
        ``seed`` in ``settings``.

    Raises:
        ValueError: A group has fewer than two finite values, or an argument is out of range.

    Example:
        >>> r = decompose([1.0, 2.0, 3.0], [0.0, 2.0, 4.0])
        >>> r.statistic, r.settings["variance_share"], r.settings["method"], r.confidence_interval().high > 1
        (0.5, 0.25, 'F', True)
        >>> decompose([1.0, 2.0, 3.0], [0.0, 2.0, 4.0], rng=1, method="BCa").settings["seed"]
        1
    """
    x, y, level, n_resamples, method = _validate_decompose(impl, algo_impl, level, n_resamples, method)
    std_x, std_y = guarded_std(x), guarded_std(y)
    if method == "bonett" and min(x.size, y.size) < _MIN_BONETT:
        method = "F"  # no kurtosis to estimate from fewer than 4 runs
    settings: dict[str, Any] = {
        "std_impl": std_x,
        "std_algo_impl": std_y,
        "n_impl": int(x.size),
        "n_algo_impl": int(y.size),
        "ddof": 1,
        "method": method,
    }
    if method in ("F", "bonett"):
        check_rng(rng)
    else:
        generator, seed = resolve_rng(rng)
        settings.update(n_resamples=n_resamples, seed=seed)
    if std_y == 0.0:
        settings["variance_share"] = math.nan
        settings["note"] = "`algo_impl` has no spread (all runs equal), so the share is undefined."
        return StatResult("decompose", math.nan, level=level, settings=settings, interval=lambda lv: (math.nan,) * 2)
    share = std_x / std_y
    settings["variance_share"] = share**2
    settings["exceeds_one"] = share > 1.0
    if share == 0.0:  # identical narrow runs: every interval is [0, 0]
        settings["above_one"] = False
        settings["note"] = (
            f"the {x.size} impl runs are identical: no implementation noise in the runs made; noise that shows in a "
            "few runs only cannot be ruled out by them"
        )
        pvalue = 0.0 if method in ("F", "bonett") else math.nan
        return StatResult("decompose", share, pvalue, level, settings, interval=lambda lv: (0.0, 0.0))
    if method in ("F", "bonett"):
        return _parametric(x, y, share, level, method, settings)
    first = _bootstrap(x, y, level, n_resamples, method, generator, None)

    def interval(new_level: float) -> tuple[float, float]:
        res = first if new_level == level else _bootstrap(x, y, new_level, 0, method, None, first)
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    return StatResult("decompose", share, level=level, settings=settings, interval=interval)


def _parametric(
    x: np.ndarray, y: np.ndarray, share: float, level: float, method: str, settings: dict[str, Any]
) -> StatResult:
    """The F or Bonett result: its interval at any level and the two-sided p-value of equal spreads."""
    from scipy.special import fdtr, ndtr

    if method == "F":
        d1, d2 = x.size - 1, y.size - 1
        cdf = float(fdtr(d1, d2, share**2))
        pvalue = min(1.0, 2.0 * min(cdf, 1.0 - cdf))

        def interval(new_level: float) -> tuple[float, float]:
            low, high, _ = f_share_interval(np.array(share), x.size, y.size, new_level, cap=False)
            return float(low), float(high)

    else:
        kurt_x, kurt_y = (float(k) for k in share_kurtoses(x, y))
        log_ratio, se = float(np.log(share**2)), _log_se(kurt_x, kurt_y, x.size, y.size)
        z_half = _adjusted_z(log_ratio, se, x.size, y.size)
        pvalue = float(2.0 * ndtr(-abs(z_half)))

        def interval(new_level: float) -> tuple[float, float]:
            low, high = bonett_share_interval(share, kurt_x, kurt_y, x.size, y.size, new_level)
            return float(low), float(high)

        if n_distinct(x) < x.size:
            settings["few_runs_note"] = (
                "some impl runs are bit-identical: implementation noise that shows in a few runs only; no interval "
                "holds at its level there from tens of runs (simulated: 84-96% at 95%), so this one is approximate"
            )
    low = interval(level)[0]
    settings["above_one"] = bool(low > 1.0)
    if settings["above_one"]:
        settings["note"] = ABOVE_ONE_NOTE
    return StatResult("decompose", share, pvalue, level, settings, interval)


def share_kurtoses(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each group's kurtosis for :func:`bonett_share_interval`, along the last axis (one pair per row): the larger
    of Bonett's pooled estimate ``(n + m) sum((v - median)^4) / (sum((v - mean)^2))^2`` over both groups and
    the group's own (:func:`~deviate_cb.stats.intervals.std_kurtosis`).

    Example:
        >>> [round(float(k), 3) for k in share_kurtoses(np.array([1.0, 2.0, 3.0, 9.0]), np.array([0.0, 2.0, 4.0, 6.0]))]
        [4.769, 4.53]
    """
    from deviate_cb.stats.intervals import std_kurtosis

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n, m = x.shape[-1], y.shape[-1]
    med_x, med_y = np.median(x, axis=-1, keepdims=True), np.median(y, axis=-1, keepdims=True)
    fourth = np.sum((x - med_x) ** 4, axis=-1) + np.sum((y - med_y) ** 4, axis=-1)
    squares = np.sum((x - x.mean(axis=-1, keepdims=True)) ** 2, axis=-1)
    squares = squares + np.sum((y - y.mean(axis=-1, keepdims=True)) ** 2, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        pooled = (n + m) * fourth / squares**2
    return np.fmax(pooled, std_kurtosis(x)), np.fmax(pooled, std_kurtosis(y))


def _log_se(kurt_x: float, kurt_y: float, n: int, m: int) -> float:
    return math.sqrt(max(kurt_x - (n - 3.0) / n, 0.0) / (n - 1.0) + max(kurt_y - (m - 3.0) / m, 0.0) / (m - 1.0))


def _adjusted_z(log_ratio: float, se: float, n: int, m: int) -> float:
    """The smallest z at which the interval reaches 1 (the test of equal spreads that the interval inverts):
    ``|ln(c(z) s_n^2 / s_w^2)| = z se``, found on a grid of z and refined by Brent's method; ``inf`` where the
    interval excludes 1 at every z the small-sample adjustment allows (up to ``z = 8.5``, p about 1e-17)."""
    from scipy.optimize import brentq

    def excess(z: Any) -> Any:  # distance of the nearer end from 1 on the log scale, at this z
        return np.abs(log_ratio + np.log((n / (n - z)) / (m / (m - z)))) - z * se

    grid = np.linspace(0.0, min(8.5, min(n, m) - 1e-6), 800)
    below = np.flatnonzero(excess(grid) <= 0.0)
    if below.size == 0:
        return math.inf
    if below[0] == 0:
        return 0.0
    return float(brentq(excess, grid[below[0] - 1], grid[below[0]], xtol=1e-13))


def bonett_share_interval(
    share: Any, kurt_narrow: Any, kurt_wide: Any, n_narrow: int, n_wide: int, level: float
) -> tuple[Any, Any]:
    """The kurtosis-adjusted (Bonett 2006) interval of ``sigma_narrow / sigma_wide`` from the std ratio
    (vectorised over ``share`` and the kurtoses, e.g. from :func:`share_kurtoses`).

    Returns ``(low, high)``; ``(0, inf)`` where a group has no more runs than the normal quantile (the
    small-sample adjustment is undefined).

    Example:
        >>> [round(float(v), 4) for v in bonett_share_interval(0.5, 3.0, 3.0, 10, 10, 0.95)]
        [0.2481, 1.0075]
    """
    from scipy.special import ndtri

    z = float(ndtri(1.0 - (1.0 - level) / 2.0))
    share = np.asarray(share, dtype=np.float64)
    if min(n_narrow, n_wide) <= z:
        return np.zeros_like(share), np.full_like(share, np.inf)
    c = (n_narrow / (n_narrow - z)) / (n_wide / (n_wide - z))
    part = lambda k, n: np.maximum(np.asarray(k, dtype=np.float64) - (n - 3.0) / n, 0.0) / (n - 1.0)  # noqa: E731
    half = z * np.sqrt(part(kurt_narrow, n_narrow) + part(kurt_wide, n_wide))
    with np.errstate(divide="ignore"):
        centre = np.log(c * share**2)
    return np.exp(0.5 * (centre - half)), np.exp(0.5 * (centre + half))


def variance_share_interval(result: StatResult, level: Optional[float] = None) -> tuple[float, float]:
    """The interval of the variance share ``sigma_impl^2 / sigma_algo_impl^2``: the std ratio's, squared.

    Example:
        >>> variance_share_interval(decompose([1.0, 2.0, 3.0], [0.0, 2.0, 4.0]), 0.5)[0] < 0.25
        True
    """
    low, high = result.confidence_interval(level)
    return float(low) ** 2, float(high) ** 2


def f_share_interval(
    share: np.ndarray, n_narrow: int, n_wide: int, level: float, cap: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The F interval of ``sigma_narrow / sigma_wide`` from the share ``s_n / s_w`` (vectorised).

    Returns ``(low, high, capped)``: ``share / sqrt(F_{1-a/2})`` and ``share / sqrt(F_{a/2})`` with
    ``F(n_narrow - 1, n_wide - 1)`` quantiles, with ``cap`` each end at most 1, and where the upper end
    exceeded 1. :func:`decompose` does not cap (a capped interval can exclude its own estimate).

    Example:
        >>> low, high, capped = f_share_interval(np.array(0.5), 10, 10, 0.95, cap=False)
        >>> round(float(low), 4), round(float(high), 4), bool(capped)
        (0.2492, 1.0032, True)
    """
    from scipy.special import fdtri

    alpha = 1.0 - level
    d1, d2 = n_narrow - 1, n_wide - 1
    share = np.asarray(share, dtype=np.float64)
    low = share / np.sqrt(fdtri(d1, d2, 1.0 - alpha / 2.0))
    high = share / np.sqrt(fdtri(d1, d2, alpha / 2.0))
    capped = high > 1.0
    if not cap:
        return low, high, capped
    return np.minimum(low, 1.0), np.minimum(high, 1.0), capped


def _std_ratio(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """``std(x) / std(y)`` along ``axis`` (the bootstrap's resamples), a resample of identical values with std 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return guarded_std_along(x, axis=axis) / guarded_std_along(y, axis=axis)


def _bootstrap(
    x: np.ndarray,
    y: np.ndarray,
    level: float,
    n_resamples: int,
    method: str,
    generator: Optional[np.random.Generator],
    previous: Any,
) -> Any:
    import warnings

    from scipy import stats

    with warnings.catch_warnings():
        # A degenerate bootstrap distribution (tiny groups) gives a NaN interval; NaN says it, not a warning.
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", getattr(stats, "DegenerateDataWarning", RuntimeWarning))
        return stats.bootstrap(
            (x, y),
            _std_ratio,
            n_resamples=n_resamples,
            vectorized=True,
            paired=False,
            confidence_level=level,
            method=method,
            bootstrap_result=previous,
            rng=generator,
        )


def _validate_decompose(
    impl: Iterable[float], algo_impl: Iterable[float], level: float, n_resamples: int, method: str
) -> tuple[np.ndarray, np.ndarray, float, int, str]:
    groups = [_group(impl, "impl")[0], _group(algo_impl, "algo_impl")[0]]
    level = check_level(level)
    n_resamples = positive_int(n_resamples, "n_resamples")
    if method not in DECOMPOSE_METHODS:
        raise ValueError(f"`method` must be one of {DECOMPOSE_METHODS}. Received: method={method!r}.")
    return groups[0], groups[1], level, int(n_resamples), method
