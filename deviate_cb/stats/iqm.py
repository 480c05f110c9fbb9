"""The interquartile mean (IQM) across runs, with a stratified bootstrap confidence interval.

The IQM is the mean of the middle 50% of the sorted values: ``scipy.stats.trim_mean(x, 0.25)``, which drops
``int(0.25 n)`` values at each end. Agarwal et al. (2021), "Deep Reinforcement Learning at the Edge of the
Statistical Precipice" (NeurIPS; the rliable library), recommend it as the aggregate of few runs: robust to
outlying runs like the median, yet using half of the runs rather than one or two.

Its interval is rliable's **stratified bootstrap**: each resample draws, within every stratum (rliable: every
task), as many runs as the stratum holds, with replacement, and the IQM is recomputed over the pooled
resample; the interval is the percentile interval of those IQMs (``np.percentile``, linear interpolation). With
one stratum (``strata=None``) this is the plain bootstrap of the IQM. For rliable's layout, pass a ``runs x
tasks`` matrix: each column is a stratum, the IQM is taken over all of its cells, and the resample of column
``t`` draws ``x[i, t]`` with ``i`` uniform over the runs, independently per cell (rliable's
``StratifiedBootstrap`` with ``task_bootstrap=False``, and the same draws from the same generator). Strata of
unequal sizes are allowed. Stratifying keeps each task's share of the pool fixed, so the differences between
tasks do not widen the interval.

Example:
    >>> r = iqm([0.80, 0.84, 0.83, 0.86, 0.82, 0.85, 0.60, 0.84], rng=0)
    >>> round(r.statistic, 4), r.settings["n"]
    (0.8325, 8)
    >>> low, high = r.confidence_interval(0.95)
    >>> bool(low < r.statistic < high)
    True
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Optional, Union

import numpy as np

from deviate_cb.stats._checks import as_numbers, check_rng, positive_int, seed_of
from deviate_cb.stats._results import StatResult, check_level

__all__ = ["iqm", "iqm_point"]

RngLike = Union[int, np.random.Generator, None]
_CELLS_PER_BATCH = 4_000_000  # bounds the memory of one batch of resamples


def iqm(
    values: Union[Iterable[float], np.ndarray],
    *,
    strata: Optional[Sequence[Hashable]] = None,
    level: float = 0.95,
    n_resamples: int = 9999,
    rng: RngLike = None,
) -> StatResult:
    """The interquartile mean of ``values`` with a (stratified) percentile bootstrap interval.

    Args:
        values: One number per run, or rliable's ``runs x tasks`` matrix (each column a stratum). NaN and
            Inf are left out and counted.
        strata: For one-dimensional ``values``: the stratum (task, dataset, ...) of each run, any hashable
            labels; runs are resampled within their stratum. ``None``: one stratum (the plain bootstrap).
        level: Confidence level of the default interval, in (0, 1).
        n_resamples: Bootstrap resamples (rliable uses 50000 for its figures).
        rng: An int seed, a ``numpy.random.Generator`` (one seed is drawn from it) or ``None`` (fresh entropy);
            the seed is recorded in ``settings["seed"]``. The global random state is never used.

    Returns:
        A :class:`StatResult` with ``test="iqm"``, the IQM as ``statistic`` (NaN without finite values), and
        ``confidence_interval(level)`` at any level from the same resamples. ``settings``: ``n``,
        ``n_nonfinite``, ``n_strata``, ``stratified``, ``method`` (``"percentile"``), ``n_resamples``, ``seed``.

    Example:
        >>> x = [1.0, 2.0, 3.0, 4.0, 100.0, 10.0, 11.0, 12.0]
        >>> iqm(x, rng=0).statistic  # the middle half: 3, 4, 10, 11
        7.0
        >>> r = iqm(x, strata=["a"] * 4 + ["b"] * 4, rng=0)
        >>> r.settings["n_strata"], r.confidence_interval() == r.confidence_interval()
        (2, True)
    """
    finite, codes, n_bad, stratified = _validate_iqm(values, strata, level, n_resamples, rng)
    seed = seed_of(rng)
    sizes = np.bincount(codes) if codes.size else np.zeros(0, dtype=np.int64)
    settings: dict[str, Any] = {
        "n": int(finite.size),
        "n_nonfinite": n_bad,
        "n_strata": int(np.count_nonzero(sizes)),
        "stratified": stratified,
        "method": "percentile",
        "n_resamples": n_resamples,
        "seed": seed,
    }
    if finite.size == 0:
        return StatResult(
            "iqm", math.nan, level=float(level), settings=settings, interval=lambda lv: (math.nan, math.nan)
        )
    boot = _bootstrap(finite, codes, sizes, n_resamples, np.random.default_rng(seed))

    def interval(lv: float) -> tuple[float, float]:
        low, high = np.percentile(boot, [50.0 * (1.0 - lv), 50.0 * (1.0 + lv)])
        return float(low), float(high)

    return StatResult("iqm", iqm_point(finite), level=float(level), settings=settings, interval=interval)


def iqm_point(values: np.ndarray) -> float:
    """The IQM of finite values, as ``scipy.stats.trim_mean(values, 0.25)`` (NaN when empty).

    Taken relative to the first value, so that identical values give exactly that value.

    Example:
        >>> iqm_point(np.array([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])), iqm_point(np.array([0.1] * 7))
        (4.5, 0.1)
    """
    n = values.size
    if n == 0:
        return math.nan
    cut = int(0.25 * n)
    middle = np.sort(values - values[0])[cut : n - cut]
    return float(values[0] + np.mean(middle))


def _bootstrap(
    x: np.ndarray, codes: np.ndarray, sizes: np.ndarray, n_resamples: int, generator: np.random.Generator
) -> np.ndarray:
    """IQMs of ``n_resamples`` stratified resamples: cell ``p`` of a resample is run ``draw`` of ``p``'s stratum."""
    n = x.size
    order = np.argsort(codes, kind="stable")  # the runs of each stratum together, in their order
    grouped = x[order]
    start = np.concatenate(([0], np.cumsum(sizes)[:-1]))[codes]  # where p's stratum begins in `grouped`
    high = sizes[codes]  # how many runs p's stratum holds
    same = bool(np.all(high == high[0]))
    cut = int(0.25 * n)
    batch = max(1, _CELLS_PER_BATCH // n)
    out = np.empty(n_resamples)
    for first in range(0, n_resamples, batch):
        size = min(batch, n_resamples - first)
        # One scalar bound when every stratum has as many runs: the draws rliable makes from the same generator.
        draws = generator.integers(0, int(high[0]) if same else high, size=(size, n))
        resample = np.sort(grouped[start + draws], axis=1)
        out[first : first + size] = resample[:, cut : n - cut].mean(axis=1)
    return out


def _validate_iqm(
    values: Any, strata: Any, level: object, n_resamples: object, rng: object
) -> tuple[np.ndarray, np.ndarray, int, bool]:
    check_level(level)
    positive_int(n_resamples, "n_resamples")
    check_rng(rng)
    array = as_numbers(values, "values")
    stratified = strata is not None or array.ndim == 2
    if array.ndim == 2:
        if strata is not None:
            raise ValueError(
                "`strata` must be None when `values` is a runs x tasks matrix (each column is a stratum). "
                f"Received: strata={strata!r}."
            )
        codes = np.broadcast_to(np.arange(array.shape[1]), array.shape).ravel()  # row-major: column = stratum
        array = array.ravel()
    elif array.ndim == 1:
        codes = np.zeros(array.size, dtype=np.int64)
        if strata is not None:
            if isinstance(strata, (str, bytes)):
                raise TypeError(f"`strata` must be one label per value, not a string. Received: strata={strata!r}.")
            labels = list(strata)
            if len(labels) != array.size:
                raise ValueError(
                    f"`strata` must hold one label per value ({array.size}). Received: {len(labels)} labels."
                )
            first: dict[Hashable, int] = {}
            codes = np.array([first.setdefault(label, len(first)) for label in labels], dtype=np.int64)
    else:
        raise ValueError(
            f"`values` must be one number per run or a runs x tasks matrix. Received: values with shape {array.shape}."
        )
    finite = np.isfinite(array)
    _, kept = np.unique(codes[finite], return_inverse=True)  # strata left without finite values drop out
    return array[finite], kept.astype(np.int64).ravel(), int(array.size - np.count_nonzero(finite)), stratified
