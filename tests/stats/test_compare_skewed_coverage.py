"""Coverage of the mean difference's interval that `deviate compare` prints (Welch's), on the runs users have
(issue 42), and the skew caveat that says where it may undercover.

Simulated, vectorised and seeded, at 5, 10 and 20 runs per group: normal, t(3), lognormal with equal spreads,
lognormal against normal, tied accuracies (binomial(200, 0.9) / 200) hold 95% within 2 points; lognormal runs
with 3:1 spreads and 10% diverged runs (shifted by 10 sd) do not, and there the caveat
(:data:`deviate_cb.report.answers.comparison.SKEWED`: a group's sample skewness beyond 1) is raised in most data sets.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import skew

from deviate_cb.report.answers.compare_notes import SKEWED
from deviate_cb.stats.compare import compare
from deviate_cb.stats.effect_size import _welch_interval, _welch_parts

REPS = 4000  # Monte Carlo error of a coverage near 0.95: 0.0034
M = float(np.exp(0.5))  # the mean of lognormal(0, 1)


def _draw(kind: str, n: int, g: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """Two groups of REPS data sets and the true difference of their means."""
    shape = (REPS, n)
    if kind == "normal":
        return g.normal(0, 1, shape), g.normal(0, 1, shape), 0.0
    if kind == "t3":
        return g.standard_t(3, shape), g.standard_t(3, shape), 0.0
    if kind == "lognormal":
        return g.lognormal(0, 1, shape), g.lognormal(0, 1, shape), 0.0
    if kind == "lognormal_vs_normal":
        return g.lognormal(0, 1, shape), g.normal(0, np.sqrt((np.e - 1) * np.e), shape), M
    if kind == "ties":
        return g.binomial(200, 0.9, shape) / 200, g.binomial(200, 0.9, shape) / 200, 0.0
    if kind == "lognormal_3to1":
        return 3 * g.lognormal(0, 1, shape), g.lognormal(0, 1, shape), 2 * M
    assert kind == "diverged"
    x = g.normal(0, 1, shape)
    return np.where(g.random(shape) < 0.1, x + 10, x), g.normal(0, 1, shape), 1.0


def _coverage_and_flag(kind: str, n: int) -> tuple[float, float]:
    g = np.random.default_rng(7 * n + len(kind))
    x, y, truth = _draw(kind, n, g)
    low, high = _welch_interval(*_welch_parts(x, y), 0.95)
    covered = float(np.mean((low <= truth) & (truth <= high)))
    with np.errstate(all="ignore"):
        sx, sy = np.abs(skew(x, axis=1, bias=False)), np.abs(skew(y, axis=1, bias=False))
    flagged = float(np.mean((np.nan_to_num(sx) > SKEWED) | (np.nan_to_num(sy) > SKEWED)))
    return covered, flagged


@pytest.mark.parametrize("n", [5, 10, 20])
@pytest.mark.parametrize("kind", ["normal", "t3", "lognormal", "lognormal_vs_normal", "ties"])
def test_the_printed_interval_holds(kind: str, n: int) -> None:
    covered, _ = _coverage_and_flag(kind, n)
    assert covered >= 0.93, covered


@pytest.mark.parametrize("n", [5, 10, 20])
@pytest.mark.parametrize("kind", ["lognormal_3to1", "diverged"])
def test_where_it_undercovers_the_caveat_is_raised(kind: str, n: int) -> None:
    covered, flagged = _coverage_and_flag(kind, n)
    assert covered < 0.92  # the docstring of the caveat quotes 81-90%: it is needed
    assert flagged >= (0.6 if n == 5 else 0.65), flagged


@pytest.mark.parametrize(("n", "most"), [(10, 0.35), (20, 0.15)])
def test_the_caveat_is_rare_for_normal_runs(n: int, most: float) -> None:
    assert _coverage_and_flag("normal", n)[1] <= most


def test_compare_prints_this_interval() -> None:
    g = np.random.default_rng(0)
    for _ in range(5):
        a, b = g.lognormal(0, 1, 5) * 3, g.lognormal(0, 1, 5)
        c = compare(a, b, rng=0, n_resamples=50, aso_resamples=50)
        low, high = _welch_interval(*_welch_parts(a, b), 0.95)
        np.testing.assert_allclose(c.mean_difference.confidence_interval(), (low, high), rtol=1e-12)
        np.testing.assert_allclose(c.welch_t.confidence_interval(), (low, high), rtol=1e-9)
