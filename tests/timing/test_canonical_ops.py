"""Backend-specific op names are grouped under the op they implement, so that two machines' timings compare.

Fast: no framework is imported. The names are those TensorFlow 2.21's profiler reports with oneDNN on
(``TF_ENABLE_ONEDNN_OPTS=1``, the default on CPUs with AVX-512 VNNI/BF16 or AMX) and off.
"""

from __future__ import annotations

import pytest

from deviate_cb.bench.stats import op_differences
from deviate_cb.profiling.ops import FUSED_OPS, canonical_op, top_ops

# Recorded by the TensorFlow profiler for the same tiny Conv2D + Dense model with oneDNN on and off
# (tests/timing/test_profile_windows.py), with their portable names.
TENSORFLOW_NAMES = [
    ("_MklMatMul", "MatMul"),
    ("_MklNativeFusedMatMul", "MatMul"),
    ("_MklNativeFusedConv2D", "Conv2D"),
    ("_MklNativeConv2DBackpropFilterWithBias", "Conv2DBackpropFilter"),
    ("MatMul", "MatMul"),
    ("_FusedMatMul", "MatMul"),
    ("_FusedConv2D", "Conv2D"),
    ("Conv2DBackpropFilter", "Conv2DBackpropFilter"),
    ("BiasAddGrad", "BiasAddGrad"),
    # other oneDNN kernels of TensorFlow 2.21
    ("_MklConv2D", "Conv2D"),
    ("_MklNativeConv2D", "Conv2D"),
    ("_MklFusedConv2D", "Conv2D"),
    ("_MklConv2DWithBias", "Conv2D"),
    ("__MklDummyConv2DWithBias", "Conv2D"),
    ("_MklNativePadWithFusedConv2D", "Conv2D"),
    ("_MklPadWithConv2D", "Conv2D"),
    ("_MklConv2DBackpropFilter", "Conv2DBackpropFilter"),
    ("_MklConv2DBackpropFilterWithBias", "Conv2DBackpropFilter"),
    ("_MklNativeConv2DBackpropInput", "Conv2DBackpropInput"),
    ("_MklNativeConv3DBackpropFilterV2", "Conv3DBackpropFilterV2"),
    ("_MklNativeFusedConv3D", "Conv3D"),
    ("_MklNativeFusedDepthwiseConv2dNative", "DepthwiseConv2dNative"),
    ("_MklFusedMatMul", "MatMul"),
    ("_MklBatchMatMulV2", "BatchMatMulV2"),
    ("_MklFusedBatchMatMulV2", "BatchMatMulV2"),
    ("_MklFusedBatchNormV3", "FusedBatchNormV3"),
    ("_MklNativeFusedBatchNormEx", "FusedBatchNormV3"),
    ("_FusedBatchNormEx", "FusedBatchNormV3"),
    ("_MklNativeFusedBatchNormGradV3", "FusedBatchNormGradV3"),
    ("_MklNativeMaxPoolGrad", "MaxPoolGrad"),
    ("_MklRelu", "Relu"),
    ("_MklEinsum", "Einsum"),
    ("_MklQuantizedConv2DWithBiasAndRelu", "QuantizedConv2DWithBiasAndRelu"),
]


@pytest.mark.parametrize(("raw", "portable"), TENSORFLOW_NAMES)
def test_tensorflow_names_map_to_the_op_they_implement(raw: str, portable: str) -> None:
    assert canonical_op(raw, "tensorflow") == portable
    assert canonical_op(portable, "tensorflow") == portable  # idempotent: a portable name stays


@pytest.mark.parametrize(
    "name",
    [
        "MyMklMatMul",  # a user op that merely contains "Mkl"
        "Custom_MklMatMul",
        "MklMatMul",  # no leading underscore: not oneDNN's prefix
        "_Mklish",  # no capital after the prefix
        "FusedBatchNormV3",  # ops a user can write keep their "Fused"
        "FusedPadConv2D",
        "FusedResizeAndPadConv2D",
        "_Send",  # TensorFlow's internal ops keep their underscore
        "_Retval",
        "Conv2D",
    ],
)
def test_other_tensorflow_names_are_kept(name: str) -> None:
    assert canonical_op(name, "tensorflow") == name


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("aten::mm", "torch"),
        ("aten::convolution_backward", "torch"),
        ("aten::_fused_adam_", "torch"),
        ("aten::mkldnn_convolution", "torch"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", "torch"),
        ("_MklMatMul", "torch"),  # only TensorFlow's names are rewritten
        ("_FusedMatMul", None),  # rows with no source are kept as recorded
        ("_MklMatMul", "jax"),
    ],
)
def test_names_of_other_profilers_are_kept(name: str, source: str | None) -> None:
    assert canonical_op(name, source) == name


def test_fused_ops_map_to_unfused_ops() -> None:
    assert all(not value.startswith(("_", "Mkl")) and value not in FUSED_OPS for value in FUSED_OPS.values())


def _row(op: str, calls: int, self_us: float, source: str = "tensorflow") -> dict:
    return {"op": op, "device_type": "cpu", "calls": calls, "self_time_us": self_us, "total_time_us": self_us,
            "source": source, "kind": "op"}  # fmt: skip


def test_top_ops_ranks_portable_names_and_keeps_the_recorded_ones() -> None:
    onednn = [
        _row("_MklMatMul", 4, 30.0),
        _row("_MklNativeFusedMatMul", 2, 20.0),
        _row("_MklNativeConv2DBackpropFilterWithBias", 2, 40.0),
        _row("aten::mm", 3, 1.0, source="torch"),
    ]
    ranked = top_ops(onednn)
    assert [(r["op"], r["calls"], r["self_time_us"]) for r in ranked] == [
        ("MatMul", 6, 50.0),
        ("Conv2DBackpropFilter", 2, 40.0),
        ("aten::mm", 3, 1.0),
    ]
    assert ranked[0]["raw_ops"] == ["_MklMatMul", "_MklNativeFusedMatMul"] and ranked[2]["raw_ops"] == ["aten::mm"]
    assert [r["op"] for r in top_ops(onednn, canonical=False)] == [
        "_MklNativeConv2DBackpropFilterWithBias",
        "_MklMatMul",
        "_MklNativeFusedMatMul",
        "aten::mm",
    ]


def test_two_machines_rank_the_same_ops() -> None:
    onednn = [
        _row("_MklMatMul", 4, 30.0),
        _row("_MklNativeFusedMatMul", 2, 20.0),
        _row("_MklNativeFusedConv2D", 2, 5.0),
    ]
    plain = [_row("MatMul", 4, 31.0), _row("_FusedMatMul", 2, 19.0), _row("_FusedConv2D", 2, 5.0)]
    key = [(r["op"], r["calls"]) for r in top_ops(onednn)]
    assert key == [(r["op"], r["calls"]) for r in top_ops(plain)] == [("MatMul", 6), ("Conv2D", 2)]


def test_op_differences_compare_a_tensorflow_op_across_kernel_names() -> None:
    off = [{"op": "_MklNativeConv2DBackpropFilterWithBias", "device_type": "cpu", "self_us_per_step": 10.0}]
    on = [{"op": "Conv2DBackpropFilter", "device_type": "cpu", "self_us_per_step": 25.0}]
    (row,) = op_differences(off, on, source="tensorflow")
    assert (row["op"], row["off_us"], row["on_us"], row["delta_us"], row["share"]) == (
        "Conv2DBackpropFilter",
        10.0,
        25.0,
        15.0,
        1.0,
    )
    assert row["raw_ops"] == ["Conv2DBackpropFilter", "_MklNativeConv2DBackpropFilterWithBias"]
    assert len(op_differences(off, on, source="tensorflow", canonical=False)) == 2
    assert len(op_differences(off, on)) == 2  # no source given or recorded: names are kept as recorded
    tagged = [{**r, "source": "tensorflow"} for r in off]  # a row's own source wins
    assert [r["op"] for r in op_differences(tagged, on)] == ["Conv2DBackpropFilter"]
