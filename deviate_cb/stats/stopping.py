"""The simulation kernels of :mod:`~deviate_cb.stats.sequential`: test statistics at every look of many studies.

Example:
    >>> looks = ((5, 5), (10, 10), (15, 15), (20, 20))
    >>> round(calibrate_nominal(looks, 0.05, "mean", 0, 200_000), 4)  # Pocock's 0.0182 for 4 looks, df -> inf
    0.0188
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any, Optional, Protocol

import numpy as np

from deviate_cb.stats._looks import check_dist, check_looks, check_on, check_seed
from deviate_cb.stats.boundaries import (
    boundary_nominals,
    information_fractions,
    welch_parts,
    widened,
    widened_p,
)

__all__ = [
    "PlanLike",
    "SequentialSimulation",
    "abs_dev_parts",
    "bf_t",
    "calibrate_boundary",
    "calibrate_nominal",
    "look_p",
    "look_t",
    "mean_parts",
    "naive_rate",
    "null_paths",
    "simulate_sequential",
    "small_p",
    "two_sided_p",
]

Looks = tuple[tuple[int, int], ...]


class PlanLike(Protocol):
    """What the simulations read of a :class:`~deviate_cb.stats.sequential.SequentialPlan` (which imports this
    module, so it is not imported here)."""

    @property
    def looks(self) -> Looks: ...
    @property
    def on(self) -> str: ...
    @property
    def nominals(self) -> tuple[float, ...]: ...
    @property
    def kappa(self) -> float: ...
    @property
    def effect(self) -> Optional[float]: ...
    @property
    def direction(self) -> str: ...


_CHUNK_VALUES = 2_000_000  # values per group and chunk: bounds the memory of a simulation to tens of MB


def null_paths(
    looks: Looks, dist: str, count: int, rng: np.random.Generator
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Chunks of ``(x, y)``: ``count`` paths in all, each row the runs of A (``x``) and B (``y``) up to the last
    look, drawn with mean 0 and variance 1 from ``dist``: ``"normal"``; ``"t3"`` (t with 3 degrees of freedom:
    symmetric, heavy tails); ``"lognormal"`` (``exp(Z)``: skewness 6.2, a loss's right tail);
    ``"lognormal-normal"`` (A lognormal, B normal); ``"diverged"`` (normal, but 10% of runs 5 sd below: a
    training that diverged to a poor value); ``"discrete"`` (an accuracy on 200 examples, ``binomial(200, 0.9) /
    200``: tied values; 3 equal runs in 0.5% of groups of 3).

    Example:
        >>> x, y = next(null_paths(((2, 3),), "t3", 4, np.random.default_rng(0)))
        >>> x.shape, y.shape
        ((4, 2), (4, 3))
    """
    n_a, n_b = looks[-1]
    chunk = max(1, _CHUNK_VALUES // max(n_a, n_b))
    done = 0
    while done < count:
        size = min(chunk, count - done)
        first = "lognormal" if dist == "lognormal-normal" else dist
        second = "normal" if dist == "lognormal-normal" else dist
        x, y = _draw(first, rng, (size, n_a)), _draw(second, rng, (size, n_b))
        done += size
        yield x, y


def _draw(dist: str, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    if dist == "normal":
        return rng.standard_normal(shape)
    if dist == "t3":
        return rng.standard_t(3, shape) / math.sqrt(3.0)
    if dist == "lognormal":
        mean, var = math.exp(0.5), (math.e - 1.0) * math.e
        return (np.exp(rng.standard_normal(shape)) - mean) / math.sqrt(var)
    if dist == "diverged":
        values = np.where(rng.random(shape) < 0.1, -5.0, rng.standard_normal(shape))
        return (values + 0.5) / math.sqrt(3.15)  # mean -0.5, variance 0.9 + 2.5 - 0.25
    return (rng.binomial(200, 0.9, shape) - 180.0) / math.sqrt(18.0)  # discrete


def mean_parts(x: np.ndarray, y: np.ndarray, looks: Looks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The difference of means, Welch's standard error and degrees of freedom at each look (:func:`welch_parts`).

    Example:
        >>> diff, se, dof = mean_parts(np.array([[1.0, 2.0, 3.0]]), np.array([[2.0, 3.0, 4.0]]), ((3, 3),))
        >>> float(diff[0, 0]), round(float(diff[0, 0] / se[0, 0]), 4), float(dof[0, 0])  # as scipy's Welch t
        (-1.0, -1.2247, 4.0)
    """
    return welch_parts(x, y, looks)[:3]


def abs_dev_parts(x: np.ndarray, sizes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance (``ddof=1``) of ``|x - median(x)|`` over the first ``n`` values of each row, for each
    ``n`` in ``sizes``: two ``(rows, len(sizes))`` arrays.

    Example:
        >>> mean, var = abs_dev_parts(np.array([[1.0, 5.0, 2.0, 9.0]]), (3, 4))
        >>> mean.round(4).tolist(), var.round(4).tolist()  # |[1,5,2] - 2| = [1,3,0]; |[1,5,2,9] - 3.5|
        ([[1.3333, 2.75]], [[2.3333, 3.5833]])
    """
    cum_sum, cum_sq = np.cumsum(x, axis=1), np.cumsum(x * x, axis=1)
    mean = np.empty((x.shape[0], len(sizes)))
    var = np.empty_like(mean)
    done: dict[int, int] = {}
    for k, n in enumerate(sizes):
        if n in done:
            mean[:, k], var[:, k] = mean[:, done[n]], var[:, done[n]]
            continue
        done[n] = k
        half = n // 2
        part = np.partition(x[:, :n], half, axis=1)  # one kth: numpy's partition at two is five times slower
        lower = part[:, :half]
        total, lower_sum = cum_sum[:, n - 1], lower.sum(axis=1)
        if n % 2:
            med = part[:, half]
            sum_abs = total - 2.0 * lower_sum - med
        else:
            med = 0.5 * (lower.max(axis=1) + part[:, half])
            sum_abs = total - 2.0 * lower_sum
        sum_sq = cum_sq[:, n - 1] - 2.0 * med * total + n * med * med
        mean[:, k] = sum_abs / n
        var[:, k] = np.maximum(sum_sq - sum_abs**2 / n, 0.0) / (n - 1)
    return mean, var


def bf_t(
    parts_a: tuple[np.ndarray, np.ndarray], parts_b: tuple[np.ndarray, np.ndarray], looks: Looks, c: float = 1.0
) -> np.ndarray:
    """The Brown-Forsythe pooled t of "A and ``c`` B spread alike" at each look (decreasing in ``c``).

    Example:
        >>> import warnings
        >>> from scipy.stats import levene
        >>> x, y = np.array([[0.1, 0.9, 0.4, 0.3]]), np.array([[1.0, -2.0, 0.5]])
        >>> t = bf_t(abs_dev_parts(x, (4,)), abs_dev_parts(y, (3,)), ((4, 3),))
        >>> bool(np.isclose(t[0, 0] ** 2, levene(x[0], y[0], center="median").statistic))
        True
    """
    (mean_u, var_u), (mean_v, var_v) = parts_a, parts_b
    n_a = np.array([look[0] for look in looks], dtype=np.float64)
    n_b = np.array([look[1] for look in looks], dtype=np.float64)
    pooled = ((n_a - 1.0) * var_u + c * c * (n_b - 1.0) * var_v) / (n_a + n_b - 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (mean_u - c * mean_v) / np.sqrt(pooled * (1.0 / n_a + 1.0 / n_b))


def two_sided_p(t: np.ndarray, dof: np.ndarray) -> np.ndarray:
    """The two-sided p-value of Student's t with ``dof`` degrees of freedom.

    Example:
        >>> round(float(two_sided_p(np.array(2.0), np.array(10.0))), 4)
        0.0734
    """
    from scipy.special import stdtr

    return 2.0 * stdtr(dof, -np.abs(t))


def look_t(x: np.ndarray, y: np.ndarray, looks: Looks, on: str) -> tuple[np.ndarray, np.ndarray]:
    """The test's t at each look under "no difference" and its degrees of freedom (the mean: Welch's t; the
    spread: Brown-Forsythe's pooled t, ``n_a + n_b - 2``).

    Example:
        >>> t, dof = look_t(np.array([[1.0, 2.0, 3.0]]), np.array([[2.0, 3.0, 4.0]]), ((3, 3),), "mean")
        >>> t.round(4).tolist(), dof.tolist()
        ([[-1.2247]], [[4.0]])
    """
    if on == "mean":
        diff, se, dof = mean_parts(x, y, looks)
        with np.errstate(divide="ignore", invalid="ignore"):
            return diff / se, dof
    sizes_a, sizes_b = tuple(n for n, _ in looks), tuple(n for _, n in looks)
    t = bf_t(abs_dev_parts(x, sizes_a), abs_dev_parts(y, sizes_b), looks)
    return t, np.broadcast_to(np.array([a + b - 2.0 for a, b in looks]), t.shape)


def small_p(t: np.ndarray, dof: np.ndarray, looks: Looks, level: float) -> np.ndarray:
    """The two-sided p-values of ``t`` where they are below ``level``, 1 elsewhere.

    Only the ``|t|`` above the critical value at ``n_a + n_b - 2`` degrees of freedom (the most a look has:
    Welch's are fewer) are evaluated, a few percent of them, so a calibration costs little more than its data.

    Example:
        >>> small_p(np.array([[3.0, 1.0]]), np.array([[10.0, 10.0]]), ((6, 6), (7, 7)), 0.05).round(4).tolist()
        [[0.0133, 1.0]]
    """
    from scipy.special import stdtrit

    crit = stdtrit(np.array([a + b - 2.0 for a, b in looks]), 1.0 - level / 2.0)
    candidate = np.abs(t) > crit
    p = np.ones(t.shape)
    p[candidate] = two_sided_p(t[candidate], dof[candidate])
    return np.where(p < level, p, 1.0)


def look_p(x: np.ndarray, y: np.ndarray, looks: Looks, on: str, kappa: float) -> np.ndarray:
    """The p-value of "no difference" at each look: the mean's skewness-widened Welch test (:func:`widened_p`;
    ``kappa`` 0: Welch's t-test), the spread's Brown-Forsythe test. NaN (a constant group) is 1.

    Example:
        >>> look_p(np.array([[1.0, 2.0, 3.0]]), np.array([[2.0, 3.0, 4.0]]), ((3, 3),), "mean", 0.0).round(4)
        array([[0.2879]])
    """
    if on == "mean":
        diff, se, dof, skew = welch_parts(x, y, looks)
        with np.errstate(divide="ignore", invalid="ignore"):
            return widened_p(diff / se, skew, dof, kappa)
    t, dof = look_t(x, y, looks, on)
    p = two_sided_p(t, dof)
    return np.where(np.isfinite(p), p, 1.0)


@functools.lru_cache(maxsize=64)
def calibrate_boundary(
    looks: Looks, alpha: float, on: str, seed: int, paths: int, boundary: str, kappa: float
) -> float:
    """The boundary's constant ``C`` (:func:`boundary_nominals`) at which rejecting at any look has probability
    ``alpha`` when there is no difference, for standard normal runs and the test as run (``kappa`` included).

    One look: ``z_{1-alpha/2}`` (the plain test). Otherwise ``paths`` standard normal null paths (seeded; cached
    by the arguments): a path rejects at look ``k`` when its p-value ``p_k`` is below ``2 Phi(-C / s_k)`` (``s_k``
    the square root of the information fraction for ``"obf"``, 1 for ``"pocock"``), that is when
    ``s_k z(p_k) > C`` with ``z(p) = Phi^-1(1 - p/2)``; ``C`` is the ``1 - alpha`` quantile of each path's largest
    ``s_k z(p_k)``, no search needed.

    Example:
        >>> round(calibrate_boundary(((5, 5), (10, 10)), 0.05, "mean", 0, 20_000, "obf", 0.0), 2)
        1.97
    """
    from scipy.special import ndtri

    if len(looks) == 1:
        return float(-ndtri(alpha / 2.0))
    scale = np.sqrt(information_fractions(looks)) if boundary == "obf" else np.ones(len(looks))
    for floor in (1.0, 0.0):  # only s_k |t_k| > floor can matter when C > floor (z(p) <= q* <= |t|)
        rng = np.random.default_rng(np.random.SeedSequence([seed, 27, 0]))
        largest = []
        for x, y in null_paths(looks, "normal", paths, rng):
            if on == "mean":
                diff, se, dof, skew = welch_parts(x, y, looks)
                with np.errstate(divide="ignore", invalid="ignore"):
                    t = diff / se
            else:
                t, dof = look_t(x, y, looks, on)
                skew = np.zeros(t.shape)
            z = np.zeros(t.shape)
            with np.errstate(invalid="ignore"):
                near = scale * np.abs(t) > floor
            p = widened_p(t[near], skew[near], np.broadcast_to(dof, t.shape)[near], kappa)
            z[near] = -ndtri(p / 2.0)
            largest.append((scale * z).max(axis=1))
        ordered = np.sort(np.concatenate(largest))[::-1]
        constant = float(ordered[math.floor(alpha * ordered.size)])
        if constant > floor:
            break
    return constant


def calibrate_nominal(looks: Looks, alpha: float, on: str, seed: int, paths: int) -> float:
    """Pocock's constant nominal level ``p*`` for Welch's t-test (no skewness widening) or Brown-Forsythe's: the
    ``alpha`` quantile of each null path's smallest p-value (:func:`calibrate_boundary`).

    Example:
        >>> looks = ((5, 5), (10, 10), (15, 15), (20, 20))
        >>> round(calibrate_nominal(looks, 0.05, "mean", 0, 200_000), 4)  # Pocock's 0.0182 for 4 looks, df -> inf
        0.0188
    """
    constant = calibrate_boundary(looks, alpha, on, seed, paths, "pocock", 0.0)
    return min(alpha, boundary_nominals(looks, constant, "pocock")[0])


@dataclass(frozen=True)
class SequentialSimulation:
    """What a sequential plan does over many simulated studies (:func:`simulate_sequential`).

    Attributes:
        studies, dist, effect_sd, std_ratio: What was simulated (B standard, A ``effect_sd + std_ratio * B``).
        decided: The rate of "A better" or "B better" (under no difference: the false-positive rate);
            a_better, b_better, equivalent, undecided: the rate of each outcome.
        mean_runs_a, mean_runs_b: Runs used per group, on average (:attr:`mean_runs`: both groups).
        coverage: How often the repeated interval at the stopping look holds the truth;
            simultaneous_coverage: how often every look's interval holds it (the design's ``1 - alpha``).
    """

    studies: int
    dist: str
    effect_sd: float
    std_ratio: float
    decided: float
    a_better: float
    b_better: float
    equivalent: float
    undecided: float
    mean_runs_a: float
    mean_runs_b: float
    coverage: float
    simultaneous_coverage: float

    @property
    def mean_runs(self) -> float:
        """Runs used by both groups together, on average."""
        return self.mean_runs_a + self.mean_runs_b

    @property
    def decided_se(self) -> float:
        """The Monte-Carlo standard error of :attr:`decided`."""
        return math.sqrt(self.decided * (1.0 - self.decided) / self.studies)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**asdict(self), "mean_runs": self.mean_runs, "decided_se": self.decided_se}


def simulate_sequential(
    plan: PlanLike,
    *,
    effect_sd: float = 0.0,
    std_ratio: float = 1.0,
    dist: str = "normal",
    studies: int = 10_000,
    seed: int = 0,
) -> SequentialSimulation:
    """Run ``plan`` on ``studies`` simulated studies, each stopped at its first decision, and tally the outcomes.

    B's runs are drawn from ``dist`` with mean 0 and variance 1 (:func:`null_paths`); A's are ``effect_sd +
    std_ratio`` times such draws, so the mean difference is ``effect_sd`` standard deviations of B and the std
    ratio ``std_ratio``; ``plan.effect`` is read in B's standard deviations. The seeds differ from the
    calibration's.

    Example:
        >>> from deviate_cb.stats.sequential import plan_looks, plan_sequential
        >>> sim = simulate_sequential(plan_sequential(plan_looks(3, 3, 1, 20)), effect_sd=2.0, studies=2000)
        >>> sim.decided > 0.95, sim.mean_runs_a < 20
        (True, True)
    """
    dist, studies, seed = _check_sim(dist, studies, seed)
    if plan.on == "improvement":
        raise ValueError(
            "`plan` must decide on the mean or the spread: a P(A>B) plan is simulated with "
            "improvement_look.improvement_outcomes. Received: plan.on='improvement'."
        )
    for value, name, least in ((effect_sd, "effect_sd", -math.inf), (std_ratio, "std_ratio", 0.0)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not least < value < math.inf:
            what = "a finite number" if name == "effect_sd" else "a positive finite number"
            raise ValueError(f"`{name}` must be {what}. Received: {name}={value!r}.")
    from scipy.special import stdtrit

    looks, on = plan.looks, plan.on
    nominals = np.array(plan.nominals)
    crit = stdtrit(np.array([a + b - 2.0 for a, b in looks]), 1.0 - nominals / 2.0)  # the spread's
    n_a, n_b = np.array([a for a, _ in looks]), np.array([b for _, b in looks])
    counts = dict.fromkeys(("a_better", "b_better", "equivalent", "undecided", "runs_a", "runs_b", "cover", "all"), 0.0)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 27, 1]))
    for x, y in null_paths(looks, dist, studies, rng):
        x = effect_sd + std_ratio * x
        above, below, equivalent, covers = _look_outcomes(plan, x, y, crit, effect_sd, std_ratio)
        decided = above | below
        stop = decided | equivalent
        stop[:, -1] = True
        at = np.argmax(stop, axis=1)
        rows = np.arange(at.size)
        a_better = (below if on == "spread" or plan.direction == "min" else above)[rows, at]
        counts["a_better"] += float(np.sum(a_better))
        counts["b_better"] += float(np.sum(decided[rows, at] & ~a_better))
        counts["equivalent"] += float(np.sum(equivalent[rows, at] & ~decided[rows, at]))
        counts["undecided"] += float(np.sum(~decided[rows, at] & ~equivalent[rows, at]))
        counts["runs_a"] += float(np.sum(n_a[at]))
        counts["runs_b"] += float(np.sum(n_b[at]))
        counts["cover"] += float(np.sum(covers[rows, at]))
        counts["all"] += float(np.sum(covers.all(axis=1)))
    rate = {key: value / studies for key, value in counts.items()}
    return SequentialSimulation(
        studies, dist, float(effect_sd), float(std_ratio), rate["a_better"] + rate["b_better"], rate["a_better"],
        rate["b_better"], rate["equivalent"], rate["undecided"], rate["runs_a"], rate["runs_b"], rate["cover"],
        rate["all"],
    )  # fmt: skip


def _look_outcomes(
    plan: PlanLike, x: np.ndarray, y: np.ndarray, crit: np.ndarray, shift: float, ratio: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per path and look: the interval above / below "no difference", inside the effect bounds, holding the truth."""
    looks, effect = plan.looks, plan.effect
    if plan.on == "mean":
        from scipy.special import stdtrit

        # the interval diff +- widened(q, a) se, q = t_{dof, 1-p_k/2}: a zero-width one (constant groups) is no
        # interval at all, so it is taken as the whole line: no decision, and it holds the truth
        diff, se, dof, skew = welch_parts(x, y, looks)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = stdtrit(dof, 1.0 - np.array(plan.nominals) / 2.0)
            half = np.where(se > 0, widened(q, plan.kappa * np.abs(skew) / 6.0) * se, np.inf)
        outside = np.abs(diff) > half
        covers = np.abs(diff - shift) <= half
        equivalent = np.abs(diff) + half < effect if effect is not None else np.zeros(diff.shape, bool)
        return outside & (diff > 0), outside & (diff < 0), equivalent, covers
    # the interval of the std ratio is the c whose t(c) is within +-crit, and t(c) decreases in c
    parts_a = abs_dev_parts(x, tuple(n for n, _ in looks))
    parts_b = abs_dev_parts(y, tuple(n for _, n in looks))
    t_one = bf_t(parts_a, parts_b, looks)
    if effect is not None:
        equivalent = (bf_t(parts_a, parts_b, looks, 1.0 / effect) > crit) & (
            bf_t(parts_a, parts_b, looks, effect) < -crit
        )
    else:
        equivalent = np.zeros(t_one.shape, bool)
    return t_one > crit, t_one < -crit, equivalent, np.abs(bf_t(parts_a, parts_b, looks, ratio)) <= crit


def naive_rate(
    looks: tuple[tuple[int, int], ...],
    *,
    alpha: float = 0.05,
    on: str = "mean",
    dist: str = "normal",
    studies: int = 10_000,
    seed: int = 0,
) -> float:
    """How often re-testing at ``alpha`` after every look rejects somewhere when there is no difference.

    Example:
        >>> naive_rate(tuple((n, n) for n in range(3, 21)), studies=4000) > 0.12
        True
    """
    from deviate_cb.stats._results import check_level

    on = check_on(on)
    looks = check_looks(looks, on)
    alpha = check_level(alpha, "alpha")
    dist, studies, seed = _check_sim(dist, studies, seed)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 27, 2]))
    hits = 0
    for x, y in null_paths(looks, dist, studies, rng):
        hits += int(np.sum((small_p(*look_t(x, y, looks, on), looks, alpha) < alpha).any(axis=1)))
    return hits / studies


def _check_sim(dist: object, studies: object, seed: object) -> tuple[str, int, int]:
    from deviate_cb.stats._checks import positive_int

    return check_dist(dist), positive_int(studies, "studies"), check_seed(seed)
