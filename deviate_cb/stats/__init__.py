"""Statistics of training variance: per-run aggregates and across-run descriptions.

Plain functions do the maths; results are frozen objects. Nothing here touches the global RNG, and SciPy
is imported only inside the functions that need it.

Example:
    >>> from deviate_cb.stats import aggregate, describe
    >>> runs = [[0.9, 0.80], [0.9, 0.84], [0.9, 0.82]]
    >>> round(describe([aggregate(r, "last") for r in runs]).std, 3)
    0.02
"""

from deviate_cb.stats.aggregate import (
    AGGREGATES,
    DIRECTIONS,
    AggregateResult,
    aggregate,
    aggregate_table,
    infer_direction,
    resolve_direction,
)
from deviate_cb.stats.describe import ConfidenceInterval, Description, describe, std_confidence_interval

__all__ = [
    "AGGREGATES",
    "DIRECTIONS",
    "AggregateResult",
    "ConfidenceInterval",
    "Description",
    "aggregate",
    "aggregate_table",
    "describe",
    "infer_direction",
    "resolve_direction",
    "std_confidence_interval",
]
