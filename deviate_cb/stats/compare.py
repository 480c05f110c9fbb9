"""Is A really better than B? Tests, effect sizes and bootstrap intervals for two groups of per-run values.

Every function takes two one-dimensional groups (one value per run); NaN and Inf are left out and counted,
and each group needs at least 2 finite values. SciPy does the maths and is imported inside the functions.
Resampling functions take ``rng`` (an int seed, a ``numpy.random.Generator`` or ``None`` for fresh entropy);
the seed actually used is recorded in ``settings["seed"]`` and reused when the interval is recomputed for
another level, so the same call always gives the same interval. The global random state is never touched.

Example:
    >>> c = compare([0.84, 0.85, 0.86, 0.85], [0.80, 0.82, 0.81, 0.83], rng=0)
    >>> round(c.welch_t.pvalue, 4), round(c.prob_improvement.statistic, 3)
    (0.0057, 1.0)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Any, Union

import numpy as np

from deviate_cb.stats._results import StatResult, check_level

__all__ = [
    "ALTERNATIVES",
    "Comparison",
    "cohens_d",
    "compare",
    "hedges_g",
    "mann_whitney_u",
    "mean_difference",
    "prob_improvement",
    "student_t",
    "variance_test",
    "welch_t",
]

ALTERNATIVES = ("two-sided", "less", "greater")
_METHODS = ("percentile", "basic", "BCa")
RngLike = Union[None, int, np.random.Generator]
Values = Iterable[float]


def welch_t(a: Values, b: Values, alternative: str = "two-sided", level: float = 0.95) -> StatResult:
    """Welch's t-test of ``mean(a) - mean(b)`` (unequal variances), with the t interval of the difference.

    Example:
        >>> r = welch_t([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
        >>> round(r.statistic, 4), round(r.pvalue, 4), r.settings["equal_var"]
        (-1.2247, 0.2879, False)
    """
    x, y, n_bad = _validate_pair(a, b)
    return _t_test(x, y, n_bad, _check_alternative(alternative), check_level(level), equal_var=False)


def student_t(a: Values, b: Values, alternative: str = "two-sided", level: float = 0.95) -> StatResult:
    """Student's t-test of ``mean(a) - mean(b)`` (pooled variance), with the t interval of the difference.

    Example:
        >>> round(student_t([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]).confidence_interval().high, 4)
        1.267
    """
    x, y, n_bad = _validate_pair(a, b)
    return _t_test(x, y, n_bad, _check_alternative(alternative), check_level(level), equal_var=True)


def mann_whitney_u(a: Values, b: Values, alternative: str = "two-sided") -> StatResult:
    """Mann-Whitney U test (two-sided by default); the statistic is U of ``a`` (``P(A>B) * n_a * n_b``).

    Example:
        >>> r = mann_whitney_u([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
        >>> float(r.statistic), r.settings["alternative"]
        (2.0, 'two-sided')
    """
    x, y, n_bad = _validate_pair(a, b)
    alternative = _check_alternative(alternative)
    from scipy.stats import mannwhitneyu

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = mannwhitneyu(x, y, alternative=alternative, method="auto")
    return StatResult(
        "mann_whitney_u",
        float(res.statistic),
        float(res.pvalue),
        math.nan,
        _settings(x, y, n_bad, alternative=alternative, method="auto"),
    )


def cohens_d(a: Values, b: Values, level: float = 0.95) -> StatResult:
    """Cohen's d, ``(mean(a) - mean(b)) / pooled sd``, with a normal-approximation interval.

    The interval is ``d -/+ z * se`` with ``se = sqrt((n_a + n_b) / (n_a n_b) + d^2 / (2 (n_a + n_b)))``
    (Hedges & Olkin's large-sample standard error). ``pvalue`` is NaN (an estimate, not a test); d is NaN
    when both groups are constant (pooled sd 0).

    Example:
        >>> r = cohens_d([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
        >>> float(r.statistic), [round(v, 4) for v in r.confidence_interval()]
        (-1.0, [-2.6974, 0.6974])
    """
    x, y, n_bad = _validate_pair(a, b)
    return _effect_size("cohens_d", x, y, n_bad, check_level(level), 1.0)


def hedges_g(a: Values, b: Values, level: float = 0.95) -> StatResult:
    """Hedges' g: Cohen's d times ``J = 1 - 3 / (4 (n_a + n_b) - 9)``; the interval is d's interval times J.

    Example:
        >>> round(hedges_g([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]).statistic, 6)
        -0.8
    """
    x, y, n_bad = _validate_pair(a, b)
    return _effect_size("hedges_g", x, y, n_bad, check_level(level), 1.0 - 3.0 / (4.0 * (x.size + y.size) - 9.0))


def prob_improvement(
    a: Values, b: Values, level: float = 0.95, n_resamples: int = 9999, rng: RngLike = None, method: str = "percentile"
) -> StatResult:
    """Probability of improvement ``P(A>B)``: the share of pairs with ``a > b``, ties counting one half.

    Equals ``U / (n_a n_b)``. The interval is a two-sample bootstrap (``scipy.stats.bootstrap``, unpaired);
    the default ``method="percentile"`` stays defined with ties and with groups that never overlap, where
    BCa's acceleration degenerates to NaN.

    Example:
        >>> r = prob_improvement([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], rng=0)
        >>> round(r.statistic, 4), r.settings["seed"]
        (0.2222, 0)
    """
    x, y, n_bad = _validate_pair(a, b)
    seed = _check_bootstrap(level, n_resamples, rng, method)
    # P(A>B) depends only on the order of the values: resample their codes (same draws, no per-resample sort)
    levels, codes = np.unique(np.concatenate([x, y]), return_inverse=True)
    data = (codes[: x.size].astype(np.float64), codes[x.size :].astype(np.float64))
    statistic = _p_improvement_codes(levels.size)
    return _bootstrap_result("prob_improvement", statistic, x, y, n_bad, level, n_resamples, seed, method, data)


def mean_difference(
    a: Values, b: Values, level: float = 0.95, n_resamples: int = 9999, rng: RngLike = None, method: str = "percentile"
) -> StatResult:
    """``mean(a) - mean(b)`` with a two-sample bootstrap interval (percentile by default; ``BCa`` selectable).

    Example:
        >>> r = mean_difference([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], rng=1)
        >>> float(r.statistic), r.confidence_interval() == r.confidence_interval()
        (-1.0, True)
    """
    x, y, n_bad = _validate_pair(a, b)
    seed = _check_bootstrap(level, n_resamples, rng, method)
    return _bootstrap_result("mean_difference", _mean_diff, x, y, n_bad, level, n_resamples, seed, method, (x, y))


def variance_test(a: Values, b: Values, center: str = "median", alternative: str = "two-sided") -> StatResult:
    """Do A and B differ in spread? Brown-Forsythe (``center="median"``) or Levene (``center="mean"``).

    Two-sided: ``scipy.stats.levene`` (statistic W). One-sided (``"less"``: A is less variable than B;
    ``"greater"``: more variable): the pooled t-test on the absolute deviations from each group's center
    (statistic t; for two groups W = t^2, so the one-sided p is half the two-sided p when t has the tested
    sign). NaN when both groups are constant.

    Example:
        >>> r = variance_test([0.0, 1.0, 2.0, 1.0], [0.0, 4.0, 8.0, 4.0], alternative="less")
        >>> r.settings["statistic_name"], round(r.pvalue, 4)
        ('t', 0.1272)
    """
    x, y, n_bad = _validate_pair(a, b)
    alternative = _check_alternative(alternative)
    if center not in ("median", "mean"):
        raise ValueError(f"`center` must be one of 'median', 'mean'. Received: center={center!r}.")
    from scipy.stats import levene, ttest_ind

    name = "brown_forsythe" if center == "median" else "levene"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if alternative == "two-sided":
            res, stat_name = levene(x, y, center=center), "W"
        else:
            mid = np.median if center == "median" else np.mean
            res = ttest_ind(np.abs(x - mid(x)), np.abs(y - mid(y)), equal_var=True, alternative=alternative)
            stat_name = "t"
    return StatResult(
        "variance_test",
        float(res.statistic),
        float(res.pvalue),
        math.nan,
        _settings(x, y, n_bad, alternative=alternative, center=center, method=name, statistic_name=stat_name),
    )


@dataclass(frozen=True)
class Comparison:
    """Everything :func:`compare` computes for two groups (each test a :class:`StatResult`).

    Attributes:
        welch_t, mann_whitney_u, variance_test: Tests (``pvalue`` set).
        cohens_d, hedges_g, prob_improvement, mean_difference: Estimates with intervals (``pvalue`` NaN).
        n_a, n_b, mean_a, mean_b, std_a, std_b: Finite values per group, their mean and std (ddof=1).
        n_nonfinite_a, n_nonfinite_b: NaN/Inf values left out.
        alpha: Significance level for :meth:`to_dict`'s ``reject`` flags.
        notes: Why some results are NaN or degenerate (constant groups).
    """

    welch_t: StatResult
    mann_whitney_u: StatResult
    cohens_d: StatResult
    hedges_g: StatResult
    prob_improvement: StatResult
    mean_difference: StatResult
    variance_test: StatResult
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    std_a: float
    std_b: float
    n_nonfinite_a: int = 0
    n_nonfinite_b: int = 0
    alpha: float = 0.05
    notes: tuple[str, ...] = ()

    def results(self) -> dict[str, StatResult]:
        """The results by name, in a fixed order."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.type in ("StatResult", StatResult)}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the group summaries, ``notes``, and each result's ``to_dict()`` plus ``reject``."""
        out: dict[str, Any] = {
            f.name: getattr(self, f.name) for f in fields(self) if f.type not in ("StatResult", StatResult)
        }
        out["notes"] = list(self.notes)
        out = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}
        results = {}
        for name, r in self.results().items():
            d = r.to_dict()
            d["reject"] = None if d["pvalue"] is None else bool(r.pvalue <= self.alpha)
            results[name] = d
        out["results"] = results
        return out


def compare(
    a: Values,
    b: Values,
    alpha: float = 0.05,
    level: float = 0.95,
    rng: RngLike = None,
    alternative: str = "two-sided",
    n_resamples: int = 9999,
    variance_alternative: str = "two-sided",
) -> Comparison:
    """Compare two groups of per-run values with every test and estimate of this module.

    Args:
        a, b: One value per run for each group (NaN/Inf left out and counted; at least 2 finite each).
        alpha: Significance level for the ``reject`` flags of :meth:`Comparison.to_dict`.
        level: Confidence level of the intervals.
        rng: Seed for both bootstraps (an int, a Generator, or None: fresh entropy, recorded).
        alternative: For Welch's t and Mann-Whitney U (``"greater"``: A is larger than B).
        n_resamples: Bootstrap resamples.
        variance_alternative: For the Brown-Forsythe test (``"less"``: A is less variable than B).

    Example:
        >>> c = compare([1.0, 2.0, 3.0, float("nan")], [2.0, 3.0, 4.0], rng=0)
        >>> c.n_a, c.n_nonfinite_a, float(c.cohens_d.statistic), c.to_dict()["results"]["welch_t"]["reject"]
        (3, 1, -1.0, False)
    """
    x, y, n_bad = _validate_pair(a, b)
    _check_alternative(alternative)
    _check_alternative(variance_alternative, "variance_alternative")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ValueError(f"`alpha` must be a number in (0, 1). Received: alpha={alpha!r}.")
    seed = _check_bootstrap(level, n_resamples, rng, "percentile")
    std_a, std_b = float(np.std(x, ddof=1)), float(np.std(y, ddof=1))
    notes = tuple(
        f"`{g}` is constant (std 0): t-tests, effect sizes and the variance test may be NaN or infinite."
        for g, s in (("a", std_a), ("b", std_b))
        if s == 0
    )
    return Comparison(
        welch_t=welch_t(x, y, alternative, level),
        mann_whitney_u=mann_whitney_u(x, y, alternative),
        cohens_d=cohens_d(x, y, level),
        hedges_g=hedges_g(x, y, level),
        prob_improvement=prob_improvement(x, y, level, n_resamples, seed),
        mean_difference=mean_difference(x, y, level, n_resamples, seed),
        variance_test=variance_test(x, y, "median", variance_alternative),
        n_a=int(x.size),
        n_b=int(y.size),
        mean_a=float(np.mean(x)),
        mean_b=float(np.mean(y)),
        std_a=std_a,
        std_b=std_b,
        n_nonfinite_a=n_bad[0],
        n_nonfinite_b=n_bad[1],
        alpha=float(alpha),
        notes=notes,
    )


# --- the maths -------------------------------------------------------------------------------------------


def _t_test(
    x: np.ndarray, y: np.ndarray, n_bad: tuple[int, int], alternative: str, level: float, equal_var: bool
) -> StatResult:
    from scipy.stats import ttest_ind

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = ttest_ind(x, y, equal_var=equal_var, alternative=alternative)

    def interval(lvl: float) -> tuple[float, float]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ci = res.confidence_interval(lvl)
        return float(ci.low), float(ci.high)

    name = "student_t" if equal_var else "welch_t"
    return StatResult(
        name,
        float(res.statistic),
        float(res.pvalue),
        level,
        _settings(
            x,
            y,
            n_bad,
            alternative=alternative,
            equal_var=equal_var,
            df=float(res.df),
            estimate=float(np.mean(x) - np.mean(y)),
        ),
        interval,
    )


def _effect_size(
    name: str, x: np.ndarray, y: np.ndarray, n_bad: tuple[int, int], level: float, factor: float
) -> StatResult:
    na, nb = x.size, y.size
    pooled = math.sqrt(((na - 1) * np.var(x, ddof=1) + (nb - 1) * np.var(y, ddof=1)) / (na + nb - 2))
    d = float((np.mean(x) - np.mean(y)) / pooled) if pooled > 0 else math.nan
    se = math.sqrt((na + nb) / (na * nb) + d * d / (2.0 * (na + nb)))

    def interval(lvl: float) -> tuple[float, float]:
        from scipy.special import ndtri

        z = float(ndtri(0.5 + lvl / 2.0))
        return factor * (d - z * se), factor * (d + z * se)

    return StatResult(
        name,
        factor * d,
        math.nan,
        level,
        _settings(x, y, n_bad, pooled_std=pooled, correction=factor, ci="normal"),
        interval,
    )


def _p_improvement(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """P(A>B) along ``axis`` (ties count one half), from the values' positions among the pooled sorted values."""
    levels, codes = np.unique(np.concatenate([np.ravel(x), np.ravel(y)]), return_inverse=True)
    cx, cy = codes[: np.size(x)].reshape(np.shape(x)), codes[np.size(x) :].reshape(np.shape(y))
    return _p_improvement_codes(levels.size)(cx, cy, axis)


def _p_improvement_codes(k: int) -> Callable[..., np.ndarray]:
    """P(A>B) for integer codes in ``range(k)`` (the order of the values): counting, no sorting per resample."""

    def statistic(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        x, y = np.moveaxis(x, axis, -1), np.moveaxis(y, axis, -1)
        shape, na, nb = x.shape[:-1], x.shape[-1], y.shape[-1]
        cx, cy = x.reshape(-1, na).astype(np.intp), y.reshape(-1, nb).astype(np.intp)
        out = np.empty(cx.shape[0])
        for start in range(0, cx.shape[0], 1024):  # chunks bound the (rows, k) count table
            rows = slice(start, start + 1024)
            m = cy[rows].shape[0]
            counts = np.bincount((cy[rows] + k * np.arange(m)[:, None]).ravel(), minlength=m * k).reshape(m, k)
            # 2 * (#y below each code) + (#y at it): twice the score of an x with that code
            twice = 2 * (np.cumsum(counts, axis=-1) - counts) + counts
            out[rows] = np.take_along_axis(twice, cx[rows], axis=-1).sum(axis=-1) / (2.0 * na * nb)
        return out.reshape(shape) if shape else out[0]

    return statistic


def _mean_diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def _bootstrap_result(
    name: str,
    statistic: Callable[..., np.ndarray],
    x: np.ndarray,
    y: np.ndarray,
    n_bad: tuple[int, int],
    level: float,
    n_resamples: int,
    seed: int,
    method: str,
    data: tuple[np.ndarray, np.ndarray],
) -> StatResult:
    cache: dict[float, tuple[float, float]] = {}

    def interval(lvl: float) -> tuple[float, float]:
        if lvl not in cache:
            from scipy.stats import bootstrap

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # degenerate (constant) resamples: the interval is then a point
                res = bootstrap(
                    data,
                    statistic,
                    n_resamples=n_resamples,
                    paired=False,
                    vectorized=True,
                    confidence_level=lvl,
                    method=method,
                    rng=np.random.default_rng(seed),
                )
            cache[lvl] = (float(res.confidence_interval.low), float(res.confidence_interval.high))
        return cache[lvl]

    return StatResult(
        name,
        float(statistic(*data)),
        math.nan,
        level,
        _settings(x, y, n_bad, method=method, n_resamples=n_resamples, seed=seed),
        interval,
    )


# --- validation ------------------------------------------------------------------------------------------


def _settings(x: np.ndarray, y: np.ndarray, n_bad: tuple[int, int], **extra: Any) -> dict[str, Any]:
    return {**extra, "n_a": int(x.size), "n_b": int(y.size), "n_nonfinite_a": n_bad[0], "n_nonfinite_b": n_bad[1]}


def _group(values: Values, name: str) -> tuple[np.ndarray, int]:
    if isinstance(values, (str, bytes)):
        raise TypeError(f"`{name}` must be numbers. Received: {name}={values!r}.")
    try:
        array = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be numbers. Received: {name} of type {type(values).__name__} ({exc}).") from exc
    if array.ndim != 1:
        raise ValueError(f"`{name}` must be one-dimensional. Received: {name} with shape {array.shape}.")
    finite = array[np.isfinite(array)]
    n_bad = int(array.size - finite.size)
    if finite.size < 2:
        raise ValueError(
            f"`{name}` needs at least 2 finite values to compare. Received: {finite.size} (and {n_bad} non-finite)."
        )
    return finite, n_bad


def _validate_pair(a: Values, b: Values) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    x, bad_a = _group(a, "a")
    y, bad_b = _group(b, "b")
    return x, y, (bad_a, bad_b)


def _check_alternative(alternative: object, name: str = "alternative") -> str:
    if alternative not in ALTERNATIVES:
        raise ValueError(f"`{name}` must be one of 'two-sided', 'less', 'greater'. Received: {name}={alternative!r}.")
    return str(alternative)


def _check_bootstrap(level: object, n_resamples: object, rng: object, method: object) -> int:
    check_level(level)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"`n_resamples` must be a positive integer. Received: n_resamples={n_resamples!r}.")
    if method not in _METHODS:
        raise ValueError(f"`method` must be one of 'percentile', 'basic', 'BCa'. Received: method={method!r}.")
    return _resolve_seed(rng)


def _resolve_seed(rng: object) -> int:
    """The int seed every interval of one result is computed with (``None``: fresh entropy)."""
    if rng is None:
        return int(np.random.default_rng().integers(2**63))  # fresh OS entropy; fits int64 columns and JSON
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(2**63))
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and rng >= 0:
        return int(rng)
    raise ValueError(f"`rng` must be None, a non-negative int seed or a numpy.random.Generator. Received: rng={rng!r}.")
