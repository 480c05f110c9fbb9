"""Multiple-comparison correction across metrics: Holm, Benjamini-Hochberg, Bonferroni.

Example:
    >>> adjusted = correct([0.01, 0.04, 0.03, float("nan")], method="holm")
    >>> [round(float(p), 2) for p in adjusted[:3]], bool(np.isnan(adjusted[3]))
    ([0.03, 0.06, 0.06], True)
    >>> reject(adjusted, alpha=0.05).tolist()
    [True, False, False, False]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional, Union

import numpy as np

from deviate_cb.stats._checks import as_numbers

__all__ = ["CORRECTIONS", "correct", "reject"]

CORRECTIONS = ("holm", "bh", "bonferroni", None)
PValues = Union[Iterable[float], np.ndarray]


def correct(pvalues: PValues, method: Optional[str] = "holm") -> np.ndarray:
    """Adjust a family of p-values for multiple comparisons.

    Args:
        pvalues: The p-values of one family (any shape; all values form one family). NaN is kept as NaN and
            not counted.
        method: ``"holm"`` (Holm's step-down, family-wise error rate; the default), ``"bh"``
            (Benjamini-Hochberg step-up, false discovery rate; via ``scipy.stats.false_discovery_control``),
            ``"bonferroni"`` (``min(1, m p)``), or ``None`` (no correction; a copy).

    Returns:
        The adjusted p-values, a float array of the input's shape, each in [0, 1] and at least its raw p.

    Example:
        >>> correct([0.01, 0.02, 0.03], method="bh").tolist()
        [0.03, 0.03, 0.03]
        >>> correct([0.01, 0.02, 0.03], method="bonferroni").round(2).tolist()
        [0.03, 0.06, 0.09]
    """
    array, method = _validate_correct(pvalues, method)
    out = array.astype(np.float64, copy=True)
    finite = ~np.isnan(out)
    p = out[finite]
    if method is None or p.size == 0:
        return out
    if method == "bonferroni":
        adjusted = np.minimum(p * p.size, 1.0)
    elif method == "holm":
        adjusted = _holm(p)
    else:
        from scipy.stats import false_discovery_control

        adjusted = false_discovery_control(p, method="bh")
    out[finite] = adjusted
    return out


def reject(adjusted: PValues, alpha: float = 0.05) -> np.ndarray:
    """Which hypotheses to reject: ``adjusted <= alpha`` (NaN is never rejected).

    Example:
        >>> reject([0.01, 0.05, 0.2, float("nan")], alpha=0.05).tolist()
        [True, True, False, False]
    """
    array = _validate_reject(adjusted, alpha)
    with np.errstate(invalid="ignore"):
        return np.asarray(array <= alpha) & ~np.isnan(array)


def _holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down: ``max_{j <= i} min(1, (m - j + 1) p_(j))`` over the ascending order."""
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = np.minimum((m - np.arange(m)) * p[order], 1.0)
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def _as_pvalues(values: PValues, name: str) -> np.ndarray:
    array = as_numbers(values, name)  # any shape: the adjusted p-values keep it
    finite = array[~np.isnan(array)]
    if np.any((finite < 0) | (finite > 1)):
        bad = float(finite[(finite < 0) | (finite > 1)][0])
        raise ValueError(f"`{name}` must lie in [0, 1] (NaN allowed). Received: a value of {bad!r}.")
    return array


def _validate_correct(pvalues: PValues, method: object) -> tuple[np.ndarray, Optional[str]]:
    if method not in CORRECTIONS:
        raise ValueError(f"`method` must be one of 'holm', 'bh', 'bonferroni', None. Received: method={method!r}.")
    return _as_pvalues(pvalues, "pvalues"), method  # type: ignore[return-value]


def _validate_reject(adjusted: PValues, alpha: object) -> np.ndarray:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ValueError(f"`alpha` must be a number in (0, 1). Received: alpha={alpha!r}.")
    return _as_pvalues(adjusted, "adjusted")
