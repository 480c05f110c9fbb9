"""The P(A>B) decision of :mod:`~deviate_cb.stats.sequential` (``on="improvement"``), vectorised.

Example:
    >>> x, y = np.array([[3.0, 4.0, 5.0, 6.0]]), np.array([[1.0, 2.0, 4.0, 5.5]])
    >>> theta, se = superiority_parts(x, y, ((3, 3), (4, 4)))
    >>> theta.round(4).tolist()  # 3 runs each: 7.5 of 9 pairs won (a tie counts half)
    [[0.8333, 0.7188]]
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any

import numpy as np

from deviate_cb.stats.boundaries import information_fractions

__all__ = [
    "DEFAULT_THRESHOLD",
    "calibrate_improvement",
    "check_threshold",
    "improvement_interval",
    "improvement_outcomes",
    "model_se",
    "rejects",
    "superiority_parts",
]

Looks = tuple[tuple[int, int], ...]

DEFAULT_THRESHOLD = 0.75  # Bouthillier et al. (2021); deviate compare's threshold too (report/compare_notes.py)
_CHUNK = 4_000  # paths per chunk: a (paths, 30, 30) comparison array of 29 MB


def check_threshold(threshold: object) -> float:
    """``threshold`` when it is a number in (0.5, 1).

    Example:
        >>> check_threshold(0.8)
        0.8
    """
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not 0.5 < float(threshold) < 1:
        raise ValueError(f"`threshold` must be a number in (0.5, 1). Received: threshold={threshold!r}.")
    return float(threshold)


def superiority_parts(x: np.ndarray, y: np.ndarray, looks: Looks) -> tuple[np.ndarray, np.ndarray]:
    """``theta = P(A>B) + P(A=B)/2`` and its placement standard error at each look: two ``(paths, looks)``
    arrays (A better means higher: negate both groups for a lower-is-better metric). Where both groups are
    constant the standard error is infinite (no interval, no claim).

    Example:
        >>> theta, se = superiority_parts(np.array([[2.0, 2.0, 2.0]]), np.array([[1.0, 1.0, 1.0]]), ((3, 3),))
        >>> float(theta[0, 0]), float(se[0, 0])
        (1.0, inf)
    """
    wins = (x[:, :, None] > y[:, None, :]) + 0.5 * (x[:, :, None] == y[:, None, :])  # (paths, n_A, n_B)
    theta = np.empty((x.shape[0], len(looks)))
    se = np.empty_like(theta)
    for k, (n_a, n_b) in enumerate(looks):
        part = wins[:, :n_a, :n_b]
        place_a, place_b = part.mean(axis=2), part.mean(axis=1)
        var = place_a.var(axis=1, ddof=1) / n_a + place_b.var(axis=1, ddof=1) / n_b
        constant = (np.ptp(x[:, :n_a], axis=1) == 0) & (np.ptp(y[:, :n_b], axis=1) == 0)
        theta[:, k], se[:, k] = place_a.mean(axis=1), np.where(constant, np.inf, np.sqrt(var))
    return theta, se


def model_se(theta: np.ndarray | float, n_a: np.ndarray | int, n_b: np.ndarray | int) -> np.ndarray:
    """Hanley & McNeil's (1982, Radiology 143:29) standard error of ``theta``'s estimate when the true value is
    ``theta``: ``Q1 = t / (2 - t)``, ``Q2 = 2 t^2 / (1 + t)``, ``var = (t (1 - t) + (n_A - 1)(Q1 - t^2) + (n_B -
    1)(Q2 - t^2)) / (n_A n_B)``. It is the floor that keeps the interval open where the runs separate completely.

    Example:
        >>> round(float(model_se(0.75, 10, 10)), 4)
        0.1117
    """
    t = np.asarray(theta, dtype=np.float64)
    q1, q2 = t / (2.0 - t), 2.0 * t * t / (1.0 + t)
    var = t * (1.0 - t) + (np.asarray(n_a) - 1.0) * (q1 - t * t) + (np.asarray(n_b) - 1.0) * (q2 - t * t)
    return np.sqrt(np.maximum(var, 0.0) / (np.asarray(n_a) * np.asarray(n_b)))


def rejects(theta: np.ndarray, se: np.ndarray, value: float, z: np.ndarray, n_a: Any, n_b: Any) -> np.ndarray:
    """Whether ``value`` lies outside the interval: ``|theta - value| > z max(SE, model_se(value))``.

    Example:
        >>> rejects(np.array([1.0]), np.array([0.0]), 0.75, np.array([1.96]), 3, 3).tolist()  # 3 runs: never sure
        [False]
    """
    with np.errstate(invalid="ignore"):
        return np.abs(theta - value) > z * np.maximum(se, model_se(value, n_a, n_b))


def improvement_interval(x: np.ndarray, y: np.ndarray, nominal: float) -> tuple[float, float, float]:
    """``theta`` and its interval at nominal two-sided level ``nominal`` (one look; A better means higher): the
    values ``v`` in ``[0, 1]`` with ``|theta - v| <= z max(SE, model_se(v))``, ends found by bisection. Both
    groups constant: ``(theta, 0, 1)``.

    Example:
        >>> [round(v, 3) for v in improvement_interval(np.array([3.0, 4, 5, 6]), np.array([1.0, 2, 4, 5.5]), 0.05)]
        [0.719, 0.309, 1.0]
    """
    from scipy.special import ndtri

    theta, se = superiority_parts(x[None, :], y[None, :], ((x.size, y.size),))
    t, s = float(theta[0, 0]), float(se[0, 0])
    if not math.isfinite(s):
        return t, 0.0, 1.0
    z = np.array(-float(ndtri(nominal / 2.0)))
    ends = []
    for inside, outside in ((t, 0.0), (t, 1.0)):
        if not rejects(np.array(t), np.array(s), outside, z, x.size, y.size):
            ends.append(outside)
            continue
        for _ in range(60):
            mid = 0.5 * (inside + outside)
            inside, outside = (inside, mid) if rejects(np.array(t), np.array(s), mid, z, x.size, y.size) else (
                mid, outside)  # fmt: skip
        ends.append(inside)
    return t, ends[0], ends[1]


def improvement_outcomes(
    theta: np.ndarray, se: np.ndarray, looks: Looks, nominals: tuple[float, ...], threshold: float, truth: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per path and look: "A better" (the interval above ``threshold``), "B better" (below ``1 - threshold``),
    "no improvement either way" (inside both), and whether the interval holds ``truth``.

    Example:
        >>> outcome = improvement_outcomes(np.array([[0.99]]), np.array([[0.01]]), ((30, 30),), (0.05,), 0.75, 0.95)
        >>> [bool(o[0, 0]) for o in outcome]
        [True, False, False, True]
    """
    from scipy.special import ndtri

    z = -ndtri(np.array(nominals) / 2.0)
    n_a, n_b = np.array([a for a, _ in looks]), np.array([b for _, b in looks])
    high_out, low_out = rejects(theta, se, threshold, z, n_a, n_b), rejects(theta, se, 1.0 - threshold, z, n_a, n_b)
    above, below = high_out & (theta > threshold), low_out & (theta < 1.0 - threshold)
    inside = high_out & low_out & (theta < threshold) & (theta > 1.0 - threshold)
    return above, below, inside, ~rejects(theta, se, truth, z, n_a, n_b)


def _scale(looks: Looks, boundary: str) -> np.ndarray:
    return np.sqrt(information_fractions(looks)) if boundary == "obf" else np.ones(len(looks))


@functools.lru_cache(maxsize=32)
def calibrate_improvement(looks: Looks, alpha: float, threshold: float, seed: int, paths: int, boundary: str) -> float:
    """The boundary's constant ``C`` for the P(A>B) interval: for each truth ``v`` in ``0.5`` and ``threshold``
    and each std ratio A:B in 1 and 3, the ``1 - alpha`` quantile over ``paths`` seeded normal studies whose shift
    makes ``P(A>B) = v`` of the largest ``s_k |theta_k - v| / max(SE_k, model_se(v))``; the largest of the four
    (cached by the arguments; it is 0.5's). The intervals then hold a true 0.5 at every look at once in ``1 -
    alpha`` of the studies, spreads 3:1 apart included, and hold the threshold more often.

    Example:
        >>> round(calibrate_improvement(((3, 3), (6, 6), (9, 9)), 0.05, 0.75, 0, 4000, "obf"), 1)
        2.1
    """
    from scipy.special import ndtri

    if len(looks) == 1:
        return float(-ndtri(alpha / 2.0))
    scale = _scale(looks, boundary)
    n_a, n_b = looks[-1]
    sizes_a, sizes_b = np.array([a for a, _ in looks]), np.array([b for _, b in looks])
    constants = []
    cells = [(truth, ratio) for truth in (0.5, threshold) for ratio in (1.0, 3.0)]
    for index, (truth, ratio) in enumerate(cells):
        shift = math.sqrt(1.0 + ratio * ratio) * float(ndtri(truth))
        floor = model_se(truth, sizes_a, sizes_b)
        rng = np.random.default_rng(np.random.SeedSequence([seed, 42, index]))
        largest = []
        for done in range(0, paths, _CHUNK):
            size = min(_CHUNK, paths - done)
            x = shift + ratio * rng.standard_normal((size, n_a))
            theta, se = superiority_parts(x, rng.standard_normal((size, n_b)), looks)
            with np.errstate(invalid="ignore"):
                largest.append((scale * np.abs(theta - truth) / np.maximum(se, floor)).max(axis=1))
        ordered = np.sort(np.concatenate(largest))[::-1]
        constants.append(float(ordered[math.floor(alpha * ordered.size)]))
    return max(constants)
