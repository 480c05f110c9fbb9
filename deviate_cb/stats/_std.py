"""One guarded standard deviation for every statistic: equal values have std 0, exactly.

Example:
    >>> float(np.std([0.901, 0.901, 0.901], ddof=1)) > 0, guarded_std([0.901, 0.901, 0.901])
    (True, 0.0)
    >>> round(guarded_std([1.0, 2.0, 3.0]), 3), is_constant([0.1, 0.1]), n_distinct([0.1, 0.2, 0.1])
    (1.0, True, 2)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["guarded_std", "guarded_std_along", "guarded_var", "guarded_var_along", "is_constant", "n_distinct"]


def guarded_std(values: Any, ddof: int = 1) -> float:
    """The sample std (``ddof=1`` by default) of a 1-d sequence, exactly 0 when its values are all equal;
    NaN when there are ``ddof`` values or fewer.

    Example:
        >>> guarded_std([0.901, 0.901, 0.901]), guarded_std([1.0])
        (0.0, nan)
    """
    return math.sqrt(guarded_var(values, ddof))  # np.std is the root of np.var: the same float


def guarded_var(values: Any, ddof: int = 1) -> float:
    """The sample variance, exactly 0 when the values are all equal (:func:`guarded_std` squared).

    Example:
        >>> guarded_var([0.9, 0.9, 0.9]), guarded_var([1.0, 3.0])
        (0.0, 2.0)
    """
    array = np.asarray(values, dtype=np.float64).ravel()
    if array.size <= ddof:
        return float("nan")
    if float(np.ptp(array)) == 0.0:
        return 0.0
    return float(np.var(array, ddof=ddof))


def guarded_var_along(values: np.ndarray, axis: int = -1, ddof: int = 1) -> np.ndarray:
    """:func:`guarded_var` along ``axis`` of an array (e.g. bootstrap resamples): 0 where a row is constant.

    Example:
        >>> guarded_var_along(np.array([[0.9, 0.9, 0.9], [1.0, 2.0, 3.0]])).tolist()
        [0.0, 1.0]
    """
    array = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.var(array, ddof=ddof, axis=axis)
    return np.where(np.ptp(array, axis=axis) == 0, 0.0, var)


def guarded_std_along(values: np.ndarray, axis: int = -1, ddof: int = 1) -> np.ndarray:
    """:func:`guarded_std` along ``axis`` of an array (e.g. bootstrap resamples): 0 where a row is constant.

    Example:
        >>> guarded_std_along(np.array([[0.9, 0.9, 0.9], [1.0, 2.0, 3.0]])).tolist()
        [0.0, 1.0]
    """
    return np.sqrt(guarded_var_along(values, axis, ddof))


def is_constant(values: Any) -> bool:
    """Whether every value is the same (an empty or one-value sequence is constant).

    Example:
        >>> is_constant([0.9, 0.9]), is_constant([0.9, 0.9000001])
        (True, False)
    """
    array = np.asarray(values, dtype=np.float64).ravel()
    return array.size < 2 or float(np.ptp(array)) == 0.0


def n_distinct(values: Any) -> int:
    """How many distinct values there are (ties counted once): what a spread can be estimated from.

    Example:
        >>> n_distinct([0.9, 0.9, 0.91, 0.9])
        2
    """
    return int(np.unique(np.asarray(values, dtype=np.float64).ravel()).size)
