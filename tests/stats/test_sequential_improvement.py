"""``on="improvement"``: the sequential P(A>B) decision against a threshold (issue 42), measured by simulation.

The question each rate answers: when the true ``P(A>B) + P(A=B)/2`` is exactly the threshold (0.75), how often
does some look wrongly say "A better" (the repeated interval's lower end above 0.75)? It must stay at most alpha
(5%) plus Monte-Carlo error, for looks from 3 runs, rounds of 1 and 3, up to 30 runs a group, on normal runs,
spreads 3:1 and 1:3 apart, lognormal against normal runs and tied accuracies (``binomial(200, p) / 200``). Each
study is stopped at its first decision, as the launcher does. Without the Hanley-McNeil floor (the placement
standard error alone, calibrated at the threshold) 3:1 spreads reached 6.3-8.8%; with the floor but calibrated on
equal spreads at the threshold alone, 4.1-4.9% (more than alpha / 2, the one side of the two-sided interval the
checks below hold it to) and a true 0.5 was held at every look in only 91-93% of studies.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr, ndtri
from scipy.stats import binom

from deviate_cb.stats.improvement_look import improvement_outcomes, superiority_parts
from deviate_cb.stats.sequential import SequentialPlan, plan_looks, plan_sequential, sequential_look

THRESHOLD = 0.75
STUDIES = 10_000


def _lognormal_shift() -> float:
    """``m`` with ``P(exp(Z1) > Z2 + m) = 0.75``: Gauss-Hermite over ``Z1``, bisection over ``m``."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()
    low, high = -10.0, 10.0
    for _ in range(60):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if float(np.sum(weights * ndtr(np.exp(nodes) - mid))) > THRESHOLD else (low, mid)
    return low


def _accuracy_p() -> float:
    """A's accuracy on 200 examples whose ``P(A>B) + P(A=B)/2`` against B's ``binomial(200, 0.9)`` is 0.75."""
    k = np.arange(201)
    pmf_b = binom.pmf(k, 200, 0.9)
    below = np.concatenate([[0.0], np.cumsum(pmf_b)[:-1]])
    low, high = 0.9, 0.99
    for _ in range(50):
        mid = 0.5 * (low + high)
        theta = float(np.sum(binom.pmf(k, 200, mid) * (below + 0.5 * pmf_b)))
        low, high = (mid, high) if theta < THRESHOLD else (low, mid)
    return low


def _draw(dist: str, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``STUDIES`` paths of ``n`` runs of A and of B whose true P(A>B) (ties half) is the threshold."""
    shape = (STUDIES, n)
    z = float(ndtri(THRESHOLD))
    if dist == "normal":
        return math.sqrt(2.0) * z + rng.standard_normal(shape), rng.standard_normal(shape)
    if dist == "spread 3:1":
        return math.sqrt(10.0) * z + 3.0 * rng.standard_normal(shape), rng.standard_normal(shape)
    if dist == "spread 1:3":
        return math.sqrt(10.0) * z + rng.standard_normal(shape), 3.0 * rng.standard_normal(shape)
    if dist == "lognormal-normal":
        return np.exp(rng.standard_normal(shape)), _lognormal_shift() + rng.standard_normal(shape)
    return rng.binomial(200, _accuracy_p(), shape) / 200.0, rng.binomial(200, 0.9, shape) / 200.0  # accuracies


def _rates(plan: SequentialPlan, dist: str, seed: int) -> dict[str, float]:
    """Each outcome's rate over studies stopped at their first decision (the launcher's rule)."""
    x, y = _draw(dist, np.random.default_rng(seed), plan.looks[-1][0])
    theta, se = superiority_parts(x, y, plan.looks)
    above, below, inside, _ = improvement_outcomes(theta, se, plan.looks, plan.nominals, THRESHOLD, THRESHOLD)
    stop = above | below | inside
    stop[:, -1] = True
    at = np.argmax(stop, axis=1)
    rows = np.arange(at.size)
    return {"a_better": float(above[rows, at].mean()), "b_better": float(below[rows, at].mean())}


@pytest.mark.slow
@pytest.mark.parametrize("step", [1, 3])
@pytest.mark.parametrize("dist", ["normal", "spread 3:1", "spread 1:3", "lognormal-normal", "accuracies"])
def test_a_wrong_a_better_at_the_threshold_stays_within_alpha(dist: str, step: int) -> None:
    plan = plan_sequential(plan_looks(3, 3, step, 30), on="improvement")
    rates = _rates(plan, dist, seed=11 + step)
    margin = 3.0 * math.sqrt(0.025 * 0.975 / STUDIES)  # one side of a two-sided 95% interval: alpha / 2
    assert rates["a_better"] <= plan.alpha / 2 + margin, (dist, step, rates)
    assert rates["b_better"] == 0.0  # P(A>B) = 0.75 is never called below 0.25


@pytest.mark.slow
@pytest.mark.parametrize("dist", ["normal", "spread 3:1"])
def test_the_pocock_boundary_holds_too(dist: str) -> None:
    plan = plan_sequential(plan_looks(3, 3, 1, 30), on="improvement", boundary="pocock")
    assert _rates(plan, dist, seed=5)["a_better"] <= 0.05 + 3.0 * math.sqrt(0.05 * 0.95 / STUDIES)


def test_a_clear_improvement_is_found_and_no_difference_ends_as_no_improvement() -> None:
    plan = plan_sequential(plan_looks(3, 3, 1, 30), on="improvement")
    rng = np.random.default_rng(3)
    shift = math.sqrt(2.0) * float(ndtri(0.95))  # P(A>B) = 0.95
    x, y = shift + rng.standard_normal((4000, 30)), rng.standard_normal((4000, 30))
    theta, se = superiority_parts(x, y, plan.looks)
    above = improvement_outcomes(theta, se, plan.looks, plan.nominals, THRESHOLD, 0.95)[0]
    assert above.any(axis=1).mean() > 0.9
    x = rng.standard_normal((4000, 30))  # P(A>B) = 0.5: inside (0.25, 0.75) by 30 runs in most studies
    theta, se = superiority_parts(x, y, plan.looks)
    above, below, inside, covers = improvement_outcomes(theta, se, plan.looks, plan.nominals, THRESHOLD, 0.5)
    assert inside.any(axis=1).mean() > 0.5 and (above | below).any(axis=1).mean() < 0.01
    assert covers.all(axis=1).mean() >= 0.95 - 3.0 * math.sqrt(0.05 * 0.95 / 4000)


def test_a_look_reads_the_same_interval_as_the_simulation_and_keeps_its_estimate_inside() -> None:
    plan = plan_sequential(plan_looks(3, 3, 1, 12), on="improvement")
    rng = np.random.default_rng(8)
    x, y = 1.2 + rng.standard_normal((60, 12)), np.round(rng.standard_normal((60, 12)), 1)  # some ties
    theta, se = superiority_parts(x, y, plan.looks)
    above, below, inside, _ = improvement_outcomes(theta, se, plan.looks, plan.nominals, THRESHOLD, THRESHOLD)
    codes = np.where(above, "a_better", np.where(below, "b_better", np.where(inside, "equivalent", "continue")))
    for row in range(60):
        for k, (n_a, n_b) in enumerate(plan.looks[:-1]):
            look = sequential_look(plan, x[row, :n_a], y[row, :n_b])
            assert look.outcome == codes[row, k], (row, k, look.text)
            assert look.low <= look.statistic <= look.high and look.low >= 0.0 and look.high <= 1.0


def test_a_lower_is_better_metric_counts_the_lower_run_as_the_winner() -> None:
    looks = plan_looks(3, 3, 5, 10)  # complete separation clears 0.75 at 10 runs a group
    low_loss, high_loss = [0.1 + 0.01 * i for i in range(10)], [0.5 + 0.01 * i for i in range(10)]
    look = sequential_look(plan_sequential(looks, on="improvement", direction="min"), low_loss, high_loss)
    assert (look.decision, look.statistic) == ("A better", 1.0)
    assert "P(A<B) = 1" in look.text and "has the better (lower) value" in look.text
    look = sequential_look(plan_sequential(looks, on="improvement"), low_loss, high_loss)
    assert (look.decision, look.statistic) == ("B better", 0.0)


def test_constant_groups_claim_nothing() -> None:
    plan = plan_sequential(plan_looks(3, 3, 3, 6), on="improvement")
    first = sequential_look(plan, [0.9, 0.9, 0.9], [0.8, 0.8, 0.8])
    assert first.decision == "continue" and (first.low, first.high) == (0.0, 1.0)
    last = sequential_look(plan, [0.9] * 6, [0.8] * 6)
    assert last.decision == "undecided" and "no difference can be claimed" in last.text


def test_the_plan_round_trips_and_old_records_are_unchanged() -> None:
    plan = plan_sequential(plan_looks(3, 3, 2, 9), on="improvement", threshold=0.8)
    written = plan.to_dict()
    assert written["threshold"] == 0.8 and SequentialPlan.from_dict(written) == plan
    mean = plan_sequential(plan_looks(3, 3, 2, 9))
    assert "threshold" not in mean.to_dict() and SequentialPlan.from_dict(mean.to_dict()) == mean
    without = {key: value for key, value in written.items() if key != "threshold"}
    with pytest.raises(ValueError, match="A P\\(A>B\\) plan needs its threshold"):
        SequentialPlan.from_dict(without)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: plan_sequential([(3, 3)], on="improvement", threshold=0.5), r"`threshold` must be a number in"),
        (lambda: plan_sequential([(3, 3)], on="improvement", threshold=1.0), r"Received: threshold=1.0\."),
        (lambda: plan_sequential([(3, 3)], threshold=0.8), r"`threshold` goes with on='improvement'"),
        (lambda: plan_sequential([(3, 3)], on="improvement", effect=0.1), r"`effect` must be None"),
        (lambda: plan_sequential([(3, 3)], on="improvement", kappa=8), r"`kappa` must be 0 for the improvement"),
    ],
)
def test_bad_arguments_say_what_was_received(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


@pytest.mark.parametrize("dist", ["normal", "spread 3:1", "accuracies"])
def test_the_repeated_intervals_hold_a_true_half_at_every_look(dist: str) -> None:
    plan = plan_sequential(plan_looks(3, 3, 1, 30), on="improvement")
    rng = np.random.default_rng(21)
    shape = (STUDIES, 30)
    if dist == "accuracies":
        x, y = rng.binomial(200, 0.9, shape) / 200.0, rng.binomial(200, 0.9, shape) / 200.0
    else:
        x, y = (3.0 if dist == "spread 3:1" else 1.0) * rng.standard_normal(shape), rng.standard_normal(shape)
    theta, se = superiority_parts(x, y, plan.looks)
    covers = improvement_outcomes(theta, se, plan.looks, plan.nominals, THRESHOLD, 0.5)[3]
    assert covers.all(axis=1).mean() >= 0.95 - 3.0 * math.sqrt(0.05 * 0.95 / STUDIES), dist
