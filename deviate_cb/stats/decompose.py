"""How much of the spread across runs implementation noise alone explains.

Runs repeated with one seed (the ``impl`` setting: only non-deterministic GPU kernels, thread scheduling and
the like vary) against runs with different seeds (``algo_impl``: initialisation, data order and the
implementation noise together). The statistic is the ratio of the sample standard deviations (``ddof=1``)::

    share = std(impl) / std(algo_impl)

A share near 1 means the seed barely matters beyond implementation noise; near 0, the seed dominates. (For
equal group sizes ``ddof=0`` gives the same ratio; ``share**2`` is the variance ratio, in ``settings``.) The
same function measures the ``control`` group (all sources fixed) against ``algo`` (only the seed varies):
``decompose(control, algo)``.

The default confidence interval (``method="F"``) is exact for normal runs: ``(s_n^2 / s_w^2) / (sigma_n^2 /
sigma_w^2)`` follows ``F(n_n - 1, n_w - 1)``, so the interval of ``rho = sigma_n / sigma_w`` is::

    [ share / sqrt(F_{1-a/2}),  share / sqrt(F_{a/2}) ],    a = 1 - level

with the upper end capped at 1: the narrow variant's noise is part of the wide variant's, so ``rho`` lies in
[0, 1] (``settings["capped"]`` is True when the cap applied at :attr:`level`; where even the lower end exceeds 1
both ends are 1 and ``settings["note"]`` says the data contradict that ordering). The statistic itself stays the
raw ratio, and ``settings["exceeds_one"]`` says when it is above 1. An ``impl`` group with no spread gives share
0 with interval ``[0, 0]``. Bit-identical values have a std of exactly 0 (as in
:func:`~deviate_cb.stats.describe`): the mean-subtraction residue of floating point (``std([0.7] * 3)`` is
``1.4e-16`` the naive way) never becomes a spread.

The bootstrap intervals stay selectable (``method="BCa"``, ``"percentile"``, ``"basic"``; each group
resampled independently with ``scipy.stats.bootstrap``): computed once with the resampling seed and recomputed
at another level from the same bootstrap distribution, so the same ``rng`` always gives the same interval. They
undercover with few runs and their upper end can exceed 1.

Degenerate data: fewer than two finite values in a group raises ``ValueError``. When ``algo_impl`` has no
spread at all (every run equal) the share is undefined: the statistic and the interval are NaN and
``settings["note"]`` says why, so that a report over many metrics can explain it instead of crashing.

Example:
    >>> r = decompose([0.80, 0.82, 0.81, 0.83], [0.78, 0.84, 0.80, 0.86])
    >>> round(r.statistic, 3), [round(v, 3) for v in r.confidence_interval()], r.settings["method"]
    (0.354, [0.09, 1.0], 'F')
    >>> low, high = r.confidence_interval(0.9)
    >>> bool(low <= r.statistic <= high)
    True
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Optional, Union

import numpy as np

from deviate_cb.stats._checks import check_rng, positive_int, resolve_rng
from deviate_cb.stats._groups import _group
from deviate_cb.stats._results import StatResult, check_level

__all__ = ["DECOMPOSE_METHODS", "decompose", "f_share_interval"]

RngLike = Union[int, np.random.Generator, None]
DECOMPOSE_METHODS = ("F", "BCa", "percentile", "basic")


def decompose(
    impl: Iterable[float],
    algo_impl: Iterable[float],
    level: float = 0.95,
    n_resamples: int = 1000,
    rng: RngLike = None,
    *,
    method: str = "F",
) -> StatResult:
    """Share of the across-run spread due to implementation noise: ``std(impl) / std(algo_impl)``.

    Args:
        impl: One value per run from runs that share every seed (or ``control`` runs).
        algo_impl: One value per run from runs with different seeds (or ``algo`` runs).
        level: Confidence level of the default interval.
        n_resamples: Bootstrap resamples (bootstrap methods only).
        rng: An int seed or a ``numpy.random.Generator``; ``None`` draws fresh entropy, recorded as the seed
            (bootstrap methods only).
        method: ``"F"`` (the default: the exact F interval for normal runs, capped at 1) or a bootstrap
            interval, ``"BCa"``, ``"percentile"``, ``"basic"``.

    Returns:
        A :class:`StatResult` with ``test="decompose"``, the share as ``statistic`` (NaN, with a ``note``
        setting, when ``algo_impl`` has no spread) and ``std_impl``, ``std_algo_impl``, ``variance_share``,
        group sizes, ``method``, ``exceeds_one``, for ``"F"`` ``capped``, and for the bootstraps ``n_resamples``
        and ``seed`` in ``settings``.

    Raises:
        ValueError: A group has fewer than two finite values, or an argument is out of range.

    Example:
        >>> r = decompose([1.0, 2.0, 3.0], [0.0, 2.0, 4.0])
        >>> r.statistic, r.settings["variance_share"], r.confidence_interval().high, r.settings["capped"]
        (0.5, 0.25, 1.0, True)
        >>> decompose([1.0, 2.0, 3.0], [0.0, 2.0, 4.0], rng=1, method="BCa").settings["seed"]
        1
    """
    x, y, level, n_resamples, method = _validate_decompose(impl, algo_impl, level, n_resamples, method)
    std_x, std_y = _sample_std(x), _sample_std(y)
    settings: dict[str, Any] = {
        "std_impl": std_x,
        "std_algo_impl": std_y,
        "n_impl": int(x.size),
        "n_algo_impl": int(y.size),
        "ddof": 1,
        "method": method,
    }
    if method == "F":
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
    if method == "F":
        n_x, n_y = x.size, y.size

        def f_interval(new_level: float) -> tuple[float, float]:
            low, high, _ = f_share_interval(np.array(share), n_x, n_y, new_level)
            return float(low), float(high)

        _, _, capped = f_share_interval(np.array(share), n_x, n_y, level)
        settings["capped"] = bool(capped)
        if f_interval(level)[0] >= 1.0 and share > 0:
            settings["note"] = (
                "even the lower end of the interval is above 1: the narrow variant spreads more than the wide one, "
                "which its noise being part of the wide variant's rules out"
            )
        return StatResult("decompose", share, level=level, settings=settings, interval=f_interval)
    if share == 0.0:  # identical narrow runs: every resample has std 0, so the interval is [0, 0] exactly
        return StatResult("decompose", share, level=level, settings=settings, interval=lambda lv: (0.0, 0.0))
    first = _bootstrap(x, y, level, n_resamples, method, generator, None)

    def interval(new_level: float) -> tuple[float, float]:
        res = first if new_level == level else _bootstrap(x, y, new_level, 0, method, None, first)
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    return StatResult("decompose", share, level=level, settings=settings, interval=interval)


def f_share_interval(
    share: np.ndarray, n_narrow: int, n_wide: int, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The F interval of ``sigma_narrow / sigma_wide`` from the share ``s_n / s_w``, capped at 1 (vectorised).

    Returns ``(low, high, capped)``: ``share / sqrt(F_{1-a/2})`` and ``share / sqrt(F_{a/2})`` with
    ``F(n_narrow - 1, n_wide - 1)`` quantiles, each end at most 1, and where the cap applied.

    Example:
        >>> low, high, capped = f_share_interval(np.array(0.5), 10, 10, 0.95)
        >>> round(float(low), 4), round(float(high), 4), bool(capped)
        (0.2492, 1.0, True)
    """
    from scipy.special import fdtri

    alpha = 1.0 - level
    d1, d2 = n_narrow - 1, n_wide - 1
    share = np.asarray(share, dtype=np.float64)
    low = share / np.sqrt(fdtri(d1, d2, 1.0 - alpha / 2.0))
    high = share / np.sqrt(fdtri(d1, d2, alpha / 2.0))
    capped = high > 1.0
    return np.minimum(low, 1.0), np.minimum(high, 1.0), capped


def _sample_std(values: np.ndarray) -> float:
    """The sample std (``ddof=1``), exactly 0 for identical values (as :func:`~deviate_cb.stats.describe` gives
    it), never the residue of subtracting their floating-point mean."""
    return 0.0 if float(np.ptp(values)) == 0.0 else float(np.std(values, ddof=1))


def _std_ratio(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """``std(x) / std(y)`` along ``axis`` (the bootstrap's resamples), a resample of identical values with std 0."""

    def std(values: np.ndarray) -> np.ndarray:
        return np.where(np.ptp(values, axis=axis) == 0, 0.0, np.std(values, ddof=1, axis=axis))

    with np.errstate(divide="ignore", invalid="ignore"):
        return std(x) / std(y)


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
