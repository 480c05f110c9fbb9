"""Almost Stochastic Order: eps_W by hand on tiny data, its degenerate case, epsilon_min's limits and seeds."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from deviate_cb.stats.aso import almost_stochastic_order, violation_ratio


def _normal(seed: int, n: int = 20) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=n)


def test_violation_ratio_by_hand_equal_sizes() -> None:
    # F^-1 = 0 on (0, 1/2], 3 on (1/2, 1); G^-1 = 1: differences -1 and +2 on halves -> 0.5 / (0.5 + 2) = 0.2.
    assert violation_ratio([0.0, 3.0], [1.0, 1.0]) == pytest.approx(0.2, abs=1e-12)
    assert violation_ratio([1.0, 1.0], [0.0, 3.0]) == pytest.approx(0.8, abs=1e-12)


def test_violation_ratio_by_hand_unequal_sizes() -> None:
    # A = (0, 3, 7), B = (2, 4). On (0,1/3): -2; (1/3,1/2): +1; (1/2,2/3): -1; (2/3,1): +3.
    # Violated: 4/3 + 1/6 = 3/2; total: 4/3 + 1/6 + 1/6 + 3 = 14/3 -> eps_W = 9/28.
    a, b = [7.0, 0.0, 3.0], [4.0, 2.0]
    assert violation_ratio(a, b, grid_size=6) == pytest.approx(9 / 28, abs=1e-12)  # breakpoints between points
    assert violation_ratio(a, b) == pytest.approx(9 / 28, abs=1e-3)  # default 1000-point grid
    assert violation_ratio(a, b, grid_size=600_000) == pytest.approx(9 / 28, abs=1e-6)


def test_degenerate_identical_samples_give_one_half() -> None:
    x = [0.5, 0.7, 0.6]
    assert violation_ratio(x, x) == 0.5
    assert violation_ratio(x, list(reversed(x))) == 0.5  # same empirical distribution
    r = almost_stochastic_order([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], rng=0)
    assert r.settings["violation_ratio"] == 0.5 and r.settings["bootstrap_std"] == 0.0
    assert math.isnan(r.statistic) and not r.settings["dominant"] and "constant" in r.settings["note"]
    # two constant groups that differ: every resample is the sample, so no bound and no decision (was eps 0)
    apart = almost_stochastic_order([0.901] * 3, [0.9] * 3, rng=0)
    assert apart.settings["violation_ratio"] == 0.0 and math.isnan(apart.statistic) and not apart.settings["dominant"]
    same = almost_stochastic_order(x, x, rng=0)
    assert same.settings["violation_ratio"] == 0.5 and same.statistic >= 0.5 and not same.settings["dominant"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_two_directions_add_up_to_one_and_affine_invariance(seed: int) -> None:
    a, b = _normal(seed, 15) + 0.3, _normal(seed + 10, 11)
    assert violation_ratio(a, b) + violation_ratio(b, a) == pytest.approx(1.0, abs=1e-12)
    assert violation_ratio(100.0 + 3.0 * a, 100.0 + 3.0 * b) == pytest.approx(violation_ratio(a, b), abs=1e-9)


def test_far_above_is_full_dominance_and_far_below_none() -> None:
    a, b = _normal(0) + 50.0, _normal(1)
    above = almost_stochastic_order(a, b, rng=0)
    assert above.statistic == 0.0 and above.settings["violation_ratio"] == 0.0 and above.settings["dominant"]
    below = almost_stochastic_order(b, a, rng=0)
    assert below.statistic == 1.0 and below.settings["violation_ratio"] == 1.0 and not below.settings["dominant"]


def test_epsilon_min_decreases_as_the_shift_grows() -> None:
    a, b = _normal(0), _normal(1)
    shifts = [-2.0, -0.5, 0.0, 0.25, 0.5, 1.0, 2.0, 4.0]
    results = [almost_stochastic_order(a + s, b, rng=3) for s in shifts]
    eps_w = [r.settings["violation_ratio"] for r in results]
    eps_min = [r.statistic for r in results]
    assert all(x >= y for x, y in itertools.pairwise(eps_w))
    assert all(x >= y for x, y in itertools.pairwise(eps_min))
    assert eps_min[0] == 1.0 and eps_min[-1] == 0.0
    assert all(m >= w for m, w in zip(eps_min, eps_w, strict=True))  # an upper confidence bound
    assert [r.settings["dominant"] for r in results] == [m < 0.2 for m in eps_min]


def test_formula_from_the_bootstrap_distribution() -> None:
    from scipy.stats import norm

    a, b = _normal(4, 12) + 0.4, _normal(5, 9)
    r = almost_stochastic_order(a, b, alpha=0.1, n_resamples=200, rng=11)
    n, m, eps = 12, 9, r.settings["violation_ratio"]
    assert eps == violation_ratio(a, b)
    # Rebuild the bootstrap from the same draws (one batch: all resamples of A, then all of B).
    g = np.random.default_rng(11)
    ia, ib = g.integers(0, n, size=(200, n)), g.integers(0, m, size=(200, m))
    boot = np.array(
        [violation_ratio(np.sort(a)[np.sort(i)], np.sort(b)[np.sort(j)]) for i, j in zip(ia, ib, strict=True)]
    )
    sigma = np.std(math.sqrt(n * m / (n + m)) * (boot - eps), ddof=1)
    expected = min(1.0, max(0.0, eps - math.sqrt((n + m) / (n * m)) * sigma * norm.ppf(0.1)))
    assert 0.0 < expected < 1.0
    assert r.statistic == pytest.approx(expected, abs=1e-12)
    assert r.settings["bootstrap_std"] == pytest.approx(np.std(boot, ddof=1), abs=1e-12)
    assert r.level == 0.9 and r.settings["alpha"] == 0.1 and math.isnan(r.pvalue)


def test_same_seed_same_result_and_interval() -> None:
    a, b = _normal(0) + 0.5, _normal(1)
    r1, r2 = almost_stochastic_order(a, b, rng=5), almost_stochastic_order(a, b, rng=5)
    assert r1.statistic == r2.statistic and r1.settings == r2.settings
    assert r1.confidence_interval(0.8) == r2.confidence_interval(0.8)
    assert r1.confidence_interval() == (0.0, r1.statistic)  # level 1 - alpha: the upper end is epsilon_min
    assert r1.confidence_interval(0.8).high < r1.statistic < r1.confidence_interval(0.99).high
    assert almost_stochastic_order(a, b, rng=6).statistic != r1.statistic
    d = r1.to_dict()
    assert d["test"] == "almost_stochastic_order" and d["setting_seed"] == 5 and d["ci_high"] == r1.statistic


def test_rng_none_records_a_seed_and_global_state_is_untouched() -> None:
    a, b = _normal(0) + 0.5, _normal(1)
    state = np.random.get_state()[1].copy()
    r = almost_stochastic_order(a, b, n_resamples=200)
    seed = r.settings["seed"]
    assert isinstance(seed, int)
    assert almost_stochastic_order(a, b, n_resamples=200, rng=seed).statistic == r.statistic
    g = almost_stochastic_order(a, b, n_resamples=200, rng=np.random.default_rng(1))
    assert g.settings["seed"] is None and 0.0 <= g.statistic <= 1.0
    np.testing.assert_array_equal(np.random.get_state()[1], state)


def test_threshold_and_non_finite_values() -> None:
    a, b = _normal(0) + 0.5, _normal(1)
    r = almost_stochastic_order(a, b, rng=0)
    strict = almost_stochastic_order(a, b, threshold=r.statistic, rng=0)
    assert not strict.settings["dominant"] and strict.settings["threshold"] == r.statistic
    with_nan = almost_stochastic_order([*a, np.nan, np.inf], b, rng=0)
    assert with_nan.statistic == r.statistic and with_nan.settings["n_a"] == 20


def test_large_groups_are_batched() -> None:
    a, b = _normal(0, 3000) + 0.05, _normal(1, 2500)
    r = almost_stochastic_order(a, b, n_resamples=800, rng=0)
    assert 0.0 <= r.settings["violation_ratio"] <= r.statistic <= 1.0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"a": [1.0]}, ValueError, "`a` needs at least 2 finite values to compare"),
        ({"b": [1.0, np.nan]}, ValueError, "`b` needs at least 2 finite values to compare"),
        ({"a": "abc"}, TypeError, "`a` must be numbers"),
        ({"b": [[1.0, 2.0]]}, ValueError, "`b` must be one-dimensional"),
        ({"alpha": 0.0}, ValueError, "`alpha` must be a number in"),
        ({"threshold": 1.5}, ValueError, "`threshold` must be a number in"),
        ({"n_resamples": 0}, ValueError, "`n_resamples` must be a positive integer. Received: n_resamples=0."),
        ({"grid_size": 2.5}, ValueError, "`grid_size` must be a positive integer"),
        ({"rng": -1}, ValueError, "`rng` must be"),
        ({"rng": "seed"}, TypeError, "`rng` must be"),
    ],
)
def test_validation(kwargs: dict, error: type, match: str) -> None:
    args = {"a": [1.0, 2.0, 3.0], "b": [0.0, 2.0, 4.0], "rng": 0, **kwargs}
    with pytest.raises(error, match=match):
        almost_stochastic_order(**args)
