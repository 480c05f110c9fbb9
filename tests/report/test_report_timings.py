"""deviate report shows the step-time spread across replicas and the top ops, from timings.parquet."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from deviate_cb.store.timings import write_timings
from tests.helpers.report_study import run_cli


def _timed_study(root: Path, make_run) -> dict[str, float]:
    medians = {}
    for k, base in enumerate([0.010, 0.011, 0.0145]):
        path = make_run(root, "mlp", "algo", k, [("val", "val_acc", 0.8 + k / 100)])
        walls = [base, base * 1.1, base * 0.9, base, 9.0]  # the last one was profiled: left out
        steps = [
            {"stage": "train", "epoch": 0, "step": s, "wall_s": w, "profiled": s == 4} for s, w in enumerate(walls)
        ]
        ops = (
            [
                {
                    "op": "aten::addmm",
                    "device_type": "cpu",
                    "calls": 6,
                    "self_time_us": 300.0,
                    "total_time_us": 400.0,
                    "window": 0,
                    "source": "torch",
                },
                {
                    "op": "aten::relu",
                    "device_type": "cpu",
                    "calls": 3,
                    "self_time_us": 100.0,
                    "total_time_us": 100.0,
                    "window": 0,
                    "source": "torch",
                },
            ]
            if k < 2
            else []
        )
        write_timings(path, steps, ops)
        medians[str(k)] = statistics.median(walls[:4])
    make_run(root, "mlp", "algo", 3, status="failed", exit_code=1)  # not completed: left out
    return medians


def test_csv_rows_and_table_section(capsys, tmp_path: Path, make_run) -> None:
    medians = _timed_study(tmp_path, make_run)
    code, out, _ = run_cli(capsys, "report", str(tmp_path), "--timings", "--format", "json")
    assert code == 0
    (row,) = json.loads(out)
    values = list(medians.values())
    assert row["n_runs"] == 3 and row["steps_per_run"] == 4
    assert row["median_step_s_mean"] == pytest.approx(statistics.fmean(values))
    assert row["median_step_s_std"] == pytest.approx(statistics.stdev(values))
    assert row["slowest_over_fastest_pct"] == pytest.approx((max(values) / min(values) - 1) * 100)
    code, out, _ = run_cli(capsys, "report", str(tmp_path), "--format", "md")
    assert code == 0 and "## Step time across replicas" in out and "+45.0%" in out
    assert "aten::addmm" in out and "75.0%" in out  # 300 of 400 us of CPU self time, 2 profiled runs
    code, out, _ = run_cli(capsys, "report", str(tmp_path))
    assert code == 0 and "Step time across replicas" in out and "aten::relu" in out


def test_no_timings_no_section_and_conflicting_flags(capsys, tmp_path: Path, make_run) -> None:
    make_run(tmp_path, "mlp", "algo", 0, [("val", "val_acc", 0.8)])
    code, out, _ = run_cli(capsys, "report", str(tmp_path), "--format", "md")
    assert code == 0 and "Step time" not in out
    code, out, _ = run_cli(capsys, "report", str(tmp_path), "--timings", "--format", "csv")
    assert code == 0 and out.startswith("experiment,variant,n_runs")
    code, _, err = run_cli(capsys, "report", str(tmp_path), "--timings", "--stability", "--format", "csv")
    assert code == 2 and "give one of `--decomposition`, `--stability`, `--timings`" in err


def test_a_corrupt_timings_file_is_one_warning(capsys, tmp_path: Path, make_run) -> None:
    _timed_study(tmp_path, make_run)
    (tmp_path / "experiment=mlp" / "variant=algo" / "replica=1" / "timings.parquet").write_bytes(b"garbage")
    code, out, err = run_cli(capsys, "report", str(tmp_path), "--timings", "--format", "json")
    assert code == 0 and json.loads(out)[0]["n_runs"] == 2
    assert err.count("timings.parquet: unreadable") == 1
    assert not math.isnan(json.loads(out)[0]["median_step_s_mean"])


def test_spread_leaves_out_profiled_steps_other_stages_and_runs_without_timings(tmp_path: Path, make_run) -> None:
    from deviate_cb.capture.step_timer import StepTimer
    from deviate_cb.report.answers.timings import build_timings
    from deviate_cb.report.reading.runs import find_runs

    medians = [0.010, 0.020, 0.0145]
    for index, base in enumerate(medians):
        path = make_run(tmp_path, "mlp", "algo", index, [("val", "val_acc", 0.8)])
        timer = StepTimer()
        for step in range(5):
            timer.update("train", 0, step, base * 100 if step == 2 else base, profiled=step == 2)
        timer.update("val", 0, 0, 9.0)
        write_timings(path, timer.rows(), [])
    make_run(tmp_path, "mlp", "algo", 3, [("val", "val_acc", 0.8)])  # no timings.parquet
    (group,) = build_timings(find_runs(tmp_path))
    assert group.n_runs == 3 and list(group.medians.values()) == medians
    assert group.slowest_over_fastest_pct == pytest.approx(100.0)
    assert group.row()["cv"] == pytest.approx(statistics.stdev(medians) / statistics.fmean(medians))
    assert build_timings([r for r in find_runs(tmp_path) if r.replica == "3"]) == []  # no step rows: no group
