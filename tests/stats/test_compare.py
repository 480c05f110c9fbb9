"""compare() and its statistics against SciPy/NumPy, hand computations and the Morin 2020 replicate data."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from deviate_cb.stats.aso import almost_stochastic_order
from deviate_cb.stats.compare import Comparison, compare, mann_whitney_u, student_t, variance_test, welch_t
from deviate_cb.stats.effect_size import cohens_d, hedges_g, mean_difference, prob_improvement
from tests.helpers.morin_data import morin

A3, B3 = [1.0, 2.0, 3.0], [2.0, 3.0, 4.0]


def _p_improvement_by_ranks(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """An independent reference: P(A>B) = (rank sum of x - na (na + 1) / 2) / (na nb), average ranks."""
    na, nb = x.shape[axis], y.shape[axis]
    ranks = sps.rankdata(np.concatenate([x, y], axis=axis), axis=axis)
    return (np.take(ranks, np.arange(na), axis=axis).sum(axis=axis) - na * (na + 1) / 2) / (na * nb)


def _groups(seed: int, na: int = 12, nb: int = 9) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(0.85, 0.01, na), rng.normal(0.84, 0.02, nb)


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
@pytest.mark.parametrize("seed", [0, 1])
def test_t_tests_match_scipy(seed: int, alternative: str) -> None:
    a, b = _groups(seed)
    for func, equal_var in ((welch_t, False), (student_t, True)):
        ref = sps.ttest_ind(a, b, equal_var=equal_var, alternative=alternative)
        r = func(a, b, alternative=alternative, level=0.9)
        assert (r.statistic, r.pvalue) == (float(ref.statistic), float(ref.pvalue))
        assert r.settings["alternative"] == alternative and r.settings["equal_var"] is equal_var
        for level in (0.9, 0.99):
            np.testing.assert_allclose(r.confidence_interval(level), ref.confidence_interval(level), rtol=1e-12)
        assert r.level == 0.9 and r.to_dict()["test"] == func.__name__


def test_welch_interval_hand_computation() -> None:
    # a=[1,2,3], b=[2,3,4]: diff -1, se sqrt(1/3 + 1/3), Welch df 4
    low, high = welch_t(A3, B3).confidence_interval(0.95)
    half = sps.t.ppf(0.975, 4) * math.sqrt(2 / 3)
    np.testing.assert_allclose([low, high], [-1 - half, -1 + half], rtol=1e-12)


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_mann_whitney_matches_scipy_and_defaults_to_two_sided(alternative: str) -> None:
    a, b = _groups(3)
    ref = sps.mannwhitneyu(a, b, alternative=alternative)
    r = mann_whitney_u(a, b, alternative=alternative)
    assert (r.statistic, r.pvalue) == (float(ref.statistic), float(ref.pvalue))
    default = mann_whitney_u(a, b)
    assert default.settings["alternative"] == "two-sided"
    assert default.pvalue == float(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)


def _nct_delta_interval(a: np.ndarray, b: np.ndarray, level: float) -> tuple[float, float]:
    """Reference: invert scipy.stats.nct.cdf of Welch's statistic with brentq, lambda / sqrt(na nb / (na + nb))."""
    from scipy.optimize import brentq

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a constant group: "precision loss" in its variance
        res = sps.ttest_ind(a, b, equal_var=False)
    t, df, alpha = float(res.statistic), float(res.df), 1 - level
    scale = math.sqrt(len(a) * len(b) / (len(a) + len(b)))

    def root(p: float) -> float:
        lo, hi = t - 5.0, t + 5.0
        while sps.nct.cdf(t, df, lo) < p:
            lo -= 10.0
        while sps.nct.cdf(t, df, hi) > p:
            hi += 10.0
        return brentq(lambda lam: sps.nct.cdf(t, df, lam) - p, lo, hi, xtol=1e-13) / scale

    return root(1 - alpha / 2), root(alpha / 2)


def test_effect_size_intervals_invert_welchs_noncentral_t() -> None:
    d, g = cohens_d(A3, B3), hedges_g(A3, B3)
    expected = _nct_delta_interval(np.array(A3), np.array(B3), 0.95)
    np.testing.assert_allclose(d.confidence_interval(), expected, rtol=1e-9)
    assert g.confidence_interval() == d.confidence_interval()  # one interval, for delta
    assert d.settings["method"] == "noncentral_t" and d.settings["df"] == 4.0
    for seed in range(4):
        a, b = _groups(seed, 5, 7)
        for level in (0.8, 0.95, 0.99):
            np.testing.assert_allclose(
                cohens_d(a, b).confidence_interval(level), _nct_delta_interval(a, b, level), rtol=1e-8
            )
    # one constant group: Welch's statistic uses the other group's spread, the interval stays finite
    one = cohens_d([0.85, 0.85, 0.85], [0.80, 0.81, 0.83])
    np.testing.assert_allclose(
        one.confidence_interval(), _nct_delta_interval(np.array([0.85] * 3), np.array([0.80, 0.81, 0.83]), 0.95)
    )
    both = cohens_d([0.85, 0.85, 0.85], [0.85, 0.85])
    assert math.isnan(both.statistic) and all(math.isnan(v) for v in both.confidence_interval())
    assert "constant" in both.settings["note"]


def test_effect_sizes_hand_computation_normal_method() -> None:
    d, g = cohens_d(A3, B3, method="normal"), hedges_g(A3, B3, method="normal")
    assert d.statistic == -1.0 and math.isnan(d.pvalue)
    np.testing.assert_allclose(g.statistic, -0.8, rtol=1e-12)  # J = 1 - 3 / (4 * 6 - 9) = 0.8
    se = math.sqrt(6 / 9 + 1 / 12)  # (na + nb) / (na nb) + d^2 / (2 (na + nb))
    z = sps.norm.ppf(0.975)
    np.testing.assert_allclose(d.confidence_interval(), [-1 - z * se, -1 + z * se], rtol=1e-12)
    np.testing.assert_allclose(g.confidence_interval(), [0.8 * (-1 - z * se), 0.8 * (-1 + z * se)], rtol=1e-12)
    z90 = sps.norm.ppf(0.95)
    np.testing.assert_allclose(d.confidence_interval(0.9), [-1 - z90 * se, -1 + z90 * se], rtol=1e-12)


def test_cohens_d_matches_numpy() -> None:
    a, b = _groups(4)
    na, nb = a.size, b.size
    pooled = np.sqrt(((na - 1) * a.var(ddof=1) + (nb - 1) * b.var(ddof=1)) / (na + nb - 2))
    np.testing.assert_allclose(cohens_d(a, b).statistic, (a.mean() - b.mean()) / pooled, rtol=1e-12)
    # the t statistic of Student's test is d / sqrt(1/na + 1/nb)
    np.testing.assert_allclose(
        cohens_d(a, b).statistic / math.sqrt(1 / na + 1 / nb), sps.ttest_ind(a, b).statistic, rtol=1e-12
    )


def test_prob_improvement_hand_computation_and_u() -> None:
    r = prob_improvement(A3, B3, rng=0, n_resamples=200)
    np.testing.assert_allclose(r.statistic, 2 / 9, rtol=1e-12)  # pairs a>b: (3,2); ties: (2,2), (3,3)
    for seed in range(3):
        a, b = (np.round(g, 2) for g in _groups(seed))  # rounded: ties
        brute = np.mean((a[:, None] > b[None, :]) + 0.5 * (a[:, None] == b[None, :]))
        u = sps.mannwhitneyu(a, b).statistic
        p = prob_improvement(a, b, rng=seed, n_resamples=100).statistic
        np.testing.assert_allclose([p, p], [brute, u / (a.size * b.size)], rtol=1e-12)


def test_bootstrap_intervals_match_scipy_bootstrap() -> None:
    a, b = _groups(5)
    for func, stat in (
        (mean_difference, lambda x, y, axis=-1: x.mean(axis) - y.mean(axis)),
        (prob_improvement, _p_improvement_by_ranks),
    ):
        r = func(a, b, level=0.9, n_resamples=999, rng=7, method="percentile")
        for level in (0.9, 0.95):
            ref = sps.bootstrap(
                (a, b),
                stat,
                n_resamples=999,
                paired=False,
                confidence_level=level,
                method="percentile",
                rng=np.random.default_rng(7),
            )
            np.testing.assert_allclose(r.confidence_interval(level), ref.confidence_interval, rtol=1e-12)
        assert r.settings["seed"] == 7 and r.settings["method"] == "percentile"
    np.testing.assert_allclose(mean_difference(a, b, rng=1).statistic, a.mean() - b.mean(), rtol=1e-12)


def test_bootstrap_bca_method_selectable() -> None:
    a, b = _groups(6)
    r = mean_difference(a, b, n_resamples=499, rng=2, method="BCa")
    ref = sps.bootstrap(
        (a, b),
        lambda x, y, axis=-1: x.mean(axis) - y.mean(axis),
        n_resamples=499,
        paired=False,
        method="BCa",
        rng=np.random.default_rng(2),
    )
    np.testing.assert_allclose(r.confidence_interval(), ref.confidence_interval, rtol=1e-12)


def test_same_seed_same_result_and_levels_reuse_the_seed() -> None:
    a, b = _groups(8)
    state = np.random.get_state()
    for method_free in (prob_improvement, mean_difference):

        def func(*args, _f=method_free, **kwargs):  # the bootstrap methods resample
            return _f(*args, method="percentile", **kwargs)

        r1, r2 = func(a, b, n_resamples=500, rng=11), func(a, b, n_resamples=500, rng=11)
        assert r1.confidence_interval() == r2.confidence_interval()
        assert r1.confidence_interval(0.8) == r2.confidence_interval(0.8)
        assert r1.confidence_interval() != func(a, b, n_resamples=500, rng=12).confidence_interval()
        # a recomputed level uses the recorded seed: equal to a fresh call at that level with that seed
        assert r1.confidence_interval(0.8) == func(a, b, level=0.8, n_resamples=500, rng=11).confidence_interval()
        low80, high80 = r1.confidence_interval(0.8)
        low95, high95 = r1.confidence_interval(0.95)
        assert low95 <= low80 <= high80 <= high95
        g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
        assert func(a, b, rng=g1, n_resamples=200).to_dict() == func(a, b, rng=g2, n_resamples=200).to_dict()
        fresh = func(a, b, n_resamples=200)
        assert isinstance(fresh.settings["seed"], int) and 0 <= fresh.settings["seed"] < 2**63
        again = func(a, b, n_resamples=200, rng=fresh.settings["seed"])
        assert fresh.confidence_interval() == again.confidence_interval()
    np.testing.assert_array_equal(np.random.get_state()[1], state[1])  # the global RNG is untouched


@pytest.mark.parametrize("center", ["median", "mean"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_variance_test_matches_levene_and_one_sided_halves(seed: int, center: str) -> None:
    a, b = _groups(seed)
    ref = sps.levene(a, b, center=center)
    two = variance_test(a, b, center=center)
    assert (two.statistic, two.pvalue) == (float(ref.statistic), float(ref.pvalue))
    assert two.settings["method"] == ("brown_forsythe" if center == "median" else "levene")
    less, greater = (variance_test(a, b, center=center, alternative=alt) for alt in ("less", "greater"))
    np.testing.assert_allclose(less.statistic**2, ref.statistic, rtol=1e-10)  # W = t^2
    np.testing.assert_allclose(less.pvalue + greater.pvalue, 1.0, rtol=1e-12)
    np.testing.assert_allclose(min(less.pvalue, greater.pvalue), ref.pvalue / 2, rtol=1e-10)
    # a is the less variable group here (sd 0.01 vs 0.02): "less" is the side that agrees
    assert (less.statistic < 0) == (less.pvalue < 0.5)


def test_variance_test_one_sided_direction() -> None:
    steady, noisy = [0.0, 1.0, 2.0, 1.0, 1.5, 0.5], [0.0, 4.0, 8.0, 4.0, 6.0, 2.0]
    assert variance_test(steady, noisy, alternative="less").pvalue < 0.05
    assert variance_test(steady, noisy, alternative="greater").pvalue > 0.95


def test_compare_collects_everything() -> None:
    a, b = _groups(9)
    a_nan = np.append(a, [np.nan, np.inf])
    c = compare(a_nan, b, rng=4, n_resamples=500)
    assert isinstance(c, Comparison)
    assert (c.n_a, c.n_b, c.n_nonfinite_a, c.n_nonfinite_b) == (a.size, b.size, 2, 0)
    np.testing.assert_allclose([c.mean_a, c.std_b], [a.mean(), b.std(ddof=1)], rtol=1e-12)
    assert list(c.results()) == [
        "welch_t",
        "student_t",
        "mann_whitney_u",
        "cohens_d",
        "hedges_g",
        "prob_improvement",
        "mean_difference",
        "variance_test",
        "spread_ratio",
        "almost_stochastic_order",
    ]
    assert c.spread_ratio.pvalue == c.variance_test.pvalue and c.spread_ratio.statistic == c.std_a / c.std_b
    assert c.mean_difference.confidence_interval() == welch_t(a, b).confidence_interval()
    assert c.welch_t.pvalue == welch_t(a, b).pvalue
    assert c.student_t.pvalue == pytest.approx(float(sps.ttest_ind(a, b, equal_var=True).pvalue), rel=1e-12)
    aso = almost_stochastic_order(a, b, rng=4)
    assert (
        c.almost_stochastic_order.statistic == aso.statistic and c.almost_stochastic_order.settings["threshold"] == 0.2
    )
    assert c.mann_whitney_u.pvalue == mann_whitney_u(a, b).pvalue
    assert c.variance_test.pvalue == float(sps.levene(a, b, center="median").pvalue)
    assert (
        c.prob_improvement.confidence_interval() == prob_improvement(a, b, n_resamples=500, rng=4).confidence_interval()
    )
    d = json.loads(json.dumps(c.to_dict()))
    assert d["n_nonfinite_a"] == 2 and d["notes"] == []
    assert d["results"]["welch_t"]["reject"] == (c.welch_t.pvalue <= 0.05)
    assert d["results"]["cohens_d"]["reject"] is None and d["results"]["cohens_d"]["pvalue"] is None
    with pytest.raises(AttributeError):
        c.n_a = 3  # type: ignore[misc]


def test_compare_is_reproducible_with_a_seed_or_generator() -> None:
    a, b = _groups(12)
    assert compare(a, b, rng=5, n_resamples=300).to_dict() == compare(a, b, rng=5, n_resamples=300).to_dict()
    c1 = compare(a, b, rng=np.random.default_rng(5), n_resamples=300)
    c2 = compare(a, b, rng=np.random.default_rng(5), n_resamples=300)
    assert c1.to_dict() == c2.to_dict()
    seed = c1.almost_stochastic_order.settings["seed"]
    assert c1.mean_difference.settings["method"] == "welch" and c1.prob_improvement.settings["method"] == "normal"
    boot = compare(a, b, rng=5, n_resamples=300, mean_difference_method="BCa", prob_improvement_method="percentile")
    assert boot.mean_difference.settings["seed"] == boot.prob_improvement.settings["seed"] == 5
    assert (
        boot.mean_difference.confidence_interval(0.8)
        == mean_difference(a, b, 0.8, 300, 5, method="BCa").confidence_interval()
    )
    assert c1.mean_difference.confidence_interval(0.8) == mean_difference(a, b, 0.8, 300, seed).confidence_interval()


def test_compare_alternatives_are_passed_on() -> None:
    a, b = _groups(10)
    c = compare(a, b, rng=0, n_resamples=100, alternative="greater", variance_alternative="less")
    assert c.welch_t.pvalue == welch_t(a, b, alternative="greater").pvalue
    assert c.mann_whitney_u.settings["alternative"] == "greater"
    assert c.variance_test.pvalue == variance_test(a, b, alternative="less").pvalue


def test_constant_groups_do_not_crash() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = compare([0.85, 0.85, 0.85], [0.85, 0.85, 0.85, 0.85], rng=0, n_resamples=200)
        assert math.isnan(c.welch_t.pvalue) and math.isnan(c.cohens_d.statistic)
        assert c.prob_improvement.statistic == 0.5
        assert all(math.isnan(v) for v in c.mean_difference.confidence_interval())  # no zero-width interval
        assert len(c.notes) == 1 and c.notes[0].startswith("both groups constant and equal")
        json.dumps(c.to_dict())
        one = compare([0.85, 0.85, 0.85], [0.80, 0.81, 0.83], rng=0, n_resamples=200)
        assert len(one.notes) == 1 and one.notes[0].startswith("`a` is constant")
        # the rank estimate (1.0) lies above Phi(delta_hi / sqrt 2): the interval is widened to hold it
        assert one.prob_improvement.statistic == 1.0 and one.prob_improvement.confidence_interval().high == 1.0
        assert one.prob_improvement.settings["widened"] and "widened" in one.prob_improvement.settings["note"]
        assert one.spread_ratio.statistic == 0.0 and math.isnan(c.spread_ratio.statistic)
        assert math.isfinite(one.cohens_d.statistic)


def test_morin2020_same_vs_different_seeds() -> None:
    same, different = morin("impl")[:, 1], morin("algo+impl")[:, 1]  # column 2: test accuracy
    c = compare(different, same, rng=2020, n_resamples=2000)
    assert (c.n_a, c.n_b) == (50, 50)
    # seeds do not shift the mean accuracy much ...
    assert c.welch_t.pvalue == float(sps.ttest_ind(different, same, equal_var=False).pvalue)
    assert abs(c.cohens_d.statistic) < 1 and 0.2 < c.prob_improvement.statistic < 0.8
    low, high = c.mean_difference.confidence_interval()
    assert low < different.mean() - same.mean() < high
    # ... and the variance test agrees with SciPy on the real data
    assert c.variance_test.pvalue == float(sps.levene(different, same, center="median").pvalue)
    np.testing.assert_allclose(c.std_a, np.std(different, ddof=1), rtol=1e-12)


def test_validation_messages() -> None:
    with pytest.raises(
        ValueError,
        match=r"^`a` needs at least 2 finite values to compare\. "
        r"Received: 1 \(and 2 non-finite\)\.$",
    ):
        compare([1.0, np.nan, np.inf], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"^`b` needs at least 2 finite values to compare\. Received: 0 \(and 0"):
        welch_t([1.0, 2.0], [])
    with pytest.raises(
        ValueError,
        match=r"^`alternative` must be one of 'two-sided', 'less', 'greater'\. "
        r"Received: alternative='x'\.$",
    ):
        mann_whitney_u(A3, B3, alternative="x")
    with pytest.raises(ValueError, match=r"^`variance_alternative` must be one of"):
        compare(A3, B3, variance_alternative="smaller")
    with pytest.raises(ValueError, match=r"^`level` must be a number in \(0, 1\)\. Received: level=95\.$"):
        cohens_d(A3, B3, level=95)
    with pytest.raises(ValueError, match=r"^`alpha` must be a number in \(0, 1\)\. Received: alpha=0\.$"):
        compare(A3, B3, alpha=0)
    with pytest.raises(ValueError, match=r"^`center` must be one of 'median', 'mean'\. Received: center='trimmed'\.$"):
        variance_test(A3, B3, center="trimmed")
    with pytest.raises(ValueError, match=r"^`n_resamples` must be a positive integer\. Received: n_resamples=0\.$"):
        mean_difference(A3, B3, n_resamples=0)
    with pytest.raises(ValueError, match=r"^`method` must be one of 'normal', 'percentile', 'basic', 'BCa'\."):
        prob_improvement(A3, B3, method="bca")
    with pytest.raises(ValueError, match=r"^`method` must be one of 'welch', 'percentile', 'basic', 'BCa'\. Rec"):
        mean_difference(A3, B3, method="t")
    with pytest.raises(ValueError, match=r"^`method` must be one of 'noncentral_t', 'normal'\. Received: method=1\.$"):
        hedges_g(A3, B3, method=1)
    with pytest.raises(ValueError, match=r"^`n_resamples` must be a positive integer\. Received: n_resamples=-2\.$"):
        prob_improvement(A3, B3, n_resamples=-2)
    with pytest.raises(
        ValueError,
        match=r"^`rng` must be None, a non-negative int seed or a numpy\.random\.Generator\. "
        r"Received: rng=-1\.$",
    ):
        prob_improvement(A3, B3, rng=-1)
    with pytest.raises(ValueError, match=r"^`a` must be one-dimensional\. Received: a with shape \(2, 2\)\.$"):
        compare([[1.0, 2.0], [3.0, 4.0]], B3)
    with pytest.raises(TypeError, match=r"^`b` must be numbers\. Received: b='abc'\.$"):
        compare(A3, "abc")


@pytest.mark.parametrize(("rng", "error"), [("seed", TypeError), (1.5, TypeError), (True, TypeError), (-1, ValueError)])
def test_every_resampling_function_checks_rng_alike(rng, error) -> None:
    # One message and one exception type per mistake, whichever function gets it.
    from deviate_cb.stats import decompose, describe

    message = rf"^`rng` must be None, a non-negative int seed or a numpy\.random\.Generator\. Received: rng={rng!r}\.$"
    a, b = [0.80, 0.82, 0.81, 0.84], [0.79, 0.80, 0.83, 0.78]
    calls = [
        lambda: compare(a, b, rng=rng),
        lambda: prob_improvement(a, b, rng=rng),
        lambda: almost_stochastic_order(a, b, rng=rng),
        lambda: describe(a, std_ci="bootstrap", rng=rng),
        lambda: decompose(a, b, rng=rng),
    ]
    for call in calls:
        with pytest.raises(error, match=message):
            call()
