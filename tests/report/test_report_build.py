"""build_report on real run directories: aggregates, NaN/Inf, excluded runs, filters, bad files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deviate_cb.errors import SchemaVersionError, UsageError
from deviate_cb.report.answers.summary import build_report
from deviate_cb.report.reading.runs import find_runs

NAN, INF = float("nan"), float("inf")
LOSS_SERIES = {0: [1.0, 0.5, 0.7], 1: [0.9, 0.3, 0.4], 2: [1.2, 0.6, 0.6]}


def _study(root: Path, make_run) -> Path:
    for k, series in LOSS_SERIES.items():
        rows = [("val", "val_loss", v) for v in series] + [("train", "lr", 0.1 * (k + 1))]
        make_run(root, "mlp", "algo", k, rows)
    return root


def _row(report, metric: str, variant: str = "algo"):
    (row,) = [r for r in report.rows if r.metric == metric and r.variant == variant]
    return row


@pytest.mark.parametrize(
    ("how", "per_run"),
    [
        ("last", [0.7, 0.4, 0.6]),
        ("best", [0.5, 0.3, 0.6]),
        ("mean", [np.mean(s) for s in LOSS_SERIES.values()]),
    ],
)
def test_aggregates(tmp_path: Path, make_run, how: str, per_run: list[float]) -> None:
    report = build_report(_study(tmp_path, make_run), aggregate=how)
    row = _row(report, "val_loss")
    assert (row.n, row.aggregate) == (3, how)
    np.testing.assert_allclose([row.mean, row.std], [np.mean(per_run), np.std(per_run, ddof=1)], rtol=1e-12)


def test_best_skips_unknown_direction_with_one_warning(tmp_path: Path, make_run) -> None:
    report = build_report(_study(tmp_path, make_run), aggregate="best")
    assert [r.metric for r in report.rows] == ["val_loss"]
    (warning,) = report.warnings
    assert "`lr`" in warning and "--direction lr=max" in warning


def test_direction_override(tmp_path: Path, make_run) -> None:
    report = build_report(_study(tmp_path, make_run), aggregate="best", directions={"val_loss": "max", "lr": "min"})
    assert _row(report, "val_loss").mean == pytest.approx(np.mean([1.0, 0.9, 1.2]))
    assert _row(report, "lr").n == 3 and report.warnings == ()


def test_nonfinite_runs_are_excluded_and_counted(tmp_path: Path, make_run) -> None:
    make_run(tmp_path, "e", "v", 0, [("val", "val_loss", 0.5), ("val", "val_loss", NAN)])
    make_run(tmp_path, "e", "v", 1, [("val", "val_loss", 0.4), ("val", "val_loss", INF)])
    make_run(tmp_path, "e", "v", 2, [("val", "val_loss", 0.6), ("val", "val_loss", 0.3)])
    make_run(tmp_path, "e", "v", 3, [("val", "val_loss", 0.2), ("val", "val_loss", 0.1)])
    last = _row(build_report(tmp_path), "val_loss", "v")
    assert (last.n, last.n_nonfinite) == (2, 2)
    assert last.mean == pytest.approx(0.2)
    best = _row(build_report(tmp_path, aggregate="best"), "val_loss", "v")
    assert (best.n, best.n_nonfinite) == (4, 0)
    assert best.mean == pytest.approx(np.mean([0.5, 0.4, 0.3, 0.1]))


def test_runs_that_did_not_complete_are_listed_apart(tmp_path: Path, make_run) -> None:
    rows = [("val", "val_acc", 0.8)]
    make_run(tmp_path, "e", "v", 0, rows)
    make_run(tmp_path, "e", "v", 1, [("val", "val_acc", 0.9)])
    failed = {"status": "failed", "exit_code": 1, "error": "ValueError: x\nmore"}
    make_run(tmp_path, "e", "v", 2, [("val", "val_acc", 0.1)], **failed)
    make_run(tmp_path, "e", "v", 3, rows, status="running")
    make_run(tmp_path, "e", "v", 4, rows, status="timeout", exit_code=-9)
    traceback = "Traceback (most recent call last):\n  File 'x.py'\nKeyError: 'a'"
    make_run(tmp_path, "e", "v", 5, rows, status="killed", error=traceback)
    bad = make_run(tmp_path, "e", "v", 6, rows)
    (bad / "run.json").write_text("{not json", encoding="utf-8")
    report = build_report(tmp_path)
    assert _row(report, "val_acc", "v").n == 2
    assert _row(report, "val_acc", "v").mean == pytest.approx(0.85)
    excluded = [(r.replica, r.status, r.exit_code, r.error) for r in report.excluded]
    assert excluded == [
        ("2", "failed", 1, "ValueError: x"),
        ("3", "running", None, None),
        ("4", "timeout", -9, None),
        ("5", "killed", None, "KeyError: 'a'"),
        ("6", "unknown", None, "unreadable run.json"),
    ]
    (warning,) = report.warnings
    assert str(bad / "run.json") in warning
    assert report.groups == (("e", "v", 2),) and report.n_runs == 7


def test_name_in_several_stages_is_shown_with_its_stage(tmp_path: Path, make_run) -> None:
    for k in range(2):
        make_run(tmp_path, "e", "v", k, [("train", "loss", 1.0 + k), ("val", "loss", 2.0 + k), ("val", "acc", 0.5)])
    report = build_report(tmp_path)
    assert {r.metric for r in report.rows} == {"train/loss", "val/loss", "acc"}
    assert _row(report, "val/loss", "v").mean == 2.5
    only_val = build_report(tmp_path, stage="val")
    assert {r.metric for r in only_val.rows} == {"loss", "acc"}
    best = build_report(tmp_path, aggregate="best", directions={"val/loss": "max", "train/loss": "min"})
    assert _row(best, "val/loss", "v").mean == 2.5


def test_metric_and_stage_filters(tmp_path: Path, make_run) -> None:
    for k in range(2):
        make_run(tmp_path, "e", "v", k, [("val", "val_acc", 0.5), ("val", "val_loss", 1.0), ("train", "lr", 0.1)])
    assert {r.metric for r in build_report(tmp_path, metrics=["val_*"]).rows} == {"val_acc", "val_loss"}
    assert {r.metric for r in build_report(tmp_path, metrics=["lr", "val_acc"]).rows} == {"lr", "val_acc"}
    assert {r.metric for r in build_report(tmp_path, stage="train").rows} == {"lr"}
    with pytest.raises(UsageError, match=r"`--metric` matches no metric\. Received: --metric nope\. "):
        build_report(tmp_path, metrics=["nope"])
    with pytest.raises(UsageError, match=r"`--stage` matches no metric\. Received: --stage='test'\. Expected one"):
        build_report(tmp_path, stage="test")


def test_metrics_in_the_same_order_in_every_group(tmp_path: Path, make_run) -> None:
    # not by CV (each group's order would differ): the metrics of interest first, then by name
    make_run(tmp_path, "e", "v", 0, [("val", "a", 1.0), ("val", "b", 1.0), ("val", "z", 0.0), ("val", "c", 1.0)])
    make_run(tmp_path, "e", "v", 1, [("val", "a", 1.1), ("val", "b", 3.0), ("val", "z", 0.0)])
    make_run(tmp_path, "d", "v", 0, [("val", "a", 1.0)])
    report = build_report(tmp_path)
    order = [(r.experiment, r.metric) for r in report.rows]
    assert order == [("d", "a"), ("e", "a"), ("e", "b"), ("e", "c"), ("e", "z")]


@pytest.mark.parametrize("inside", ["experiment=mlp", "experiment=mlp/variant=algo"])
def test_dir_may_point_inside_the_study(tmp_path: Path, make_run, inside: str) -> None:
    study = tmp_path / "nested" / "study"
    _study(study, make_run)
    make_run(study, "other", "algo", 0, [("val", "val_loss", 9.0)])
    report = build_report(study / inside)
    assert {(r.experiment, r.variant, r.metric, r.n) for r in report.rows} == {
        ("mlp", "algo", "val_loss", 3),
        ("mlp", "algo", "lr", 3),
    }
    assert len(build_report(tmp_path).rows) == 3  # from above the study, too


def test_corrupt_and_foreign_metrics_files_are_skipped_with_a_warning(tmp_path: Path, make_run) -> None:
    _study(tmp_path, make_run)
    garbage = make_run(tmp_path, "mlp", "algo", 3, [("val", "val_loss", 0.1)]) / "metrics.parquet"
    garbage.write_bytes(b"PAR1 this is not parquet")
    truncated = make_run(tmp_path, "mlp", "algo", 4, [("val", "val_loss", 0.1)]) / "metrics.parquet"
    truncated.write_bytes(truncated.read_bytes()[:-20])
    foreign = make_run(tmp_path, "mlp", "algo", 5) / "metrics.parquet"
    pq.write_table(pa.table({"x": [1.0]}), foreign)
    report = build_report(tmp_path)
    assert _row(report, "val_loss").n == 3
    assert len(report.warnings) == 3
    for path, warning in zip((garbage, truncated, foreign), report.warnings, strict=True):
        assert warning.startswith(f"{path}: ") and "skipped" in warning


def test_non_numeric_values_skip_only_that_metric(tmp_path: Path, make_run) -> None:
    _study(tmp_path, make_run)
    for k in (3, 4):
        path = make_run(tmp_path, "mlp", "algo", k) / "metrics.parquet"
        table = pa.table(
            {
                "seq": [0, 1, 2],
                "stage": ["val"] * 3,
                "name": ["val_loss", "note", "note"],
                "value": ["0.25", "hello", "1"],
            }
        )
        pq.write_table(table, path)
    listy = make_run(tmp_path, "mlp", "algo", 5) / "metrics.parquet"
    pq.write_table(pa.table({"seq": [0], "stage": ["val"], "name": ["val_loss"], "value": [[1.0]]}), listy)
    report = build_report(tmp_path)
    assert _row(report, "val_loss").n == 5
    assert {r.metric for r in report.rows} == {"val_loss", "lr"}
    assert len(report.warnings) == 2
    note, listed = sorted(report.warnings, key=lambda w: str(listy) in w)
    assert "metric `note` is not a number (value 'hello'); the metric is skipped." in note
    assert listed.startswith(f"{listy}: column `value` has type list")


def test_integer_values_are_read(tmp_path: Path, make_run) -> None:
    for k in range(3):
        path = make_run(tmp_path, "e", "v", k) / "metrics.parquet"
        pq.write_table(pa.table({"seq": [0], "stage": ["final"], "name": ["steps"], "value": [10 * k]}), path)
    assert _row(build_report(tmp_path), "steps", "v").mean == 10.0


def test_completed_run_without_metrics_is_reported(tmp_path: Path, make_run) -> None:
    _study(tmp_path, make_run)
    empty = make_run(tmp_path, "mlp", "algo", 3)
    report = build_report(tmp_path)
    assert _row(report, "val_loss").n == 3
    assert report.warnings == (f"{empty}: completed run without metrics.parquet; it has no metrics.",)


def test_newer_schema_version_is_a_usage_error_naming_the_file(tmp_path: Path, make_run) -> None:
    path = make_run(tmp_path, "e", "v", 0, [("val", "acc", 1.0)]) / "run.json"
    path.write_text(json.dumps({"schema_version": 99, "status": "completed"}), encoding="utf-8")
    with pytest.raises(SchemaVersionError, match=rf"^{path}: written with schema_version=99"):
        build_report(tmp_path)


def test_bad_directories(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^`DIR` does not exist\. Received: DIR="):
        build_report(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match=r"^`DIR` must be a directory\."):
        build_report(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match=r"^`DIR` is empty; it contains no runs \(expected <DIR>/experiment="):
        build_report(tmp_path / "empty")
    (tmp_path / "other" / "experiment=x" / "variant=y").mkdir(parents=True)
    with pytest.raises(UsageError, match=r"^`DIR` contains no runs \(expected .*replica=<k>/run\.json\)\."):
        build_report(tmp_path / "other")


def test_find_runs_reads_partition_keys_from_the_path(tmp_path: Path, make_run) -> None:
    make_run(tmp_path, "e", "v", 10)
    make_run(tmp_path, "e", "v", 2)
    (tmp_path / "experiment=e" / "variant=v" / "replica=3").mkdir()  # no files: not a run
    runs = find_runs(tmp_path / "experiment=e" / "variant=v" / "replica=10")
    assert [(r.experiment, r.variant, r.replica) for r in runs] == [("e", "v", "10")]
    assert [r.replica for r in find_runs(tmp_path)] == ["2", "10"]


def test_level_changes_only_the_interval(tmp_path: Path, make_run) -> None:
    _study(tmp_path, make_run)
    r95, r80 = _row(build_report(tmp_path), "val_loss"), _row(build_report(tmp_path, level=0.8), "val_loss")
    assert r95.std == r80.std and r80.std_ci_high < r95.std_ci_high and r80.std_ci_low > r95.std_ci_low
    with pytest.raises(UsageError, match=r"^`--level` must be in \(0, 1\)\. Received: --level=1\.5\.$"):
        build_report(tmp_path, level=1.5)


def test_single_run_group_has_nan_spread(tmp_path: Path, make_run) -> None:
    make_run(tmp_path, "e", "v", 0, [("val", "acc", 0.5)])
    row = _row(build_report(tmp_path), "acc", "v")
    assert row.n == 1 and all(math.isnan(x) for x in (row.std, row.cv, row.std_ci_low, row.std_ci_high))


def test_launcher_manifest_fields_are_summarised(tmp_path: Path, make_run) -> None:
    """deviate-replicate records `exception` (one line), `reason`, `signal` and the stderr tail as `error`."""
    tail = "Traceback (most recent call last):\n  File 'train.py', line 3\nValueError: bad lr"
    make_run(tmp_path, "e", "v", 0, [("val", "acc", 0.5)])
    make_run(tmp_path, "e", "v", 1, status="failed", exit_code=1, exception="ValueError: bad lr", error=tail)
    killed = {"exit_code": -9, "signal": "SIGKILL", "reason": "killed by SIGKILL", "error": "epoch 3/10"}
    make_run(tmp_path, "e", "v", 2, status="killed", **killed)
    make_run(tmp_path, "e", "v", 3, status="timeout", exit_code=None, signal="SIGTERM", error=tail)
    from deviate_cb.report.reading.loading import excluded_line

    lines = [excluded_line(r) for r in build_report(tmp_path).excluded]
    prefix = "experiment=e variant=v replica="
    assert lines == [
        f"{prefix}1 left out of the statistics: failed (exit code 1): ValueError: bad lr",
        f"{prefix}2 left out of the statistics: killed (exit code -9 (SIGKILL)): killed by SIGKILL",
        f"{prefix}3 left out of the statistics: timeout (SIGTERM): ValueError: bad lr",
    ]


@pytest.mark.parametrize("summary", [False, True])
def test_corrupt_column_chunk_with_intact_footer(tmp_path: Path, make_run, summary: bool) -> None:
    """Without a footer summary, the dataset scan fails and the files are then read one by one to name the bad
    one. With the summary the store writes, the report reads only the footer, whose values are still right."""
    _study(tmp_path, make_run)
    path = make_run(tmp_path, "mlp", "algo", 3, [("val", "val_loss", 0.1)] * 50) / "metrics.parquet"
    if not summary:
        pq.write_table(pq.read_table(path).replace_schema_metadata(None), path)
    chunk = pq.read_metadata(path).row_group(0).column(pq.read_schema(path).get_field_index("value"))
    offset = chunk.dictionary_page_offset or chunk.data_page_offset
    data = bytearray(path.read_bytes())
    data[offset : offset + 16] = b"\xab" * 16  # the page header
    path.write_bytes(bytes(data))
    report = build_report(tmp_path)
    if summary:
        assert _row(report, "val_loss").n == 4 and report.warnings == ()
        return
    assert _row(report, "val_loss").n == 3
    (warning,) = report.warnings
    assert warning.startswith(f"{path}: not a readable Parquet file (") and warning.endswith("; skipped.")


def test_direction_for_an_unknown_metric_is_warned_about(tmp_path: Path, make_run) -> None:
    report = build_report(_study(tmp_path, make_run), aggregate="best", directions={"lr": "max", "val_lss": "min"})
    assert report.warnings == ("`--direction val_lss=min` names no metric of this report; it is ignored.",)
