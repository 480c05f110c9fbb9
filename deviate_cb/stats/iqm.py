"""The interquartile mean (IQM) across runs, with Yuen's trimmed-mean t interval or rliable's stratified bootstrap.

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
from deviate_cb.stats._std import guarded_std_along, is_constant, n_distinct

__all__ = ["IQM_METHODS", "iqm", "iqm_point", "trimmed_t_interval"]

IQM_METHODS = ("t", "bootstrap")

RngLike = Union[int, np.random.Generator, None]
_CELLS_PER_BATCH = 4_000_000  # bounds the memory of one batch of resamples


def iqm(
    values: Union[Iterable[float], np.ndarray],
    *,
    strata: Optional[Sequence[Hashable]] = None,
    level: float = 0.95,
    n_resamples: int = 9999,
    rng: RngLike = None,
    method: Optional[str] = None,
) -> StatResult:
    """The interquartile mean of ``values`` with Yuen's trimmed t interval or a (stratified) percentile bootstrap.

    Args:
        values: One number per run, or rliable's ``runs x tasks`` matrix (each column a stratum). NaN and
            Inf are left out and counted.
        strata: For one-dimensional ``values``: the stratum (task, dataset, ...) of each run, any hashable
            labels; runs are resampled within their stratum. ``None``: one stratum (the plain bootstrap).
        level: Confidence level of the default interval, in (0, 1).
        n_resamples: Bootstrap resamples (rliable uses 50000 for its figures).
        rng: An int seed, a ``numpy.random.Generator`` (one seed is drawn from it) or ``None`` (fresh entropy);
            the seed is recorded in ``settings["seed"]``. The global random state is never used.
        method: ``"t"`` (Yuen's trimmed-mean t interval, see the module's notes; one stratum only) or
            ``"bootstrap"`` (the stratified percentile bootstrap). ``None``: ``"t"`` for one-dimensional
            ``values`` without ``strata``, else ``"bootstrap"`` (rliable's layout).

    Returns:
        A :class:`StatResult` with ``test="iqm"``, the IQM as ``statistic`` (NaN without finite values), and
        ``confidence_interval(level)`` at any level from the same resamples. ``settings``: ``n``,
        ``n_nonfinite``, ``n_strata``, ``stratified``, ``method`` (``"t"`` or ``"percentile"``), ``n_resamples``
        and ``seed`` (bootstrap), ``df`` and ``trimmed`` (``g``, per end) for ``"t"``.

    Example:
        >>> x = [1.0, 2.0, 3.0, 4.0, 100.0, 10.0, 11.0, 12.0]
        >>> r = iqm(x)
        >>> r.statistic, r.settings["method"], [round(v, 3) for v in r.confidence_interval()]  # middle: 3, 4, 10, 11
        (7.0, 't', [-2.809, 16.809])
        >>> r = iqm(x, strata=["a"] * 4 + ["b"] * 4, rng=0)
        >>> r.settings["n_strata"], r.confidence_interval() == r.confidence_interval()
        (2, True)
    """
    finite, codes, n_bad, stratified = _validate_iqm(values, strata, level, n_resamples, rng)
    sizes = np.bincount(codes) if codes.size else np.zeros(0, dtype=np.int64)
    n_strata = int(np.count_nonzero(sizes))
    method = _check_iqm_method(method, stratified, n_strata)
    settings: dict[str, Any] = {
        "n": int(finite.size),
        "n_nonfinite": n_bad,
        "n_strata": n_strata,
        "stratified": stratified,
    }
    if method == "t":
        g = int(0.25 * finite.size)
        settings.update(method="t", trimmed=g, df=float(finite.size - 2 * g - 1))
        settings.update(_tie_note(finite, g))

        def t_interval(lv: float) -> tuple[float, float]:
            if finite.size == 0:
                return math.nan, math.nan
            low, high = trimmed_t_interval(finite[None, :], lv)
            return float(low[0]), float(high[0])

        return StatResult("iqm", iqm_point(finite), level=float(level), settings=settings, interval=t_interval)
    seed = seed_of(rng)
    settings.update(method="percentile", n_resamples=n_resamples, seed=seed)
    if finite.size == 0:
        return StatResult(
            "iqm", math.nan, level=float(level), settings=settings, interval=lambda lv: (math.nan, math.nan)
        )
    boot = _bootstrap(finite, codes, sizes, n_resamples, np.random.default_rng(seed))

    def interval(lv: float) -> tuple[float, float]:
        low, high = np.percentile(boot, [50.0 * (1.0 - lv), 50.0 * (1.0 + lv)])
        return float(low), float(high)

    return StatResult("iqm", iqm_point(finite), level=float(level), settings=settings, interval=interval)


def trimmed_t_interval(x: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Yuen's trimmed-mean t interval of the IQM for each row of ``x`` (vectorised; NaN for fewer than 2 values).

    Example:
        >>> low, high = trimmed_t_interval(np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]), 0.95)
        >>> [round(float(v), 4) for v in low]  # n = 3: Student's t interval of the mean
        [-0.4841, -0.4841]
    """
    from scipy.special import stdtrit

    n = x.shape[-1]
    g = int(0.25 * n)
    h = n - 2 * g
    if h < 2:
        nan = np.full(x.shape[:-1], np.nan)
        return nan, nan.copy()
    ordered = np.sort(x - x[..., :1], axis=-1)  # relative to the first value, as iqm_point
    centre = x[..., 0] + ordered[..., g : n - g].mean(axis=-1)
    winsorized = np.clip(ordered, ordered[..., g : g + 1], ordered[..., n - g - 1 : n - g])
    s_w = guarded_std_along(winsorized)  # 0 exactly where ties leave one winsorised value (np.std: 1e-17)
    s_raw = guarded_std_along(ordered)
    # Ties: the winsorised runs can have no spread although the runs do (n = 4 keeps two values: 1 in 7 data sets
    # of binomial(200, 0.9) / 200 accuracies, half of binomial(20, 0.95) / 20); the runs' own std then stands in
    # (never smaller than s_w), and where every run is equal there is no interval (NaN).
    spread = np.where(s_w > 0, s_w, np.where(s_raw > 0, s_raw, np.nan))
    se = spread * math.sqrt((n - 1) / (h * (h - 1)))
    half = float(stdtrit(h - 1, 0.5 + level / 2.0)) * se
    return centre - half, centre + half


def _tie_note(finite: np.ndarray, g: int) -> dict[str, Any]:
    """``spread`` (``"winsorized"``, ``"runs"`` or ``"none"``) and a ``note`` when ties change the interval."""
    if finite.size < 2 or finite.size - 2 * g < 2:
        return {}
    if is_constant(finite):
        return {"spread": "none", "note": "every run gave the same value: no spread to build an interval from (NaN)"}
    ordered = np.sort(finite)
    if n_distinct(np.clip(ordered, ordered[g], ordered[finite.size - g - 1])) < 2:
        return {
            "spread": "runs",
            "note": "ties leave the winsorised runs without spread (Yuen's standard error would be 0): the runs' own "
            "std stands in for it, a wider interval that holds (simulated on tied accuracies)",
        }
    return {"spread": "winsorized"}


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


def _check_iqm_method(method: object, stratified: bool, n_strata: int) -> str:
    if method is None:
        return "bootstrap" if stratified else "t"
    if method not in IQM_METHODS:
        raise ValueError(f"`method` must be one of 't', 'bootstrap' or None. Received: method={method!r}.")
    if method == "t" and n_strata > 1:
        raise ValueError(
            f"`method` 't' needs one stratum; use 'bootstrap' with strata. Received: method='t' and {n_strata} strata."
        )
    return str(method)


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
