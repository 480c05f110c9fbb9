"""The test set's own sampling noise: how much a metric would move on another test set of the same size.

Example:
    >>> rng = np.random.default_rng(0)
    >>> correct = rng.random((5, 10_000)) < 0.85
    >>> s = sampling_spread(correct, n_resamples=1000, seed=0)
    >>> s.metric, round(s.estimate, 3), round(s.binomial_std, 4), round(s.sampling_std, 4)
    ('accuracy', 0.852, 0.0035, 0.0035)
    >>> s.ci_low < s.estimate < s.ci_high, s.test_set_only
    (True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from deviate_cb.stats._results import check_level, json_value
from deviate_cb.stats._std import guarded_std, guarded_var

__all__ = ["COMPARABLE", "MIN_OUTCOMES", "MIN_SCORES", "SamplingSpread", "sampling_spread"]

COMPARABLE = 2.0  # run std / sampling std below this: the runs spread no more than a test set's sampling does
MIN_OUTCOMES = 10  # expected examples of the rarer outcome (right or wrong) the interval needs
MIN_SCORES = 100  # samples a mean score's interval needs (skewed per-example losses undercover below)
_BLOCK = 1 << 22  # elements of one block of resampled indices (resamples x samples), to bound memory


@dataclass(frozen=True)
class SamplingSpread:
    """The test set's sampling spread of a metric beside the run-to-run spread (the method: docs/design/stats.md).

    Attributes:
        metric: ``"accuracy"`` (scores all 0 or 1) or ``"mean score"``.
        n_samples, n_runs: The test set's size and the runs compared.
        estimate: The runs' mean metric on this test set.
        ci_low, ci_high: Percentile bootstrap interval of the runs' mean metric over resampled test sets.
        level: Its confidence level.
        sampling_std: Std of one run's metric over resampled test sets (its exact bootstrap value; root mean
            square over runs).
        binomial_std: ``sqrt(p (1 - p) / n)`` at the mean accuracy ``p``; NaN when the metric is no accuracy.
        run_std: Std (ddof=1) of the runs' metrics on this test set; NaN with one run.
        ratio: ``run_std / sampling_std``; NaN when either is undefined or the sampling std is 0.
        test_set_only: Whether the run-to-run spread is smaller than or comparable to the sampling spread
            (``ratio < COMPARABLE``, or identical runs); ``None`` when it cannot be told.
        reliable: Whether the interval can be trusted at its level (an accuracy: ``n min(p, 1 - p)`` at least
            :data:`MIN_OUTCOMES`; a mean score: at least :data:`MIN_SCORES` samples).
        n_resamples, seed: Of the bootstrap.
    """

    metric: str
    n_samples: int
    n_runs: int
    estimate: float
    ci_low: float
    ci_high: float
    level: float
    sampling_std: float
    binomial_std: float
    run_std: float
    ratio: float
    test_set_only: Optional[bool]
    reliable: bool
    n_resamples: int
    seed: int

    def sentence(self) -> str:
        """The answer in words, as every format of the report prints it."""
        lv = f"{self.level:.0%}"
        head = (
            f"test-set sampling: {self.metric} {_g(self.estimate)} [{_g(self.ci_low)}, {_g(self.ci_high)}] "
            f"({lv} bootstrap over the {self.n_samples} samples, {self.n_resamples} resamples, seed {self.seed})"
        )
        if self.sampling_std == 0.0:
            return (
                f"{head}: each run scored every sample the same, so the test set shows no sampling spread; "
                f"{self.n_samples} samples cannot tell how the {self.metric} varies on new data."
            )
        binomial = f" (binomial std {_g(self.binomial_std)})" if math.isfinite(self.binomial_std) else ""
        spread = f"; one run's {self.metric} varies by std {_g(self.sampling_std)}{binomial} over resampled test sets"
        caveat = (
            "" if self.reliable else f" (too few samples of the rarer outcome: the interval may cover less than {lv})"
        )
        if self.test_set_only is None:
            return f"{head}{caveat}{spread}; with one run there is no run-to-run spread to compare it with."
        runs = f"the {self.n_runs} runs by std {_g(self.run_std)}"
        if self.test_set_only:
            how = "identical runs" if self.run_std == 0.0 else f"{_g(self.ratio, 2)}x the test set's"
            return (
                f"{head}{caveat}{spread}, {runs} ({how}): the run-to-run spread is no larger than the test set's "
                "own sampling spread, so a difference between groups on this test set is a claim about this "
                "test set only."
            )
        return (
            f"{head}{caveat}{spread}, {runs} ({_g(self.ratio, 2)}x the test set's): training varies more than the "
            "test set's sampling does, but that sampling spread is not in the run-to-run spread: a claim about "
            "new data carries it too."
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN becomes ``None``) with the sentence."""
        out = {name: json_value(getattr(self, name)) for name in self.__dataclass_fields__}
        out["sentence"] = self.sentence()
        return out


def sampling_spread(scores: Any, *, level: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> SamplingSpread:
    """The test set's sampling spread of the per-example ``scores`` of every run, beside the runs' spread.

    Args:
        scores: ``(runs, samples)`` per-example scores, the same samples in the same columns (1/0 for right/wrong
            makes the metric an accuracy; booleans are read as 1/0); each run's metric is its mean score.
        level: Confidence level of the interval, in (0, 1).
        n_resamples: Bootstrap resamples of the test set (at least 100).
        seed: Seed of the resampling (a non-negative integer): the same seed gives the same answer.

    Example:
        >>> s = sampling_spread([[1, 1, 0, 1], [1, 0, 0, 1]], n_resamples=200, seed=1)
        >>> s.metric, s.estimate, round(s.binomial_std, 4), s.reliable
        ('accuracy', 0.625, 0.2421, False)
        >>> sampling_spread([[1, 2]], n_resamples=10)
        Traceback (most recent call last):
        ...
        ValueError: `n_resamples` must be an integer of at least 100. Received: n_resamples=10.
    """
    matrix, level, n_resamples, seed = _check(scores, level, n_resamples, seed)
    runs, n = matrix.shape
    binary = bool(np.all((matrix == 0) | (matrix == 1)))
    per_run = matrix.mean(axis=1)
    estimate = float(per_run.mean())
    # the bootstrap std of a run's mean score, exactly (B -> infinity): sqrt(plug-in variance / n); for right/wrong
    # scores it is the binomial std of that run's accuracy (Efron & Tibshirani 1993, eq. 6.9 and 6.10)
    plug_in = np.array([guarded_var(row, ddof=0) for row in matrix])
    sampling_std = float(np.sqrt(np.mean(plug_in) / n))
    group = _resampled_group_means(matrix.mean(axis=0), n_resamples, seed)
    alpha = 1.0 - level
    low, high = (float(q) for q in np.quantile(group, [alpha / 2, 1 - alpha / 2]))
    low, high = min(low, estimate), max(high, estimate)  # an estimate is never outside its own interval
    binomial = math.sqrt(max(estimate * (1.0 - estimate), 0.0) / n) if binary else math.nan
    run_std = guarded_std(per_run, ddof=1)
    ratio = run_std / sampling_std if math.isfinite(run_std) and sampling_std > 0 else math.nan
    if not math.isfinite(run_std) or sampling_std == 0.0:
        only: Optional[bool] = None
    else:
        only = run_std == 0.0 or ratio < COMPARABLE
    # a proportion's percentile interval undercovers when one outcome is rare (as Wald's does)
    reliable = n * min(estimate, 1.0 - estimate) >= MIN_OUTCOMES if binary else n >= MIN_SCORES
    return SamplingSpread(
        metric="accuracy" if binary else "mean score",
        n_samples=int(n),
        n_runs=int(runs),
        estimate=estimate,
        ci_low=low,
        ci_high=high,
        level=level,
        sampling_std=sampling_std,
        binomial_std=binomial,
        run_std=run_std,
        ratio=ratio,
        test_set_only=only,
        reliable=reliable,
        n_resamples=n_resamples,
        seed=seed,
    )


def _resampled_group_means(column: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The mean of ``column`` (each example's mean score over the runs) on ``n_resamples`` test sets drawn with
    replacement: the runs' mean metric on each resampled test set.

    With few distinct values (an accuracy over ``runs`` runs takes at most ``runs + 1``) a resample is drawn as
    the multinomial counts of the values, the same law as drawing the ``n`` examples one by one.
    """
    n = column.size
    rng = np.random.default_rng(np.random.SeedSequence([seed, 42, 7]))
    values, sizes = np.unique(column, return_counts=True)
    if 4 * values.size <= n:
        return rng.multinomial(n, sizes / n, size=n_resamples) @ values / n
    out = np.empty(n_resamples)
    block = max(1, _BLOCK // n)
    for start in range(0, n_resamples, block):
        size = min(block, n_resamples - start)
        out[start : start + size] = column[rng.integers(0, n, size=(size, n))].mean(axis=1)
    return out


def _check(scores: Any, level: object, n_resamples: object, seed: object) -> tuple[np.ndarray, float, int, int]:
    from deviate_cb.stats._looks import check_seed

    array = np.asarray(scores)
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 2:
        raise ValueError(
            f"`scores` must be a 2-D array of shape (runs, samples) with at least 2 samples. Received: shape "
            f"{array.shape}."
        )
    if array.dtype.kind not in "biuf" or not np.all(np.isfinite(array)):
        raise ValueError(f"`scores` must hold finite numbers. Received: dtype {array.dtype}.")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 100:
        raise ValueError(f"`n_resamples` must be an integer of at least 100. Received: n_resamples={n_resamples!r}.")
    return array.astype(np.float64), check_level(level), int(n_resamples), check_seed(seed)


def _g(x: float, digits: int = 4) -> str:
    return "-" if not math.isfinite(x) else f"{x:.{digits}g}"
