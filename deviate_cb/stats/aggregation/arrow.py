"""Per-run aggregation of a long metrics table: :func:`aggregate_table` on a ``pyarrow.Table``.

Example:
    >>> import pyarrow as pa
    >>> t = pa.table({"run": [0, 0, 1], "name": ["val_loss"] * 3, "seq": [0, 1, 0], "value": [0.5, 0.4, 0.6]})
    >>> r = aggregate_table(t, "last", keys=["run", "name"])
    >>> r.how, r.table.column("value").to_pylist()
    ('last', [0.4, 0.6])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import numpy as np

from deviate_cb.stats.aggregation.spec import AT_AGGREGATES, validate_how
from deviate_cb.stats.directions import resolve_direction, validate_direction

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["AggregateResult", "aggregate_table"]


@dataclass(frozen=True)
class AggregateResult:
    """The per-run aggregates of a metrics table.

    Attributes:
        table: One row per group: the key columns, then ``value`` (float64; NaN when not finite).
        how: The aggregate that was computed (``"at_step"``/``"at_epoch"`` without the ``=S`` part).
        skipped: Metric names left out because ``how="best"`` and their direction is unknown.
        at: The step or epoch of ``at_step``/``at_epoch``; ``None`` otherwise.
        n_missing: Groups (runs) with no row at that step or epoch; their ``value`` is NaN.
    """

    table: pa.Table
    how: str
    skipped: tuple[str, ...] = ()
    at: Optional[int] = None
    n_missing: int = 0


def aggregate_table(
    table: pa.Table,
    how: str = "last",
    *,
    keys: Sequence[str] = ("run", "stage", "name"),
    directions: Optional[Mapping[str, str]] = None,
    order: str = "seq",
    value: str = "value",
    name: str = "name",
    at: Optional[int] = None,
    step: str = "step",
    epoch: str = "epoch",
) -> AggregateResult:
    """Aggregate every group of rows (by default one metric of one stage of one run) of a long metrics table.

    Args:
        table: A long table with the ``keys`` columns, an ``order`` column and a numeric ``value`` column.
        how: ``"last"`` (value with the largest ``order``), ``"best"`` or ``"mean"`` (finite values only),
            ``"at_step"`` or ``"at_epoch"`` (the value at step or epoch ``at``, the last by ``order`` if several
            rows match, NaN if none; also spelled ``"at_step=S"``, ``"at_epoch=E"``).
        keys: The columns that identify one series.
        directions: Metric name -> ``"max"``/``"min"``, overriding :func:`infer_direction` for ``best``.
        order: The column giving the recording order.
        value: The value column.
        name: The column holding metric names (used to find each metric's direction for ``best``).
        at: The step or epoch for ``at_step``/``at_epoch``.
        step: The global-step column (``at_step``).
        epoch: The epoch column (``at_epoch``).

    Returns:
        An :class:`AggregateResult`. With ``best``, metrics of unknown direction are left out and listed
        in ``skipped``. With ``at_step``/``at_epoch``, every group has a row; those with no row at ``at``
        get NaN and are counted in ``n_missing``.

    Example:
        >>> import pyarrow as pa
        >>> t = pa.table({"run": [0, 0, 1], "name": ["acc"] * 3, "seq": [0, 1, 0], "value": [0.5, 0.7, 0.6]})
        >>> aggregate_table(t, "best", keys=["run", "name"]).table.column("value").to_pylist()
        [0.7, 0.6]
        >>> t = t.append_column("step", pa.array([10, 20, 10]))
        >>> r = aggregate_table(t, "at_step=20", keys=["run", "name"])
        >>> r.table.column("value").to_pylist(), r.n_missing
        ([0.7, nan], 1)
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    keys, how, at = _validate_aggregate_table(table, how, keys, directions, (order, value, name), at, (step, epoch))
    values = pc.cast(table.column(value), pa.float64()).fill_null(math.nan)
    if how in AT_AGGREGATES:
        # Rows at another step/epoch (or with none recorded) become null; "last" then skips them.
        label = table.column(step if how == "at_step" else epoch)
        values = pc.if_else(pc.equal(label, pa.scalar(at, label.type)), values, pa.scalar(None, pa.float64()))
    work = pa.table({**{k: table.column(k) for k in keys}, "_order": table.column(order), "_v": values})
    skipped: list[str] = []
    if how == "best":
        names = [n for n in pc.unique(table.column(name)).to_pylist() if n is not None]
        resolved = {n: resolve_direction(n, directions) for n in names}
        skipped = sorted(n for n, d in resolved.items() if d is None)
        maximise = pa.array([n for n, d in resolved.items() if d == "max"], type=pa.string())
        keep = pc.invert(pc.is_in(table.column(name), value_set=pa.array(skipped, type=pa.string())))
        work = work.append_column("_max", pc.is_in(table.column(name), value_set=maximise)).filter(keep)
    n_missing = 0
    if how == "last" or how in AT_AGGREGATES:
        order_values = work.column("_order").to_numpy()
        if order_values.size and not np.all(order_values[1:] >= order_values[:-1]):
            work = work.take(pa.array(np.argsort(order_values, kind="stable")))
        options = pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)
        out = work.group_by(keys, use_threads=False).aggregate([("_v", "last", options)])
        result = out.column("_v_last")
        if how in AT_AGGREGATES:
            n_missing = result.null_count
    else:
        finite = pc.if_else(pc.is_finite(work.column("_v")), work.column("_v"), pa.scalar(None, pa.float64()))
        work = work.set_column(work.schema.get_field_index("_v"), "_v", finite)
        if how == "mean":
            out = work.group_by(keys).aggregate([("_v", "mean")])
            result = out.column("_v_mean")
        else:
            out = work.group_by(keys).aggregate([("_v", "min"), ("_v", "max"), ("_max", "any")])
            result = pc.if_else(out.column("_max_any"), out.column("_v_max"), out.column("_v_min"))
    result = pc.cast(result, pa.float64()).fill_null(math.nan)
    final = pa.table({**{k: out.column(k) for k in keys}, "value": result})
    return AggregateResult(final.sort_by([(k, "ascending") for k in keys]), how, tuple(skipped), at, n_missing)


def _validate_aggregate_table(
    table: pa.Table,
    how: str,
    keys: Sequence[str],
    directions: Optional[Mapping[str, str]],
    columns: tuple[str, str, str],
    at: Optional[int],
    label_columns: tuple[str, str],
) -> tuple[list[str], str, Optional[int]]:
    import pyarrow as pa

    how, at = validate_how(how, at)
    if not isinstance(table, pa.Table):
        raise TypeError(f"`table` must be a pyarrow.Table. Received: table of type {type(table).__name__}.")
    order, value, name = columns
    label = {"at_step": label_columns[0], "at_epoch": label_columns[1]}.get(how)
    needed = [*keys, order, value] + ([name] if how == "best" else []) + ([label] if label else [])
    missing = [c for c in needed if c not in table.column_names]
    if missing:
        raise ValueError(f"`table` lacks column(s) {', '.join(missing)}. Received: columns {table.column_names}.")
    if not (
        pa.types.is_integer(table.schema.field(value).type) or pa.types.is_floating(table.schema.field(value).type)
    ):
        raise TypeError(f"`table` column `{value}` must be numeric. Received: {table.schema.field(value).type}.")
    if label and label in table.column_names and not pa.types.is_integer(table.schema.field(label).type):
        raise TypeError(f"`table` column `{label}` must be integer. Received: {table.schema.field(label).type}.")
    for metric, direction in (directions or {}).items():
        validate_direction(direction, f"directions[{metric!r}]")
    return list(keys), how, at
