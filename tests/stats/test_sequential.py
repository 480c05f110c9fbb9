"""Sequential stopping (issue 27): the group-sequential design keeps its error rate under optional stopping.

Every simulation is seeded, with seeds other than the calibration's (``stopping`` draws the calibration from
``SeedSequence([seed, 27, 0])`` and the studies from ``[seed, 27, 1]``), so a rate near ``alpha`` is evidence, not
the calibration repeated. The bound is ``alpha + 3`` Monte-Carlo standard errors of the tested rate (10,000
studies: 0.0565 at 5%); the calibration's own error (200,000 paths for the mean, 100,000 for the spread) is a
third of that or less.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from deviate_cb.stats import (
    SequentialPlan,
    naive_rate,
    plan_looks,
    plan_sequential,
    runs_for_precision,
    sequential_look,
    simulate_sequential,
    spread_ratio,
    std_confidence_interval,
    std_precision,
)
from deviate_cb.stats.stopping import _look_outcomes, abs_dev_parts, bf_t, null_paths

ALPHA = 0.05
STUDIES = 10_000
BOUND = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / STUDIES)


@pytest.mark.parametrize("on", ["mean", "spread"])
@pytest.mark.parametrize("round_size", [1, 2, 5])
@pytest.mark.parametrize("dist", ["normal", "t3"])
def test_no_difference_is_decided_at_most_alpha_of_the_time(on: str, round_size: int, dist: str) -> None:
    plan = plan_sequential(plan_looks(3, 3, round_size, 50, on=on), on=on)
    sim = simulate_sequential(plan, dist=dist, studies=STUDIES, seed=11)
    assert sim.decided <= BOUND, (sim.decided, plan.nominal)
    if dist == "normal":  # calibrated for normal runs: not conservative there either
        assert sim.decided >= ALPHA - 3 * math.sqrt(ALPHA * (1 - ALPHA) / STUDIES), sim.decided
    assert sim.undecided == pytest.approx(1 - sim.decided)  # no effect given: never "no difference"
    assert sim.mean_runs_a > 45  # a null study runs to the end almost always


@pytest.mark.parametrize("on", ["mean", "spread"])
@pytest.mark.parametrize("looks", [plan_looks(3, 10, 2, 20), ((3, 3), (4, 4)), ((3, 5), (6, 5), (6, 9), (12, 12))])
def test_uneven_and_short_plans_keep_alpha(on: str, looks: tuple[tuple[int, int], ...]) -> None:
    plan = plan_sequential(looks, on=on)
    for dist in ("normal", "t3"):
        assert simulate_sequential(plan, dist=dist, studies=STUDIES, seed=12).decided <= BOUND


def test_welch_keeps_alpha_with_unequal_spreads_from_ten_runs() -> None:
    plan = plan_sequential(plan_looks(10, 10, 1, 50))
    for ratio in (1 / 3, 3.0):
        assert simulate_sequential(plan, std_ratio=ratio, studies=STUDIES, seed=13).decided <= BOUND


@pytest.mark.parametrize("on", ["mean", "spread"])
def test_naive_retesting_after_every_look_exceeds_alpha(on: str) -> None:
    looks = plan_looks(3, 3, 2, 30, on=on)
    assert len(looks) >= 10
    rate = naive_rate(looks, on=on, studies=STUDIES, seed=14)
    assert rate > 0.08, rate
    assert naive_rate(looks[:1], on=on, studies=STUDIES, seed=14) <= BOUND  # one look: the plain test


def test_repeated_intervals_cover_a_true_difference_simultaneously() -> None:
    plan = plan_sequential(plan_looks(3, 3, 1, 30), effect=0.5)
    sim = simulate_sequential(plan, effect_sd=1.0, studies=STUDIES, seed=15)
    assert sim.simultaneous_coverage >= 1 - BOUND, sim
    assert sim.coverage >= sim.simultaneous_coverage
    assert sim.a_better > 0.9 and sim.b_better < 0.001 and sim.mean_runs < 2 * 30
    spread = plan_sequential(plan_looks(3, 3, 2, 30, on="spread"), on="spread")
    for dist in ("normal", "t3"):
        sim = simulate_sequential(spread, std_ratio=2.0, dist=dist, studies=STUDIES, seed=16)
        assert sim.simultaneous_coverage >= 1 - BOUND, sim
    assert sim.b_better > 0.3 and sim.a_better < 0.005  # A spreads more: B is better


def test_equivalence_stops_under_no_difference_with_a_large_effect() -> None:
    plan = plan_sequential(plan_looks(3, 3, 1, 50), effect=1.0)
    sim = simulate_sequential(plan, studies=STUDIES, seed=17)
    assert sim.equivalent > 0.9 and sim.decided <= BOUND
    assert sim.mean_runs_a < 30
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.0, 0.1, 40), rng.normal(0.0, 0.1, 40)
    look = sequential_look(plan, a, b)
    assert look.decision == "no difference of at least 1" and look.outcome == "equivalent" and look.stop
    spread = plan_sequential(plan_looks(3, 3, 5, 50, on="spread"), on="spread", effect=3.0)
    assert simulate_sequential(spread, studies=2000, seed=18).equivalent > 0.8


def _look_data(seed: int, n_a: int, n_b: int, shift: float, scale: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return shift + scale * rng.standard_normal(n_a), rng.standard_normal(n_b)


@pytest.mark.parametrize("on", ["mean", "spread"])
def test_decisions_agree_with_the_interval_and_the_simulation_kernels(on: str) -> None:
    plan = plan_sequential(plan_looks(3, 3, 3, 15, on=on), on=on, effect=0.8 if on == "mean" else 2.5)
    from scipy.special import stdtrit

    crit = stdtrit(np.array([a + b - 2.0 for a, b in plan.looks]), 1.0 - plan.nominal / 2.0)
    rng = np.random.default_rng(19)
    seen = set()
    for x, y in null_paths(plan.looks, "normal", 150, rng):
        x = 0.7 * np.arange(x.shape[0])[:, None] / 150 + x * np.where(np.arange(x.shape[0]) % 2, 1.0, 0.4)[:, None]
        above, below, equivalent, _ = _look_outcomes(plan, x, y, crit, 0.0, 1.0)
        for i in range(x.shape[0]):
            for k, (n_a, n_b) in enumerate(plan.looks):
                look = sequential_look(plan, x[i, :n_a], y[i, :n_b])
                low, high = look.confidence_interval()
                null = 0.0 if on == "mean" else 1.0
                assert (look.pvalue < plan.nominal) == (low > null or high < null)
                expected = "a_better" if (above if on == "mean" else below)[i, k] else None
                expected = expected or ("b_better" if (below if on == "mean" else above)[i, k] else None)
                expected = expected or ("equivalent" if equivalent[i, k] else None)
                expected = expected or ("undecided" if k == len(plan.looks) - 1 else "continue")
                assert look.outcome == expected, (i, k, look)
                seen.add(look.outcome)
    assert {"a_better", "continue", "equivalent"} <= seen


def test_the_spread_kernel_is_brown_forsythe_and_its_interval() -> None:
    rng = np.random.default_rng(20)
    looks = ((3, 4), (6, 4), (9, 9))
    x, y = rng.standard_normal((5, 9)), 2.0 * rng.standard_normal((5, 9))
    parts_a, parts_b = abs_dev_parts(x, (3, 6, 9)), abs_dev_parts(y, (4, 4, 9))
    t_one = bf_t(parts_a, parts_b, looks)
    for i in range(5):
        for k, (n_a, n_b) in enumerate(looks):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                w = sps.levene(x[i, :n_a], y[i, :n_b], center="median").statistic
            assert t_one[i, k] ** 2 == pytest.approx(w, rel=1e-9)
            low, high = spread_ratio(x[i, :n_a], y[i, :n_b], level=0.9).confidence_interval()
            for c in (low, high):  # the interval's ends are where t(c) meets the critical value
                if 0 < c < math.inf:
                    t_c = bf_t(parts_a, parts_b, looks, float(c))[i, k]
                    assert abs(t_c) == pytest.approx(sps.t.ppf(0.95, n_a + n_b - 2), rel=1e-6)


def test_the_look_text_direction_and_spread() -> None:
    plan = plan_sequential(((5, 5), (10, 10)), direction="min")
    a, b = _look_data(21, 5, 5, -3.0, 1.0)
    look = sequential_look(plan, a, b)
    assert look.decision == "A better" and look.statistic < 0 and look.k == 1 and look.n_looks == 2
    assert look.text.startswith("look 1 of 2: A-B = ") and look.text.endswith("Welch t-test): A better")
    assert "95% repeated CI" in look.text
    a, b = _look_data(22, 10, 10, 0.0, 1.0)
    look = sequential_look(plan, a, b)
    assert look.decision == "undecided" and look.stop and look.to_dict()["outcome"] == "undecided"
    assert look.text.endswith(f"undecided: 10 runs each; the difference is within [{look.low:.3g}, {look.high:.3g}]")
    json.dumps(look.to_dict())
    spread = plan_sequential(((6, 6), (12, 12)), on="spread")
    a, b = np.linspace(-0.1, 0.1, 12), np.linspace(-2.0, 2.0, 12)
    look = sequential_look(spread, a, b)
    assert look.decision == "A better" and look.estimate < 1 and "std A/B" in look.text  # A spreads less
    assert sequential_look(spread, [1.0] * 6, [1.0] * 6).decision == "continue"  # both constant: no test


def test_plan_round_trip_and_reproducibility() -> None:
    plan = plan_sequential(plan_looks(2, 2, 2, 12), alpha=0.1, effect=0.25, direction="min", seed=3)
    data = json.loads(json.dumps(plan.to_dict()))
    assert SequentialPlan.from_dict(data) == plan
    data["nominal"] = 0.0123  # a resumed study keeps the plan it wrote: never recalibrated
    assert SequentialPlan.from_dict(data).nominal == 0.0123
    assert plan_sequential(plan_looks(2, 2, 2, 12), alpha=0.1, seed=3).nominal == plan.nominal
    other = plan_sequential(plan_looks(2, 2, 2, 12), alpha=0.1, seed=4).nominal
    assert other != plan.nominal and other == pytest.approx(plan.nominal, rel=0.1)
    assert plan_sequential(((4, 4),)).nominal == 0.05  # one look: the plain test
    assert plan.method == "Pocock-type group-sequential Welch t-test" and "Jennison" in plan.reference


def test_plan_looks() -> None:
    assert plan_looks(3, 3, 2, 9) == ((3, 3), (5, 5), (7, 7), (9, 9))
    assert plan_looks(0, 6, 3, 10) == ((3, 6), (6, 6), (9, 9), (10, 10))
    assert plan_looks(0, 0, 1, 4, on="spread") == ((3, 3), (4, 4))
    assert plan_looks(5, 5, 10, 5) == ((5, 5),)
    assert plan_looks(2, 2, 1, 4, on="spread") == ((3, 3), (4, 4))


def test_precision_is_the_chi_square_interval_and_fixed_in_advance() -> None:
    for n in (2, 3, 10, 57, 400):
        low, high = std_confidence_interval(1.0, n, 0.9)
        assert std_precision(n, 0.9) == pytest.approx((high - low) / 2, rel=1e-12)
    for rel in (0.05, 0.1, 0.3, 1.0):
        n = runs_for_precision(rel)
        assert std_precision(n) <= rel < std_precision(n - 1)
    assert runs_for_precision(100.0) == 2


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: plan_sequential([]), r"`looks` must be a non-empty sequence"),
        (lambda: plan_sequential([(3, 3), (3, 3)]), r"some runs added between looks"),
        (lambda: plan_sequential([(5, 5), (4, 6)]), r"neither group shrinking"),
        (lambda: plan_sequential([(2, 2)], on="spread"), r"integers >= 3 \(spread\)"),
        (lambda: plan_sequential([(1, 3)]), r"integers >= 2 \(mean\)"),
        (lambda: plan_sequential(5), r"Received: looks=5\."),  # type: ignore[arg-type]
        (lambda: plan_sequential([(3, 3)], alpha=0), r"`alpha` must be a number in \(0, 1\)\. Received: alpha=0\."),
        (lambda: plan_sequential([(3, 3)], on="median"), r"`on` must be one of 'mean', 'spread'\."),
        (lambda: plan_sequential([(3, 3)], effect=-1), r"`effect` must be a positive number\. Received: effect=-1\."),
        (lambda: plan_sequential([(3, 3)], on="spread", effect=0.5), r"a factor greater than 1"),
        (lambda: plan_sequential([(3, 3)], direction="up"), r"`direction` must be 'max' or 'min'"),
        (lambda: plan_sequential([(3, 3)], seed=-1), r"`seed` must be a non-negative integer"),
        (lambda: plan_sequential([(3, 3)], paths=0), r"`paths` must be a positive integer\. Received: paths=0\."),
        (lambda: plan_looks(-1, 3, 1, 5), r"`n_a0` must be a non-negative integer\. Received: n_a0=-1\."),
        (lambda: plan_looks(3, 3, 0, 5), r"`round_size` must be a positive integer\. Received: round_size=0\."),
        (lambda: plan_looks(3, 8, 1, 5), r"`max_runs` must be at least the runs already made"),
        (lambda: plan_looks(0, 0, 1, 2, on="spread"), r"`max_runs` must be at least .* and 3"),
        (lambda: sequential_look(plan_sequential([(3, 3)]), [1, 2], [1, 2, 3]), r"must be a look of the plan"),
        (lambda: sequential_look(plan_sequential([(3, 3)]), [1, 2, math.nan], [1, 2, 3]), r"`a` must hold one finite"),
        (lambda: sequential_look({"looks": []}, [1, 2], [1, 2]), r"`plan` must be a SequentialPlan"),  # type: ignore[arg-type]
        (lambda: SequentialPlan.from_dict({"looks": [[3, 3]]}), r"A sequential plan needs alpha, nominal, on"),
        (lambda: simulate_sequential(plan_sequential([(3, 3)]), dist="cauchy"), r"`dist` must be one of"),
        (lambda: simulate_sequential(plan_sequential([(3, 3)]), studies=0), r"`studies` must be a positive integer"),
        (lambda: simulate_sequential(plan_sequential([(3, 3)]), std_ratio=0), r"`std_ratio` must be a positive"),
        (lambda: naive_rate(((3, 3),), alpha=1.5), r"`alpha` must be a number in \(0, 1\)"),
        (lambda: std_precision(1), r"`n` must be at least 2"),
        (lambda: runs_for_precision(0), r"`rel` must be a positive number\. Received: rel=0\."),
    ],
)
def test_bad_input_gives_one_readable_line(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises((ValueError, TypeError), match=message) as info:
        call()
    assert "\n" not in str(info.value)
