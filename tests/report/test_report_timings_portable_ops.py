"""deviate report ranks TensorFlow ops under their portable names when replicas ran on CPUs with and without oneDNN.

timings.parquet keeps the names as recorded; the report groups ``_MklMatMul`` and ``_MklNativeFusedMatMul``
(oneDNN) with ``MatMul`` and ``_FusedMatMul`` (TensorFlow's own kernels) and shows the recorded names beside them.
"""

from __future__ import annotations

import json
from pathlib import Path

from deviate_cb.report.answers.timings import build_timings
from deviate_cb.report.reading.runs import find_runs
from deviate_cb.store.timings import read_timings, write_timings
from tests.helpers.report_study import run_cli

RECORDED = {  # replica -> ops as the TensorFlow profiler named them on its machine: (op, calls, self time in us)
    0: [("_MklMatMul", 4, 300.0), ("_MklNativeFusedMatMul", 2, 100.0), ("_MklNativeFusedConv2D", 2, 100.0)],
    1: [("MatMul", 4, 300.0), ("_FusedMatMul", 2, 100.0), ("_FusedConv2D", 2, 100.0)],
}


def _study(root: Path, make_run) -> None:
    for replica, ops in RECORDED.items():
        path = make_run(root, "cnn", "keras_tf", replica, [("val", "val_acc", 0.8)])
        steps = [{"stage": "train", "epoch": 0, "step": s, "wall_s": 0.01, "profiled": False} for s in range(3)]
        rows = [
            {"op": op, "device_type": "cpu", "calls": calls, "self_time_us": us, "total_time_us": us, "window": 0,
             "source": "tensorflow"}
            for op, calls, us in ops
        ]  # fmt: skip
        write_timings(path, steps, rows)


def test_top_ops_group_onednn_and_plain_kernels_and_keep_the_recorded_names(tmp_path: Path, make_run) -> None:
    _study(tmp_path, make_run)
    (group,) = build_timings(find_runs(tmp_path))
    assert [(t["op"], t["calls"], t["self_ms"]) for t in group.top_ops] == [("MatMul", 6.0, 0.4), ("Conv2D", 2.0, 0.1)]
    assert group.top_ops[0]["raw_ops"] == ["MatMul", "_FusedMatMul", "_MklMatMul", "_MklNativeFusedMatMul"]
    assert group.top_ops[0]["share"] == 0.8
    stored = {r["op"] for r in read_timings(find_runs(tmp_path)[0].path).to_pylist() if r["kind"] == "op"}
    assert stored == {op for op, _, _ in RECORDED[0]}  # the file keeps the names as recorded


def test_report_shows_portable_names_and_what_was_recorded(capsys, tmp_path: Path, make_run) -> None:
    _study(tmp_path, make_run)
    code, out, _ = run_cli(capsys, "report", str(tmp_path), "--format", "md")
    assert code == 0 and "recorded as" in out
    (matmul,) = [line for line in out.splitlines() if line.startswith("| MatMul ")]
    assert "_MklMatMul" in matmul and "_FusedMatMul" in matmul and "80.0%" in matmul
    code, out, _ = run_cli(capsys, "report", str(tmp_path), "--timings", "--format", "json")
    assert code == 0 and json.loads(out)[0]["n_runs"] == 2


def test_torch_only_ranking_has_no_recorded_as_column(capsys, tmp_path: Path, make_run) -> None:
    path = make_run(tmp_path, "mlp", "algo", 0, [("val", "val_acc", 0.8)])
    steps = [{"stage": "train", "epoch": 0, "step": 0, "wall_s": 0.01, "profiled": False}]
    op = {"op": "aten::addmm", "device_type": "cpu", "calls": 2, "self_time_us": 5.0, "total_time_us": 5.0}
    write_timings(path, steps, [{**op, "window": 0, "source": "torch"}])
    code, out, _ = run_cli(capsys, "report", str(tmp_path), "--format", "md")
    assert code == 0 and "aten::addmm" in out and "recorded as" not in out
