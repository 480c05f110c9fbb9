"""Per-run aggregation: reduce one metric's series within one run to a single number.

Three aggregates: ``last`` (the value recorded last, by ``seq``), ``best`` (the maximum of an
accuracy-like metric, the minimum of a loss-like one) and ``mean``. ``best`` and ``mean`` use finite
values only; ``last`` returns whatever was recorded last, so a run that ended in NaN aggregates to NaN
(and the across-run statistics then leave it out and count it).

Example:
    >>> aggregate([0.9, 0.5, 0.7], "best", infer_direction("val_loss"))
    0.5
    >>> aggregate([0.1, float("nan")], "mean")
    0.1
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "AGGREGATES",
    "DIRECTIONS",
    "AggregateResult",
    "aggregate",
    "aggregate_table",
    "infer_direction",
    "resolve_direction",
]

AGGREGATES = ("last", "best", "mean")
DIRECTIONS = ("max", "min")

# Name tokens that say "lower is better" / "higher is better". A name is split into tokens at anything
# that is not a letter or digit and at camelCase boundaries; the right-most token that is known decides.
# fmt: off
_MINIMISE = frozenset({
    "loss", "losses", "error", "errors", "err", "mse", "mae", "rmse", "rmsle", "msle", "mape", "smape", "nll",
    "perplexity", "ppl", "wer", "cer", "ter", "crossentropy", "xent", "ce", "bce", "kl", "kld", "divergence",
    "hinge", "fid", "lpips", "eer", "regret", "distance",
})
_MAXIMISE = frozenset({
    "acc", "accuracy", "top1", "top5", "f1", "fbeta", "auc", "auroc", "auprc", "precision", "prec", "recall", "iou",
    "miou", "jaccard", "dice", "map", "ap", "ndcg", "mrr", "bleu", "rouge", "meteor", "r2", "score", "psnr", "ssim",
    "kappa", "mcc", "reward", "return", "sensitivity", "specificity",
})
# fmt: on
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^0-9a-z]+")


def infer_direction(name: str) -> Optional[str]:
    """Whether a larger value of metric ``name`` is better (``"max"``), worse (``"min"``), or unknown (``None``).

    Args:
        name: A metric name such as ``val_acc``, ``train/loss`` or ``valMeanSquaredError``.

    Returns:
        ``"max"`` for accuracy-like names, ``"min"`` for loss- and error-like names, ``None`` otherwise.

    Example:
        >>> infer_direction("val_acc"), infer_direction("train_loss"), infer_direction("lr")
        ('max', 'min', None)
    """
    tokens = [t for t in _SPLIT.split(_CAMEL.sub("_", str(name)).lower()) if t]
    for token in reversed(tokens):
        for candidate in (token, token.rstrip("0123456789")):
            if candidate in _MINIMISE:
                return "min"
            if candidate in _MAXIMISE:
                return "max"
    return None


def resolve_direction(name: str, directions: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The direction of ``name``: an explicit entry in ``directions`` wins over :func:`infer_direction`.

    Example:
        >>> resolve_direction("val_acc", {"val_acc": "min"}), resolve_direction("val_acc")
        ('min', 'max')
    """
    if directions and name in directions:
        return _validate_direction(directions[name], f"directions[{name!r}]")
    return infer_direction(name)


def aggregate(
    values: Iterable[float], how: str = "last", direction: Optional[str] = None, *, order: Optional[Sequence] = None
) -> float:
    """Reduce one run's series of one metric to a single number.

    Args:
        values: The values in recording order (or in any order, with ``order`` giving the recording order).
        how: ``"last"``, ``"best"`` or ``"mean"``.
        direction: ``"max"`` or ``"min"``; required when ``how="best"``.
        order: Optional sort keys (for example ``seq``) of the same length as ``values``.

    Returns:
        The aggregate, NaN when there is no value (``last``) or no finite value (``best``, ``mean``).

    Example:
        >>> aggregate([3.0, 1.0, 2.0], "last", order=[0, 2, 1])
        1.0
        >>> aggregate([0.7, float("inf"), 0.8], "best", "max")
        0.8
    """
    array = _validate_aggregate(values, how, direction, order)
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


@dataclass(frozen=True)
class AggregateResult:
    """The per-run aggregates of a metrics table.

    Attributes:
        table: One row per group: the key columns, then ``value`` (float64; NaN when not finite).
        how: The aggregate that was computed.
        skipped: Metric names left out because ``how="best"`` and their direction is unknown.
    """

    table: pa.Table
    how: str
    skipped: tuple[str, ...] = ()


def aggregate_table(
    table: pa.Table,
    how: str = "last",
    *,
    keys: Sequence[str] = ("run", "stage", "name"),
    directions: Optional[Mapping[str, str]] = None,
    order: str = "seq",
    value: str = "value",
    name: str = "name",
) -> AggregateResult:
    """Aggregate every group of rows (by default one metric of one stage of one run) of a long metrics table.

    Args:
        table: A long table with the ``keys`` columns, an ``order`` column and a numeric ``value`` column.
        how: ``"last"`` (value with the largest ``order``), ``"best"`` or ``"mean"`` (finite values only).
        keys: The columns that identify one series.
        directions: Metric name -> ``"max"``/``"min"``, overriding :func:`infer_direction` for ``best``.
        order: The column giving the recording order.
        value: The value column.
        name: The column holding metric names (used to find each metric's direction for ``best``).

    Returns:
        An :class:`AggregateResult`. With ``best``, metrics of unknown direction are left out and listed
        in ``skipped``.

    Example:
        >>> import pyarrow as pa
        >>> t = pa.table({"run": [0, 0, 1], "name": ["acc"] * 3, "seq": [0, 1, 0], "value": [0.5, 0.7, 0.6]})
        >>> aggregate_table(t, "best", keys=["run", "name"]).table.column("value").to_pylist()
        [0.7, 0.6]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = _validate_aggregate_table(table, how, keys, directions, (order, value, name))
    values = pc.cast(table.column(value), pa.float64()).fill_null(math.nan)
    work = pa.table({**{k: table.column(k) for k in keys}, "_order": table.column(order), "_v": values})
    skipped: list[str] = []
    if how == "best":
        names = [n for n in pc.unique(table.column(name)).to_pylist() if n is not None]
        resolved = {n: resolve_direction(n, directions) for n in names}
        skipped = sorted(n for n, d in resolved.items() if d is None)
        maximise = pa.array([n for n, d in resolved.items() if d == "max"], type=pa.string())
        keep = pc.invert(pc.is_in(table.column(name), value_set=pa.array(skipped, type=pa.string())))
        work = work.append_column("_max", pc.is_in(table.column(name), value_set=maximise)).filter(keep)
    if how == "last":
        order_values = work.column("_order").to_numpy()
        if order_values.size and not np.all(order_values[1:] >= order_values[:-1]):
            work = work.take(pa.array(np.argsort(order_values, kind="stable")))
        out = work.group_by(keys, use_threads=False).aggregate([("_v", "last")])
        result = out.column("_v_last")
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
    return AggregateResult(final.sort_by([(k, "ascending") for k in keys]), how, tuple(skipped))


def _validate_direction(direction: object, label: str = "direction") -> str:
    if direction not in DIRECTIONS:
        raise ValueError(f"`{label}` must be 'max' or 'min'. Received: {label}={direction!r}.")
    return str(direction)


def _validate_how(how: object) -> None:
    if how not in AGGREGATES:
        raise ValueError(f"`how` must be one of {', '.join(AGGREGATES)}. Received: how={how!r}.")


def _validate_aggregate(
    values: Iterable[float], how: str, direction: Optional[str], order: Optional[Sequence]
) -> np.ndarray:
    _validate_how(how)
    if how == "best":
        if direction is None:
            raise ValueError("`direction` must be 'max' or 'min' when how='best'. Received: direction=None.")
        _validate_direction(direction)
    try:
        array = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`values` must be numbers. Received: values of type {type(values).__name__} ({exc}).") from exc
    if array.ndim != 1:
        raise ValueError(f"`values` must be one-dimensional. Received: values with shape {array.shape}.")
    if order is not None and len(order) != array.size:
        raise ValueError(f"`order` must have one key per value. Received: {len(order)} keys for {array.size} values.")
    return array


def _validate_aggregate_table(
    table: pa.Table,
    how: str,
    keys: Sequence[str],
    directions: Optional[Mapping[str, str]],
    columns: tuple[str, str, str],
) -> list[str]:
    import pyarrow as pa

    _validate_how(how)
    if not isinstance(table, pa.Table):
        raise TypeError(f"`table` must be a pyarrow.Table. Received: table of type {type(table).__name__}.")
    order, value, name = columns
    needed = [*keys, order, value] + ([name] if how == "best" else [])
    missing = [c for c in needed if c not in table.column_names]
    if missing:
        raise ValueError(f"`table` lacks column(s) {', '.join(missing)}. Received: columns {table.column_names}.")
    if not (
        pa.types.is_integer(table.schema.field(value).type) or pa.types.is_floating(table.schema.field(value).type)
    ):
        raise TypeError(f"`table` column `{value}` must be numeric. Received: {table.schema.field(value).type}.")
    for metric, direction in (directions or {}).items():
        _validate_direction(direction, f"directions[{metric!r}]")
    return list(keys)
