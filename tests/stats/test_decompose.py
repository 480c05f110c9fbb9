"""decompose(): the implementation-noise share on the Morin & Willetts (2020) replicate data, and its edges."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deviate_cb.stats.decompose import decompose, variance_share_interval
from tests.helpers.morin_data import morin


def _morin() -> tuple[np.ndarray, np.ndarray]:
    return morin("impl"), morin("algo+impl")


@pytest.mark.parametrize(("column", "expected"), [(0, 0.759), (1, 0.902)])
def test_morin_2020_share(column: int, expected: float) -> None:
    impl, algo_impl = _morin()
    r = decompose(impl[:, column], algo_impl[:, column], rng=0, method="BCa")
    assert r.test == "decompose"
    assert round(r.statistic, 3) == expected
    # Equal group sizes: ddof=0 gives the same ratio.
    np.testing.assert_allclose(r.statistic, np.std(impl[:, column]) / np.std(algo_impl[:, column]), rtol=1e-12)
    assert math.isnan(r.pvalue)
    np.testing.assert_allclose(r.settings["variance_share"], r.statistic**2, rtol=1e-12)
    assert r.settings["n_impl"] == r.settings["n_algo_impl"] == 50
    for level in (0.8, 0.95, 0.99):
        low, high = r.confidence_interval(level)
        assert low < r.statistic < high
    assert r.confidence_interval(0.8).high < r.confidence_interval(0.99).high


def test_same_seed_same_interval_and_level_recomputation_reuses_draws() -> None:
    impl, algo_impl = _morin()
    a = decompose(impl[:, 0], algo_impl[:, 0], rng=7, method="BCa")
    b = decompose(impl[:, 0], algo_impl[:, 0], rng=7, method="BCa")
    assert a.confidence_interval() == b.confidence_interval()
    assert a.confidence_interval(0.9) == b.confidence_interval(0.9) == a.confidence_interval(0.9)
    c = decompose(impl[:, 0], algo_impl[:, 0], level=0.9, rng=7, method="BCa")
    np.testing.assert_allclose(c.confidence_interval(), a.confidence_interval(0.9), rtol=1e-12)
    assert decompose(impl[:, 0], algo_impl[:, 0], rng=8, method="BCa").confidence_interval() != a.confidence_interval()


def test_rng_generator_and_fresh_entropy_are_recorded() -> None:
    x, y = [1.0, 2.0, 4.0, 3.0, 2.5], [0.0, 3.0, 5.0, 1.0, 2.0]
    state = np.random.get_state()[1].copy()
    r = decompose(x, y, rng=None, n_resamples=200, method="BCa")
    assert isinstance(r.settings["seed"], int)
    again = decompose(x, y, rng=r.settings["seed"], n_resamples=200, method="BCa")
    assert again.confidence_interval() == r.confidence_interval()
    g = decompose(x, y, rng=np.random.default_rng(3), n_resamples=200, method="BCa")
    assert g.settings["seed"] is None and np.isfinite(g.confidence_interval().low)
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # global state untouched


def test_hand_computed_ratio_and_control_algo_pair() -> None:
    r = decompose([1.0, 2.0, 3.0], [0.0, 2.0, 4.0], rng=1, method="percentile")
    assert r.statistic == 0.5 and r.settings["method"] == "percentile"
    assert r.settings["std_impl"] == 1.0 and r.settings["std_algo_impl"] == 2.0
    # Identical control runs: no implementation noise at all.
    assert decompose([0.9, 0.9, 0.9], [0.8, 0.85, 0.9], rng=1).statistic == 0.0


def test_non_finite_values_are_left_out() -> None:
    r = decompose([1.0, np.nan, 2.0, 3.0], [0.0, 2.0, np.inf, 4.0], rng=1)
    assert r.statistic == 0.5 and r.settings["n_impl"] == 3 and r.settings["n_algo_impl"] == 3


def test_no_spread_in_algo_impl_gives_nan_with_a_note() -> None:
    r = decompose([1.0, 2.0, 3.0], [5.0, 5.0, 5.0], rng=0)
    assert math.isnan(r.statistic)
    assert "no spread" in r.settings["note"]
    assert all(math.isnan(v) for v in r.confidence_interval())
    assert r.to_dict()["statistic"] is None


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"impl": [1.0]}, ValueError, "`impl` needs at least 2 finite values to compare"),
        ({"algo_impl": [1.0, np.nan]}, ValueError, "`algo_impl` needs at least 2 finite values to compare"),
        ({"impl": "abc"}, TypeError, "`impl` must be numbers"),
        ({"impl": [[1.0, 2.0]]}, ValueError, "one-dimensional"),
        ({"level": 1.5}, ValueError, "`level` must be a number in"),
        ({"n_resamples": 0}, ValueError, "`n_resamples` must be a positive integer"),
        ({"method": "bca"}, ValueError, "`method` must be one of"),
        ({"rng": 1.5}, TypeError, "`rng` must be"),
        ({"rng": True}, TypeError, "`rng` must be"),
    ],
)
def test_validation(kwargs: dict, error: type, match: str) -> None:
    args = {"impl": [1.0, 2.0, 3.0], "algo_impl": [0.0, 2.0, 4.0], "rng": 0, **kwargs}
    with pytest.raises(error, match=match):
        decompose(**args)


@pytest.mark.parametrize(("n_narrow", "n_wide"), [(3, 3), (4, 7), (10, 5), (50, 50)])
@pytest.mark.parametrize("level", [0.8, 0.95])
def test_f_interval_is_the_direct_scipy_computation(n_narrow: int, n_wide: int, level: float) -> None:
    from scipy import stats as sps

    g = np.random.default_rng(n_narrow * 100 + n_wide)
    x, y = g.normal(0.0, 0.3, n_narrow), g.normal(0.0, 1.0, n_wide)
    r = decompose(x, y, level=0.5, method="F")
    share = np.std(x, ddof=1) / np.std(y, ddof=1)
    alpha = 1 - level
    f = sps.f(n_narrow - 1, n_wide - 1)
    low, high = share / np.sqrt(f.ppf(1 - alpha / 2)), share / np.sqrt(f.ppf(alpha / 2))
    np.testing.assert_allclose(r.confidence_interval(level), [low, high], rtol=1e-10)  # not capped at 1
    assert r.settings["method"] == "F" and "seed" not in r.settings
    assert r.statistic == share and r.settings["exceeds_one"] is bool(share > 1)
    np.testing.assert_allclose(r.pvalue, 2 * min(f.cdf(share**2), f.sf(share**2)), rtol=1e-9)


def test_fewer_than_four_runs_use_the_f_interval() -> None:
    r = decompose([1.0, 2.0, 3.0], [0.0, 2.0, 4.0])
    assert r.statistic == 0.5 and r.settings["method"] == "F" and r.confidence_interval().high > 1.0
    assert decompose([0.9, 0.9, 0.9], [0.8, 0.85, 0.9]).confidence_interval() == (0.0, 0.0)


@pytest.mark.parametrize("method", ["bonett", "F"])
def test_a_significant_share_above_one_is_a_broken_set_up_never_a_capped_interval(method: str) -> None:
    # the case: impl spreads 4x the seed runs; F rejects equal spreads at p = 0.00025
    g = np.random.default_rng(5)
    impl, wide = g.normal(0.0, 4.0, 10), g.normal(0.0, 1.0, 10)
    r = decompose(impl, wide, method=method)
    low, high = r.confidence_interval()
    assert r.statistic > 1 and low <= r.statistic <= high  # never an interval that excludes its estimate
    assert low > 1 and r.settings["above_one"] is True and r.pvalue < 0.05
    assert "sound set-up rules out" in r.settings["note"] and "mislabelled" in r.settings["note"]
    vlow, vhigh = variance_share_interval(r)
    np.testing.assert_allclose((vlow, vhigh), (low**2, high**2))
    assert vlow <= r.settings["variance_share"] <= vhigh


def test_a_share_above_one_within_noise_is_not_a_problem() -> None:
    r = decompose([0.0, 1.2, 2.0, 0.4, 1.1], [0.0, 1.0, 2.0, 0.5, 1.2])
    low, high = r.confidence_interval()
    assert r.statistic > 1 and low < 1 < high and r.settings["above_one"] is False and "note" not in r.settings


def test_identical_impl_runs_say_what_they_cannot_rule_out() -> None:
    r = decompose([0.9] * 6, [0.8, 0.85, 0.9, 0.84, 0.88, 0.83])
    assert r.statistic == 0.0 and r.confidence_interval() == (0.0, 0.0)
    assert "cannot be ruled out" in r.settings["note"]
