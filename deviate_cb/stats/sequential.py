"""Sequential stopping: test A against B after every round of runs, on a group-sequential plan that spends the
error rate once; each look gives a repeated confidence interval and the decision read off it.

Example:
    >>> plan = plan_sequential(plan_looks(3, 3, 2, 9))
    >>> plan.looks, [round(p, 4) for p in plan.nominals]
    (((3, 3), (5, 5), (7, 7), (9, 9)), [0.0076, 0.0386, 0.0805, 0.1232])
    >>> look = sequential_look(plan, [0.84, 0.85, 0.86, 0.85, 0.86], [0.80, 0.82, 0.81, 0.83, 0.81])
    >>> look.decision, look.k
    ('A better', 2)
    >>> print(look.text)  # doctest: +NORMALIZE_WHITESPACE
    look 2 of 4: A-B = 0.038 [0.00572, 0.0703] (95% repeated CI, O'Brien-Fleming-type group-sequential Welch
    t-test, skewness-widened (kappa 8)): A better; bias-adjusted A-B 0.0377 (for stopping on a decision;
    Whitehead 1986)
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
from deviate_cb.stats._looks import (
    MIN_RUNS,
    check_boundary,
    check_effect,
    check_kappa,
    check_looks,
    check_on,
    check_seed,
)
from deviate_cb.stats._results import check_level, json_value
from deviate_cb.stats._std import guarded_std, is_constant
from deviate_cb.stats.boundaries import boundary_nominals
from deviate_cb.stats.directions import validate_direction
from deviate_cb.stats.improvement_look import DEFAULT_THRESHOLD, calibrate_improvement, check_threshold
from deviate_cb.stats.intervals import ConfidenceInterval
from deviate_cb.stats.look_statistics import mean_look, spread_look
from deviate_cb.stats.stopping import calibrate_boundary

__all__ = [
    "DEFAULT_BOUNDARY",
    "DEFAULT_KAPPA",
    "SequentialLook",
    "SequentialPlan",
    "plan_looks",
    "plan_sequential",
    "sequential_look",
]

DEFAULT_BOUNDARY = "obf"
DEFAULT_KAPPA = 8.0  # the mean's; the spread's is 0
_TESTS = {
    "mean": "Welch t-test",
    "spread": "Brown-Forsythe test",
    "improvement": "P(A>B) interval (placement SE, Hanley-McNeil floor)",
}
_SHAPES = {"obf": "O'Brien-Fleming-type", "pocock": "Pocock-type"}
_PATHS = {"mean": 200_000, "spread": 100_000, "improvement": 10_000}
REFERENCE = (
    "O'Brien & Fleming (1979), Biometrics 35:549-556; Pocock (1977), Biometrika 64:191-199; Jennison & Turnbull "
    "(2000), Group Sequential Methods with Applications to Clinical Trials, ch. 2-3 and 9 (repeated confidence "
    "intervals); Hall (1992), The Bootstrap and Edgeworth Expansion, and Johnson (1978), JASA 73:536-544 (the "
    "skewness term)"
)
_LEGACY_REFERENCE = (
    "Pocock (1977), Biometrika 64:191-199; Jennison & Turnbull (2000), Group Sequential Methods with "
    "Applications to Clinical Trials, ch. 2-3 and 9 (repeated confidence intervals)"
)


def _method(on: str, boundary: str, kappa: float) -> str:
    widened = f", skewness-widened (kappa {kappa:g})" if kappa > 0 else ""
    return f"{_SHAPES[boundary]} group-sequential {_TESTS[on]}{widened}"


@dataclass(frozen=True)
class SequentialPlan:
    """The looks of a sequential comparison and the nominal level each look tests at.

    Attributes:
        looks: ``(n_a, n_b)`` at each look, in order.
        alpha: The chance that some look rejects when there is no difference.
        on: ``"mean"`` or ``"spread"``.
        effect: The smallest difference that matters (a factor ``> 1`` for the spread), or ``None``: no
            "no difference" stop.
        direction: ``"max"`` (higher is better) or ``"min"``; the spread's "better" is always "spreads less".
        nominals: Each look's nominal two-sided level (:attr:`nominal`: the last look's, every look's for Pocock).
        seed, paths: How the boundary was calibrated.
        boundary: ``"obf"`` (O'Brien-Fleming-type: strict early looks) or ``"pocock"`` (one level at every look).
        kappa: The inflation of the mean's skewness term (0: Welch's plain t interval; the spread: 0).
        method, reference: What runs, and where it comes from.
        threshold: ``on="improvement"``: the P(A>B) to exceed with confidence (``None`` otherwise).
    """

    looks: tuple[tuple[int, int], ...]
    alpha: float
    on: str
    effect: Optional[float]
    direction: str
    nominals: tuple[float, ...]
    seed: int
    paths: int
    boundary: str = field(default=DEFAULT_BOUNDARY)
    kappa: float = field(default=0.0)
    method: str = field(default="")
    reference: str = field(default=REFERENCE)
    threshold: Optional[float] = field(default=None)

    @property
    def nominal(self) -> float:
        """The last look's nominal level (Pocock's: every look's)."""
        return self.nominals[-1]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back unchanged.

        Example:
            >>> plan = plan_sequential(((4, 4), (6, 6)), effect=0.5)
            >>> SequentialPlan.from_dict(plan.to_dict()) == plan
            True
        """
        extra = {} if self.threshold is None else {"threshold": self.threshold}
        return {
            "looks": [list(look) for look in self.looks],
            "alpha": self.alpha,
            "on": self.on,
            "effect": self.effect,
            "direction": self.direction,
            "boundary": self.boundary,
            "kappa": self.kappa,
            "nominals": list(self.nominals),
            "nominal": self.nominal,
            "seed": self.seed,
            "paths": self.paths,
            "method": self.method,
            "reference": self.reference,
            **extra,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SequentialPlan:
        """The plan :meth:`to_dict` wrote, checked; the nominal levels are taken as written, never recalibrated.

        A plan written before boundaries were named (no ``"boundary"``: one ``"nominal"``) is the Pocock-type
        plan of Welch's plain t-test (``kappa`` 0) it was, its looks as written (2 runs a group allowed then).

        Example:
            >>> old = {"looks": [[2, 2], [4, 4]], "alpha": 0.05, "on": "mean", "nominal": 0.03, "seed": 0,
            ...        "paths": 1000}
            >>> plan = SequentialPlan.from_dict(old)
            >>> plan.boundary, plan.kappa, plan.nominals
            ('pocock', 0.0, (0.03, 0.03))
        """
        legacy = "boundary" not in data
        missing = sorted({"looks", "alpha", "on", "seed", "paths", "nominal" if legacy else "nominals"} - set(data))
        if missing:
            raise ValueError(f"A sequential plan needs {', '.join(missing)}. Received keys: {sorted(data)}.")
        on = check_on(data["on"])
        kappa = 0.0 if legacy else check_kappa(data.get("kappa", 0.0), on)
        # Welch's plain t-test (kappa 0) needs 2 runs a group, as the plans written before the skewness term had
        looks = check_looks(data["looks"], on, least=2 if on == "mean" and kappa == 0 else None)
        written = [data["nominal"]] * len(looks) if legacy else data["nominals"]
        if (
            not isinstance(written, (list, tuple))
            or len(written) != len(looks)
            or not all(not isinstance(p, bool) and isinstance(p, (int, float)) and 0 < p < 1 for p in written)
        ):
            name = "nominal" if legacy else "nominals"
            raise ValueError(
                f"`{name}` must be {'a number' if legacy else 'one number per look'} in (0, 1). "
                f"Received: {name}={data[name]!r}."
            )
        boundary = "pocock" if legacy else check_boundary(data["boundary"])
        if on == "improvement" and "threshold" not in data:
            raise ValueError(f"A P(A>B) plan needs its threshold. Received keys: {sorted(data)}.")
        threshold = check_threshold(data["threshold"]) if on == "improvement" else None
        return cls(
            looks,
            check_level(data["alpha"], "alpha"),
            on,
            check_effect(data.get("effect"), on),
            validate_direction(data.get("direction", "max")),
            tuple(float(p) for p in written),
            check_seed(data["seed"]),
            positive_int(data["paths"], "paths"),
            boundary,
            kappa,
            str(data.get("method", _method(on, boundary, kappa))),
            str(data.get("reference", _LEGACY_REFERENCE if legacy else REFERENCE)),
            threshold,
        )


@dataclass(frozen=True)
class SequentialLook:
    """One look of a sequential comparison: the estimate, its repeated confidence interval and the decision.

    Attributes:
        k, n_looks: This look's number (from 1) and the plan's number of looks.
        n_a, n_b: Runs in each group.
        statistic: The mean difference A-B, or the ratio ``std(A)/std(B)``.
        pvalue: The test's nominal two-sided p-value at this look (the mean: of the skewness-widened test;
            compare with :attr:`nominal`, not alpha; NaN where both groups are constant).
        nominal: This look's nominal level; level: ``1 - alpha``, the simultaneous coverage of the repeated
            intervals.
        low, high: The repeated confidence interval (:meth:`confidence_interval`; the whole line while both
            groups are constant).
        decision: ``"A better"``, ``"B better"``, ``"no difference of at least EFFECT"``, ``"continue"`` or
            ``"undecided"`` (the last look, not decided); outcome: the same as a code (``"a_better"``,
            ``"b_better"``, ``"equivalent"``, ``"continue"``, ``"undecided"``).
        text: One line for the launcher to print.
        adjusted: Where the mean's study stops on a decision, Whitehead's (1986) bias-adjusted difference
            (:func:`~deviate_cb.stats.stopped_estimate.bias_adjusted`: a study that stops early overstates the
            difference on average), within the interval; NaN otherwise.
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
    adjusted: float = math.nan

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
        names = ("k", "n_looks", "n_a", "n_b", "on", "statistic", "pvalue", "nominal", "level", "low", "high",
                 "adjusted")  # fmt: skip
        out = {name: json_value(getattr(self, name)) for name in names}
        return {**out, "decision": self.decision, "outcome": self.outcome, "text": self.text}


def plan_sequential(
    looks: Sequence[Sequence[int]],
    *,
    alpha: float = 0.05,
    on: str = "mean",
    effect: Optional[float] = None,
    direction: str = "max",
    boundary: str = DEFAULT_BOUNDARY,
    kappa: Optional[float] = None,
    seed: int = 0,
    paths: Optional[int] = None,
    threshold: Optional[float] = None,
) -> SequentialPlan:
    """Plan a sequential comparison: the looks and each look's calibrated nominal level (see the module's notes).

    Args:
        looks: ``(n_a, n_b)`` at each look (e.g. :func:`plan_looks`): at least 3 runs per group, neither group
            shrinking, some runs added between looks.
        alpha: The chance of any wrong claim over the whole study, in (0, 1).
        on: ``"mean"`` (Welch's t, skewness-widened) or ``"spread"`` (Brown-Forsythe, the ratio of standard
            deviations).
        effect: The smallest difference that matters, in the metric's units (the spread: a factor ``> 1``);
            ``None``: no "no difference" stop.
        direction: ``"max"`` when higher values of the metric are better, ``"min"`` when lower are.
        boundary: ``"obf"`` (O'Brien-Fleming-type, the default: early looks decide only on a large difference)
            or ``"pocock"`` (the same level at every look).
        kappa: The inflation of the mean's skewness term (default 8 for the mean; 0 turns the widening off, as
            the spread always has it).
        seed, paths: The calibration's seed and number of simulated null studies (default 200,000 for the
            mean, 100,000 for the spread, 10,000 for P(A>B)). The result is cached by its arguments.
        threshold: ``on="improvement"`` only: "A better" when the interval of ``P(A>B)`` (ties half; for
            ``direction="min"`` a lower run wins) lies above it, "B better" below ``1 - threshold``, "no
            improvement of at least ``threshold`` either way" inside ``(1 - threshold, threshold)``; in (0.5, 1),
            default 0.75 (Bouthillier et al. 2021); :mod:`~deviate_cb.stats.improvement_look`.

    Example:
        >>> plan = plan_sequential(((5, 5), (10, 10)))  # the levels of q, before the skewness widening
        >>> [round(p, 4) for p in plan.nominals], plan.boundary, plan.kappa
        ([0.0333, 0.1324], 'obf', 8.0)
    """
    on = check_on(on)
    checked = check_looks(looks, on)
    alpha = check_level(alpha, "alpha")
    effect = check_effect(effect, on)
    direction = validate_direction(direction)
    boundary = check_boundary(boundary)
    kappa = check_kappa((DEFAULT_KAPPA if on == "mean" else 0.0) if kappa is None else kappa, on)
    seed = check_seed(seed)
    paths = _PATHS[on] if paths is None else positive_int(paths, "paths")
    if on != "improvement" and threshold is not None:
        raise ValueError(f"`threshold` goes with on='improvement'. Received: threshold={threshold!r}, on={on!r}.")
    if on == "improvement":
        threshold = check_threshold(DEFAULT_THRESHOLD if threshold is None else threshold)
        constant = calibrate_improvement(checked, alpha, threshold, seed, paths, boundary)
    else:
        constant = calibrate_boundary(checked, alpha, on, seed, paths, boundary, kappa)
    nominals = (alpha,) if len(checked) == 1 else boundary_nominals(checked, constant, boundary)
    method = _method(on, boundary, kappa)
    return SequentialPlan(
        checked, alpha, on, effect, direction, nominals, seed, paths, boundary, kappa, method, REFERENCE, threshold
    )


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


def sequential_look(plan: SequentialPlan, a: Values, b: Values, *, adjust: bool = True) -> SequentialLook:
    """Test the runs made so far at the plan's look ``(len(a), len(b))``.

    Args:
        plan: From :func:`plan_sequential` (or :meth:`SequentialPlan.from_dict`).
        a, b: The metric of every run of A and of B so far (finite; the look is found from their counts).
        adjust: Where the mean's study stops on a decision, add the bias-adjusted difference (a simulation of
            20,000 seeded normal studies at the observed spreads, about 0.1 s).

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
    nominal = plan.nominals[k - 1]
    if plan.on == "mean":
        estimate, pvalue, low, high = mean_look(x, y, nominal, plan.kappa)
    elif plan.on == "spread":
        estimate, pvalue, low, high = spread_look(x, y, nominal)
    else:
        from deviate_cb.stats.improvement_look import improvement_interval

        sign = -1.0 if plan.direction == "min" else 1.0  # "min": a lower run is the better one
        estimate, low, high = improvement_interval(sign * x, sign * y, nominal)
        pvalue = math.nan  # the decision is read off the interval only
    last = k == len(plan.looks)
    name = {"mean": "A-B", "spread": "std A/B", "improvement": _p_name(plan)}[plan.on]
    head = f"look {k} of {len(plan.looks)}: {name} = {estimate:.3g}"
    runs = f"{x.size} runs each" if x.size == y.size else f"{x.size} and {y.size} runs"
    if is_constant(x) and is_constant(y):  # no spread to measure a difference against: never a claim
        outcome = "undecided" if last else "continue"
        text = f"{head}: both groups constant so far: no spread to test against: {outcome}"
        if last:
            text += f": {runs}, all equal within each group; no difference can be claimed from them"
        low, high, pvalue = (0.0, 1.0, math.nan) if plan.on == "improvement" else (-math.inf, math.inf, math.nan)
    else:
        outcome = _outcome(plan, low, high, last=last)
        text = f"{head} [{low:.3g}, {high:.3g}] ({_percent(1 - plan.alpha)} repeated CI, {plan.method}): "
        text += _decision(plan, outcome)
        if outcome == "undecided":
            what = {"mean": "difference", "spread": "ratio", "improvement": _p_name(plan)}[plan.on]
            text += f": {runs}; the {what} is within [{low:.3g}, {high:.3g}]"
        if plan.on == "improvement":
            text += f" ({_p_meaning(plan)})"
    adjusted = math.nan
    if adjust and plan.on == "mean" and outcome in ("a_better", "b_better", "equivalent"):
        from deviate_cb.stats.stopped_estimate import bias_adjusted

        found = bias_adjusted(plan, estimate, guarded_std(x), guarded_std(y), seed=plan.seed)
        adjusted = min(max(found, low), high) if math.isfinite(found) else math.nan  # an estimate within its CI
        if math.isfinite(adjusted):
            text += f"; bias-adjusted A-B {adjusted:.3g} (for stopping on a decision; Whitehead 1986)"
    return SequentialLook(
        k, len(plan.looks), int(x.size), int(y.size), plan.on, estimate, pvalue, nominal, 1.0 - plan.alpha,
        low, high, _decision(plan, outcome), outcome, text, adjusted,
    )  # fmt: skip


def _p_name(plan: SequentialPlan) -> str:
    return "P(A<B)" if plan.direction == "min" else "P(A>B)"


def _p_meaning(plan: SequentialPlan) -> str:
    better = "lower" if plan.direction == "min" else "higher"
    return (
        f"{_p_name(plan)}: the chance that a run of A has the better ({better}) value than a run of B, ties "
        f"counted half; threshold {plan.threshold:g}, Bouthillier et al. 2021"
    )


def _outcome(plan: SequentialPlan, low: float, high: float, last: bool) -> str:
    if plan.on == "improvement":
        threshold = float(plan.threshold or DEFAULT_THRESHOLD)
        if low > threshold:
            return "a_better"
        if high < 1.0 - threshold:
            return "b_better"
        if 1.0 - threshold < low and high < threshold:
            return "equivalent"
        return "undecided" if last else "continue"
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
    if outcome == "equivalent" and plan.on == "improvement":
        return f"no improvement of at least {plan.threshold:g} either way"
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
