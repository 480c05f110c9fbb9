"""Argument checks of the sequential design (:mod:`~deviate_cb.stats.sequential`, :mod:`~deviate_cb.stats.stopping`).

Example:
    >>> check_looks(((3, 3), (5, 5)), "mean"), MIN_RUNS["spread"], check_boundary("obf")
    (((3, 3), (5, 5)), 3, 'obf')
"""

from __future__ import annotations

import itertools
import math
import numbers
from typing import Optional

__all__ = [
    "BOUNDARIES",
    "DISTS",
    "MIN_RUNS",
    "ON",
    "check_boundary",
    "check_dist",
    "check_effect",
    "check_kappa",
    "check_looks",
    "check_on",
    "check_seed",
]

ON = ("mean", "spread", "improvement")
BOUNDARIES = ("obf", "pocock")
DISTS = ("normal", "t3", "lognormal", "lognormal-normal", "diverged", "discrete")
# The mean's skewness term needs each group's third cumulant (3 runs); Brown-Forsythe with 2 runs a group always
# rejects (spread.py).
MIN_RUNS = {"mean": 3, "spread": 3, "improvement": 3}
_WHY = {
    "mean": "the mean: its skewness correction needs a group's third cumulant, which takes 3 runs",
    "spread": "the spread: Brown-Forsythe with 2 runs a group always rejects",
    "improvement": "P(A>B): a placement variance needs 2 runs a group; 3, as the mean's, keeps the looks alike",
}


def _one_of(value: object, name: str, choices: tuple[str, ...]) -> str:
    """``value`` when it is one of ``choices``; else the one-line ``ValueError`` naming ``name`` and them."""
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {', '.join(map(repr, choices))}. Received: {name}={value!r}.")
    return str(value)


def check_dist(dist: object) -> str:
    """``dist`` when it is one of :data:`DISTS` (see :func:`~deviate_cb.stats.stopping.null_paths`).

    Example:
        >>> check_dist("t3")
        't3'
    """
    return _one_of(dist, "dist", DISTS)


def check_boundary(boundary: object) -> str:
    """``boundary`` when it is ``"obf"`` (O'Brien-Fleming-type) or ``"pocock"``.

    Example:
        >>> check_boundary("pocock")
        'pocock'
    """
    return _one_of(boundary, "boundary", BOUNDARIES)


def check_kappa(kappa: object, on: str) -> float:
    """The skewness correction's inflation ``kappa``: a finite number >= 0, and 0 for the spread.

    Example:
        >>> check_kappa(8, "mean")
        8.0
    """
    if isinstance(kappa, bool) or not isinstance(kappa, numbers.Real) or not 0 <= float(kappa) < math.inf:
        raise ValueError(f"`kappa` must be a finite number >= 0. Received: kappa={kappa!r}.")
    if on != "mean" and kappa != 0:
        raise ValueError(f"`kappa` must be 0 for the {on} (its test has no skewness term). Received: kappa={kappa!r}.")
    return float(kappa)


def check_on(on: object) -> str:
    """``on`` when it is ``"mean"``, ``"spread"`` or ``"improvement"`` (P(A>B) against a threshold).

    Example:
        >>> check_on("spread")
        'spread'
    """
    return _one_of(on, "on", ON)


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
    if on == "improvement":
        raise ValueError(
            "`effect` must be None with on='improvement' (its threshold sets what matters). "
            f"Received: effect={effect!r}."
        )
    least = 0.0 if on == "mean" else 1.0
    if isinstance(effect, bool) or not isinstance(effect, numbers.Real) or not (least < float(effect) < math.inf):
        what = "a positive number" if on == "mean" else "a factor greater than 1 (the spread)"
        raise ValueError(f"`effect` must be {what}. Received: effect={effect!r}.")
    return float(effect)


def check_looks(looks: object, on: str, least: Optional[int] = None) -> tuple[tuple[int, int], ...]:
    """The looks as a tuple of ``(n_a, n_b)`` int pairs, each group with the test's minimum, growing.

    ``least`` overrides the minimum (a plan written before the mean needed 3 runs a group is read back as written).

    Example:
        >>> check_looks([[3, 3], (5, 5)], "spread")
        ((3, 3), (5, 5))
    """
    least = MIN_RUNS[on] if least is None else least
    why = f"{on}" if least != MIN_RUNS[on] else _WHY[on]
    message = (
        f"`looks` must be a non-empty sequence of (n_a, n_b) pairs of integers >= {least} ({why}), neither group "
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
