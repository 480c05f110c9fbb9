"""Monte-Carlo coverage of every interval the project prints, for normal runs, and the test/interval equivalences.

Each simulation draws ``SIMS`` data sets at once (seeded) and computes the intervals with the same vectorised
kernels the public functions call (each checked against its public function on a few data sets here), at 95%.
The requirement (issue 24): coverage at least 0.93 (nominal 0.95 less 2 points) at every group size, and at most
0.97 for the intervals that are exact for normal data (the mean of one group, the std, the decomposition share).
With 4000 data sets the Monte-Carlo standard error is 0.34 points; the noncentral-t intervals (d, P(A>B)) use
the same count (their root finding is vectorised too). The IQM uses 20000 (s.e. 0.15 points) and the spread
ratio 30000 (s.e. 0.13 points), because their intervals sit within 2 points of nominal at their worst sizes
(Yuen's 0.935 at 8 runs; Brown-Forsythe's 0.933 at 4 and 4 runs), so a smaller count could fall below 0.93 by
chance.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from deviate_cb.stats import (
    achieved_power,
    cohens_d,
    decompose,
    describe,
    detectable_effect,
    hedges_g,
    iqm,
    mean_difference,
    power_curve,
    prob_improvement,
    spread_ratio,
    std_confidence_interval,
    variance_test,
    welch_t,
)
from deviate_cb.stats.decompose import f_share_interval
from deviate_cb.stats.effect_size import _delta_interval, _delta_scale, _welch_interval, _welch_parts
from deviate_cb.stats.iqm import trimmed_t_interval
from deviate_cb.stats.spread import _spread_interval

SIZES = [(3, 3), (4, 3), (4, 4), (5, 5), (10, 10)]
SIMS = 4000
SPREAD_SIMS = 30000
LEVEL = 0.95
LOW_BOUND, HIGH_BOUND = 0.93, 0.97


def _normal(seed: int, shape: tuple[int, int], mean: float = 0.0, std: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(mean, std, size=shape)


def _coverage(low: np.ndarray, high: np.ndarray, truth: float) -> float:
    return float(np.mean((low <= truth) & (truth <= high)))


def _rank_p(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    greater = (x[:, :, None] > y[:, None, :]).mean(axis=(1, 2))
    return greater + 0.5 * (x[:, :, None] == y[:, None, :]).mean(axis=(1, 2))


@pytest.mark.parametrize(("n_a", "n_b"), SIZES)
def test_welch_based_intervals_cover(n_a: int, n_b: int) -> None:
    delta = 0.8
    x = _normal(n_a * 10 + n_b, (SIMS, n_a), mean=delta)
    y = _normal(n_a * 10 + n_b + 1000, (SIMS, n_b))
    diff, se, df = _welch_parts(x, y)
    low, high = _welch_interval(diff, se, df, LEVEL)
    mean_cov = _coverage(low, high, delta)
    d_low, d_high = _delta_interval(diff / se, df, _delta_scale(n_a, n_b), LEVEL)
    d_cov = _coverage(d_low, d_high, delta)
    p_true = float(sps.norm.cdf(delta / math.sqrt(2)))
    p_hat = _rank_p(x, y)
    p_low = np.minimum(sps.norm.cdf(d_low / math.sqrt(2)), p_hat)
    p_high = np.maximum(sps.norm.cdf(d_high / math.sqrt(2)), p_hat)
    p_cov = _coverage(p_low, p_high, p_true)
    assert LOW_BOUND <= mean_cov <= HIGH_BOUND, mean_cov
    assert LOW_BOUND <= d_cov <= HIGH_BOUND, d_cov
    assert p_cov >= LOW_BOUND, p_cov
    # the kernels are what the public functions compute
    for i in range(3):
        assert mean_difference(x[i], y[i]).confidence_interval() == pytest.approx((low[i], high[i]), rel=1e-12)
        assert cohens_d(x[i], y[i]).confidence_interval() == pytest.approx((d_low[i], d_high[i]), rel=1e-12)
        assert prob_improvement(x[i], y[i]).confidence_interval() == pytest.approx((p_low[i], p_high[i]), rel=1e-12)


@pytest.mark.parametrize("n", [3, 4, 5, 8, 10, 12, 20])
def test_iqm_interval_covers_the_centre(n: int) -> None:
    sims = 20000
    x = _normal(n, (sims, n), mean=5.0, std=2.0)
    low, high = trimmed_t_interval(x, LEVEL)
    cov = _coverage(low, high, 5.0)
    assert cov >= LOW_BOUND, cov
    if n == 3:  # nothing trimmed: Student's t, exact
        assert cov <= HIGH_BOUND, cov
    for i in range(3):
        assert iqm(x[i]).confidence_interval() == pytest.approx((low[i], high[i]), rel=1e-12)


@pytest.mark.parametrize("n", [3, 4, 5, 10])
def test_std_interval_covers(n: int) -> None:
    x = _normal(100 + n, (SIMS, n), std=3.0)
    s = np.std(x, axis=1, ddof=1)
    low, high = std_confidence_interval(s, np.full(SIMS, n), LEVEL)
    cov = _coverage(low, high, 3.0)
    assert LOW_BOUND <= cov <= HIGH_BOUND, cov
    assert describe(x[0], std_ci="chi2").confidence_interval() == pytest.approx((low[0], high[0]), rel=1e-12)


@pytest.mark.parametrize(("n_a", "n_b"), SIZES)
@pytest.mark.parametrize(("sigma_a", "sigma_b"), [(1.0, 1.0), (1.0, 2.5), (3.0, 1.0)])
def test_spread_ratio_interval_covers(n_a: int, n_b: int, sigma_a: float, sigma_b: float) -> None:
    seed = 200 + 10 * n_a + n_b + int(10 * sigma_a + 100 * sigma_b)
    x = _normal(seed, (SPREAD_SIMS, n_a), std=sigma_a)
    y = _normal(seed + 1, (SPREAD_SIMS, n_b), std=sigma_b)
    low, high = _spread_interval(x, y, LEVEL)
    cov = _coverage(low, high, sigma_a / sigma_b)
    assert cov >= LOW_BOUND, cov
    assert ("coverage_note" in spread_ratio(x[0], y[0]).settings) == (n_a == n_b == 4)
    for i in range(3):
        assert spread_ratio(x[i], y[i]).confidence_interval() == pytest.approx((low[i], high[i]), rel=1e-12)


@pytest.mark.parametrize(("n_a", "n_b"), SIZES)
def test_decomposition_share_interval_covers(n_a: int, n_b: int) -> None:
    rho = 0.6
    x = _normal(400 + n_a, (SIMS, n_a), std=rho)
    y = _normal(500 + n_b, (SIMS, n_b))
    share = np.std(x, axis=1, ddof=1) / np.std(y, axis=1, ddof=1)
    low, high, _ = f_share_interval(share, n_a, n_b, LEVEL, cap=False)
    cov = _coverage(low, high, rho)
    assert LOW_BOUND <= cov <= HIGH_BOUND, cov
    for i in range(3):
        assert decompose(x[i], y[i], method="F").confidence_interval() == pytest.approx((low[i], high[i]), rel=1e-12)


# --- the equivalences: an interval printed beside a test excludes "no effect" iff the test rejects --------


def _pairs(count: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    g = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n_a, n_b = (int(v) for v in g.integers(3, 12, size=2))
        out.append((g.normal(g.normal(0, 1.5), g.uniform(0.5, 2), n_a), g.normal(0, g.uniform(0.5, 2), n_b)))
    return out


def test_welch_intervals_exclude_no_effect_iff_welch_rejects() -> None:
    rejected = 0
    for x, y in _pairs(300, 1):
        reject = welch_t(x, y).pvalue <= 0.05
        rejected += reject
        low, high = mean_difference(x, y).confidence_interval()
        assert (not low <= 0 <= high) == reject
        assert mean_difference(x, y).confidence_interval() == pytest.approx(welch_t(x, y).confidence_interval())
        low, high = cohens_d(x, y).confidence_interval()
        assert (not low <= 0 <= high) == reject
        assert hedges_g(x, y).confidence_interval() == (low, high)
        p = prob_improvement(x, y)
        if not p.settings["widened"]:
            low, high = p.confidence_interval()
            assert (not low <= 0.5 <= high) == reject
    assert 30 < rejected < 270  # both outcomes are exercised


def test_spread_interval_excludes_one_iff_brown_forsythe_rejects() -> None:
    rejected = 0
    g = np.random.default_rng(2)
    for x, y in _pairs(300, 2):
        y = y * g.uniform(0.2, 5.0)
        r = spread_ratio(x, y)
        reject = r.pvalue <= 0.05
        rejected += reject
        assert r.pvalue == variance_test(x, y).pvalue
        low, high = r.confidence_interval()
        assert (not low <= 1 <= high) == reject
    assert 30 < rejected < 270


def test_spread_interval_ends_are_where_brown_forsythe_is_at_the_level() -> None:
    x, y = _normal(7, (1, 8))[0], _normal(8, (1, 9), std=3.0)[0]
    r = spread_ratio(x, y)
    low, high = r.confidence_interval()
    assert 0 < low < r.statistic < high < math.inf and not r.settings["low_zero"]
    for end in (low, high):
        np.testing.assert_allclose(sps.levene(x, end * y, center="median").pvalue, 0.05, rtol=1e-8)
    small = spread_ratio([1.0, 2.0, 2.5], [0.0, 1.0, 5.0])  # 3 runs each: little power, an end is open
    assert small.settings["low_zero"] or small.settings["high_infinite"]


def test_spread_ratio_degenerate_groups() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a_const = spread_ratio([1.0, 1.0, 1.0, 1.0], [0.0, 2.0, 0.0, 2.0, 1.0])
        assert a_const.statistic == 0.0 and "constant" in a_const.settings["note"]
        assert a_const.confidence_interval() in ((0.0, math.inf), (0.0, 0.0))
        b_const = spread_ratio([0.0, 2.0, 0.0, 2.0, 1.0], [1.0, 1.0, 1.0])
        assert b_const.statistic == math.inf
        both = spread_ratio([1.0, 1.0], [2.0, 2.0, 2.0])
        assert math.isnan(both.statistic) and all(math.isnan(v) for v in both.confidence_interval())
    rejected = spread_ratio([1.0] * 8, [0.0, 4.0, 0.0, 4.0, 0.0, 4.0, 0.0, 4.0, 5.0])
    assert rejected.pvalue < 0.05 and rejected.confidence_interval() == (0.0, 0.0)
    kept = spread_ratio([1.0] * 3, [0.9, 1.1, 1.0])
    assert kept.pvalue > 0.05 and kept.confidence_interval() == (0.0, math.inf)
    two = spread_ratio([1.0, 2.0], [1.0, 5.0])  # 2 runs each: equal deviations, the test always rejects
    assert two.confidence_interval().low == pytest.approx(0.25) and "2 runs" in two.settings["note"]
    with pytest.raises(ValueError, match=r"^`level` must be a number in \(0, 1\)\. Received: level=2\.$"):
        spread_ratio([1.0, 2.0], [1.0, 3.0], level=2)


# --- power ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_a", "n_b", "std_a", "std_b", "alternative"),
    [
        (3, 3, 1.0, None, "two-sided"),
        (10, 10, 0.01, 0.02, "greater"),
        (3, 20, 1.0, 0.5, "less"),
        (2, 2, 1.0, None, "two-sided"),
    ],
)
def test_detectable_effect_inverts_achieved_power(n_a, n_b, std_a, std_b, alternative) -> None:
    effect = detectable_effect(n_a, n_b, std_a, std_b, power=0.8, alternative=alternative)
    got = achieved_power(n_a, n_b, std_a, std_b, effect=effect, alternative=alternative)
    np.testing.assert_allclose(got, 0.8, atol=1e-9)
    assert achieved_power(n_a, n_b, std_a, std_b, effect=effect * 0.99, alternative=alternative) < 0.8


def test_power_curve_is_achieved_power_per_n_and_fast() -> None:
    import time

    ns = list(range(2, 31))
    curve = power_curve(0.5, 0.8, 0.6, ns)
    expected = [achieved_power(n, n, 0.5, 0.8, effect=0.6) for n in ns]
    np.testing.assert_allclose(curve, expected, rtol=1e-12)
    assert np.all(np.diff(curve) > 0)
    start = time.perf_counter()
    power_curve(0.5, 0.8, 0.6, ns)
    detectable_effect(5, 5, 0.5, 0.8)
    assert time.perf_counter() - start < 0.5  # each under 50 ms on a fast machine; generous for slow CI


def test_power_validation_messages() -> None:
    with pytest.raises(ValueError, match=r"^`n_a` must be an integer of at least 2\. Received: n_a=1\.$"):
        detectable_effect(1, 3, 1.0)
    with pytest.raises(ValueError, match=r"^`power` must be above `alpha`"):
        detectable_effect(3, 3, 1.0, power=0.01)
    with pytest.raises(ValueError, match=r"^`ns` must be an integer of at least 2\. Received: ns=0\.$"):
        power_curve(1.0, None, 1.0, [3, 0])
    with pytest.raises(TypeError, match=r"^`ns` must be integers\."):
        power_curve(1.0, None, 1.0, "3")
    with pytest.raises(ValueError, match=r"^`effect` must be a positive number\. Received: effect=0\.$"):
        power_curve(1.0, None, 0, [3])
