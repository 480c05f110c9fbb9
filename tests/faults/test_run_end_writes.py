"""The run's end writes (issue 30): cheaper, and still exactly what pyarrow writes for the same rows.

``MetricsFile.append`` and ``append_timings_part(compact=True)`` serialize the Parquet file in memory and hand it
to ``atomic_write_bytes`` in one go, read the file and the parts once, and build columns without a Python list
per null column. What they write must not change: here the files are compared byte for byte with
``pq.write_table`` of the same rows built the plain way (dictionary encoding on the string columns only, as the
store writes), the inputs may be lists or NumPy arrays, a file and
parts an earlier process left are still merged, and a failed write leaves nothing behind.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deviate_cb.store.atomic import atomic_write_bytes
from deviate_cb.store.footer_summary import SERIES_KEY, footer_summary, with_summary
from deviate_cb.store.metrics import MetricsFile, metrics_schema
from deviate_cb.store.parts import list_parts, parts_dir
from deviate_cb.store.timings import TIMINGS_FILE, StepColumns, append_timings_part, read_timings, timings_schema

REPO = Path(__file__).resolve().parents[2]


def metric_columns(steps: int) -> dict[str, list[Any]]:
    """What a run's end hands over: two values a step, then a few epoch values (one NaN, one without epoch)."""
    columns: dict[str, list[Any]] = {k: [] for k in ("name", "step", "epoch", "stage", "scope", "wall_time", "value")}
    for step in range(steps):
        for name in ("loss", "acc"):
            for key, value in zip(
                columns, (name, step + 1, step // 10, "train", "step", 1.7e9 + step, 1.0 / (step + 1)), strict=True
            ):
                columns[key].append(value)
    for key, values in (
        ("name", ["loss", "acc", "score"]),
        ("step", [steps, steps, steps]),
        ("epoch", [0, 0, None]),
        ("stage", ["val", "val", "final"]),
        ("scope", ["epoch", "epoch", "final"]),
        ("wall_time", [1.8e9, 1.8e9, 1.8e9]),
        ("value", [0.5, math.nan, -math.inf]),
    ):
        columns[key] += values
    return columns


def plain_metrics_file(columns: dict[str, list[Any]], first_seq: int = 0) -> bytes:
    """The file ``pq.write_table`` writes for these rows, built the plain way (a Python list per column)."""
    n = len(columns["value"])
    data = {
        **columns,
        "seq": list(range(first_seq, first_seq + n)),
        "finite": [math.isfinite(v) for v in columns["value"]],
    }
    schema = metrics_schema()
    table = with_summary(pa.table({f.name: pa.array(data[f.name], type=f.type) for f in schema}, schema=schema))
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, use_dictionary=[f.name for f in schema if f.type == pa.string()])
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("steps", [0, 1, 300])
def test_metrics_at_the_run_end_are_the_file_pyarrow_writes_for_the_same_rows(tmp_path: Path, steps: int) -> None:
    columns = metric_columns(steps)
    metrics = MetricsFile(tmp_path / "metrics.parquet")
    assert metrics.append(columns) == len(columns["value"])
    assert metrics.path.read_bytes() == plain_metrics_file(columns)
    assert metrics.summary == pq.read_schema(metrics.path).metadata[SERIES_KEY]
    assert footer_summary(pq.read_metadata(metrics.path)) is not None
    assert not parts_dir(metrics.path).exists() and os.listdir(tmp_path) == ["metrics.parquet"]


def test_numpy_columns_write_the_same_file_as_lists(tmp_path: Path) -> None:
    columns = metric_columns(40)
    arrays = {**columns, **{key: np.asarray(columns[key]) for key in ("step", "wall_time", "value")}}
    assert arrays["step"].dtype == np.int64 and isinstance(arrays["epoch"], list)  # epoch holds a None
    MetricsFile(tmp_path / "lists.parquet").append(columns)
    MetricsFile(tmp_path / "arrays.parquet").append(arrays)
    assert (tmp_path / "lists.parquet").read_bytes() == (tmp_path / "arrays.parquet").read_bytes()


def test_the_run_directory_is_made_when_it_does_not_exist_yet(tmp_path: Path) -> None:
    path = tmp_path / "not" / "yet" / "metrics.parquet"
    assert MetricsFile(path).append(metric_columns(2)) == 7
    assert pq.read_table(path).num_rows == 7


EARLIER_PROCESS = """
import sys
from pathlib import Path
from deviate_cb.store.metrics import MetricsFile
f = MetricsFile(Path(sys.argv[1]) / "metrics.parquet")
row = {"step": [1], "epoch": [0], "stage": ["train"], "scope": ["step"], "name": ["loss"], "wall_time": [0.0]}
f.append({**row, "value": [1.0]})         # compacted into metrics.parquet
f.append_part({**row, "value": [2.0]})    # then a part, left for whoever comes next (a resumed run)
f.append_part({**row, "value": [3.0]})
"""


def test_a_file_and_parts_an_earlier_process_left_are_merged_once(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-c", textwrap.dedent(EARLIER_PROCESS), str(tmp_path)], check=True, env=env)
    path = tmp_path / "metrics.parquet"
    assert pq.read_table(path).num_rows == 1 and len(list_parts(path)) == 2
    metrics = MetricsFile(path)
    columns = {"step": [2, 2], "epoch": [0, 0], "stage": ["val"] * 2, "scope": ["epoch"] * 2,
               "name": ["loss", "acc"], "value": [4.0, 5.0], "wall_time": [0.0, 0.0]}  # fmt: skip
    assert metrics.append(columns) == 2
    table = pq.read_table(path)
    assert table.column("seq").to_pylist() == [0, 1, 2, 3, 4]  # seq continues after the earlier process's rows
    assert table.column("value").to_pylist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert not parts_dir(path).exists()
    assert footer_summary(pq.read_metadata(path))["series"][0][:4] == ["train", "loss", 2, 3.0]
    assert MetricsFile(path).compact() == 0 and pq.read_table(path).num_rows == 5


def test_an_empty_parts_folder_is_still_removed_by_the_run_end(tmp_path: Path) -> None:
    metrics = MetricsFile(tmp_path / "metrics.parquet")
    parts_dir(metrics.path).mkdir()  # a compaction killed after deleting the last part, before the folder
    (tmp_path / "timings.parts").mkdir()
    metrics.append(metric_columns(1))
    append_timings_part(tmp_path, StepColumns(["train"], [0], [1], [0.5], [False]), [], attempt=1, compact=True)
    assert sorted(os.listdir(tmp_path)) == ["metrics.parquet", TIMINGS_FILE]


def plain_timings_file(rows: list[dict[str, Any]]) -> bytes:
    schema = timings_schema()
    table = pa.table({f.name: pa.array([r.get(f.name) for r in rows], type=f.type) for f in schema}, schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, use_dictionary=[f.name for f in schema if f.type == pa.string()])
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("with_ops", [False, True])
def test_timings_at_the_run_end_are_the_file_pyarrow_writes_for_the_same_rows(tmp_path: Path, with_ops: bool) -> None:
    n = 250
    columns = StepColumns(
        ["train"] * (n - 1) + ["val"], [k // 50 for k in range(n)], list(range(n)), [1e-3 * (k % 7) for k in range(n)],
        [k < 5 for k in range(n)],
    )  # fmt: skip
    ops = [
        {"op": "aten::mm", "device_type": "cpu", "calls": 3, "self_time_us": 1.5, "total_time_us": 2.0, "window": 0,
         "source": "torch"},
    ] if with_ops else []  # fmt: skip
    assert append_timings_part(tmp_path, columns, ops, attempt=1, compact=True) == tmp_path / TIMINGS_FILE
    rows = [{"kind": "step", **dict(zip(StepColumns._fields, row, strict=True))} for row in zip(*columns, strict=True)]
    rows += [{"kind": "op", **op} for op in ops]
    assert (tmp_path / TIMINGS_FILE).read_bytes() == plain_timings_file(rows)
    assert os.listdir(tmp_path) == [TIMINGS_FILE]
    # NumPy columns give the same file
    arrays = StepColumns(columns.stage, np.asarray(columns.epoch), np.asarray(columns.step),
                         np.asarray(columns.wall_s), np.asarray(columns.profiled))  # fmt: skip
    other = tmp_path / "other"
    other.mkdir()
    append_timings_part(other, arrays, ops, attempt=1, compact=True)
    assert (other / TIMINGS_FILE).read_bytes() == (tmp_path / TIMINGS_FILE).read_bytes()
    assert read_timings(other).num_rows == n + len(ops)


def test_an_atomic_write_of_a_buffer_is_exact_and_a_failed_one_leaves_nothing(tmp_path: Path) -> None:
    data = np.random.default_rng(0).integers(0, 256, 3 * 2**20 + 7, dtype=np.uint8).tobytes()
    target = tmp_path / "big.bin"
    atomic_write_bytes(target, memoryview(pa.py_buffer(data)))  # a pyarrow buffer, as the Parquet writes hand over
    assert target.read_bytes() == data
    with pytest.raises(TypeError):
        atomic_write_bytes(target, "not bytes")  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == ["big.bin"] and target.read_bytes() == data  # no temporary file, old file kept
    with pytest.raises(FileNotFoundError):
        atomic_write_bytes(tmp_path / "missing" / "x.bin", b"x")
    assert os.listdir(tmp_path) == ["big.bin"]
