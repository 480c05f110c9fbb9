"""Argument checks of the sequential design (:mod:`~deviate_cb.stats.sequential`, :mod:`~deviate_cb.stats.stopping`).

Example:
    >>> check_looks(((2, 2), (4, 4)), "mean"), MIN_RUNS["spread"]
    (((2, 2), (4, 4)), 3)
"""

from __future__ import annotations

import itertools
import math
import numbers
from typing import Optional

__all__ = ["DISTS", "MIN_RUNS", "ON", "check_dist", "check_effect", "check_looks", "check_on", "check_seed"]

ON = ("mean", "spread")
DISTS = ("normal", "t3")
MIN_RUNS = {"mean": 2, "spread": 3}  # Brown-Forsythe with 2 runs a group always rejects (spread.py)


def check_dist(dist: object) -> str:
    """``dist`` when it is ``"normal"`` or ``"t3"``.

    Example:
        >>> check_dist("t3")
        't3'
    """
    if dist not in DISTS:
        raise ValueError(f"`dist` must be one of 'normal', 't3'. Received: dist={dist!r}.")
    return str(dist)


def check_on(on: object) -> str:
    """``on`` when it is ``"mean"`` or ``"spread"``.

    Example:
        >>> check_on("spread")
        'spread'
    """
    if on not in ON:
        raise ValueError(f"`on` must be one of 'mean', 'spread'. Received: on={on!r}.")
    return str(on)


def check_seed(seed: object, name: str = "seed") -> int:
    """A non-negative int seed.

    Example:
        >>> check_seed(-1)
        Traceback (most recent call last):
        ...
        ValueError: `seed` must be a non-negative integer. Received: seed=-1.
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"`{name}` must be a non-negative integer. Received: {name}={seed!r}.")
    return int(seed)


def check_effect(effect: object, on: str) -> Optional[float]:
    """The smallest difference that matters: positive (the mean), a factor above 1 (the spread), or ``None``.

    Example:
        >>> check_effect(1, "mean"), check_effect(None, "spread")
        (1.0, None)
    """
    if effect is None:
        return None
    least = 0.0 if on == "mean" else 1.0
    if isinstance(effect, bool) or not isinstance(effect, numbers.Real) or not (least < float(effect) < math.inf):
        what = "a positive number" if on == "mean" else "a factor greater than 1 (the spread)"
        raise ValueError(f"`effect` must be {what}. Received: effect={effect!r}.")
    return float(effect)


def check_looks(looks: object, on: str) -> tuple[tuple[int, int], ...]:
    """The looks as a tuple of ``(n_a, n_b)`` int pairs, each group with the test's minimum, growing.

    Example:
        >>> check_looks([[3, 3], (5, 5)], "spread")
        ((3, 3), (5, 5))
    """
    least = MIN_RUNS[on]
    message = (
        f"`looks` must be a non-empty sequence of (n_a, n_b) pairs of integers >= {least} ({on}), neither group "
        f"shrinking and some runs added between looks. Received: looks={looks!r}."
    )
    try:
        pairs = [tuple(look) for look in looks]  # type: ignore[attr-defined]
    except TypeError:
        raise ValueError(message) from None
    ok = bool(pairs) and all(
        len(p) == 2 and all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and int(n) >= least for n in p)
        for p in pairs
    )
    checked = tuple((int(p[0]), int(p[1])) for p in pairs) if ok else ()
    steps = itertools.pairwise(checked)
    if not ok or not all(a1 <= a2 and b1 <= b2 and (a1, b1) != (a2, b2) for (a1, b1), (a2, b2) in steps):
        raise ValueError(message)
    return checked
