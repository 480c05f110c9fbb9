"""best and mean reduced by DuckDB while it streams (no summaries) equal aggregate_table of the whole long table."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from deviate_cb.report.answers.summary import build_report
from deviate_cb.report.reading.loading import load_per_run
from deviate_cb.report.reading.metrics import footers
from deviate_cb.report.reading.metrics import scan as scan_module
from deviate_cb.report.reading.runs import find_runs
from deviate_cb.store.run_directory import RunDirectory, run_path

pytest.importorskip("duckdb")


def _study(root: Path) -> None:
    rng = np.random.default_rng(7)
    for k in range(5):
        run = RunDirectory(run_path(root, "exp", "a" if k < 3 else "b", k))
        run.update_manifest(status="completed")
        n = 80
        value = rng.normal(size=n)
        value[rng.integers(0, n, 6)] = np.nan
        value[rng.integers(0, n, 2)] = np.inf
        if k == 4:
            value[:] = np.nan  # a run with no finite value at all: best and mean are NaN
        run.metrics().append(
            {
                "step": np.arange(n),
                "epoch": np.arange(n) // 10,
                "stage": rng.choice(["train", "val"], n).tolist(),
                "scope": ["step"] * n,
                "name": rng.choice(["acc", "loss", "lr"], n).tolist(),
                "value": value,
                "wall_time": np.zeros(n),
            }
        )


@pytest.mark.parametrize("how", ["best", "mean"])
def test_equals_the_long_table(tmp_path: Path, how: str, monkeypatch) -> None:
    _study(tmp_path)
    monkeypatch.setattr(footers, "footer_summary", lambda metadata: None)  # no summaries: DuckDB reduces
    got = load_per_run(tmp_path, aggregate=how)
    monkeypatch.setattr(scan_module, "import_duckdb", lambda required: None)  # and without DuckDB: the long table
    want = load_per_run(tmp_path, aggregate=how)
    assert got.warnings == want.warnings
    skipped = [w.split("`")[1] for w in got.warnings if "cannot tell" in w]
    assert skipped == (["train/lr", "val/lr"] if how == "best" else [])
    assert [row[:4] for row in got.rows] == [row[:4] for row in want.rows]  # experiment, variant, run, metric
    for (*_, g), (*_, w) in zip(got.rows, want.rows, strict=True):
        assert (math.isnan(g) and math.isnan(w)) or g == pytest.approx(w, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("how", ["best", "mean"])
def test_report_is_the_same_with_and_without_duckdb(tmp_path: Path, how: str, monkeypatch) -> None:
    _study(tmp_path)
    monkeypatch.setattr(footers, "footer_summary", lambda metadata: None)
    streamed = build_report(tmp_path, aggregate=how)
    monkeypatch.setattr(scan_module, "import_duckdb", lambda required: None)
    materialised = build_report(tmp_path, aggregate=how)
    assert streamed.warnings == materialised.warnings
    assert len(streamed.rows) == len(materialised.rows) > 0
    for s, m in zip(streamed.rows, materialised.rows, strict=True):
        assert (s.experiment, s.variant, s.metric, s.n, s.n_nonfinite) == (
            m.experiment,
            m.variant,
            m.metric,
            m.n,
            m.n_nonfinite,
        )
        assert s.mean == pytest.approx(m.mean, rel=1e-12, nan_ok=True)
        assert s.std == pytest.approx(m.std, rel=1e-9, nan_ok=True)


def test_a_file_that_is_not_a_store_file_falls_back(tmp_path: Path, monkeypatch) -> None:
    _study(tmp_path)
    bad = RunDirectory(run_path(tmp_path, "exp", "a", 9))
    bad.update_manifest(status="completed")
    bad.metrics_path.write_bytes(b"not parquet")
    monkeypatch.setattr(footers, "footer_summary", lambda metadata: None)
    scan = scan_module.SeriesScan(
        [str(r.metrics_path) for r in find_runs(tmp_path)], reduce="summary"
    )  # DuckDB cannot read the bad file, so nothing is reduced: the report reads and warns file by file
    assert str(bad.metrics_path) in scan.uncovered and scan.result() == {}
    report = build_report(tmp_path, aggregate="best")
    assert any("not a readable Parquet file" in w for w in report.warnings)
    assert {r.n for r in report.rows if r.variant == "a"} == {3}


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"`reduce` must be one of last, summary\. Received: reduce='max'"):
        scan_module.SeriesScan([], reduce="max")
