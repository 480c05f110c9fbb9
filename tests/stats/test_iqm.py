"""The IQM and its stratified bootstrap: against scipy.stats.trim_mean, a plain NumPy bootstrap, and a NumPy
reimplementation of rliable's definition (IQM over the flattened runs x tasks matrix; each cell's run drawn
independently within its task, ``StratifiedBootstrap(task_bootstrap=False)``; percentile interval)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from deviate_cb.stats import describe, iqm
from deviate_cb.stats.iqm import iqm_point


def _rliable_iqm_interval(scores: np.ndarray, reps: int, level: float, seed: int) -> tuple[float, tuple[float, float]]:
    """rliable's ``get_interval_estimates(..., aggregate_iqm, method="percentile")`` for one algorithm, in NumPy."""
    runs, tasks = scores.shape
    generator = np.random.default_rng(seed)
    run_index = generator.integers(0, runs, size=(reps, runs, tasks))  # one draw per (rep, run, task) cell
    resampled = scores[run_index, np.arange(tasks)[None, None, :]]  # column t stays in task t
    boot = sps.trim_mean(resampled.reshape(reps, -1), 0.25, axis=1)  # aggregate_iqm: over all runs and tasks
    alpha = (1 - level) / 2
    low, high = np.percentile(boot, [100 * alpha, 100 * (1 - alpha)])
    return float(sps.trim_mean(scores, 0.25, axis=None)), (float(low), float(high))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 10, 13, 50])
def test_the_point_estimate_is_scipy_trim_mean(n: int) -> None:
    x = np.random.default_rng(n).normal(0.8, 0.05, size=n)
    r = iqm(x, n_resamples=99, rng=0)
    assert r.statistic == pytest.approx(sps.trim_mean(x, 0.25), rel=1e-12)
    assert r.statistic == describe(x).iqm == iqm_point(x)
    assert r.test == "iqm" and math.isnan(r.pvalue) and r.settings["n"] == n


def test_identical_values_give_exactly_that_value() -> None:
    r = iqm([0.1] * 9, rng=0)
    # no spread, no interval: a zero-width one would claim the IQM exactly from 9 equal runs
    assert r.statistic == 0.1 and all(math.isnan(v) for v in r.confidence_interval())
    assert r.settings["spread"] == "none" and "no spread" in r.settings["note"]
    assert iqm([0.1] * 9, rng=0, method="bootstrap").confidence_interval() == (0.1, 0.1)  # rliable's, as it was


def test_one_stratum_is_the_plain_bootstrap() -> None:
    x = np.random.default_rng(1).normal(size=12)
    reps, seed = 2000, 3
    index = np.random.default_rng(seed).integers(0, x.size, size=(reps, x.size))
    boot = sps.trim_mean(x[index], 0.25, axis=1)
    r = iqm(x, n_resamples=reps, rng=seed, method="bootstrap")
    np.testing.assert_allclose(r.confidence_interval(0.95), np.percentile(boot, [2.5, 97.5]), rtol=1e-12)
    np.testing.assert_allclose(r.confidence_interval(0.8), np.percentile(boot, [10, 90]), rtol=1e-12)
    # One named stratum is the same thing.
    assert iqm(x, strata=["task"] * x.size, n_resamples=reps, rng=seed).confidence_interval() == r.confidence_interval()
    assert not r.settings["stratified"] and r.settings["n_strata"] == 1


@pytest.mark.parametrize(("runs", "tasks", "seed"), [(5, 4, 0), (10, 3, 1), (3, 26, 2), (8, 1, 3)])
def test_a_runs_by_tasks_matrix_gives_rliables_numbers(runs: int, tasks: int, seed: int) -> None:
    g = np.random.default_rng(100 + seed)
    scores = g.normal(size=(runs, tasks)) + g.uniform(0, 5, size=tasks)  # tasks of different difficulty
    point, (low, high) = _rliable_iqm_interval(scores, 2000, 0.95, seed)
    r = iqm(scores, n_resamples=2000, rng=seed)
    assert r.statistic == pytest.approx(point, rel=1e-12)
    assert r.confidence_interval() == (pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12))
    assert r.settings["n_strata"] == tasks and r.settings["stratified"] and r.settings["n"] == runs * tasks
    # The same runs as one value per run with task labels (row-major, as the matrix is read): the same draws.
    labels = np.broadcast_to(np.arange(tasks), scores.shape).ravel().tolist()
    flat = iqm(scores.ravel(), strata=[f"task{t}" for t in labels], n_resamples=2000, rng=seed)
    assert flat.statistic == r.statistic and flat.confidence_interval() == r.confidence_interval()


def test_stratifying_tasks_of_different_means_narrows_the_interval() -> None:
    g = np.random.default_rng(0)
    x = np.concatenate([g.normal(mean, 1.0, size=10) for mean in (0.0, 10.0, 20.0)])
    strata = np.repeat(["easy", "medium", "hard"], 10).tolist()
    plain = iqm(x, n_resamples=4000, rng=1).confidence_interval()
    stratified = iqm(x, strata=strata, n_resamples=4000, rng=1).confidence_interval()
    assert stratified.high - stratified.low < 0.5 * (plain.high - plain.low)
    assert plain.low < stratified.low < stratified.high < plain.high


def test_unequal_strata_keep_their_sizes_in_every_resample() -> None:
    # Each stratum is constant, so a resample that keeps every stratum's count is the data again: a zero-width
    # interval. Without strata the counts change and the interval is wide.
    x = [1.0] * 3 + [5.0] * 7 + [9.0] * 2
    strata = ["a"] * 3 + ["b"] * 7 + ["c"] * 2
    r = iqm(x, strata=strata, n_resamples=2000, rng=0)
    assert r.confidence_interval() == (r.statistic, r.statistic) == (5.0, 5.0)
    low, high = iqm(x, n_resamples=2000, rng=0, method="bootstrap").confidence_interval()
    assert high - low > 0.5  # the plain bootstrap changes the counts


def test_non_finite_values_are_left_out_with_their_strata() -> None:
    x = [1.0, 2.0, float("nan"), 4.0, float("inf"), 6.0]
    strata = ["a", "a", "b", "c", "b", "c"]  # stratum b holds no finite value
    r = iqm(x, strata=strata, n_resamples=500, rng=0)
    same = iqm([1.0, 2.0, 4.0, 6.0], strata=["a", "a", "c", "c"], n_resamples=500, rng=0)
    assert r.statistic == same.statistic and r.confidence_interval() == same.confidence_interval()
    assert (r.settings["n"], r.settings["n_nonfinite"], r.settings["n_strata"]) == (4, 2, 2)
    empty = iqm([float("nan")], rng=0)
    assert math.isnan(empty.statistic) and all(math.isnan(v) for v in empty.confidence_interval())


def test_levels_seeds_and_the_global_state() -> None:
    x = np.random.default_rng(5).normal(size=15)
    state = np.random.get_state()[1].copy()
    r = iqm(x, n_resamples=1000, method="bootstrap")
    seed = r.settings["seed"]
    again = iqm(x, n_resamples=1000, rng=seed, method="bootstrap")
    assert isinstance(seed, int) and again.confidence_interval() == r.confidence_interval()
    assert r.confidence_interval(0.99).low < r.confidence_interval(0.8).low < r.statistic
    assert r.confidence_interval(0.8).high < r.confidence_interval(0.99).high
    g1 = iqm(x, n_resamples=200, rng=np.random.default_rng(9), method="bootstrap")
    g2 = iqm(x, n_resamples=200, rng=np.random.default_rng(9), method="bootstrap")
    assert g1.settings["seed"] == g2.settings["seed"] and g1.confidence_interval() == g2.confidence_interval()
    np.testing.assert_array_equal(np.random.get_state()[1], state)
    out = r.to_dict()
    assert json.loads(json.dumps(out)) == out and out["test"] == "iqm" and out["setting_method"] == "percentile"


def test_describe_gives_the_same_interval_from_its_seed() -> None:
    x = [0.80, 0.84, 0.83, 0.86, 0.82, 0.85, 0.60, 0.84]
    d = describe(x, n_resamples=3000, rng=4, level=0.9)
    expected = iqm(x, n_resamples=3000, rng=4).confidence_interval(0.9)
    assert d.iqm_confidence_interval() == expected
    assert d.iqm_confidence_interval(0.9) == d.iqm_confidence_interval(0.9)
    out = d.to_dict()
    assert (out["iqm_ci_low"], out["iqm_ci_high"]) == tuple(expected) and out["seed"] == 4
    assert all(math.isnan(v) for v in describe([]).iqm_confidence_interval())


def _yuen_reference(x: np.ndarray, level: float) -> tuple[float, float]:
    """Yuen's trimmed-mean t interval by hand: scipy's trim_mean and winsorize, se s_w sqrt((n-1)/(h(h-1)))."""
    from scipy.stats import mstats

    n = x.size
    g = int(0.25 * n)
    h = n - 2 * g
    winsorized = np.asarray(mstats.winsorize(x, limits=(g / n, g / n)))
    se = np.std(winsorized, ddof=1) * math.sqrt((n - 1) / (h * (h - 1)))
    half = sps.t.ppf(0.5 + level / 2, h - 1) * se
    centre = sps.trim_mean(x, 0.25)
    return centre - half, centre + half


@pytest.mark.parametrize("n", [3, 4, 5, 7, 8, 12, 20, 41])
def test_default_interval_is_yuens_trimmed_t(n: int) -> None:
    x = np.random.default_rng(n).normal(0.8, 0.05, size=n)
    r = iqm(x)
    assert r.settings["method"] == "t" and r.settings["trimmed"] == int(0.25 * n)
    assert r.settings["df"] == n - 2 * int(0.25 * n) - 1 and "seed" not in r.settings
    for level in (0.8, 0.95):
        np.testing.assert_allclose(r.confidence_interval(level), _yuen_reference(x, level), rtol=1e-12)
    assert describe(x).iqm_confidence_interval() == r.confidence_interval()
    if n == 3:  # nothing trimmed: Student's t interval of the mean
        np.testing.assert_allclose(r.confidence_interval(), describe(x).mean_confidence_interval(), rtol=1e-12)


def test_trimmed_t_edges_and_the_bootstrap_of_describe() -> None:
    assert all(math.isnan(v) for v in iqm([1.0]).confidence_interval())
    assert all(math.isnan(v) for v in iqm([0.3, 0.3, 0.3, 0.3]).confidence_interval())
    x = [0.80, 0.84, 0.83, 0.86, 0.82, 0.85, 0.60, 0.84]
    d = describe(x, iqm_ci="bootstrap", n_resamples=999, rng=3)
    expected = iqm(x, n_resamples=999, rng=3, method="bootstrap").confidence_interval()
    assert d.iqm_confidence_interval() == expected and d.to_dict()["iqm_ci"] == "bootstrap"
    with pytest.raises(ValueError, match=r"^`iqm_ci` must be 't' or 'bootstrap'\. Received: iqm_ci='x'\.$"):
        describe(x, iqm_ci="x")
    with pytest.raises(ValueError, match=r"^`method` 't' needs one stratum"):
        iqm(x, strata=["a", "b"] * 4, method="t")
    with pytest.raises(ValueError, match=r"^`method` must be one of 't', 'bootstrap' or None\. Received: method='BCa'"):
        iqm(x, method="BCa")
    # one stratum given explicitly may still use the t interval
    assert iqm(x, strata=["a"] * 8, method="t").confidence_interval() == iqm(x).confidence_interval()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"values": "abc"}, TypeError, "`values` must be numbers."),
        ({"values": np.zeros((2, 2, 2))}, ValueError, "`values` must be one number per run or a runs x tasks"),
        ({"strata": ["a"]}, ValueError, "`strata` must hold one label per value (3). Received: 1 labels."),
        ({"strata": "abc"}, TypeError, "`strata` must be one label per value, not a string."),
        ({"values": [[1.0, 2.0]], "strata": ["a", "b"]}, ValueError, "`strata` must be None when `values` is a"),
        ({"level": 1.0}, ValueError, "`level` must be a number in (0, 1). Received: level=1.0."),
        ({"n_resamples": 0}, ValueError, "`n_resamples` must be a positive integer. Received: n_resamples=0."),
        ({"rng": -1}, ValueError, "`rng` must be None, a non-negative int seed or a numpy.random.Generator."),
    ],
)
def test_validation(kwargs: dict, error: type, message: str) -> None:
    args = {"values": [1.0, 2.0, 3.0], "rng": 0, **kwargs}
    values = args.pop("values")
    with pytest.raises(error) as info:
        iqm(values, **args)
    assert str(info.value).startswith(message)
