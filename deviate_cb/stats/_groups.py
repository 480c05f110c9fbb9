"""Validation shared by the two-group statistics: groups of per-run values, alternatives, resampling seeds."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Union

import numpy as np

from deviate_cb.stats._checks import as_vector, positive_int, seed_of
from deviate_cb.stats._results import check_level

__all__ = ["ALTERNATIVES", "RngLike", "Values"]

ALTERNATIVES = ("two-sided", "less", "greater")
_METHODS = ("percentile", "basic", "BCa")
RngLike = Union[None, int, np.random.Generator]
Values = Iterable[float]


def _settings(x: np.ndarray, y: np.ndarray, n_bad: tuple[int, int], **extra: Any) -> dict[str, Any]:
    return {**extra, "n_a": int(x.size), "n_b": int(y.size), "n_nonfinite_a": n_bad[0], "n_nonfinite_b": n_bad[1]}


def _group(values: Values, name: str) -> tuple[np.ndarray, int]:
    array = as_vector(values, name)
    finite = array[np.isfinite(array)]
    n_bad = int(array.size - finite.size)
    if finite.size < 2:
        raise ValueError(
            f"`{name}` needs at least 2 finite values to compare. Received: {finite.size} (and {n_bad} non-finite)."
        )
    return finite, n_bad


def _validate_pair(a: Values, b: Values) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    x, bad_a = _group(a, "a")
    y, bad_b = _group(b, "b")
    return x, y, (bad_a, bad_b)


def _check_alternative(alternative: object, name: str = "alternative") -> str:
    if alternative not in ALTERNATIVES:
        raise ValueError(f"`{name}` must be one of 'two-sided', 'less', 'greater'. Received: {name}={alternative!r}.")
    return str(alternative)


def _check_bootstrap(level: object, n_resamples: object, rng: object, method: object) -> int:
    check_level(level)
    positive_int(n_resamples, "n_resamples")
    if method not in _METHODS:
        raise ValueError(f"`method` must be one of 'percentile', 'basic', 'BCa'. Received: method={method!r}.")
    return seed_of(rng)
