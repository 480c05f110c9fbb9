"""The exact power of Welch's t-test against simulations of the test, and the noncentral-t shortcut's error.

Each simulation draws ``SIMS`` pairs of normal samples with a fixed seed and runs ``scipy.stats.ttest_ind(...,
equal_var=False)``; the share rejected estimates the power with a standard error ``sqrt(p (1 - p) / SIMS)``
(at most 0.0011 for ``SIMS = 200_000``). The tolerance is 4 standard errors (under half a point): a correct
power fails it with probability 6e-5 per case.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from deviate_cb.stats.power import achieved_power, runs_needed
from deviate_cb.stats.welch_power import welch_power

SIMS = 200_000


def _simulated(n_a: int, n_b: int, sa: float, sb: float, effect: float, alt: str, seed: int) -> float:
    rng = np.random.default_rng(seed)
    rejected = 0
    for _ in range(SIMS // 50_000):  # in chunks, to bound the memory
        a = rng.normal(effect, sa, size=(50_000, n_a))
        b = rng.normal(0.0, sb, size=(50_000, n_b))
        test = sps.ttest_ind(a, b, axis=1, equal_var=False, alternative="greater" if alt == "greater" else alt)
        rejected += int(np.sum(test.pvalue < 0.05))
    return rejected / SIMS


def _shortcut(n_a: int, n_b: int, sa: float, sb: float, effect: float) -> float:
    """The noncentral t with the Welch-Satterthwaite df of the true stds (two-sided, alpha 0.05)."""
    va, vb = sa**2 / n_a, sb**2 / n_b
    df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    nc, crit = effect / math.sqrt(va + vb), sps.t.ppf(0.975, df)
    return float(sps.nct.sf(crit, df, nc) + sps.nct.cdf(-crit, df, nc))


@pytest.mark.parametrize(
    ("n_a", "n_b", "sa", "sb", "effect", "alt"),
    [
        (3, 20, 1.0, 1.0, 1.5, "two-sided"),  # the case: the shortcut reads 5.7 points low
        (20, 3, 1.0, 1.0, 1.5, "two-sided"),
        (3, 20, 2.0, 1.0, 2.5, "two-sided"),
        (3, 20, 1.0, 0.5, 1.0, "greater"),
        (2, 20, 1.0, 1.0, 3.0, "two-sided"),  # the shortcut reads 16 points low
        (10, 10, 1.0, 1.0, 1.0, "two-sided"),  # balanced
        (17, 17, 1.0, 1.0, 1.0, "two-sided"),
    ],
)
def test_welch_power_matches_a_simulation_of_the_test(n_a, n_b, sa, sb, effect, alt) -> None:
    simulated = _simulated(n_a, n_b, sa, sb, effect, alt, seed=n_a * 100 + n_b)
    tolerance = 4 * math.sqrt(simulated * (1 - simulated) / SIMS)
    assert tolerance < 0.0045
    got = achieved_power(n_a, n_b, sa, sb, effect=effect, alternative=alt)
    assert abs(got - simulated) < tolerance


def test_the_noncentral_t_shortcut_is_off_where_the_exact_power_is_not() -> None:
    # n = (3, 20), equal stds: the simulation gives 41.3%, the shortcut 35.7%.
    simulated = _simulated(3, 20, 1.0, 1.0, 1.5, "two-sided", seed=7)
    assert _shortcut(3, 20, 1.0, 1.0, 1.5) < simulated - 0.05
    assert abs(welch_power(3, 20, 1.0, 1.0, 1.5, 0.05, "two-sided") - simulated) < 0.0045


@pytest.mark.parametrize(("n", "effect", "alt"), [(2, 1.0, "greater"), (3, 3.0, "two-sided"), (6, 0.5, "two-sided")])
def test_a_group_without_spread_gives_the_one_sample_noncentral_t(n: int, effect: float, alt: str) -> None:
    # std_b = 0: Welch's test is the one-sample t-test of A, whose power the noncentral t gives exactly.
    crit = sps.t.ppf(0.975 if alt == "two-sided" else 0.95, n - 1)
    nc = effect * math.sqrt(n)
    exact = sps.nct.sf(crit, n - 1, nc) + (sps.nct.cdf(-crit, n - 1, nc) if alt == "two-sided" else 0.0)
    assert welch_power(n, 5, 1.0, 0.0, effect, 0.05, alt) == pytest.approx(exact, abs=2e-6)
    # The integration is symmetric in the groups.
    assert welch_power(5, n, 0.0, 1.0, effect, 0.05, alt) == pytest.approx(exact, abs=2e-6)


def test_power_grows_with_the_runs_and_runs_needed_stays_minimal() -> None:
    powers = [achieved_power(n, n, 1.0, 2.0, effect=1.0) for n in range(2, 60)]
    assert all(a < b for a, b in itertools.pairwise(powers))
    n = runs_needed(1.0, 2.0, effect=1.0)
    assert powers[n - 2] >= 0.8 > powers[n - 3]


def test_huge_groups_stay_finite_and_match_the_normal_limit() -> None:
    # At n = 10^9 per group the t is a normal: power = Phi(d - 1.96) + Phi(-d - 1.96) with d = effect / se.
    n, d = 10**9, 2.5
    effect = d * math.sqrt(2.0 / n)
    limit = sps.norm.cdf(d - sps.norm.ppf(0.975)) + sps.norm.cdf(-d - sps.norm.ppf(0.975))
    assert welch_power(n, n, 1.0, 1.0, effect, 0.05, "two-sided") == pytest.approx(limit, abs=1e-6)
