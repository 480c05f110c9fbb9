"""describe(): ddof, t interval of the mean, bootstrap std interval, median/IQR/IQM, to_dict, Morin 2020 data."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats as sps

from deviate_cb.stats.describe import Description, describe
from deviate_cb.stats.intervals import mean_confidence_interval
from tests.helpers.morin_data import morin


@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("n", [2, 3, 7, 50])
def test_ddof_matches_numpy(ddof: int, n: int) -> None:
    x = np.random.default_rng(n).normal(3.0, 0.5, size=n)
    d = describe(x, ddof=ddof)
    np.testing.assert_allclose(d.std, np.std(x, ddof=ddof), rtol=1e-12)
    np.testing.assert_allclose(d.cv, np.std(x, ddof=ddof) / abs(np.mean(x)), rtol=1e-12)
    assert d.ddof == ddof


@pytest.mark.parametrize("ddof", [0, 1])
def test_chi2_interval_is_for_sigma_whatever_the_ddof(ddof: int) -> None:
    x = np.random.default_rng(3).normal(size=9)
    for level in (0.8, 0.95):
        a, df, s2 = 1 - level, x.size - 1, np.var(x, ddof=1)
        expected = (math.sqrt(df * s2 / sps.chi2.ppf(1 - a / 2, df)), math.sqrt(df * s2 / sps.chi2.ppf(a / 2, df)))
        np.testing.assert_allclose(
            describe(x, ddof=ddof, std_ci="chi2").confidence_interval(level), expected, rtol=1e-10
        )


@pytest.mark.parametrize("n", [2, 5, 30])
def test_mean_interval_matches_scipy_t(n: int) -> None:
    x = np.random.default_rng(n).normal(10.0, 2.0, size=n)
    for ddof in (0, 1):
        d = describe(x, ddof=ddof, level=0.9)
        for level in (0.9, 0.99):
            expected = sps.t.interval(level, n - 1, loc=np.mean(x), scale=sps.sem(x))
            np.testing.assert_allclose(d.mean_confidence_interval(level), expected, rtol=1e-10)
        np.testing.assert_allclose(d.mean_confidence_interval(), sps.t.interval(0.9, n - 1, np.mean(x), sps.sem(x)))


def test_mean_interval_function_is_vectorised() -> None:
    low, high = mean_confidence_interval(np.array([0.0, 1.0]), np.array([1.0, 2.0]), np.array([10, 1]), 0.95)
    np.testing.assert_allclose(low[0], sps.t.ppf(0.025, 9) / math.sqrt(10))
    assert math.isnan(low[1]) and math.isnan(high[1])


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 11, 40])
def test_robust_extras_match_numpy_and_scipy(n: int) -> None:
    x = np.random.default_rng(n).standard_cauchy(size=n)
    d = describe(np.append(x, [np.nan, np.inf]))
    assert d.n_nonfinite == 2
    np.testing.assert_allclose(d.median, np.median(x), rtol=1e-14)
    np.testing.assert_allclose(d.iqr, np.percentile(x, 75) - np.percentile(x, 25), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(d.iqr, sps.iqr(x), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(d.iqm, sps.trim_mean(x, 0.25), rtol=1e-12, atol=1e-14)


def test_iqm_is_the_mean_of_the_middle_half() -> None:
    assert describe([100.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -50.0]).iqm == 3.5


@pytest.mark.parametrize("std_ci", ["bonett", "chi2", "bootstrap"])
def test_identical_values_give_exact_zero_spread_and_no_interval(std_ci: str) -> None:
    """Seven equal runs have std 0, but a sample of equal runs does not show the std is 0 (implementation noise
    that shows in 15% of runs leaves 7 runs equal 32% of the time): no interval, and the note says so."""
    d = describe([0.901] * 7, ddof=0, std_ci=std_ci, n_resamples=99, rng=0)
    assert (d.std, d.iqr, d.range) == (0.0, 0.0, 0.0)
    assert d.mean == d.median == d.iqm == 0.901
    assert all(math.isnan(v) for v in d.confidence_interval())
    assert d.std_note == "cannot tell the std from 7 runs with only 1 distinct value"
    assert d.to_dict()["std_note"] == d.std_note and d.to_dict()["std_ci_low"] is None
    assert d.mean_confidence_interval() == (0.901, 0.901)


@pytest.mark.parametrize("std_ci", ["bonett", "chi2", "bootstrap"])
@pytest.mark.parametrize(
    ("values", "note"),
    [
        ([0.9, 0.9, 0.905, 0.905, 0.9], "cannot tell the std from 5 runs with only 2 distinct values"),
        ([0.0] * 8 + [0.3, -0.2], "cannot tell the std from 10 runs: only 2 differ from the other 8"),
        ([0.0] * 5 + [0.3], "cannot tell the std from 6 runs with only 2 distinct values"),
    ],
)
def test_too_few_differing_runs_give_no_interval(std_ci: str, values: list[float], note: str) -> None:
    d = describe(values, std_ci=std_ci, n_resamples=99, rng=0)
    assert d.std > 0 and d.std_note == note
    assert all(math.isnan(v) for v in d.confidence_interval())


@pytest.mark.parametrize(
    "values",
    [[0.9, 0.905, 0.91], [0.9, 0.9, 0.905, 0.91], [0.0, 0.0, 0.0, 0.1, 0.2, 0.3], [0.895, 0.9, 0.9, 0.905, 0.9, 0.91]],
)
def test_enough_differing_runs_give_an_interval(values: list[float]) -> None:
    d = describe(values)
    low, high = d.confidence_interval()
    assert d.std_note == "" and 0 < low < d.std < high < math.inf


@pytest.mark.parametrize("std_ci", ["bonett", "chi2", "bootstrap"])
def test_fewer_than_two_values_give_nan_intervals(std_ci: str) -> None:
    for values in ([], [1.5], [1.5, float("nan")]):
        d = describe(values, std_ci=std_ci, rng=0, n_resamples=99)
        assert math.isnan(d.std)
        assert all(math.isnan(v) for v in (*d.confidence_interval(), *d.mean_confidence_interval()))
    one = describe([1.5])
    assert (one.median, one.iqr, one.iqm) == (1.5, 0.0, 1.5)
    empty = describe([])
    assert all(math.isnan(v) for v in (empty.median, empty.iqr, empty.iqm))


@pytest.mark.parametrize("ddof", [0, 1])
def test_bootstrap_interval_matches_scipy_and_is_reproducible(ddof: int) -> None:
    x = np.random.default_rng(11).normal(0.85, 0.01, size=20)
    d = describe(x, ddof=ddof, std_ci="bootstrap", n_resamples=999, rng=42)
    ref = sps.bootstrap(
        (x,), lambda s, axis: np.std(s, ddof=ddof, axis=axis), n_resamples=999, rng=np.random.default_rng(42)
    ).confidence_interval
    np.testing.assert_allclose(d.confidence_interval(), (ref.low, ref.high), rtol=1e-10)
    assert d.confidence_interval() == d.confidence_interval()
    again = describe(x, ddof=ddof, std_ci="bootstrap", n_resamples=999, rng=42)
    assert again.confidence_interval(0.9) == d.confidence_interval(0.9)
    other = describe(x, ddof=ddof, std_ci="bootstrap", n_resamples=999, rng=43)
    assert other.confidence_interval() != d.confidence_interval()
    low, high = d.confidence_interval(0.99)
    low90, high90 = d.confidence_interval(0.9)
    assert low < low90 < d.std < high90 < high


def test_bootstrap_with_generator_stores_a_seed_and_leaves_global_state_alone() -> None:
    x = [0.81, 0.84, 0.83, 0.86, 0.82, 0.85]
    state = np.random.get_state()[1].copy()
    d1 = describe(x, std_ci="bootstrap", n_resamples=199, rng=np.random.default_rng(5))
    d2 = describe(x, std_ci="bootstrap", n_resamples=199, rng=np.random.default_rng(5))
    assert isinstance(d1.seed, int) and d1.seed == d2.seed
    assert d1.confidence_interval() == d2.confidence_interval()
    d3 = describe(x, std_ci="bootstrap", n_resamples=199)
    assert d3.confidence_interval() == d3.confidence_interval()
    assert np.array_equal(np.random.get_state()[1], state)


def test_to_dict_is_json_ready() -> None:
    import json

    d = describe([1.0, 2.0, 4.0], level=0.9)
    out = d.to_dict()
    assert json.loads(json.dumps(out)) == out
    assert (out["std_ci_low"], out["std_ci_high"]) == tuple(d.confidence_interval(0.9))
    assert (out["mean_ci_low"], out["mean_ci_high"]) == tuple(d.mean_confidence_interval(0.9))
    assert out["iqm"] == pytest.approx(sps.trim_mean([1.0, 2.0, 4.0], 0.25)) and out["level"] == 0.9
    assert describe([1.0]).to_dict()["std"] is None
    b = describe([1.0, 2.0, 4.0], std_ci="bootstrap", n_resamples=99, rng=1).to_dict()
    assert (b["seed"], b["n_resamples"], b["std_ci"]) == (1, 99, "bootstrap")


def test_old_positional_construction_still_works() -> None:
    d = Description(3, 2.0, 1.0, 0.5, 1.0, 3.0, 2.0, 0)  # summary numbers only: the chi-square interval
    assert d.confidence_interval(0.95) == describe([1.0, 2.0, 3.0], std_ci="chi2").confidence_interval(0.95)
    assert d.std_note == ""


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"ddof": 2}, ValueError, "`ddof` must be 0 or 1. Received: ddof=2."),
        ({"ddof": True}, ValueError, "`ddof` must be 0 or 1. Received: ddof=True."),
        ({"level": 1.0}, ValueError, "`level` must be in (0, 1). Received: level=1.0."),
        ({"std_ci": "t"}, ValueError, "`std_ci` must be 'bonett', 'chi2' or 'bootstrap'. Received: std_ci='t'."),
        ({"n_resamples": 0}, ValueError, "`n_resamples` must be a positive integer. Received: n_resamples=0."),
        ({"rng": "a"}, TypeError, "`rng` must be None, a non-negative int seed or a numpy.random.Generator."),
        (
            {"rng": -1},
            ValueError,
            "`rng` must be None, a non-negative int seed or a numpy.random.Generator. Received: rng=-1.",
        ),
    ],
)
def test_validation_messages(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}"):
        describe([1.0, 2.0], **kwargs)
    with pytest.raises(ValueError, match="`level` must be in"):
        describe([1.0, 2.0]).mean_confidence_interval(0.0)


def test_morin2020_same_seed_population_std() -> None:
    column = morin("impl")[:, 0]
    d = describe(column, ddof=0)
    assert d.n == column.size
    assert f"{d.std:.3e}" == "1.995e-02"
    np.testing.assert_allclose(d.std, np.std(column), rtol=1e-12)


def test_a_group_identical_by_design_has_the_interval_0_0() -> None:
    """The control variant is bit-identical by design: its equal runs are std 0 with [0, 0], not "cannot tell"."""
    d = describe([0.901] * 4, by_design=True)
    assert d.std == 0.0 and d.confidence_interval() == (0.0, 0.0) and d.std_note == ""
    differs = describe([0.9, 0.91, 0.92], by_design=True)  # a control that differs: the ordinary interval
    assert differs.confidence_interval() == describe([0.9, 0.91, 0.92]).confidence_interval()
    with pytest.raises(ValueError, match=r"^`by_design` must be True or False\. Received: by_design=1\.$"):
        describe([1.0, 2.0], by_design=1)  # type: ignore[arg-type]
