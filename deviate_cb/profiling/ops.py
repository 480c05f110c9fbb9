"""Op rows of profiled windows, summed: the ops that took the most time, under names that compare across machines.

Example:
    >>> rows = [
    ...     {"op": "_MklMatMul", "device_type": "cpu", "calls": 4, "self_time_us": 8.0, "total_time_us": 8.0,
    ...      "source": "tensorflow"},
    ...     {"op": "_MklNativeFusedMatMul", "device_type": "cpu", "calls": 2, "self_time_us": 4.0,
    ...      "total_time_us": 4.0, "source": "tensorflow"}]
    >>> [(r["op"], r["calls"], r["raw_ops"]) for r in top_ops(rows)]
    [('MatMul', 6, ['_MklMatMul', '_MklNativeFusedMatMul'])]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Optional

__all__ = ["FUSED_OPS", "canonical_op", "grouped_op", "top_ops"]

#: oneDNN's kernel prefixes of TensorFlow op types (``_MklNativeConv2D``, ``_MklMatMul``, ``__MklDummyConv2DWithBias``).
_ONEDNN_PREFIX = re.compile(r"^(?:__MklDummy|_MklNative|_Mkl)(?=[A-Z])")

#: Ops that TensorFlow's graph rewrites (Grappler's remapper, the oneDNN layout pass) put in place of an op and the
#: bias, activation or padding around it, by name without oneDNN's prefix or leading underscores, mapped to the op
#: they are built around. Ops a user can write (``FusedBatchNormV3``, ``FusedPadConv2D``) are not listed.
FUSED_OPS: dict[str, str] = {
    "FusedMatMul": "MatMul",
    "FusedBatchMatMulV2": "BatchMatMulV2",
    "FusedConv2D": "Conv2D",
    "Conv2DWithBias": "Conv2D",
    "PadWithConv2D": "Conv2D",
    "PadWithFusedConv2D": "Conv2D",
    "FusedConv3D": "Conv3D",
    "FusedDepthwiseConv2dNative": "DepthwiseConv2dNative",
    "Conv2DBackpropFilterWithBias": "Conv2DBackpropFilter",
    "FusedBatchNormEx": "FusedBatchNormV3",
    "FusedBatchNormGradEx": "FusedBatchNormGradV3",
    "FusedInstanceNorm": "InstanceNorm",
    "FusedMish": "Mish",
}


def canonical_op(name: str, source: Optional[str]) -> str:
    """The portable name of an op recorded by a profiler: what a run on another machine records for the same op.

    Only TensorFlow's names change (``source == "tensorflow"``); torch's (``aten::mm``, CUDA kernel names) and
    any other source's are returned as recorded. For TensorFlow:

    1. oneDNN's kernel prefix (``_MklNative``, ``_Mkl``, ``__MklDummy``, followed by a capital letter) is dropped:
       ``_MklMatMul`` is ``MatMul``, ``_MklNativeConv2DBackpropFilter`` is ``Conv2DBackpropFilter``.
    2. A fused op that TensorFlow's graph rewrites put in place of an op and its bias, activation or padding
       (:data:`FUSED_OPS`) is named after the op it is built around, with or without oneDNN:
       ``_FusedMatMul`` and ``_MklNativeFusedMatMul`` are ``MatMul``, ``_MklNativeFusedConv2D`` is ``Conv2D``,
       ``_MklNativeConv2DBackpropFilterWithBias`` is ``Conv2DBackpropFilter``. Which ops are fused depends on
       the device and on oneDNN, so only the base op compares across machines; the fused op's time includes its
       bias add or activation, so ``BiasAdd``, ``BiasAddGrad`` or ``Relu`` rows are smaller where fusion happened.

    Other names are kept, leading underscores included (``_Send``, ``Conv2D``); a name that merely contains
    ``Mkl`` elsewhere is not changed.

    Args:
        name: The op name as recorded (an op row's ``op``).
        source: The profiler that recorded it (an op row's ``source``): ``tensorflow``, ``torch`` or ``None``.

    Example:
        >>> [canonical_op(n, "tensorflow") for n in ("_MklMatMul", "_MklNativeFusedMatMul", "_FusedMatMul")]
        ['MatMul', 'MatMul', 'MatMul']
        >>> canonical_op("_MklNativeConv2DBackpropFilterWithBias", "tensorflow")
        'Conv2DBackpropFilter'
        >>> canonical_op("_MklNativeFusedConv2D", "tensorflow"), canonical_op("_MklConv2D", "tensorflow")
        ('Conv2D', 'Conv2D')
        >>> canonical_op("_MklFusedBatchNormV3", "tensorflow"), canonical_op("_FusedBatchNormEx", "tensorflow")
        ('FusedBatchNormV3', 'FusedBatchNormV3')
        >>> canonical_op("MyMklMatMul", "tensorflow"), canonical_op("_Send", "tensorflow")
        ('MyMklMatMul', '_Send')
        >>> canonical_op("aten::mm", "torch"), canonical_op("_MklMatMul", "torch")
        ('aten::mm', '_MklMatMul')
    """
    if source != "tensorflow":
        return name
    base = _ONEDNN_PREFIX.sub("", name, count=1)
    return FUSED_OPS.get(base.lstrip("_"), base)


def grouped_op(row: Mapping[str, Any], *, canonical: bool = True, source: Optional[str] = None) -> str:
    """The name an op row is grouped under: its portable name (:func:`canonical_op`) or, with ``canonical=False``,
    the name as recorded. ``source`` stands in for the profiler of rows that carry no ``source``.

    Example:
        >>> row = {"op": "_MklMatMul", "source": "tensorflow"}
        >>> grouped_op(row), grouped_op(row, canonical=False), grouped_op({"op": "_MklMatMul"}, source="tensorflow")
        ('MatMul', '_MklMatMul', 'MatMul')
    """
    return canonical_op(row["op"], row.get("source", source)) if canonical else row["op"]


def top_ops(
    op_rows: Iterable[Mapping[str, Any]], n: int = 10, device_type: Optional[str] = None, *, canonical: bool = True
) -> list[dict[str, Any]]:
    """The ``n`` ops with the most self time, summed over windows (and devices, unless ``device_type`` is given).

    Args:
        op_rows: Op rows (``op``, ``device_type``, ``calls``, ``self_time_us``, ``total_time_us``, ``source``);
            rows whose ``kind`` is not ``op`` are left out.
        n: How many ops to return.
        device_type: Only this device's rows, kept apart from other devices' (default: all devices together,
            ``device_type`` ``*``).
        canonical: Group the rows by :func:`canonical_op` (the default, so that machines compare), or by the
            name as recorded.

    Returns:
        Per op, most self time first: ``op``, ``device_type``, ``calls``, ``self_time_us``, ``total_time_us`` and
        ``raw_ops``, the names as recorded that were summed under ``op`` (sorted).

    Example:
        >>> rows = [{"op": "aten::mm", "device_type": "cpu", "calls": 2, "self_time_us": 5.0, "total_time_us": 6.0},
        ...         {"op": "aten::add", "device_type": "cpu", "calls": 1, "self_time_us": 9.0, "total_time_us": 9.0},
        ...         {"op": "aten::mm", "device_type": "cpu", "calls": 2, "self_time_us": 5.0, "total_time_us": 6.0}]
        >>> [(r["op"], r["self_time_us"], r["calls"]) for r in top_ops(rows, n=2)]
        [('aten::mm', 10.0, 4), ('aten::add', 9.0, 1)]
        >>> tf = [{"op": "_MklMatMul", "device_type": "cpu", "calls": 1, "self_time_us": 2.0, "total_time_us": 2.0,
        ...        "source": "tensorflow"}]
        >>> top_ops(tf)[0]["op"], top_ops(tf, canonical=False)[0]["op"]
        ('MatMul', '_MklMatMul')
    """
    totals: dict[tuple[str, str], dict[str, Any]] = {}
    for row in op_rows:
        if row.get("kind", "op") != "op" or (device_type is not None and row["device_type"] != device_type):
            continue
        op = grouped_op(row, canonical=canonical)
        key = (op, row["device_type"] if device_type is not None else "*")
        total = totals.setdefault(
            key,
            {"op": op, "device_type": key[1], "calls": 0, "self_time_us": 0.0, "total_time_us": 0.0, "raw_ops": set()},
        )
        total["calls"] += int(row["calls"])
        total["self_time_us"] += float(row["self_time_us"])
        total["total_time_us"] += float(row["total_time_us"])
        total["raw_ops"].add(row["op"])
    for total in totals.values():
        total["raw_ops"] = sorted(total["raw_ops"])
    return sorted(totals.values(), key=lambda r: (-r["self_time_us"], r["op"]))[:n]
