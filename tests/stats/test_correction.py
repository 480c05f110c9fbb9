"""correct() and reject(): Holm against a hand computation and a brute-force reference, BH against SciPy."""

from __future__ import annotations

import doctest
import itertools

import numpy as np
import pytest
from scipy import stats as sps

from deviate_cb.stats import correction
from deviate_cb.stats.correction import correct, reject


def _holm_brute_force(p: np.ndarray) -> np.ndarray:
    """Holm from its closed-testing definition: adj_i = max over ranks j <= rank(i) of min(1, (m - j + 1) p_(j))."""
    m = p.size
    out = np.empty(m)
    for i in range(m):
        rank_i = sum(1 for j in range(m) if (p[j], j) < (p[i], i))  # 0-based rank with stable ties
        best = 0.0
        for j in range(m):
            rank_j = sum(1 for k in range(m) if (p[k], k) < (p[j], j))
            if rank_j <= rank_i:
                best = max(best, min(1.0, (m - rank_j) * p[j]))
        out[i] = best
    return out


def test_holm_hand_computation() -> None:
    # sorted: 0.01 (x4 = 0.04), 0.02 (x3 = 0.06), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04 -> monotone 0.06)
    adjusted = correct([0.03, 0.01, 0.04, 0.02], method="holm")
    np.testing.assert_allclose(adjusted, [0.06, 0.04, 0.06, 0.06], rtol=1e-12)
    np.testing.assert_allclose(correct([0.5, 0.4], "holm"), [0.8, 0.8], rtol=1e-12)
    np.testing.assert_allclose(correct([0.9, 0.6], "holm"), [1.0, 1.0])  # capped at 1


@pytest.mark.parametrize("seed", range(20))
def test_holm_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 9))
    p = rng.choice([0.001, 0.01, 0.02, 0.04, 0.3, 0.5, 0.9], size=m) if seed % 2 else rng.uniform(0, 0.2, size=m)
    adjusted = correct(p, "holm")
    np.testing.assert_allclose(adjusted, _holm_brute_force(p), rtol=1e-12)
    assert np.all(adjusted >= p) and np.all(adjusted <= 1)
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(adjusted[order]) >= 0)


def test_holm_is_the_step_down_procedure() -> None:
    # Rejecting adjusted <= alpha equals Holm's sequential rule on the raw p-values.
    for p in itertools.product([0.004, 0.012, 0.02, 0.03, 0.2], repeat=3):
        p = np.array(p)
        m, alpha = p.size, 0.05
        expected = np.zeros(m, dtype=bool)
        for k, i in enumerate(np.argsort(p, kind="stable")):
            if p[i] > alpha / (m - k):
                break
            expected[i] = True
        assert reject(correct(p, "holm"), alpha).tolist() == expected.tolist()


@pytest.mark.parametrize("seed", range(5))
def test_bh_and_bonferroni_match_references(seed: int) -> None:
    p = np.random.default_rng(seed).uniform(0, 0.1, size=12)
    np.testing.assert_allclose(correct(p, "bh"), sps.false_discovery_control(p, method="bh"), rtol=1e-12)
    np.testing.assert_allclose(correct(p, "bonferroni"), np.minimum(p * 12, 1), rtol=1e-12)
    np.testing.assert_array_equal(correct(p, None), p)


def test_bh_hand_computation() -> None:
    # sorted 0.01, 0.02, 0.04, 0.2 -> m p / rank = 0.04, 0.04, 0.0533, 0.2; step-up minimum keeps them
    np.testing.assert_allclose(correct([0.2, 0.01, 0.04, 0.02], "bh"), [0.2, 0.04, 0.16 / 3, 0.04], rtol=1e-12)


@pytest.mark.parametrize("method", ["holm", "bh", "bonferroni", None])
def test_nan_is_kept_and_not_counted(method: str | None) -> None:
    p = np.array([0.01, np.nan, 0.04, 0.03, np.nan])
    adjusted = correct(p, method)
    assert np.isnan(adjusted[[1, 4]]).all()
    np.testing.assert_allclose(adjusted[[0, 2, 3]], correct(p[[0, 2, 3]], method), rtol=1e-12)
    assert reject(adjusted, 0.05)[[1, 4]].tolist() == [False, False]
    assert np.isnan(correct([np.nan, np.nan], method)).all() and correct([], method).size == 0


def test_shape_is_kept_and_input_is_not_modified() -> None:
    p = np.array([[0.01, 0.2], [0.03, np.nan]])
    before = p.copy()
    adjusted = correct(p, "holm")
    assert adjusted.shape == (2, 2)
    np.testing.assert_allclose(adjusted[~np.isnan(p)], correct(p[~np.isnan(p)], "holm"))
    np.testing.assert_array_equal(p, before)


def test_reject_boundary() -> None:
    assert reject([0.05, 0.0500001, 0.0], 0.05).tolist() == [True, False, True]


def test_validation_messages() -> None:
    with pytest.raises(
        ValueError,
        match=r"^`method` must be one of 'holm', 'bh', 'bonferroni', None\. "
        r"Received: method='fdr'\.$",
    ):
        correct([0.1], "fdr")
    with pytest.raises(
        ValueError, match=r"^`pvalues` must lie in \[0, 1\] \(NaN allowed\)\. Received: a value of 1\.5\.$"
    ):
        correct([0.1, 1.5])
    with pytest.raises(TypeError, match=r"^`pvalues` must be numbers\. Received: pvalues='0\.1'\.$"):
        correct("0.1")
    with pytest.raises(ValueError, match=r"^`alpha` must be a number in \(0, 1\)\. Received: alpha=1\.0\.$"):
        reject([0.1], 1.0)
    with pytest.raises(ValueError, match=r"^`adjusted` must lie in \[0, 1\]"):
        reject([-0.1], 0.05)


def test_docstring_examples() -> None:
    result = doctest.testmod(correction, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
