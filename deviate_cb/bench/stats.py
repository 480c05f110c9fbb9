"""Statistics of a determinism benchmark: the median on/off ratio with a distribution-free CI, and op differences.

Example:
    >>> ci = median_ratio_ci([1.10, 1.30, 1.20, 1.25, 1.15, 1.22, 1.18, 1.05])
    >>> round(ci.median, 3), (ci.low, ci.high), round(ci.level, 3)
    (1.19, (1.05, 1.3), 0.992)
    >>> [row["op"] for row in op_differences(
    ...     [{"op": "aten::mm", "device_type": "cpu", "self_us_per_step": 10.0}],
    ...     [{"op": "aten::mm", "device_type": "cpu", "self_us_per_step": 30.0}])]
    ['aten::mm']
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Optional

from deviate_cb.profiling.ops import grouped_op

__all__ = ["RatioCI", "median_ratio_ci", "op_differences"]


@dataclass(frozen=True)
class RatioCI:
    """Median of the per-pair on/off ratios and its confidence interval.

    Attributes:
        median: Median ratio (above 1: determinism makes steps slower).
        low: Lower bound of the interval.
        high: Upper bound of the interval.
        level: Coverage the interval actually has (at least the requested level when enough pairs).
        requested_level: The level asked for.
        n: Number of pairs.
        method: ``order-statistic`` (distribution-free CI for the median).
    """

    median: float
    low: float
    high: float
    level: float
    requested_level: float
    n: int
    method: str = "order-statistic"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def median_ratio_ci(ratios: Sequence[float], level: float = 0.95) -> RatioCI:
    """The median of ``ratios`` with an order-statistic confidence interval (see the module docstring)."""
    from scipy.stats import binom

    values = sorted(float(r) for r in ratios)
    n = len(values)
    if n == 0:
        raise ValueError("`ratios` must hold at least one ratio. Received: ratios=[].")
    if not 0 < level < 1:
        raise ValueError(f"`level` must be between 0 and 1. Received: level={level!r}.")
    best_k, coverage = 1, 1 - 2 * float(binom.cdf(0, n, 0.5)) if n > 1 else 0.0
    for k in range(1, n // 2 + 1):
        reached = 1 - 2 * float(binom.cdf(k - 1, n, 0.5))
        if reached >= level:
            best_k, coverage = k, reached
    return RatioCI(
        median=statistics.median(values),
        low=values[best_k - 1],
        high=values[n - best_k],
        level=coverage,
        requested_level=level,
        n=n,
    )


def op_differences(
    off: Iterable[Mapping[str, Any]],
    on: Iterable[Mapping[str, Any]],
    n: int = 8,
    *,
    source: Optional[str] = None,
    canonical: bool = True,
) -> list[dict[str, Any]]:
    """The ops whose self time per step changed most between determinism off and on, largest change first.

    Args:
        off: Op rows of the mode ``off``: ``op``, ``device_type``, ``self_us_per_step``, optionally ``source``.
        on: Op rows of the mode ``on``, the same columns.
        n: How many ops to return.
        source: The profiler of rows that carry no ``source`` (``tensorflow`` or ``torch``), for
            :func:`~deviate_cb.profiling.ops.canonical_op`.
        canonical: Compare ops under their portable names (the default) or under the names as recorded.

    Returns:
        Per op and device: ``op``, ``device_type``, ``off_us``, ``on_us`` and ``delta_us`` (per step), ``share``
        (this op's part of the total change of self time, signed) and ``raw_ops`` (the names as recorded, sorted).

    Example:
        >>> (row,) = op_differences(
        ...     [{"op": "_MklMatMul", "device_type": "cpu", "self_us_per_step": 10.0}],
        ...     [{"op": "MatMul", "device_type": "cpu", "self_us_per_step": 12.0}], source="tensorflow")
        >>> row["op"], row["delta_us"], row["raw_ops"]
        ('MatMul', 2.0, ['MatMul', '_MklMatMul'])
    """
    table: dict[tuple[str, str], dict[str, Any]] = {}
    for mode, rows in (("off_us", off), ("on_us", on)):
        for row in rows:
            key = (grouped_op(row, canonical=canonical, source=source), row["device_type"])
            entry = table.setdefault(
                key, {"op": key[0], "device_type": key[1], "off_us": 0.0, "on_us": 0.0, "raw_ops": set()}
            )
            entry[mode] += float(row["self_us_per_step"])
            entry["raw_ops"].add(row["op"])
    total = sum(e["on_us"] - e["off_us"] for e in table.values())
    for entry in table.values():
        entry["delta_us"] = entry["on_us"] - entry["off_us"]
        entry["share"] = entry["delta_us"] / total if total else None
        entry["raw_ops"] = sorted(entry.pop("raw_ops"))  # last, after delta_us and share
    return sorted(table.values(), key=lambda e: (-abs(e["delta_us"]), e["op"]))[:n]
