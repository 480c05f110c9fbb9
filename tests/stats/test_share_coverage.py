"""The implementation share's interval covers at its level on the runs users have (issue 42).

Simulated, vectorised and seeded: normal, t(3), lognormal and tied (accuracies on a grid) runs at 5 to 20 runs
per group, with a true std ratio of 0.5 (and the std ratio of the discretised values for the tied runs). The
default (Bonett-style, kurtosis-adjusted) interval covers at least 93% at a nominal 95% everywhere (the
module's notes give the 20,000-set figures); the F interval, the default before, covers far less on heavy
tails. Implementation noise that shows in 15% of the runs only is the case no interval holds for: the answer
says so (``few_runs_note``).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import fdtri

from deviate_cb.stats._std import guarded_std_along
from deviate_cb.stats.decompose import bonett_share_interval, decompose, share_kurtoses

_SETS = 4000
_LEVEL = 0.95


def _draw(kind: str, n: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    g = np.random.default_rng(seed)
    if kind == "normal":
        return g.normal(0, 0.5, (_SETS, n)), g.normal(0, 1, (_SETS, m)), 0.5
    if kind == "t3":
        s = np.sqrt(3.0)
        return 0.5 * g.standard_t(3, (_SETS, n)) / s, g.standard_t(3, (_SETS, m)) / s, 0.5
    if kind == "lognormal":
        sd = np.sqrt((np.exp(0.25) - 1) * np.exp(0.25))
        return 0.5 * np.exp(g.normal(0, 0.5, (_SETS, n))) / sd, np.exp(g.normal(0, 0.5, (_SETS, m))) / sd, 0.5
    if kind == "ties":  # accuracies on a test set of 200 examples: values on a grid of 0.005, many equal
        grid = lambda v: np.round(v * 200) / 200  # noqa: E731
        big = np.random.default_rng(99).normal(0, 1, 1_000_000)
        truth = float(np.std(grid(0.9 + 0.004 * big)) / np.std(grid(0.9 + 0.01 * big)))
        return grid(0.9 + 0.004 * g.normal(0, 1, (_SETS, n))), grid(0.9 + 0.01 * g.normal(0, 1, (_SETS, m))), truth
    # implementation noise in 15% of the runs only; the seed runs carry it on top of the seed noise
    x = g.normal(0, 1, (_SETS, n)) * (g.random((_SETS, n)) < 0.15)
    y = g.normal(0, 1, (_SETS, m)) + g.normal(0, 1, (_SETS, m)) * (g.random((_SETS, m)) < 0.15)
    return x, y, float(np.sqrt(0.15 / 1.15))


def _coverage(x: np.ndarray, y: np.ndarray, truth: float, method: str) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        share = guarded_std_along(x) / guarded_std_along(y)
    n, m = x.shape[1], y.shape[1]
    if method == "bonett":
        low, high = bonett_share_interval(share, *share_kurtoses(x, y), n, m, _LEVEL)
    else:
        a = 1 - _LEVEL
        low, high = share / np.sqrt(fdtri(n - 1, m - 1, 1 - a / 2)), share / np.sqrt(fdtri(n - 1, m - 1, a / 2))
    spread = share > 0  # identical impl runs: share 0, interval [0, 0], with a note that it bounds nothing
    return float(np.mean((low <= truth)[spread] & (truth <= high)[spread]))


@pytest.mark.parametrize("kind", ["normal", "t3", "lognormal", "ties"])
@pytest.mark.parametrize(("n", "m"), [(5, 5), (10, 10), (20, 20), (5, 20), (20, 5)])
def test_default_interval_covers_beyond_normal_runs(kind: str, n: int, m: int) -> None:
    x, y, truth = _draw(kind, n, m, seed=n * 100 + m)
    assert _coverage(x, y, truth, "bonett") >= 0.93


@pytest.mark.parametrize("kind", ["t3", "lognormal"])
def test_the_f_interval_fails_on_heavy_tails(kind: str) -> None:
    x, y, truth = _draw(kind, 20, 20, seed=7)
    assert _coverage(x, y, truth, "F") < 0.87 < _coverage(x, y, truth, "bonett") - 0.05


def test_the_default_interval_is_the_one_decompose_prints() -> None:
    x, y, _ = _draw("t3", 8, 12, seed=3)
    low, high = bonett_share_interval(
        guarded_std_along(x[:20]) / guarded_std_along(y[:20]), *share_kurtoses(x[:20], y[:20]), 8, 12, _LEVEL
    )
    for i in range(20):
        r = decompose(x[i], y[i])
        assert r.settings["method"] == "bonett"
        np.testing.assert_allclose(tuple(r.confidence_interval()), (low[i], high[i]), rtol=1e-12)
        # the test of equal spreads is the interval's: it excludes 1 exactly when p < 1 - level
        assert (r.pvalue < 1 - _LEVEL) == (not low[i] <= 1.0 <= high[i])


def test_noise_in_few_runs_is_named_where_no_interval_holds() -> None:
    x, y, truth = _draw("rare15", 10, 10, seed=11)
    assert _coverage(x, y, truth, "bonett") < 0.93  # what cannot be claimed
    tied = [i for i in range(200) if np.ptp(x[i]) > 0]
    assert tied and all("few runs only" in decompose(x[i], y[i]).settings["few_runs_note"] for i in tied[:30])
    assert "few_runs_note" not in decompose([0.1, 0.5, 0.3, 0.9], [0.0, 1.0, 3.0, 2.0]).settings
