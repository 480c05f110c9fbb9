"""Op rows of profiled windows, summed: the ops that took the most time.

The op rows come from the profiler drivers (:mod:`deviate_cb.profiling.torch_profiler`,
:mod:`deviate_cb.profiling.tensorflow_profiler`) and are stored in ``timings.parquet``
(:mod:`deviate_cb.store.timings`); ``deviate report`` ranks them with :func:`top_ops`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Optional

__all__ = ["top_ops"]


def top_ops(
    op_rows: Iterable[Mapping[str, Any]], n: int = 10, device_type: Optional[str] = None
) -> list[dict[str, Any]]:
    """The ``n`` ops with the most self time, summed over windows (and devices, unless ``device_type`` is given).

    Example:
        >>> rows = [{"op": "aten::mm", "device_type": "cpu", "calls": 2, "self_time_us": 5.0, "total_time_us": 6.0},
        ...         {"op": "aten::add", "device_type": "cpu", "calls": 1, "self_time_us": 9.0, "total_time_us": 9.0},
        ...         {"op": "aten::mm", "device_type": "cpu", "calls": 2, "self_time_us": 5.0, "total_time_us": 6.0}]
        >>> [(r["op"], r["self_time_us"], r["calls"]) for r in top_ops(rows, n=2)]
        [('aten::mm', 10.0, 4), ('aten::add', 9.0, 1)]
    """
    totals: dict[tuple[str, str], dict[str, Any]] = {}
    for row in op_rows:
        if row.get("kind", "op") != "op" or (device_type is not None and row["device_type"] != device_type):
            continue
        key = (row["op"], row["device_type"] if device_type is not None else "*")
        total = totals.setdefault(
            key, {"op": row["op"], "device_type": key[1], "calls": 0, "self_time_us": 0.0, "total_time_us": 0.0}
        )
        total["calls"] += int(row["calls"])
        total["self_time_us"] += float(row["self_time_us"])
        total["total_time_us"] += float(row["total_time_us"])
    return sorted(totals.values(), key=lambda r: (-r["self_time_us"], r["op"]))[:n]
