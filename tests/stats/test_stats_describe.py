"""describe() and its std intervals (Bonett's, chi-square) against numpy/scipy references and a coverage simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from deviate_cb.stats import ConfidenceInterval, Description, describe, std_confidence_interval


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n", [2, 3, 10, 50])
def test_describe_matches_numpy(seed: int, n: int) -> None:
    x = np.random.default_rng(seed).normal(5.0, 2.0, size=n)
    d = describe(x)
    assert d.n == n and d.n_nonfinite == 0
    np.testing.assert_allclose(d.mean, np.mean(x), rtol=1e-14)
    np.testing.assert_allclose(d.std, np.std(x, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(d.cv, np.std(x, ddof=1) / abs(np.mean(x)), rtol=1e-12)
    assert (d.min, d.max) == (x.min(), x.max())
    np.testing.assert_allclose(d.range, np.ptp(x), rtol=1e-14)


def test_cv_matches_scipy_variation_and_uses_abs_mean() -> None:
    x = np.array([0.81, 0.84, 0.83, 0.86])
    np.testing.assert_allclose(describe(x).cv, sps.variation(x, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(describe(-x).cv, describe(x).cv, rtol=1e-12)


def test_confidence_interval_matches_chi2_formula() -> None:
    x = np.random.default_rng(7).normal(size=12)
    d = describe(x, std_ci="chi2")
    for level in (0.5, 0.9, 0.95, 0.99):
        a = 1 - level
        s2, df = np.var(x, ddof=1), x.size - 1
        low = math.sqrt(df * s2 / sps.chi2.ppf(1 - a / 2, df))
        high = math.sqrt(df * s2 / sps.chi2.ppf(a / 2, df))
        ci = d.confidence_interval(level)
        assert isinstance(ci, ConfidenceInterval)
        np.testing.assert_allclose([ci.low, ci.high], [low, high], rtol=1e-12)
        assert ci.low < d.std < ci.high


@pytest.mark.parametrize("n", [3, 5, 12, 40])
def test_default_interval_is_bonett_formula(n: int) -> None:
    """Bonett (2006): exp(ln(c s^2) +- z c se) with c = n/(n - z), se^2 = (kurt - (n-3)/n)/(n-1), kurtosis about
    the median; written out here with scipy's quantile."""
    x = np.random.default_rng(n).lognormal(0.0, 0.5, size=n)
    d = describe(x)
    assert d.std_ci == "bonett"
    for level in (0.8, 0.95, 0.99):
        z = sps.norm.ppf(1 - (1 - level) / 2)
        c = n / (n - z)
        kurt = n * np.sum((x - np.median(x)) ** 4) / np.sum((x - x.mean()) ** 2) ** 2
        se = c * math.sqrt((kurt - (n - 3) / n) / (n - 1))
        s2 = np.var(x, ddof=1)
        expected = (math.sqrt(c * s2 * math.exp(-z * se)), math.sqrt(c * s2 * math.exp(z * se)))
        np.testing.assert_allclose(d.confidence_interval(level), expected, rtol=1e-10)
        low, high = d.confidence_interval(level)
        assert low < d.std < high
        assert describe(x, ddof=0).confidence_interval(level) == (low, high)  # an interval for sigma


def test_confidence_interval_narrows_with_level_and_n() -> None:
    widths = [np.subtract(*std_confidence_interval(1.0, 10, lv)[::-1]) for lv in (0.8, 0.9, 0.95, 0.99)]
    assert widths == sorted(widths)
    high_10, high_100 = std_confidence_interval(1.0, 10).high, std_confidence_interval(1.0, 100).high
    assert high_100 < high_10


def test_confidence_interval_coverage() -> None:
    """About `level` of the intervals from normal samples contain the true sigma."""
    rng = np.random.default_rng(2024)
    sigma, n, trials = 3.0, 8, 4000
    samples = rng.normal(0.0, sigma, size=(trials, n))
    low, high = std_confidence_interval(samples.std(axis=1, ddof=1), np.full(trials, n), 0.9)
    coverage = np.mean((low <= sigma) & (sigma <= high))
    assert abs(coverage - 0.9) < 0.02
    # and one tail each: the interval is equal-tailed
    assert abs(np.mean(sigma < low) - 0.05) < 0.015 and abs(np.mean(sigma > high) - 0.05) < 0.015


def test_nonfinite_values_are_left_out_and_counted() -> None:
    d = describe([1.0, 2.0, float("nan"), 3.0, float("inf"), -float("inf")])
    assert d.n == 3 and d.n_nonfinite == 3
    assert d.mean == 2.0 and d.std == 1.0 and d.range == 2.0


def test_small_and_degenerate_samples() -> None:
    empty = describe([])
    assert empty.n == 0 and all(math.isnan(v) for v in (empty.mean, empty.std, empty.cv, empty.min, empty.range))
    one = describe([0.5])
    assert (one.n, one.mean, one.min, one.max, one.range) == (1, 0.5, 0.5, 0.5, 0.0)
    assert math.isnan(one.std) and math.isnan(one.cv)
    assert all(math.isnan(v) for v in one.confidence_interval())
    zero_mean = describe([-1.0, 1.0])
    assert zero_mean.std == pytest.approx(math.sqrt(2)) and math.isnan(zero_mean.cv)
    identical = describe([0.7, 0.7, 0.7])
    assert identical.std == 0.0 and identical.cv == 0.0 and identical.mean == 0.7
    assert all(math.isnan(v) for v in identical.confidence_interval())  # no zero-width interval from a sample
    assert identical.std_note == "cannot tell the std from 3 runs with only 1 distinct value"


def test_result_is_frozen() -> None:
    d = describe([1.0, 2.0])
    assert isinstance(d, Description)
    with pytest.raises(AttributeError):
        d.std = 0.0  # type: ignore[misc]


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.1, True, "0.95"])
def test_bad_level_is_rejected(level: object) -> None:
    with pytest.raises(ValueError, match=r"^`level` must be in \(0, 1\)\. Received: level="):
        describe([1.0, 2.0, 3.0]).confidence_interval(level)  # type: ignore[arg-type]


def test_bad_values_are_rejected() -> None:
    with pytest.raises(TypeError, match="`values` must be numbers"):
        describe(["a", "b"])
    with pytest.raises(TypeError, match="`values` must be numbers"):
        describe("abc")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one-dimensional"):
        describe(np.ones((2, 2)))
    with pytest.raises(ValueError, match="`n` must be a non-negative integer"):
        std_confidence_interval(1.0, 2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`std` must be non-negative"):
        std_confidence_interval(-1.0, 5)
