"""Argument checks shared by the statistics: numbers, vectors, positive counts, random generators.

Imports nothing from the rest of the package, so every statistics module can use it.
"""

from __future__ import annotations

import numbers
from typing import Any, Optional, Union, cast

import numpy as np

__all__ = ["as_numbers", "as_vector", "check_rng", "positive_int", "resolve_rng", "seed_of"]

RngLike = Union[None, int, np.random.Generator]


def as_numbers(values: Any, name: str) -> np.ndarray:
    """``values`` as a float64 array, or a ``TypeError`` naming ``name``.

    Example:
        >>> as_numbers([1, 2.5], "a")
        array([1. , 2.5])
    """
    if isinstance(values, (str, bytes)):
        raise TypeError(f"`{name}` must be numbers. Received: {name}={values!r}.")
    try:
        return np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be numbers. Received: {name} of type {type(values).__name__} ({exc}).") from exc


def as_vector(values: Any, name: str) -> np.ndarray:
    """:func:`as_numbers`, which must also be one-dimensional.

    Example:
        >>> as_vector((0.1, 0.2), "values").shape
        (2,)
    """
    array = as_numbers(values, name)
    if array.ndim != 1:
        raise ValueError(f"`{name}` must be one-dimensional. Received: {name} with shape {array.shape}.")
    return array


def positive_int(value: object, name: str) -> int:
    """``value`` as an int ``>= 1`` (``bool`` is not a count).

    Example:
        >>> positive_int(9999, "n_resamples")
        9999
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}.")
    return int(value)


def resolve_rng(rng: RngLike) -> tuple[np.random.Generator, Optional[int]]:
    """A generator for ``rng`` and the seed to record (``None`` when a generator was given).

    Example:
        >>> generator, seed = resolve_rng(7)
        >>> seed, float(generator.random()) == float(np.random.default_rng(7).random())
        (7, True)
    """
    if isinstance(rng, np.random.Generator):
        return rng, None
    check_rng(rng)
    seed = int(cast(int, np.random.SeedSequence().entropy)) if rng is None else int(cast(int, rng))
    return np.random.default_rng(seed), seed


def seed_of(rng: object) -> int:
    """One int seed for ``rng``: the seed itself, one drawn from a Generator, or fresh entropy for ``None``.

    A result that recomputes an interval (another ``level``) reuses this seed, so it stays reproducible.

    Example:
        >>> seed_of(3), seed_of(np.random.default_rng(0)) == seed_of(np.random.default_rng(0))
        (3, True)
    """
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(2**63))
    check_rng(rng)
    if rng is None:
        return int(np.random.default_rng().integers(2**63))  # fresh OS entropy; fits int64 columns and JSON
    return int(cast(int, rng))


def check_rng(rng: object) -> None:
    """``rng`` must be ``None``, a non-negative int seed or a Generator: TypeError for another type,
    ValueError for a negative seed (one message for every function of the package).

    Example:
        >>> check_rng(-1)
        Traceback (most recent call last):
        ...
        ValueError: `rng` must be None, a non-negative int seed or a numpy.random.Generator. Received: rng=-1.
    """
    message = f"`rng` must be None, a non-negative int seed or a numpy.random.Generator. Received: rng={rng!r}."
    if rng is None or isinstance(rng, np.random.Generator):
        return
    if isinstance(rng, bool) or not isinstance(rng, numbers.Integral):
        raise TypeError(message)
    if rng < 0:
        raise ValueError(message)
