"""The lines of ``--until-decided``: its plan, each group's shortfall, and the answer in the user's words.

Example:
    >>> runs_text(((3, 4), (5, 5), (7, 7)))
    '3/4 (A/B), 5, 7'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["answer_line", "bound", "diverged_line", "finite", "group_label", "plan_line", "runs_text", "short_line"]

PROG = "deviate-replicate"


def answer_line(look: Mapping[str, Any], metric: str, plan: Any, a: tuple[str, str], b: tuple[str, str]) -> str:
    """The sequence's answer in the user's words: which group is better, by how much, after how many runs.

    Example:
        >>> from deviate_cb.stats.sequential import SequentialPlan
        >>> plan = SequentialPlan(((3, 3), (6, 6)), 0.05, "mean", None, "min", (0.01, 0.04), 0, 1000)
        >>> look = {"n_a": 6, "n_b": 6, "k": 2, "level": 0.95, "statistic": -0.08275, "low": -0.1499,
        ...         "high": -0.01558, "decision": "A better"}
        >>> answer_line(look, "loss", plan, ("new", "algo"), ("old", "algo")).split(" (95%")[0]
        'decided: experiment=new variant=algo has the better loss (lower), by 0.08275 [0.01558, 0.1499]'
    """
    runs = f"{look['n_a']} runs per group" if look["n_a"] == look["n_b"] else f"{look['n_a']} and {look['n_b']} runs"
    where = f"after {runs} (look {look['k']} of {len(plan.looks)}; alpha {plan.alpha:g} over the whole sequence)"
    level = f"{look['level']:.0%} repeated CI"
    if plan.on == "improvement":
        return _improvement_answer(look, metric, plan, a, b, where, level)
    low, high = bound(look.get("low"), -math.inf), bound(look.get("high"), math.inf)
    if look["decision"] in ("A better", "B better") and plan.on == "mean":
        winner = a if look["decision"] == "A better" else b
        # the winner's margin is |A-B|: the interval excludes 0, so it is (low, high) or (-high, -low), as the
        # estimate's sign says (not the winner's: for a lower-is-better metric the winner has the lower mean)
        lo, hi = (low, high) if look["statistic"] > 0 else (-high, -low)
        higher = "higher" if plan.direction == "max" else "lower"
        adjusted = bound(look.get("adjusted"), math.nan)
        bias = f"; {abs(adjusted):.4g} adjusted for the stopping's bias" if math.isfinite(adjusted) else ""
        return (
            f"decided: {group_label(winner)} has the better {metric} ({higher}), by {abs(look['statistic']):.4g} "
            f"[{lo:.4g}, {hi:.4g}] ({level}{bias}), {where}."
        )
    if look["decision"] in ("A better", "B better"):
        winner = a if look["decision"] == "A better" else b
        return (
            f"decided: {group_label(winner)} spreads less on {metric}: std A/B = {look['statistic']:.4g} [{low:.4g}, "
            f"{high:.4g}] ({level}), {where}."
        )
    if look["decision"] == "undecided" and math.isinf(low) and math.isinf(high):
        return (
            f"undecided at --max-runs: both groups' {metric} were constant at every run, so no difference can be "
            f"claimed from them, {where}."
        )
    if look["decision"] == "undecided":
        name = "the difference A-B" if plan.on == "mean" else "std A/B"
        return f"undecided at --max-runs: {name} of {metric} is within [{low:.4g}, {high:.4g}] ({level}), {where}."
    return f"decided: {look['decision']} in {metric}: within [{low:.4g}, {high:.4g}] ({level}), {where}."


def _improvement_answer(
    look: Mapping[str, Any], metric: str, plan: Any, a: tuple[str, str], b: tuple[str, str], where: str, level: str
) -> str:
    """The P(A>B) sequence's answer: who wins a run against a run, how often, and what that rests on.

    Example:
        >>> from deviate_cb.stats.sequential import SequentialPlan
        >>> plan = SequentialPlan(((3, 3), (6, 6)), 0.05, "improvement", None, "max", (0.01, 0.04), 0, 1000,
        ...                       threshold=0.75)
        >>> look = {"n_a": 6, "n_b": 6, "k": 2, "level": 0.95, "statistic": 0.97, "low": 0.8, "high": 1.0,
        ...         "decision": "A better"}
        >>> print(answer_line(look, "acc", plan, ("new", "algo"), ("old", "algo")).split(" (95%")[0])
        ... # doctest: +NORMALIZE_WHITESPACE
        decided: experiment=new variant=algo is better on acc: a run of it beats a run of experiment=old
        variant=algo in 97% of pairs, P(A>B) = 0.97 [0.8, 1]
    """
    low, high = bound(look.get("low"), 0.0), bound(look.get("high"), 1.0)
    name = "P(A<B)" if plan.direction == "min" else "P(A>B)"
    better = "lower" if plan.direction == "min" else "higher"
    meaning = f"{name}: the chance a run of A has the {better} {metric} than a run of B, ties half"
    shown = f"{name} = {look['statistic']:.3g} [{low:.3g}, {high:.3g}] ({level}; {meaning})"
    threshold = plan.threshold
    if look["decision"] in ("A better", "B better"):
        winner, loser = (a, b) if look["decision"] == "A better" else (b, a)
        share = look["statistic"] if look["decision"] == "A better" else 1.0 - look["statistic"]
        return (
            f"decided: {group_label(winner)} is better on {metric}: a run of it beats a run of {group_label(loser)} in "
            f"{share:.0%} of pairs, {shown}, with confidence above {threshold:g}, {where}."
        )
    if look["decision"] == "undecided":
        return (
            f"undecided at --max-runs: {shown} is neither above {threshold:g} nor below {1 - threshold:g}, nor "
            f"inside both, {where}."
        )
    return f"decided: {look['decision']} on {metric}: {shown} lies within ({1 - threshold:g}, {threshold:g}), {where}."


def bound(value: Any, missing: float) -> float:
    """An interval's end as recorded (JSON has no infinity: ``None`` is the unbounded end)."""
    return float(value) if finite(value) else missing


def plan_line(plan: Any, looks: Sequence[tuple[int, int]], metric: str, a: tuple[str, str], b: tuple[str, str]) -> str:
    if plan.on == "improvement":
        what = f"P(A>B) against the threshold {plan.threshold:g}"
    else:
        what = "the difference of the means" if plan.on == "mean" else "the spread ratio"
    first, last = plan.nominals[0], plan.nominals[-1]
    levels = f"{last:.4g}" if first == last else f"from {first:.3g} at the first look to {last:.4g} at the last"
    widened = ", before the skewness widening" if getattr(plan, "kappa", 0.0) > 0 else ""
    return (
        f"{PROG}: replicating A = {group_label(a)} against B = {group_label(b)} in rounds until {what} of {metric} is "
        f"decided: {len(looks)} looks at {runs_text(looks)} runs per group, {plan.method} at alpha "
        f"{plan.alpha:g} (nominal level per look {levels}{widened})"
    )


def runs_text(looks: Sequence[tuple[int, int]]) -> str:
    """``3, 5, 7`` runs per group; ``3/4`` where A and B have different numbers of runs at a look."""
    shown = [str(a) if a == b else f"{a}/{b} (A/B)" for a, b in looks]
    return ", ".join(shown) if len(shown) <= 6 else f"{shown[0]}, {shown[1]}, ..., {shown[-1]}"


def short_line(
    k: int,
    sizes: tuple[int, int],
    a: tuple[str, str],
    b: tuple[str, str],
    a_values: list[float],
    b_values: list[float],
    ra: Any,
    rb: Any,
) -> str:
    need = (
        f"{sizes[0]} completed runs with the metric in each group"
        if sizes[0] == sizes[1]
        else f"{sizes[0]} completed runs with the metric in A and {sizes[1]} in B"
    )
    return (
        f"{PROG}: error: look {k} needs {need}; A ({group_label(a)}) has {len(a_values)}, B ({group_label(b)}) has "
        f"{len(b_values)} ({ra.summary()}; {rb.summary()}). Failed runs are never counted: rerun the same command "
        "to retry them and continue the sequence."
    )


def diverged_line(who: str, group: tuple[str, str], metric: str, replicas: Sequence[str]) -> str:
    return (
        f"{PROG}: error: {who} ({group_label(group)}) completed replica{'s' * (len(replicas) > 1)} "
        f"{', '.join(replicas)} with a {metric} that is NaN or infinite (the training diverged): the sequential test "
        "needs a number from every run. Decide what such a run means for your comparison; the sequence cannot go on "
        "until it has a finite value (rerun it with the same seed only if the divergence was not the model's own)."
    )


def group_label(group: tuple[str, str]) -> str:
    """``experiment=E variant=V``."""
    return f"experiment={group[0]} variant={group[1]}"


def finite(value: Any) -> bool:
    """A number that is neither a bool, NaN nor infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
