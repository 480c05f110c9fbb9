"""read_last_values (streamed per-run last values) equals aggregate_table(read_metrics(...), "last")."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deviate_cb.report.reading.metrics import last_values
from deviate_cb.report.reading.metrics.last_values import read_last_values
from deviate_cb.report.reading.metrics.long_table import read_metrics
from deviate_cb.report.reading.runs import find_runs, partition_base
from deviate_cb.stats.aggregation.arrow import aggregate_table
from deviate_cb.store.run_directory import RunDirectory, run_path


def _write(root: Path, replica: int, table: pa.Table, variant: str = "a") -> None:
    run = RunDirectory(run_path(root, "exp", variant, replica))
    run.update_manifest(status="completed")
    pq.write_table(table, run.metrics_path)


def _reference(root: Path) -> tuple[list[dict], list[str]]:
    warnings: list[str] = []
    runs = find_runs(root)
    table = read_metrics(runs, partition_base(root), warnings)
    last = aggregate_table(table, "last", keys=("run", "stage", "name")).table
    lookup = {i: r for i, r in enumerate(runs)}
    rows = [
        {
            "experiment": lookup[r["run"]].experiment,
            "variant": lookup[r["run"]].variant,
            "replica": lookup[r["run"]].replica,
            **r,
        }
        for r in last.to_pylist()
    ]
    return rows, warnings


def _same(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert {k: v for k, v in g.items() if k != "value"} == {k: v for k, v in w.items() if k != "value"}
        assert (math.isnan(g["value"]) and math.isnan(w["value"])) or g["value"] == w["value"]


@pytest.mark.parametrize("engine", ["pyarrow", "duckdb", "auto"])
def test_matches_aggregate_table_on_awkward_files(tmp_path: Path, engine: str, monkeypatch) -> None:
    if engine == "duckdb":
        pytest.importorskip("duckdb")
        monkeypatch.setattr(last_values, "_stream_last", None)  # DuckDB must do every numeric file itself
    rng = np.random.default_rng(0)
    for k in range(4):
        n = 60
        seq = rng.permutation(n) if k % 2 else np.arange(n)  # unsorted seq in odd runs
        seq[5] = seq[6] = seq.max()  # a tie on the largest seq: the later row wins
        stage = rng.choice(["train", "val", None], n).tolist()
        name = rng.choice(["acc", "loss", None], n).tolist()
        value = rng.normal(size=n)
        value[rng.integers(0, n, 5)] = np.nan
        values = pa.array(value, mask=rng.random(n) < 0.1)
        if k == 3:
            values = pa.array(rng.integers(0, 10, n))  # an integer value column
        table = pa.table({"seq": seq, "stage": stage, "name": name, "value": values})
        _write(tmp_path, k, table)
    _write(tmp_path, 10, pa.table({"seq": [0, 1], "stage": ["val"] * 2, "name": ["x"] * 2, "value": ["1.5", "2"]}))
    _write(tmp_path, 11, pa.table({"seq": [0, 1], "stage": ["val"] * 2, "name": ["y"] * 2, "value": ["1", "oops"]}))
    bad = RunDirectory(run_path(tmp_path, "exp", "b", 0))
    bad.update_manifest(status="completed")
    bad.metrics_path.write_bytes(b"not parquet")
    _write(tmp_path, 1, pa.table({"seq": [0], "name": ["z"], "value": [1.0]}), variant="c")  # no stage column
    want, want_warnings = _reference(tmp_path)
    warnings: list[str] = []
    got = read_last_values(find_runs(tmp_path), partition_base(tmp_path), warnings, engine=engine).to_pylist()
    _same(got, want)
    assert sorted(warnings) == sorted(want_warnings)
    assert any("oops" in w for w in warnings) and any("not a readable" in w for w in warnings)


@pytest.mark.parametrize("engine", ["pyarrow", "auto"])
def test_empty(tmp_path: Path, engine: str) -> None:
    RunDirectory(run_path(tmp_path, "exp", "a", 0)).update_manifest(status="completed")
    table = read_last_values(find_runs(tmp_path), partition_base(tmp_path), [], engine=engine)
    assert table.num_rows == 0 and table.column_names == [
        "experiment",
        "variant",
        "replica",
        "run",
        "stage",
        "name",
        "value",
    ]


def test_duckdb_is_not_imported_by_the_package() -> None:
    import subprocess
    import sys

    modules = "deviate_cb, deviate_cb.report.reading.metrics.last_values, deviate_cb.stats"
    code = f"import sys, {modules}; print('duckdb' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_duckdb_fast_path_on_store_files(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("duckdb")
    rng = np.random.default_rng(1)
    for k in range(3):
        n = 50
        seq = rng.permutation(n) if k else np.arange(n)
        seq[3] = seq[4] = seq.max()
        table = pa.table(
            {
                "seq": seq,
                "stage": rng.choice(["train", "val", None], n).tolist(),
                "name": rng.choice(["acc", "loss", None], n).tolist(),
                "value": pa.array(rng.normal(size=n), mask=rng.random(n) < 0.2),
            }
        )
        _write(tmp_path, k, table)
    want, _ = _reference(tmp_path)
    monkeypatch.setattr(last_values, "_check_file", None)  # one DuckDB query must do it all
    monkeypatch.setattr(last_values, "_stream_last", None)
    got = read_last_values(find_runs(tmp_path), partition_base(tmp_path), [], engine="duckdb").to_pylist()
    _same(got, want)
