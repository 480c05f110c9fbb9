"""`deviate report`: exit codes and the one-line messages for every bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers.report_study import run_cli


def _deviate(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    cmd = [sys.executable, "-m", "deviate_cb.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


def _small_study(root: Path, make_run) -> Path:
    for k, acc in enumerate([0.80, 0.84, 0.82]):
        make_run(root, "mlp", "algo", k, [("val", "val_acc", acc), ("val", "val_loss", 1.0 - acc)])
    return root


# -- subprocess: the real command line -----------------------------------------------------------------------


def test_subprocess_report_json_on_morin(morin_study: Path) -> None:
    proc = _deviate("report", str(morin_study), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    rows = json.loads(proc.stdout)
    assert [(r["variant"], r["metric"]) for r in rows][:2] == [("algo+impl", "test_acc"), ("algo+impl", "test_loss")]


def test_subprocess_missing_dir(tmp_path: Path) -> None:
    proc = _deviate("report", "does-not-exist", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "deviate: error: `DIR` does not exist. Received: DIR='does-not-exist'.\n"


def test_subprocess_corrupt_metrics_file_is_named_and_the_rest_reported(tmp_path: Path, make_run) -> None:
    _small_study(tmp_path, make_run)
    bad = make_run(tmp_path, "mlp", "algo", 3, [("val", "val_acc", 0.9)]) / "metrics.parquet"
    bad.write_bytes(b"garbage")
    proc = _deviate("report", str(tmp_path))
    assert proc.returncode == 0
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"deviate: warning: {bad}: not a readable Parquet file (") and line.endswith("skipped.")
    assert "val_acc" in proc.stdout and "3 completed runs" not in proc.stdout and "4 completed runs" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_subprocess_no_command() -> None:
    proc = _deviate()
    assert proc.returncode == 2
    assert proc.stderr == "deviate: error: the following arguments are required: COMMAND. See `deviate --help`.\n"


# -- in process: main(argv) returns the exit status ---------------------------------------------------------


def test_success_in_every_format(capsys, tmp_path: Path, make_run) -> None:
    _small_study(tmp_path, make_run)
    for fmt in ("table", "md", "csv", "json"):
        code, out, err = run_cli(capsys, "report", str(tmp_path), "--format", fmt)
        assert (code, err) == (0, ""), fmt
        assert "val_acc" in out


def test_options_reach_the_report(capsys, tmp_path: Path, make_run) -> None:
    _small_study(tmp_path, make_run)
    make_run(tmp_path, "mlp", "algo", 3, [("val", "lr", 0.1)])
    argv = ["report", str(tmp_path), "--format", "json", "--aggregate", "best", "--metric", "val_*", "--stage", "val"]
    code, out, err = run_cli(capsys, *argv, "--direction", "val_loss=max", "--level", "0.9")
    assert code == 0 and err == ""
    rows = json.loads(out)
    assert {r["metric"] for r in rows} == {"val_acc", "val_loss"} and {r["aggregate"] for r in rows} == {"best"}


def test_empty_dir(capsys, tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, "report", str(tmp_path))
    assert (code, out) == (2, "")
    assert err == (
        "deviate: error: `DIR` is empty; it contains no runs (expected "
        f"<DIR>/experiment=<name>/variant=<v>/replica=<k>/run.json). Received: DIR={str(tmp_path)!r}.\n"
    )


def test_dir_without_runs(capsys, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "experiment=a" / "variant=b").mkdir(parents=True)
    code, _, err = run_cli(capsys, "report", str(tmp_path))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("deviate: error: `DIR` contains no runs (expected <DIR>/experiment=<name>/variant=<v>/")


def test_dir_is_a_file(capsys, tmp_path: Path) -> None:
    (tmp_path / "runs").write_text("x")
    code, _, err = run_cli(capsys, "report", str(tmp_path / "runs"))
    assert code == 2
    assert err == f"deviate: error: `DIR` must be a directory. Received: DIR={str(tmp_path / 'runs')!r} (a file).\n"


def test_newer_schema_version(capsys, tmp_path: Path, make_run) -> None:
    _small_study(tmp_path, make_run)
    manifest = tmp_path / "experiment=mlp" / "variant=algo" / "replica=1" / "run.json"
    manifest.write_text(json.dumps({"schema_version": 7, "status": "completed"}))
    code, out, err = run_cli(capsys, "report", str(tmp_path))
    assert (code, out) == (2, "")
    assert err == (
        f"deviate: error: {manifest}: written with schema_version=7, but this deviate-cb reads up to "
        "schema_version=1. Upgrade deviate-cb (pip install -U deviate-cb).\n"
    )


def test_non_numeric_metric_is_skipped_with_one_warning(capsys, tmp_path: Path, make_run) -> None:
    _small_study(tmp_path, make_run)
    for k in (3, 4):
        path = make_run(tmp_path, "mlp", "algo", k) / "metrics.parquet"
        table = {"seq": [0, 1], "stage": ["val", "val"], "name": ["val_acc", "comment"], "value": ["0.83", "good"]}
        pq.write_table(pa.table(table), path)
    code, out, err = run_cli(capsys, "report", str(tmp_path), "--format", "json")
    assert code == 0
    (line,) = err.splitlines()
    assert line.startswith("deviate: warning: ") and line.endswith(
        "metric `comment` is not a number (value 'good'); the metric is skipped."
    )
    rows = json.loads(out)
    # the metric of interest first, then by name
    assert [(r["metric"], r["n"]) for r in rows] == [("val_acc", 5), ("val_loss", 3)]


def test_failed_runs_are_warned_about_in_machine_formats(capsys, tmp_path: Path, make_run) -> None:
    _small_study(tmp_path, make_run)
    make_run(tmp_path, "mlp", "algo", 3, status="failed", exit_code=1, error="RuntimeError: boom")
    code, out, err = run_cli(capsys, "report", str(tmp_path), "--format", "csv")
    assert code == 0 and "boom" not in out
    assert err == (
        "deviate: warning: experiment=mlp variant=algo replica=3 left out of the statistics: "
        "failed (exit code 1): RuntimeError: boom\n"
    )
    code, out, err = run_cli(capsys, "report", str(tmp_path))
    assert code == 0 and err == "" and "RuntimeError: boom" in out


def test_best_with_unknown_direction_warns_once(capsys, tmp_path: Path, make_run) -> None:
    for k in range(3):
        make_run(tmp_path, "e", "v", k, [("train", "lr", 0.1), ("train", "lr", 0.2), ("val", "val_acc", 0.5)])
    code, out, err = run_cli(capsys, "report", str(tmp_path), "--aggregate", "best", "--format", "json")
    assert code == 0 and [r["metric"] for r in json.loads(out)] == ["val_acc"]
    assert err == (
        "deviate: warning: metric `lr`: cannot tell whether higher or lower is better, so --aggregate best skips "
        "it; pass --direction lr=max or --direction lr=min.\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--aggregate", "median"], "argument --aggregate: invalid choice: 'median' (choose from "),
        (["--format", "xml"], "argument --format: invalid choice: 'xml' (choose from "),
        (["--stage", "eval"], "argument --stage: invalid choice: 'eval' (choose from "),
        (["--direction", "val_acc"], "argument --direction: expected NAME=max or NAME=min. Received: --direction="),
        (["--direction", "val_acc=up"], "argument --direction: expected NAME=max or NAME=min."),
        (["--level", "abc"], "argument --level: invalid float value: 'abc'."),
        (["--level", "1.5"], "`--level` must be in (0, 1). Received: --level=1.5."),
        (["--metric", "nope"], "`--metric` matches no metric. Received: --metric nope. Expected one of: "),
        (["--stage", "test"], "`--stage` matches no metric. Received: --stage='test'. Expected one of: val."),
        (["--bogus"], "deviate: error: unrecognized arguments: --bogus. See `deviate --help`."),
    ],
)
def test_bad_options_give_one_line(capsys, tmp_path: Path, make_run, args: list[str], message: str) -> None:
    _small_study(tmp_path, make_run)
    code, out, err = run_cli(capsys, "report", str(tmp_path), *args)
    assert (code, out) == (2, "")
    assert err.startswith("deviate: error: ") and err.count("\n") == 1
    assert message in err


def test_missing_dir_argument_and_help(capsys) -> None:
    code, _, err = run_cli(capsys, "report")
    assert code == 2
    assert err == "deviate: error: the following arguments are required: DIR. See `deviate report --help`.\n"
    code, out, _ = run_cli(capsys, "report", "--help")
    assert code == 0 and "--aggregate" in out and "--direction" in out
