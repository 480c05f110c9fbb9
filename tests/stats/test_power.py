"""Power analysis: Welch power near the scipy.stats.nct shortcut and against a simulation, runs_needed's
minimality, Noether. (The exact Welch power against simulations at unequal sizes: test_welch_power.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from deviate_cb.stats.pilot import std_upper_limit
from deviate_cb.stats.planning import PowerReport, power_report
from deviate_cb.stats.power import achieved_power, noether_runs, runs_needed


def _reference_power(n_a: int, n_b: int, sa: float, sb: float, effect: float, alpha: float, alt: str) -> float:
    va, vb = sa**2 / n_a, sb**2 / n_b
    df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    nc = effect / math.sqrt(va + vb)
    if alt == "two-sided":
        crit = sps.t.ppf(1 - alpha / 2, df)
        return sps.nct.sf(crit, df, nc) + sps.nct.cdf(-crit, df, nc)
    return sps.nct.sf(sps.t.ppf(1 - alpha, df), df, nc)


def test_classic_t_test_answer_is_17_per_group() -> None:
    assert runs_needed(1.0, effect=1.0, alpha=0.05, power=0.8) == 17
    assert runs_needed(1.0, 1.0, effect=1.0) == 17
    # Normal approximation n = 2 (z_{1-a/2} + z_{power})^2 sd^2 / effect^2 = 15.7: within 1-2 of the exact answer.
    z = sps.norm.ppf
    normal = math.ceil(2 * (z(0.975) + z(0.8)) ** 2)
    assert normal == 16 and abs(runs_needed(1.0, effect=1.0) - normal) <= 2


@pytest.mark.parametrize(
    ("n_a", "n_b", "sa", "sb", "effect", "alpha", "alt"),
    [
        (17, 17, 1.0, 1.0, 1.0, 0.05, "two-sided"),
        (10, 10, 0.0034, 0.0034, 0.005, 0.05, "two-sided"),
        (5, 12, 0.5, 2.0, 1.5, 0.01, "two-sided"),
        (8, 3, 1.0, 0.1, 0.7, 0.05, "greater"),
        (20, 20, 2.0, 3.0, 1.0, 0.1, "less"),
    ],
)
def test_achieved_power_is_near_the_noncentral_t_shortcut_where_that_is_good(n_a, n_b, sa, sb, effect, alpha, alt):
    # The noncentral t with the Welch-Satterthwaite df of the true stds is within a point where the larger
    # group is the more variable or the sizes are balanced (the exact power: test_welch_power.py).
    got = achieved_power(n_a, n_b, sa, sb, effect=effect, alpha=alpha, alternative=alt)
    assert got == pytest.approx(_reference_power(n_a, n_b, sa, sb, effect, alpha, alt), abs=0.01)
    assert alpha / (2 if alt == "two-sided" else 1) < got < 1


def test_a_group_without_spread_is_the_one_sample_t_test_exactly() -> None:
    # With std_b = 0, Welch's test is the one-sample t-test of A (df n_a - 1): the shortcut is then exact.
    got = achieved_power(4, 4, 1.0, 0.0, effect=1.0)
    assert got == pytest.approx(_reference_power(4, 4, 1.0, 0.0, 1.0, 0.05, "two-sided"), abs=1e-6)


@pytest.mark.parametrize(
    ("sa", "sb", "effect", "alpha", "power", "alt"),
    [
        (1.0, None, 1.0, 0.05, 0.8, "two-sided"),
        (1.0, None, 0.2, 0.05, 0.9, "two-sided"),
        (0.0034, 0.005, 0.004, 0.05, 0.8, "two-sided"),
        (1.0, 3.0, 1.0, 0.01, 0.95, "greater"),
        (2.0, 0.5, 0.3, 0.1, 0.5, "less"),
        (1.0, None, 0.01, 0.05, 0.8, "two-sided"),
    ],
)
def test_runs_needed_is_the_smallest_n_reaching_the_power(sa, sb, effect, alpha, power, alt) -> None:
    n = runs_needed(sa, sb, effect=effect, alpha=alpha, power=power, alternative=alt)
    kw = {"effect": effect, "alpha": alpha, "alternative": alt}
    assert achieved_power(n, n, sa, sb, **kw) >= power
    assert n == 2 or achieved_power(n - 1, n - 1, sa, sb, **kw) < power
    # The normal approximation is close (it ignores the t's heavier tails, so it is never much larger).
    z = sps.norm.ppf
    za = z(1 - alpha / 2) if alt == "two-sided" else z(1 - alpha)
    normal = (za + z(power)) ** 2 * (sa**2 + (sa if sb is None else sb) ** 2) / effect**2
    assert normal - 1 <= n <= normal + 3


def test_huge_effect_needs_two_runs_and_one_sided_needs_fewer() -> None:
    assert runs_needed(1.0, effect=100.0) == 2
    assert runs_needed(1.0, effect=0.5, alternative="greater") < runs_needed(1.0, effect=0.5)
    assert runs_needed(1.0, effect=0.5, alternative="greater") == runs_needed(1.0, effect=0.5, alternative="less")
    assert runs_needed(1.0, effect=0.5, power=0.9) > runs_needed(1.0, effect=0.5, power=0.8)


def test_achieved_power_agrees_with_a_simulation_of_welch_tests() -> None:
    rng = np.random.default_rng(0)
    sims, n_a, n_b, sa, sb, effect = 20_000, 8, 12, 1.0, 2.0, 1.5
    a = rng.normal(effect, sa, size=(sims, n_a))
    b = rng.normal(0.0, sb, size=(sims, n_b))
    rejected = np.mean(sps.ttest_ind(a, b, axis=1, equal_var=False).pvalue < 0.05)
    expected = achieved_power(n_a, n_b, sa, sb, effect=effect)
    assert abs(rejected - expected) < 4 * math.sqrt(expected * (1 - expected) / sims)


def test_noether_against_a_hand_computation() -> None:
    # p = 0.75, alpha 0.05 two-sided, power 0.8: (1.959964 + 0.841621)^2 / (3 * 0.25^2) = 41.86 in all -> 21 a group.
    total = (1.959964 + 0.841621) ** 2 / (12 * 0.5 * 0.5 * 0.25**2)
    assert round(total, 2) == 41.86
    assert noether_runs(0.75) == math.ceil(total / 2) == 21
    assert noether_runs(0.25) == 21  # symmetric in p - 1/2
    # One-sided alpha 0.05: (1.644854 + 0.841621)^2 / 0.1875 = 32.97 -> 17.
    assert noether_runs(0.75, alternative="greater") == 17
    assert noether_runs(0.55) > noether_runs(0.6) > noether_runs(0.75)


def test_power_report_one_group_summary() -> None:
    values = [0.851, 0.847, 0.853, 0.849, 0.856, 0.846, float("nan")]
    r = power_report(values, effect=0.005)
    assert isinstance(r, PowerReport)
    std = float(np.std(values[:-1], ddof=1))
    assert (r.n_a, r.n_b, r.std_a, r.std_b) == (6, 6, std, std)
    # planned on the 80% upper confidence limit of the std, not on the std as if it were the truth
    assert r.n_at_estimate == runs_needed(std, effect=0.005) == 11
    assert r.n_needed == runs_needed(std_upper_limit(std, 6), effect=0.005) == 21
    assert r.achieved_power == achieved_power(6, 6, std, effect=0.005)
    assert r.summary() == (
        "To detect a difference of 0.005 at 80% power (alpha 0.05): 21 runs per group (at the 80% upper confidence "
        "limit of the std, 0.00552 for a measured 0.00378 from 6 runs): at least 80% power with 80% confidence, 90% "
        "expected; at the measured std 11 (only 73% expected), 5 to 55 across the std's interval [0.00236, "
        "0.00926]. The 6 runs you have give 53% power at the measured std, 48% expected. The confidence and "
        "expected powers hold for normal runs (heavier tails: optimistic)."
    )
    with pytest.raises(AttributeError):
        r.n_needed = 3  # type: ignore[misc]


def test_power_report_two_groups_summary() -> None:
    r = power_report([1.0, 2.0, 3.0], [1.0, 3.0, 5.0, 7.0], effect=2.0, power=0.9, alternative="greater")
    assert (r.n_a, r.n_b, r.std_a) == (3, 4, 1.0)
    assert r.n_at_estimate == runs_needed(1.0, r.std_b, effect=2.0, power=0.9, alternative="greater")
    upper = (std_upper_limit(1.0, 3, 0.8**0.5), std_upper_limit(r.std_b, 4, 0.8**0.5))  # both hold with 80%
    assert r.n_needed == runs_needed(*upper, effect=2.0, power=0.9, alternative="greater") > r.n_at_estimate
    text = r.summary()
    assert "(measured std 1 and 2.6)" in text and "The 3 and 4 runs you have" in text and "at 90% power" in text
    assert "with 80% confidence" in text


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: runs_needed(1.0, effect=0), "`effect` must be a positive number. Received: effect=0."),
        (lambda: runs_needed(1.0, effect=-1.0), "`effect` must be a positive number"),
        (lambda: runs_needed(-1.0, effect=1.0), "`std_a` must be a non-negative number"),
        (lambda: runs_needed(1.0, float("nan"), effect=1.0), "`std_b` must be a non-negative number"),
        (lambda: runs_needed(0.0, 0.0, effect=1.0), "must not both be 0"),
        (lambda: runs_needed(1.0, effect=1.0, alpha=1.0), "`alpha` must be a number in"),
        (lambda: runs_needed(1.0, effect=1.0, power=0.0), "`power` must be a number in"),
        (lambda: runs_needed(1.0, effect=1.0, alternative="two_sided"), "`alternative` must be one of"),
        (lambda: achieved_power(1, 5, 1.0, effect=1.0), "`n_a` must be an integer of at least 2"),
        (lambda: achieved_power(5, 2.5, 1.0, effect=1.0), "`n_b` must be an integer of at least 2"),
        (lambda: noether_runs(0.5), "`p_improvement` must be in"),
        (lambda: noether_runs(1.0), "`p_improvement` must be in"),
        (lambda: power_report([1.0], effect=1.0), "`values_a` must hold at least two finite values"),
        (lambda: power_report([1.0, 2.0], [3.0, float("nan")], effect=1.0), "`values_b` must hold at least two"),
        (lambda: runs_needed(1.0, effect=1e-9), "too small to detect"),
    ],
)
def test_validation(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()
