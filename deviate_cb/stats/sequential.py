"""Sequential stopping (issue 27): test A against B after every round of runs, and stay valid while doing so.

Re-testing at ``alpha`` after every round and stopping at the first ``p < alpha`` rejects a true "no difference"
far more often than ``alpha``: 28.6% at 0.05 with 48 looks, after every run from 3 to 50 runs per group
(normal runs, Welch's t; :func:`naive_rate` of ``plan_looks(3, 3, 1, 50)``, 100,000 simulated studies, seed
101). This module plans the looks instead, as a group-sequential design with a Pocock-type constant nominal
level (Pocock 1977, Biometrika 64:191; Jennison & Turnbull, *Group Sequential Methods with Applications to
Clinical Trials*, 2000, ch. 2-3). Pocock's constant nominal level was derived for normal statistics with known
variance and equal increments; here it is calibrated by simulation for the t-tests actually run and for any
looks:

- :func:`plan_sequential` fixes the looks ``(n_a_k, n_b_k)``, ``k = 1..K``, and one nominal two-sided level
  ``p*``: look ``k`` rejects when the test's p-value is below ``p*``, and ``p*`` is calibrated so that *some*
  look rejects with probability ``alpha`` when there is no difference. The mean uses Welch's t-test (the
  groups may spread differently: that is what deviate-cb measures); for normal runs with a common spread the
  joint law of its t statistics and degrees of freedom at all looks is the same for every mean and standard
  deviation (location-scale invariance), so simulating standard normal runs gives ``p*`` exactly up to
  Monte-Carlo error (200,000 paths, seeded: a plan is reproducible; see :mod:`~deviate_cb.stats.stopping`).
  With unequal spreads the law depends a little on their ratio, through Welch's approximation: simulated
  rejection rates of a true "no difference" at 5% (looks every run up to 50 each) are 5.6% / 6.1% with the
  first look at 3 runs each and standard deviations 2x / 3x apart, 5.1% / 5.2% from 10 runs, 5.0% from 10 runs in
  rounds of 5 (the pooled t-test, which Pocock's design assumes, gave 6.1% / 7.3% and 5.5% / 6.0%).
  The spread uses the Brown-Forsythe test (``scipy.stats.levene(center="median")``) calibrated the same way
  (100,000 normal paths: its median step costs more; 2 s for 48 looks); its null law is location-scale
  invariant too, but depends on the shape: under unit-variance t(3) runs both tests reject less than ``alpha``
  (3.7-4.5% at 5%, see the tests), so heavy tails make the design conservative, not wrong.
- :func:`sequential_look` tests the runs made so far at a planned look and gives the *repeated confidence interval*
  (Jennison & Turnbull 2000, ch. 9): the mean difference ``d_k +- t_{df_k, 1-p*/2} SE_k`` (Welch's standard error and
  degrees of freedom), or for the spread the ratio ``std(A)/std(B)`` with the interval that inverts Brown-Forsythe at
  ``1 - p*`` (:func:`~deviate_cb.stats.spread.spread_ratio`). The interval at look ``k`` holds the true value exactly
  when the same test of "the difference is the true one" does not reject, and that test's statistics have the null
  law whatever the true difference (or ratio), so **all** the looks' intervals hold it at once with probability
  ``1 - alpha`` (exactly for normal runs with a common spread, as above otherwise), whatever rule stops the study. The
  decisions are read off the interval, so they never disagree with it: A or B better when it excludes 0 (a ratio of
  1), "no difference of at least ``effect``" when it lies inside ``(-effect, effect)`` (the spread: inside
  ``(1/effect, effect)``, ``effect > 1`` a factor), "undecided" at the last look. Every claim made is wrong only if
  some interval misses the truth, so the chance of any wrong claim is at most ``alpha``. A difference that is decided
  but smaller than ``effect`` is reported as decided. For the mean, "better" follows ``direction`` (``"max"``: higher
  is better); for the spread, A is better when it spreads less.
- The precision rule, run until the std's chi-square interval is narrow enough: its half-width relative to
  the std, ``(sqrt((n-1)/chi2_{a/2}) - sqrt((n-1)/chi2_{1-a/2})) / 2``, depends on ``n`` only
  (:func:`std_precision`), so stopping on it (:func:`runs_for_precision`) is a fixed number of runs decided in
  advance: it does not bias the interval's coverage.

A plan is written to the study's manifest (:meth:`SequentialPlan.to_dict`) and a resumed launcher reads it back
(:meth:`SequentialPlan.from_dict`), ``p*`` included, so the alpha already spent is never spent again.

Example:
    >>> plan = plan_sequential(plan_looks(3, 3, 2, 9))
    >>> plan.looks, round(plan.nominal, 4)
    (((3, 3), (5, 5), (7, 7), (9, 9)), 0.0218)
    >>> look = sequential_look(plan, [0.84, 0.85, 0.86, 0.85, 0.86], [0.80, 0.82, 0.81, 0.83, 0.81])
    >>> look.decision, look.k
    ('A better', 2)
    >>> print(look.text)
    look 2 of 4: A-B = 0.038 [0.0197, 0.0563] (95% repeated CI, Pocock-type group-sequential Welch t-test): A better
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from deviate_cb.stats._checks import as_vector, positive_int
from deviate_cb.stats._groups import Values
from deviate_cb.stats._looks import MIN_RUNS, check_effect, check_looks, check_on, check_seed
from deviate_cb.stats._results import check_level, json_value
from deviate_cb.stats.directions import validate_direction
from deviate_cb.stats.intervals import ConfidenceInterval
from deviate_cb.stats.stopping import calibrate_nominal

__all__ = [
    "SequentialLook",
    "SequentialPlan",
    "plan_looks",
    "plan_sequential",
    "runs_for_precision",
    "sequential_look",
    "std_precision",
]

_METHODS = {
    "mean": "Pocock-type group-sequential Welch t-test",
    "spread": "Pocock-type group-sequential Brown-Forsythe test",
}
_PATHS = {"mean": 200_000, "spread": 100_000}
REFERENCE = (
    "Pocock (1977), Biometrika 64:191-199; Jennison & Turnbull (2000), Group Sequential Methods with "
    "Applications to Clinical Trials, ch. 2-3 and 9 (repeated confidence intervals)"
)


@dataclass(frozen=True)
class SequentialPlan:
    """The looks of a sequential comparison and the nominal level ``p*`` every look tests at.

    Attributes:
        looks: ``(n_a, n_b)`` at each look, in order.
        alpha: The chance that some look rejects when there is no difference.
        on: ``"mean"`` or ``"spread"``.
        effect: The smallest difference that matters (a factor ``> 1`` for the spread), or ``None``: no
            "no difference" stop.
        direction: ``"max"`` (higher is better) or ``"min"``; the spread's "better" is always "spreads less".
        nominal: ``p*``, the nominal two-sided level of each look.
        seed, paths: How ``p*`` was calibrated.
        method, reference: What runs, and where it comes from.
    """

    looks: tuple[tuple[int, int], ...]
    alpha: float
    on: str
    effect: Optional[float]
    direction: str
    nominal: float
    seed: int
    paths: int
    method: str = field(default="")
    reference: str = field(default=REFERENCE)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back unchanged.

        Example:
            >>> plan = plan_sequential(((4, 4), (6, 6)), effect=0.5)
            >>> SequentialPlan.from_dict(plan.to_dict()) == plan
            True
        """
        return {
            "looks": [list(look) for look in self.looks],
            "alpha": self.alpha,
            "on": self.on,
            "effect": self.effect,
            "direction": self.direction,
            "nominal": self.nominal,
            "seed": self.seed,
            "paths": self.paths,
            "method": self.method,
            "reference": self.reference,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SequentialPlan:
        """The plan :meth:`to_dict` wrote, checked; ``nominal`` is taken as written, never recalibrated."""
        missing = sorted({"looks", "alpha", "on", "nominal", "seed", "paths"} - set(data))
        if missing:
            raise ValueError(f"A sequential plan needs {', '.join(missing)}. Received keys: {sorted(data)}.")
        on = check_on(data["on"])
        nominal = data["nominal"]
        if isinstance(nominal, bool) or not isinstance(nominal, (int, float)) or not 0 < nominal < 1:
            raise ValueError(f"`nominal` must be a number in (0, 1). Received: nominal={nominal!r}.")
        return cls(
            check_looks(data["looks"], on),
            check_level(data["alpha"], "alpha"),
            on,
            check_effect(data.get("effect"), on),
            validate_direction(data.get("direction", "max")),
            float(nominal),
            check_seed(data["seed"]),
            positive_int(data["paths"], "paths"),
            str(data.get("method", _METHODS[on])),
            str(data.get("reference", REFERENCE)),
        )


@dataclass(frozen=True)
class SequentialLook:
    """One look of a sequential comparison: the estimate, its repeated confidence interval and the decision.

    Attributes:
        k, n_looks: This look's number (from 1) and the plan's number of looks.
        n_a, n_b: Runs in each group.
        statistic: The mean difference A-B, or the ratio ``std(A)/std(B)``.
        pvalue: The test's nominal two-sided p-value at this look (compare with :attr:`nominal`, not alpha).
        nominal: ``p*``; level: ``1 - alpha``, the simultaneous coverage of the repeated intervals.
        low, high: The repeated confidence interval (:meth:`confidence_interval`).
        decision: ``"A better"``, ``"B better"``, ``"no difference of at least EFFECT"``, ``"continue"`` or
            ``"undecided"`` (the last look, not decided); outcome: the same as a code (``"a_better"``,
            ``"b_better"``, ``"equivalent"``, ``"continue"``, ``"undecided"``).
        text: One line for the launcher to print.
    """

    k: int
    n_looks: int
    n_a: int
    n_b: int
    on: str
    statistic: float
    pvalue: float
    nominal: float
    level: float
    low: float
    high: float
    decision: str
    outcome: str
    text: str

    @property
    def estimate(self) -> float:
        """The same as :attr:`statistic`."""
        return self.statistic

    @property
    def stop(self) -> bool:
        """Whether the study stops here (decided, no difference, or the last look)."""
        return self.outcome != "continue"

    def confidence_interval(self) -> ConfidenceInterval:
        """The repeated confidence interval at this look (level :attr:`level` jointly over all looks)."""
        return ConfidenceInterval(self.low, self.high)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN and infinite values become ``None``)."""
        names = ("k", "n_looks", "n_a", "n_b", "on", "statistic", "pvalue", "nominal", "level", "low", "high")
        out = {name: json_value(getattr(self, name)) for name in names}
        return {**out, "decision": self.decision, "outcome": self.outcome, "text": self.text}


def plan_sequential(
    looks: Sequence[Sequence[int]],
    *,
    alpha: float = 0.05,
    on: str = "mean",
    effect: Optional[float] = None,
    direction: str = "max",
    seed: int = 0,
    paths: Optional[int] = None,
) -> SequentialPlan:
    """Plan a sequential comparison: the looks and the calibrated nominal level ``p*`` (see the module's notes).

    Args:
        looks: ``(n_a, n_b)`` at each look (e.g. :func:`plan_looks`): at least 2 runs per group (3 for the
            spread), neither group shrinking, some runs added between looks.
        alpha: The chance of any wrong claim over the whole study, in (0, 1).
        on: ``"mean"`` (Welch's t) or ``"spread"`` (Brown-Forsythe, the ratio of standard deviations).
        effect: The smallest difference that matters, in the metric's units (the spread: a factor ``> 1``);
            ``None``: no "no difference" stop.
        direction: ``"max"`` when higher values of the metric are better, ``"min"`` when lower are.
        seed, paths: The calibration's seed and number of simulated null studies (default 200,000 for the
            mean, 100,000 for the spread). The result is cached by its arguments.

    Example:
        >>> round(plan_sequential(((5, 5), (10, 10))).nominal, 4)
        0.0308
    """
    on = check_on(on)
    checked = check_looks(looks, on)
    alpha = check_level(alpha, "alpha")
    effect = check_effect(effect, on)
    direction = validate_direction(direction)
    seed = check_seed(seed)
    paths = _PATHS[on] if paths is None else positive_int(paths, "paths")
    nominal = calibrate_nominal(checked, alpha, on, seed, paths)
    return SequentialPlan(checked, alpha, on, effect, direction, nominal, seed, paths, _METHODS[on])


def plan_looks(
    n_a0: int, n_b0: int, round_size: int, max_runs: int, *, on: str = "mean"
) -> tuple[tuple[int, int], ...]:
    """The looks when both groups are topped up to the same number of runs, ``round_size`` runs per round.

    Each round raises the smaller group by ``round_size`` (at most ``max_runs``) and tops the other up to it (a
    group already above waits); a look follows every round, and the runs already made are the first look, once
    each group has the runs the test needs (2; 3 for the spread). The last look is ``(max_runs, max_runs)``.

    Example:
        >>> plan_looks(3, 3, 2, 9)
        ((3, 3), (5, 5), (7, 7), (9, 9))
        >>> plan_looks(0, 6, 3, 10)
        ((3, 6), (6, 6), (9, 9), (10, 10))
    """
    for value, name in ((n_a0, "n_a0"), (n_b0, "n_b0")):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ValueError(f"`{name}` must be a non-negative integer. Received: {name}={value!r}.")
    round_size = positive_int(round_size, "round_size")
    max_runs = positive_int(max_runs, "max_runs")
    least = MIN_RUNS[check_on(on)]
    if max_runs < max(n_a0, n_b0, least):
        raise ValueError(
            f"`max_runs` must be at least the runs already made and {least} (the test's minimum). "
            f"Received: max_runs={max_runs} with n_a0={n_a0}, n_b0={n_b0}."
        )
    n_a, n_b = int(n_a0), int(n_b0)
    looks = [(n_a, n_b)] if min(n_a, n_b) >= least else []
    while (n_a, n_b) != (max_runs, max_runs):
        level = min(max_runs, min(n_a, n_b) + round_size)
        n_a, n_b = max(n_a, level), max(n_b, level)
        if min(n_a, n_b) >= least:
            looks.append((n_a, n_b))
    return tuple(looks)


def sequential_look(plan: SequentialPlan, a: Values, b: Values) -> SequentialLook:
    """Test the runs made so far at the plan's look ``(len(a), len(b))``.

    Args:
        plan: From :func:`plan_sequential` (or :meth:`SequentialPlan.from_dict`).
        a, b: The metric of every run of A and of B so far (finite; the look is found from their counts).

    Example:
        >>> plan = plan_sequential(((3, 3), (6, 6)), on="spread")
        >>> look = sequential_look(plan, [1.0, 1.1, 0.9], [0.0, 2.0, 1.0])
        >>> look.decision, round(look.statistic, 2), look.confidence_interval().high
        ('continue', 0.1, inf)
    """
    if not isinstance(plan, SequentialPlan):
        raise TypeError(f"`plan` must be a SequentialPlan. Received: plan of type {type(plan).__name__}.")
    x, y = _finite(a, "a"), _finite(b, "b")
    if (x.size, y.size) not in plan.looks:
        looks = ", ".join(f"({n_a}, {n_b})" for n_a, n_b in plan.looks)
        raise ValueError(
            f"(len(a), len(b)) must be a look of the plan. Received: ({x.size}, {y.size}); the looks are {looks}."
        )
    k = plan.looks.index((x.size, y.size)) + 1
    if plan.on == "mean":
        estimate, pvalue, low, high = _mean_look(x, y, plan.nominal)
    else:
        estimate, pvalue, low, high = _spread_look(x, y, plan.nominal)
    outcome = _outcome(plan, low, high, last=k == len(plan.looks))
    decision = _decision(plan, outcome)
    name = "A-B" if plan.on == "mean" else "std A/B"
    text = (
        f"look {k} of {len(plan.looks)}: {name} = {estimate:.3g} [{low:.3g}, {high:.3g}] "
        f"({_percent(1 - plan.alpha)} repeated CI, {plan.method}): {decision}"
    )
    if outcome == "undecided":
        runs = f"{x.size} runs each" if x.size == y.size else f"{x.size} and {y.size} runs"
        what = "difference" if plan.on == "mean" else "ratio"
        text += f": {runs}; the {what} is within [{low:.3g}, {high:.3g}]"
    return SequentialLook(
        k, len(plan.looks), int(x.size), int(y.size), plan.on, estimate, pvalue, plan.nominal, 1.0 - plan.alpha,
        low, high, decision, outcome, text,
    )  # fmt: skip


def std_precision(n: int, level: float = 0.95, kurtosis: Optional[float] = None) -> float:
    """The half-width of a std's interval from ``n`` runs, relative to the std: a planning number.

    Without ``kurtosis``, the chi-square interval's (normal theory: it depends on ``n`` only, and holds for normal
    runs only). With ``kurtosis`` (3 for normal runs, about 9 for lognormal(0, 0.5), more for heavier tails), the
    half-width of Bonett's interval when the runs show that kurtosis
    (:func:`~deviate_cb.stats.precision.planning_precision`): what ``deviate-replicate --until-precision``
    reaches, since its interval is Bonett's and its width follows the kurtosis of the runs.

    Example:
        >>> round(std_precision(10), 4), round(std_precision(100), 4), round(std_precision(39, kurtosis=3.0), 3)
        (0.5689, 0.1418, 0.25)
    """
    n = positive_int(n, "n")
    if n < 2:
        raise ValueError(f"`n` must be at least 2 (a std needs two runs). Received: n={n}.")
    return _precision(n, check_level(level), _kurtosis(kurtosis))


def runs_for_precision(rel: float, level: float = 0.95, kurtosis: Optional[float] = None) -> int:
    """The fewest runs whose std interval's half-width is at most ``rel`` times the std (:func:`std_precision`).

    A planning number: normal theory without ``kurtosis``; with it, for runs of that kurtosis (a metric with heavy
    tails needs several times more runs: 39 for ±25% at kurtosis 3, 133 at 9).

    Example:
        >>> runs_for_precision(0.2), round(std_precision(runs_for_precision(0.2)), 4)
        (53, 0.199)
        >>> runs_for_precision(0.25, kurtosis=3.0), runs_for_precision(0.25, kurtosis=9.0)
        (39, 133)
    """
    if isinstance(rel, bool) or not isinstance(rel, numbers.Real) or not math.isfinite(rel) or rel <= 0:
        raise ValueError(f"`rel` must be a positive number. Received: rel={rel!r}.")
    level = check_level(level)
    kurt = _kurtosis(kurtosis)
    if rel < 1e-4:
        raise ValueError(f"`rel` must be at least 1e-4 (about 1e9 runs). Received: rel={rel!r}.")
    low, high = 1, 2  # precision(low) > rel >= precision(high), with precision(1) taken as infinite
    while _precision(high, level, kurt) > rel:
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if _precision(mid, level, kurt) <= rel else (mid, high)
    return high


def _precision(n: int, level: float, kurtosis: Optional[float] = None) -> float:
    if kurtosis is not None:
        from deviate_cb.stats.precision import planning_precision

        return float(planning_precision(n, kurtosis, level))
    from scipy.special import chdtri

    df, tail = float(n - 1), (1.0 - level) / 2.0
    return 0.5 * (math.sqrt(df / chdtri(df, 1.0 - tail)) - math.sqrt(df / chdtri(df, tail)))


def _kurtosis(kurtosis: object) -> Optional[float]:
    if kurtosis is None:
        return None
    if isinstance(kurtosis, bool) or not isinstance(kurtosis, numbers.Real) or not 1 <= float(kurtosis) < math.inf:
        raise ValueError(
            f"`kurtosis` must be a number of at least 1 (3: normal runs). Received: kurtosis={kurtosis!r}."
        )
    return float(kurtosis)


def _mean_look(x: np.ndarray, y: np.ndarray, nominal: float) -> tuple[float, float, float, float]:
    from scipy.special import stdtrit

    from deviate_cb.stats.stopping import two_sided_p

    part_a, part_b = np.var(x, ddof=1) / x.size, np.var(y, ddof=1) / y.size
    se = math.sqrt(part_a + part_b)
    dof = (part_a + part_b) ** 2 / (part_a**2 / (x.size - 1) + part_b**2 / (y.size - 1)) if se > 0 else math.nan
    diff = float(np.mean(x) - np.mean(y))
    half = float(stdtrit(dof, 1.0 - nominal / 2.0)) * se if se > 0 else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        pvalue = float(two_sided_p(np.array(diff / se), np.array(dof))) if se > 0 else math.nan
    return diff, pvalue, diff - half, diff + half


def _spread_look(x: np.ndarray, y: np.ndarray, nominal: float) -> tuple[float, float, float, float]:
    from deviate_cb.stats.spread import spread_ratio

    result = spread_ratio(x, y, level=1.0 - nominal)
    low, high = result.confidence_interval()
    return float(result.statistic), float(result.pvalue), float(low), float(high)


def _outcome(plan: SequentialPlan, low: float, high: float, last: bool) -> str:
    null = 0.0 if plan.on == "mean" else 1.0
    if low > null or high < null:  # NaN compares false: continue
        above = low > null
        a_better = above != (plan.on == "spread" or plan.direction == "min")
        return "a_better" if a_better else "b_better"
    if plan.effect is not None:
        bound = (-plan.effect, plan.effect) if plan.on == "mean" else (1.0 / plan.effect, plan.effect)
        if bound[0] < low and high < bound[1]:
            return "equivalent"
    return "undecided" if last else "continue"


def _decision(plan: SequentialPlan, outcome: str) -> str:
    if outcome == "equivalent":
        return f"no difference of at least {'a factor ' if plan.on == 'spread' else ''}{plan.effect:g}"
    return {"a_better": "A better", "b_better": "B better"}.get(outcome, outcome)


def _percent(level: float) -> str:
    return f"{100 * level:.3g}%"


def _finite(values: Values, name: str) -> np.ndarray:
    array = as_vector(values, name)
    if not np.all(np.isfinite(array)):
        raise ValueError(
            f"`{name}` must hold one finite value per run (the look is found from their count). "
            f"Received: {int(np.sum(~np.isfinite(array)))} non-finite of {array.size}."
        )
    return array
