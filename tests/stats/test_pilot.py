"""Plans from a pilot std reach the power they state (issue 42): simulated, seeded, vectorised.

A normal pilot of 5 runs, true std 1, a difference of 1 to detect (17 runs per group at the true std). The plan
at the measured std (the default before) realises 70% power on average and falls short of 80% in 56% of pilots;
the default plan, at the 80% upper confidence limit of the std, reaches 80% power in at least 80% of pilots and
its stated expected power matches the power it realises on average. The same for "as made, detect X".
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from deviate_cb.stats.pilot import assured_detectable_effect, expected_power, plan_runs, std_upper_limit
from deviate_cb.stats.planning import power_report
from deviate_cb.stats.power import detectable_effect, runs_needed
from deviate_cb.stats.welch_power import welch_power

_N_PILOT, _EFFECT, _PILOTS, _MAX = 5, 1.0, 20000, 300


@functools.lru_cache(maxsize=1)
def _tables() -> tuple[np.ndarray, np.ndarray]:
    """Per n runs per group (true std 1): the difference detected with 80% power, and the power at _EFFECT."""
    sizes = range(2, _MAX)
    detect = np.array([np.inf, np.inf, *(detectable_effect(n, n, 1.0) for n in sizes)])
    power = np.array([0.0, 0.0, *(welch_power(n, n, 1.0, 1.0, _EFFECT, 0.05, "two-sided") for n in sizes)])
    return detect, power


def _pilot_stds() -> np.ndarray:
    k = _N_PILOT - 1
    return np.sqrt(np.random.default_rng(42).chisquare(k, _PILOTS) / k)  # sigma = 1


def _planned(std: np.ndarray) -> np.ndarray:
    """runs_needed at each std (scale invariance: the smallest n that detects _EFFECT / std at 80%)."""
    detect, _ = _tables()
    return np.argmax(detect[None, :] * std[:, None] <= _EFFECT, axis=1)


def test_the_tables_are_the_modules_plans() -> None:
    s = _pilot_stds()[:6]
    for std, n in zip(s, _planned(s * std_upper_limit(1.0, _N_PILOT)), strict=True):
        assert plan_runs(float(std), _N_PILOT, effect=_EFFECT).runs_needed == n
    for std, n in zip(s, _planned(s), strict=True):
        assert runs_needed(float(std), effect=_EFFECT) == n


def test_the_default_plan_reaches_its_power_with_its_stated_probability_where_the_old_did_not() -> None:
    _, power = _tables()
    s = _pilot_stds()
    old, new = power[_planned(s)], power[_planned(s * std_upper_limit(1.0, _N_PILOT))]
    assert old.mean() < 0.72 and (old >= 0.8).mean() < 0.5  # the issue: 0.70 on average, most plans short
    assert (new >= 0.8).mean() >= 0.8 - 0.006  # assured: 80% of plans reach 80% (Monte Carlo error 0.003)
    assert new.mean() >= 0.8
    stated = [plan_runs(float(v), _N_PILOT, effect=_EFFECT).expected_power for v in s[:20]]
    assert np.mean(stated) == pytest.approx(new.mean(), abs=0.03)  # the expected power it states, it realises
    at_estimate = [plan_runs(float(v), _N_PILOT, effect=_EFFECT).expected_power_at_estimate for v in s[:20]]
    assert np.mean(at_estimate) == pytest.approx(old.mean(), abs=0.05)  # and it names the old plan's shortfall


def test_as_made_detectable_effect_is_assured() -> None:
    detect, _ = _tables()
    s = _pilot_stds()
    # the runs made (the pilot's 5) detect X with 80% power when X >= detect[5] * sigma (sigma = 1)
    old = detect[_N_PILOT] * s >= detect[_N_PILOT]
    new = detect[_N_PILOT] * s * std_upper_limit(1.0, _N_PILOT) >= detect[_N_PILOT]
    assert old.mean() < 0.5 and new.mean() >= 0.8 - 0.006
    got = assured_detectable_effect(_N_PILOT, _N_PILOT, float(s[0]), _N_PILOT)
    assert got == pytest.approx(detect[_N_PILOT] * s[0] * std_upper_limit(1.0, _N_PILOT), rel=1e-6)


def test_plan_range_and_expected_power_edges() -> None:
    plan = plan_runs(1.0, 5, effect=1.0, std_interval=(0.6, 2.9))
    assert plan.runs_low == runs_needed(0.6, effect=1.0) and plan.runs_high == runs_needed(2.9, effect=1.0)
    assert plan.runs_low <= plan.runs_at_estimate <= plan.runs_needed <= plan.runs_high
    assert plan.expected_power_at_estimate < 0.8 < plan.expected_power
    assert "with 80% confidence" in plan.summary() and f"{plan.runs_low} to {plan.runs_high}" in plan.summary()
    # a pilot of many runs: the std is nearly known and the expected power is the power
    big = expected_power(17, 17, 1.0, 10**5, effect=1.0)
    assert big == pytest.approx(welch_power(17, 17, 1.0, 1.0, 1.0, 0.05, "two-sided"), abs=2e-3)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: std_upper_limit(1.0, 1), "`n_pilot` must be an integer of at least 2"),
        (lambda: std_upper_limit(1.0, 5, confidence=1.0), "`confidence` must be a number in"),
        (lambda: plan_runs(0.0, 5, effect=1.0), "`std` must be positive"),
        (lambda: expected_power(1, 5, 1.0, 5, effect=1.0), "`n_a` must be an integer of at least 2"),
    ],
)
def test_validation(call, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=match):
        call()


def test_power_report_plans_on_the_upper_limit() -> None:
    values = [0.851, 0.847, 0.853, 0.849, 0.856, 0.846]
    r = power_report(values, effect=0.005)
    plan = plan_runs(float(np.std(values, ddof=1)), 6, effect=0.005)
    assert r.n_needed == plan.runs_needed > r.n_at_estimate == plan.runs_at_estimate
    assert "with 80% confidence" in r.summary() and "expected" in r.summary()
