"""Argument checks shared by the statistics: numbers, vectors, positive counts, random generators.

Imports nothing from the rest of the package, so every statistics module can use it.
"""

from __future__ import annotations

import numbers
from typing import Any, Optional, Union, cast

import numpy as np

__all__ = ["as_numbers", "as_vector", "positive_int", "resolve_rng"]

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
    if rng is not None and (isinstance(rng, bool) or not isinstance(rng, numbers.Integral) or rng < 0):
        raise ValueError(f"`rng` must be a non-negative int seed, a numpy Generator or None. Received: rng={rng!r}.")
    seed = int(cast(int, np.random.SeedSequence().entropy)) if rng is None else int(rng)
    return np.random.default_rng(seed), seed
