"""Per-run aggregation: reduce one metric's series within one run to a single number.

Example:
    >>> from deviate_cb.stats.directions import infer_direction
    >>> aggregate([0.9, 0.5, 0.7], "best", infer_direction("val_loss"))
    0.5
    >>> aggregate([0.1, float("nan")], "mean")
    0.1
    >>> aggregate([0.2, 0.4, 0.6], "at_step=20", steps=[10, 20, 30])
    0.4
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Optional

import numpy as np

from deviate_cb.stats.aggregation.spec import AT_AGGREGATES, validate_how
from deviate_cb.stats.directions import validate_direction

__all__ = ["aggregate"]


def aggregate(
    values: Iterable[float],
    how: str = "last",
    direction: Optional[str] = None,
    *,
    order: Optional[Sequence] = None,
    at: Optional[int] = None,
    steps: Optional[Sequence[int]] = None,
    epochs: Optional[Sequence[int]] = None,
) -> float:
    """Reduce one run's series of one metric to a single number.

    Args:
        values: The values in recording order (or in any order, with ``order`` giving the recording order).
        how: ``"last"``, ``"best"``, ``"mean"``, ``"at_step"`` or ``"at_epoch"`` (or ``"at_step=S"``,
            ``"at_epoch=E"``).
        direction: ``"max"`` or ``"min"``; required when ``how="best"``.
        order: Optional sort keys (for example ``seq``) of the same length as ``values``.
        at: The global step (``at_step``) or epoch (``at_epoch``) whose value is wanted.
        steps: The global step of each value; required for ``at_step``.
        epochs: The epoch of each value; required for ``at_epoch``.

    Returns:
        The aggregate, NaN when there is no value (``last``), no finite value (``best``, ``mean``) or no
        value at that step or epoch (``at_step``, ``at_epoch``; the value recorded last by ``order`` wins when
        several match).

    Example:
        >>> aggregate([3.0, 1.0, 2.0], "last", order=[0, 2, 1])
        1.0
        >>> aggregate([0.7, float("inf"), 0.8], "best", "max")
        0.8
        >>> aggregate([0.5, 0.6, 0.7], "at_epoch", at=1, epochs=[0, 1, 1])
        0.7
        >>> aggregate([0.5, 0.6], "at_epoch", at=5, epochs=[0, 1])
        nan
    """
    array, how, at, labels = _validate_aggregate(values, how, direction, order, at, steps, epochs)
    if how in AT_AGGREGATES:
        match = np.flatnonzero(np.asarray(labels) == at)
        if match.size == 0:
            return math.nan
        if order is None:
            return float(array[match[-1]])
        keys = np.asarray(order)[match]
        # The last match among the largest keys: argmax on the reversed keys finds the latest position.
        return float(array[match[match.size - 1 - int(np.argmax(keys[::-1]))]])
    if array.size == 0:
        return math.nan
    if how == "last":
        return float(array[-1] if order is None else array[np.argmax(np.asarray(order))])
    finite = array[np.isfinite(array)]
    if finite.size == 0:
        return math.nan
    if how == "mean":
        return float(np.mean(finite))
    return float(np.max(finite) if direction == "max" else np.min(finite))


def _validate_aggregate(
    values: Iterable[float],
    how: str,
    direction: Optional[str],
    order: Optional[Sequence],
    at: Optional[int],
    steps: Optional[Sequence[int]],
    epochs: Optional[Sequence[int]],
) -> tuple[np.ndarray, str, Optional[int], Optional[Sequence[int]]]:
    how, at = validate_how(how, at)
    if how == "best":
        if direction is None:
            raise ValueError("`direction` must be 'max' or 'min' when how='best'. Received: direction=None.")
        validate_direction(direction)
    try:
        array = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`values` must be numbers. Received: values of type {type(values).__name__} ({exc}).") from exc
    if array.ndim != 1:
        raise ValueError(f"`values` must be one-dimensional. Received: values with shape {array.shape}.")
    if order is not None and len(order) != array.size:
        raise ValueError(f"`order` must have one key per value. Received: {len(order)} keys for {array.size} values.")
    labels = None
    if how in AT_AGGREGATES:
        label_name = "steps" if how == "at_step" else "epochs"
        labels = steps if how == "at_step" else epochs
        if labels is None:
            raise ValueError(f"`{label_name}` must be given when how={how!r}. Received: {label_name}=None.")
        if len(labels) != array.size:
            received = f"Received: {len(labels)} entries for {array.size} values."
            raise ValueError(f"`{label_name}` must have one entry per value. {received}")
    return array, how, at, labels
