"""multi_aso: every ordered pair is almost_stochastic_order at alpha / (k (k - 1)), the ranking, the result."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from deviate_cb.stats import almost_stochastic_order, multi_aso, violation_ratio


def _groups(k: int = 4, n: int = 12) -> dict[str, np.ndarray]:
    g = np.random.default_rng(0)
    return {f"v{i}": g.normal(0.1 * i, 0.1, size=n + i) for i in range(k)}


def test_each_entry_is_almost_stochastic_order_at_the_bonferroni_level() -> None:
    groups = _groups()
    names = list(groups)
    r = multi_aso(groups, alpha=0.05, n_resamples=300, rng=7)
    k, m = 4, 12
    assert (r.n_comparisons, r.pair_alpha, r.alpha) == (m, 0.05 / m, 0.05)
    seeds = np.random.default_rng(7).integers(2**63, size=(k, k))  # the documented per-pair seeds
    for i in range(k):
        assert math.isnan(r.eps_min[i, i]) and math.isnan(r.violation_ratio[i, i])
        for j in range(k):
            if i == j:
                continue
            a, b = groups[names[i]], groups[names[j]]
            one = almost_stochastic_order(a, b, alpha=0.05 / m, n_resamples=300, rng=int(seeds[i, j]))
            assert r.eps_min[i, j] == one.statistic
            assert r.violation_ratio[i, j] == violation_ratio(a, b)
            assert r.violation_ratio[i, j] + r.violation_ratio[j, i] == pytest.approx(1.0, abs=1e-12)
            assert one.level == pytest.approx(1 - 0.05 / m)


def test_bonferroni_makes_eps_min_larger_than_the_uncorrected_bound() -> None:
    groups = _groups(3)
    r = multi_aso(groups, n_resamples=500, rng=1)
    seeds = np.random.default_rng(1).integers(2**63, size=(3, 3))
    a, b = groups["v2"], groups["v0"]
    uncorrected = almost_stochastic_order(a, b, alpha=0.05, n_resamples=500, rng=int(seeds[2, 0])).statistic
    half = almost_stochastic_order(a, b, alpha=0.05 / 3, n_resamples=500, rng=int(seeds[2, 0])).statistic
    # m = 6 ordered pairs: stricter than alpha and than the k(k-1)/2 = 3 unordered pairs.
    assert uncorrected <= half <= r.eps_min[2, 0]
    assert uncorrected < r.eps_min[2, 0] or r.eps_min[2, 0] in (0.0, 1.0)


def test_ranking_by_wins_then_mean_then_name() -> None:
    g = np.random.default_rng(3)
    groups = {
        "low": g.normal(0.0, 0.01, 10),
        "top": g.normal(1.0, 0.01, 10),
        "mid_b": g.normal(0.5, 0.01, 10) + 0.001,
        "mid_a": g.normal(0.5, 0.01, 10),
    }
    r = multi_aso(groups, rng=0)
    wins = dict(zip(r.groups, r.wins, strict=True))
    assert wins["top"] == 3 and wins["low"] == 0
    assert r.ranking[0] == "top" and r.ranking[-1] == "low"
    # The two middle groups overlap: each dominates "low" only, so their order comes from the means.
    if wins["mid_a"] == wins["mid_b"]:
        means = dict(zip(r.groups, r.means, strict=True))
        assert list(r.ranking[1:3]) == sorted(("mid_a", "mid_b"), key=lambda n: -means[n])
    assert r.dominant.sum(axis=1).tolist() == list(r.wins)
    assert not r.dominant.diagonal().any()
    # Ties in wins and means go to the name.
    same = multi_aso({"b": [1.0, 2.0, 3.0], "a": [1.0, 2.0, 3.0]}, rng=0)
    assert same.ranking == ("a", "b") and same.wins == (0, 0)
    assert same.eps_min[0, 1] >= 0.5 and same.violation_ratio[0, 1] == 0.5


def test_two_groups_and_sequences_of_values() -> None:
    r = multi_aso([[1.0, 2.0, 3.0, 4.0], [3.0, 4.0, 5.0, 6.0, float("nan")]], n_resamples=200, rng=2)
    assert r.groups == ("0", "1") and r.n_comparisons == 2 and r.pair_alpha == 0.025
    assert r.settings["n"] == {"0": 4, "1": 4} and r.settings["n_nonfinite"] == {"0": 0, "1": 1}
    assert r.statistic is r.eps_min


def test_reproducible_read_only_and_json_ready() -> None:
    groups = _groups(3)
    state = np.random.get_state()[1].copy()
    r = multi_aso(groups, n_resamples=200)
    again = multi_aso(groups, n_resamples=200, rng=r.settings["seed"])
    np.testing.assert_array_equal(r.eps_min, again.eps_min)
    np.testing.assert_array_equal(np.random.get_state()[1], state)
    with pytest.raises(ValueError):
        r.eps_min[0, 1] = 0.0
    out = r.to_dict()
    assert json.loads(json.dumps(out)) == out
    assert out["eps_min"]["v0"]["v0"] is None and out["eps_min"]["v1"]["v0"] == r.eps_min[1, 0]
    assert out["ranking"] == list(r.ranking) and out["setting_seed"] == r.settings["seed"]


@pytest.mark.parametrize(
    ("groups", "kwargs", "error", "message"),
    [
        ({"a": [1.0, 2.0]}, {}, ValueError, "`groups` must hold at least 2 groups. Received: 1."),
        ("ab", {}, TypeError, "`groups` must be a mapping of names to values or a sequence of value lists."),
        ({1: [1.0, 2.0], "1": [2.0, 3.0]}, {}, ValueError, "`groups` must have distinct names."),
        ({"a": [1.0], "b": [2.0, 3.0]}, {}, ValueError, "`groups['a']` needs at least 2 finite values to compare."),
        ({"a": [1.0, 2.0], "b": [2.0, 3.0]}, {"alpha": 1.0}, ValueError, "`alpha` must be a number in (0, 1)."),
        ({"a": [1.0, 2.0], "b": [2.0, 3.0]}, {"threshold": 0}, ValueError, "`threshold` must be a number in (0, 1)."),
        ({"a": [1.0, 2.0], "b": [2.0, 3.0]}, {"n_resamples": 0}, ValueError, "`n_resamples` must be a positive"),
        ({"a": [1.0, 2.0], "b": [2.0, 3.0]}, {"rng": "x"}, TypeError, "`rng` must be None, a non-negative int"),
    ],
)
def test_validation(groups, kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error) as info:
        multi_aso(groups, **kwargs)
    assert str(info.value).startswith(message)
