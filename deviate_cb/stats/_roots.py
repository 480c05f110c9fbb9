"""Vectorised root finding for the test-inverting intervals: where a decreasing function crosses a target."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["solve_decreasing"]

_MAX_GROWTH = 200
_MAX_HALVINGS = 200


def solve_decreasing(
    f: Callable[[np.ndarray, np.ndarray], np.ndarray],
    target: np.ndarray,
    guess: np.ndarray,
    step: np.ndarray,
) -> np.ndarray:
    """``theta`` with ``f(theta, index) = target`` for a function that decreases in ``theta``, elementwise.

    Args:
        f: ``f(theta, index)``: the function at ``theta`` for the problems ``index`` (an integer array into
            ``target``), vectorised.
        target: The value to reach, one per problem.
        guess: Where to start, one per problem.
        step: The first half-width of the bracket (positive); it doubles until the bracket holds the root.

    Returns:
        The roots; ``-inf`` / ``+inf`` where ``f`` stays below / above ``target`` over ``1e300``, NaN where
        ``f``, ``target`` or ``guess`` is NaN.

    Example:
        >>> roots = solve_decreasing(lambda x, i: -(x**3), np.array([8.0, -1.0]), np.zeros(2), np.ones(2))
        >>> [round(float(r), 9) for r in roots]
        [-2.0, 1.0]
    """
    target = np.asarray(target, dtype=np.float64)
    guess = np.broadcast_to(np.asarray(guess, dtype=np.float64), target.shape)
    step = np.broadcast_to(np.asarray(step, dtype=np.float64), target.shape)
    out = np.full(target.shape, np.nan)
    index = np.flatnonzero(np.isfinite(target) & np.isfinite(guess))
    low, high = guess.ravel()[index] - step.ravel()[index], guess.ravel()[index] + step.ravel()[index]
    tgt = target.ravel()[index]
    width = step.ravel()[index].copy()
    for _ in range(_MAX_GROWTH):  # f(low) >= target >= f(high) once bracketed
        f_low, f_high = f(low, index), f(high, index)
        below, above = f_low < tgt, f_high > tgt
        if not (below.any() or above.any()):
            break
        width = np.where(below | above, 2.0 * width, width)
        low = np.where(below, low - width, low)
        high = np.where(above, high + width, high)
        low, high = np.maximum(low, -1e300), np.minimum(high, 1e300)
    f_low, f_high = f(low, index), f(high, index)
    bad = np.isnan(f_low) | np.isnan(f_high)
    result = np.full(index.shape, np.nan)
    result[~bad & (f_high > tgt)] = np.inf
    result[~bad & (f_low < tgt)] = -np.inf
    todo = ~bad & (f_low >= tgt) & (f_high <= tgt)
    lo, hi, idx, t = low[todo], high[todo], index[todo], tgt[todo]
    for _ in range(_MAX_HALVINGS):
        mid = 0.5 * (lo + hi)
        up = f(mid, idx) >= t
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
        if np.all(hi - lo <= np.maximum(1e-12 * np.maximum(np.abs(lo), np.abs(hi)), 1e-300)):
            break
    result[todo] = 0.5 * (lo + hi)
    out.ravel()[index] = result  # out is a fresh contiguous array, so ravel() is a view
    return out
