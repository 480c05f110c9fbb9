"""Reports read the per-series summaries in the store's footers, and get exactly what a scan gets."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from deviate_cb.report.answers.summary import build_report
from deviate_cb.report.reading.metrics import footers, scan
from deviate_cb.report.reading.metrics.last_values import read_last_values
from deviate_cb.report.reading.runs import find_runs, partition_base
from deviate_cb.store.footer_summary import SERIES_KEY, decode_summary, footer_summary, with_summary
from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.metrics import MetricsFile
from deviate_cb.store.run_directory import RunDirectory, run_path


def _study(root: Path) -> list[Path]:
    rng = np.random.default_rng(11)
    paths = []
    for k in range(6):
        run = RunDirectory(run_path(root, "exp", "algo" if k < 3 else "impl", k))
        run.update_manifest(status="completed")
        metrics = run.metrics()
        for flush in range(3):  # several flushes, as a callback writes at each epoch end
            n = 40
            value = rng.normal(size=n)
            value[rng.integers(0, n, 3)] = np.nan
            value[rng.integers(0, n, 1)] = -np.inf
            metrics.append(
                {
                    "step": np.arange(n) + 40 * flush,
                    "epoch": np.full(n, flush),
                    "stage": rng.choice(["train", "val"], n).tolist(),
                    "scope": ["step"] * n,
                    "name": rng.choice(["acc", "loss"], n).tolist(),
                    "value": value,
                    "wall_time": np.zeros(n),
                }
            )
        if k == 1:
            metrics.truncate(90)  # a resumed run drops what it records again
        if k == 2:
            metrics.append(
                {
                    "step": [200],
                    "epoch": [3],
                    "stage": ["val"],
                    "scope": ["epoch"],
                    "name": ["acc"],
                    "value": [math.nan],
                    "wall_time": [0.0],
                }
            )  # a run that ended in NaN: last is NaN, best and mean skip it
        paths.append(run.metrics_path)
    return paths


def _rows(report) -> list[tuple]:
    return [(r.experiment, r.variant, r.metric, r.n, r.n_nonfinite, r.mean, r.std, r.min, r.max) for r in report.rows]


def _same(a: list[tuple], b: list[tuple]) -> None:
    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        assert x[:5] == y[:5]
        for u, v in zip(x[5:], y[5:], strict=True):
            assert (math.isnan(u) and math.isnan(v)) or u == pytest.approx(v, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("how", ["last", "best", "mean"])
@pytest.mark.parametrize("scanner", ["duckdb", "pyarrow"])
def test_footers_give_what_a_scan_gives(tmp_path: Path, how: str, scanner: str, monkeypatch) -> None:
    paths = _study(tmp_path)
    assert all(footer_summary(pq.read_metadata(p)) is not None for p in paths)
    from_footers = build_report(tmp_path, aggregate=how)
    monkeypatch.setattr(footers, "footer_summary", lambda metadata: None)  # as if no file had a summary
    if scanner == "pyarrow":
        monkeypatch.setattr(scan, "import_duckdb", lambda required: None)
    scanned = build_report(tmp_path, aggregate=how)
    assert from_footers.warnings == scanned.warnings
    _same(_rows(from_footers), _rows(scanned))


def test_a_file_rewritten_with_fewer_rows_is_scanned(tmp_path: Path) -> None:
    paths = _study(tmp_path)
    table = pq.read_table(paths[0])
    kept = table.filter(pc.less(table.column("seq"), 50))  # pyarrow keeps the schema metadata: a stale summary
    assert SERIES_KEY in kept.schema.metadata
    pq.write_table(kept, paths[0])
    assert footer_summary(pq.read_metadata(paths[0])) is None
    want = {}  # the last value of each series of the rewritten file, by hand
    for row in kept.to_pylist():
        want[(row["stage"], row["name"])] = row["value"]
    runs = find_runs(tmp_path)
    got = read_last_values(runs, partition_base(tmp_path), []).to_pylist()
    mine = {(r["stage"], r["name"]): r["value"] for r in got if r["run"] == 0}
    assert mine.keys() == want.keys()
    assert all((math.isnan(mine[k]) and math.isnan(want[k])) or mine[k] == want[k] for k in want)


def test_summaries_that_do_not_parse_are_ignored() -> None:
    assert decode_summary(b"not json") is None
    assert decode_summary(b'{"version": 99, "rows": 1, "series": []}') is None
    assert decode_summary(b'{"version": 1, "rows": "x", "series": []}') is None


def test_empty_table_summary(tmp_path: Path) -> None:
    f = MetricsFile(tmp_path / "metrics.parquet")
    f.append(
        {
            "step": [0],
            "epoch": [0],
            "stage": ["val"],
            "scope": ["epoch"],
            "name": ["acc"],
            "value": [1.0],
            "wall_time": [0.0],
        }
    )
    assert f.truncate(0) == 1
    summary = footer_summary(pq.read_metadata(f.path))
    assert summary is not None and summary["rows"] == 0 and summary["series"] == []
    empty = with_summary(f.read().slice(0, 0))
    assert decode_summary(empty.schema.metadata[SERIES_KEY])["series"] == []


@pytest.mark.parametrize(
    "options",
    [
        {"aggregate": "best", "directions": {"loss": "max", "nothing": "min"}},
        {"aggregate": "last", "stage": "val"},
        {"aggregate": "mean", "metrics": ["train/*"]},
        {"aggregate": "best", "metrics": ["*acc"], "stage": "train"},
    ],
)
def test_filters_and_directions_match_the_long_table_path(tmp_path: Path, options: dict, monkeypatch) -> None:
    _study(tmp_path)
    fast = build_report(tmp_path, **options)  # from the summaries, in plain Python
    monkeypatch.setattr(footers, "footer_summary", lambda metadata: None)
    monkeypatch.setattr(scan, "import_duckdb", lambda required: None)
    slow = build_report(tmp_path, **options)  # the long table through aggregate_table
    assert fast.warnings == slow.warnings
    _same(_rows(fast), _rows(slow))


def _session_run(root: Path, values: list[float]) -> Path:
    from deviate_cb.capture.session import RunSession

    session = RunSession(out_dir=root, experiment="s", seed=0)
    run = session.open()
    for step, value in enumerate(values):
        session.recorder.update(step=step, epoch=0, stage="val", scope="epoch", name="acc", value=value, wall_time=0.0)
        session.flush()  # one flush per value: the manifest's copy follows every write
    session.close()
    return run.path


def test_the_manifest_copy_is_read_instead_of_the_footer(tmp_path: Path, monkeypatch) -> None:
    paths = [_session_run(tmp_path, [0.5, 0.6 + k / 100]) for k in range(3)]
    copy = json.loads((paths[0] / "run.json").read_text())["metrics_summary"]
    assert copy["series"] == [["val", "acc", 1, 0.6, 0.6, 0.5, 1.1, 2]] and copy["rows"] == 2
    assert copy["file_size"] == (paths[0] / "metrics.parquet").stat().st_size

    def no_footers(files, reduce):
        assert not files, "footers read although the manifests hold the summaries"
        return {}, []

    monkeypatch.setattr(footers, "footer_values", no_footers)
    row = build_report(tmp_path).rows[0]
    assert (row.n, round(row.mean, 4), round(row.max, 4)) == (3, 0.61, 0.62)


def test_a_changed_file_makes_the_copy_stale(tmp_path: Path) -> None:
    paths = [_session_run(tmp_path, [0.5, 0.6 + k / 100]) for k in range(2)]
    table = pq.read_table(paths[0] / "metrics.parquet")
    values = pc.multiply(table.column("value"), 2.0)  # same rows and seq: only the time and size give it away
    pq.write_table(
        table.set_column(table.schema.get_field_index("value"), "value", values), paths[0] / "metrics.parquet"
    )
    assert json.loads((paths[0] / "run.json").read_text())["metrics_summary"]["series"][0][3] == 0.6
    row = build_report(tmp_path).rows[0]
    assert sorted([row.min, row.max]) == [pytest.approx(0.61), pytest.approx(1.2)]  # 0.6 * 2 read from the file


def test_a_report_from_the_manifest_copies_loads_no_pyarrow(tmp_path: Path) -> None:
    """Every value comes from run.json: neither pyarrow (0.05-0.2 s to load) nor DuckDB is imported."""
    import subprocess
    import sys

    for k in range(3):
        _session_run(tmp_path, [0.5, 0.6 + k / 100])
    code = (
        "import sys; from deviate_cb.report.answers.summary import build_report; "
        f"row = build_report({str(tmp_path)!r}).rows[0]; "
        "print(row.n, round(row.max, 4), sorted(m for m in ('pyarrow', 'duckdb') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["3", "0.62", "[]"]


def test_deviate_report_reads_each_manifest_once(tmp_path: Path, monkeypatch, capsys) -> None:
    """The step-time and stability sections reuse the runs the report read: no second walk of DIR."""
    from deviate_cb.cli.main import main
    from deviate_cb.report.reading import runs as runs_module

    paths = [_session_run(tmp_path, [0.5, 0.6 + k / 100]) for k in range(3)]
    reads: list[str] = []
    real = runs_module.read_run_manifest

    def counting(path: str) -> RunManifest:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(runs_module, "read_run_manifest", counting)
    assert main(["report", str(tmp_path), "--format", "md"]) == 0
    assert sorted(reads) == sorted(str(p / "run.json") for p in paths)
    assert "| acc |" in capsys.readouterr().out
