"""Per-run aggregation: reduce one metric's series within one run to a single number.

Five aggregates: ``last`` (the value recorded last, by ``seq``), ``best`` (the maximum of an
accuracy-like metric, the minimum of a loss-like one), ``mean``, and ``at_step`` / ``at_epoch`` (the value
recorded at global step ``at`` / epoch ``at``; the last by ``seq`` if several rows match; NaN, and the run
counted as missing, if none does). ``best`` and ``mean`` use finite values only; ``last`` and ``at_*`` return
whatever was recorded, so a run that ended in NaN aggregates to NaN (and the across-run statistics then leave
it out and count it). ``how`` may also be written ``"at_step=S"`` / ``"at_epoch=E"`` (see :func:`parse_aggregate`).

Example:
    >>> aggregate([0.9, 0.5, 0.7], "best", infer_direction("val_loss"))
    0.5
    >>> aggregate([0.1, float("nan")], "mean")
    0.1
    >>> aggregate([0.2, 0.4, 0.6], "at_step=20", steps=[10, 20, 30])
    0.4
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
    "AT_AGGREGATES",
    "DIRECTIONS",
    "AggregateResult",
    "aggregate",
    "aggregate_table",
    "infer_direction",
    "parse_aggregate",
    "resolve_direction",
]

# The aggregates that need no argument (what `deviate report --aggregate` accepts) and those that need `at`.
AGGREGATES = ("last", "best", "mean")
AT_AGGREGATES = ("at_step", "at_epoch")
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


def parse_aggregate(how: str, at: Optional[int] = None) -> tuple[str, Optional[int]]:
    """Split an aggregate spelled ``"at_step=S"`` / ``"at_epoch=E"`` into its name and its step or epoch.

    Args:
        how: ``"last"``, ``"best"``, ``"mean"``, ``"at_step"``, ``"at_epoch"``, ``"at_step=S"`` or ``"at_epoch=E"``.
        at: The step or epoch, when ``how`` is ``"at_step"`` or ``"at_epoch"`` without ``=``.

    Returns:
        ``(name, at)``; ``at`` is ``None`` for ``last``, ``best`` and ``mean``.

    Example:
        >>> parse_aggregate("at_epoch=9"), parse_aggregate("at_step", at=100), parse_aggregate("best")
        (('at_epoch', 9), ('at_step', 100), ('best', None))
    """
    return _validate_parse_aggregate(how, at)


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


def _validate_direction(direction: object, label: str = "direction") -> str:
    if direction not in DIRECTIONS:
        raise ValueError(f"`{label}` must be 'max' or 'min'. Received: {label}={direction!r}.")
    return str(direction)


def _validate_how(how: object, at: object = None) -> tuple[str, Optional[int]]:
    names = (*AGGREGATES, *AT_AGGREGATES)
    spec = how
    if isinstance(how, str) and "=" in how:
        spec, _, text = how.partition("=")
        if spec not in AT_AGGREGATES:
            raise ValueError(f"`how` must be one of {', '.join(AGGREGATES)}. Received: how={how!r}.")
        try:
            parsed = int(text.strip())
        except ValueError:
            raise ValueError(f"`how` must give an integer after '='. Received: how={how!r}.") from None
        if at is not None and at != parsed:
            raise ValueError(f"`at` contradicts `how`. Received: how={how!r}, at={at!r}.")
        at = parsed
    if spec not in names:
        raise ValueError(f"`how` must be one of {', '.join(AGGREGATES)}. Received: how={how!r}.")
    if spec in AT_AGGREGATES:
        if at is None:
            raise ValueError(f"`at` must be given when how={spec!r}. Received: at=None.")
        if isinstance(at, bool) or not isinstance(at, (int, np.integer)):
            raise TypeError(f"`at` must be an integer. Received: at={at!r}.")
        return str(spec), int(at)
    if at is not None:
        raise ValueError(f"`at` applies to at_step and at_epoch only. Received: how={how!r}, at={at!r}.")
    return str(spec), None


def _validate_parse_aggregate(how: object, at: object) -> tuple[str, Optional[int]]:
    return _validate_how(how, at)


def _validate_aggregate(
    values: Iterable[float],
    how: str,
    direction: Optional[str],
    order: Optional[Sequence],
    at: Optional[int],
    steps: Optional[Sequence[int]],
    epochs: Optional[Sequence[int]],
) -> tuple[np.ndarray, str, Optional[int], Optional[Sequence[int]]]:
    how, at = _validate_how(how, at)
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

    how, at = _validate_how(how, at)
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
        _validate_direction(direction, f"directions[{metric!r}]")
    return list(keys), how, at
