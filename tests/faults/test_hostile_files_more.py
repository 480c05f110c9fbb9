"""The last unbounded readers of store files: each hostile file is one line naming it, never a hang or a crash
(issue 45, items 4 and 5).

A real study: ``deviate-replicate`` (the console script, from the project's folder) runs a tiny PyTorch model twice
in command mode. Into a copy of it:

- replica 1's ``run.json`` becomes a FIFO, JSON nested 200,000 deep, a 2-GB sparse file or truncated JSON: the
  rerun reruns that replica and says why in one line naming the file and what was found (it used to rerun it
  silently);
- the variant's Slurm job record (``.deviate-jobs.json``, read by ``deviate status`` for every group) becomes a FIFO
  (``status`` blocked forever) or JSON nested too deep (``RecursionError``): one warning line, every replica shown.

``deviate report --table`` given a Parquet file of more rows than a run table can hold (a few KB on disk) is one
usage line naming ``--table``, exit 2, before the rows are read.

Unit-level, on the real functions (each in a subprocess with a timeout, so that a hang fails): the launcher's tail of
a replica's ``stderr.log`` and its scan of the logs for ``--metric-regex``, the ``--isolate`` origin file, and the
Keras backup's ``training_metadata.json`` nested too deep (``RecursionError`` in the replica's resume record).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hostile_study import DEEP, TIMEOUT_S, bin_path, launch_args, make_study

from tests.helpers.replicate_helpers import child_env

pytestmark = pytest.mark.slow

LAUNCH = launch_args(2)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_study(tmp_path_factory.mktemp("project"), 2)


def _variant(store: Path) -> Path:
    return store / "experiment=e" / "variant=algo"


def _plant(path: Path, kind: str) -> None:
    if kind == "fifo":
        if path.exists():
            path.unlink()
        os.mkfifo(path)
    elif kind == "deep":
        path.write_text('{"schema_version": 1, "a": ' + DEEP + "}")
    elif kind == "huge":
        os.truncate(path, 2 * 1024**3)  # sparse: no disk used
    elif kind == "corrupt":
        path.write_text('{"status": "completed", ')


def _run(args: list[str], cwd: Path, what: str, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(args, cwd=cwd, env=child_env(), stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} still running after {timeout} s (blocked on a hostile file)")


def _naming(text: str, path: Path) -> list[str]:
    return [line for line in text.splitlines() if str(path) in line]


WHAT = {"fifo": "is a FIFO, not a regular file", "deep": "JSON nested more than", "huge": "2147483648 bytes",
        "corrupt": "is not a valid run manifest"}  # fmt: skip


@pytest.mark.parametrize("kind", ["fifo", "deep", "huge", "corrupt"])
def test_a_rerun_over_a_hostile_manifest_says_why_in_one_line(study: Path, tmp_path: Path, kind: str) -> None:
    project = tmp_path / "project"
    shutil.copytree(study, project, symlinks=True)
    manifest = _variant(project / "runs") / "replica=1" / "run.json"
    _plant(manifest, kind)
    done = _run([bin_path("deviate-replicate"), "--out", "runs", *LAUNCH], project, "the rerun", timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Traceback" not in output and "RecursionError" not in output, output
    assert "1 completed, 0 failed, 1 skipped" in output, output
    lines = _naming(output, manifest)
    assert len(lines) == 1, output
    assert lines[0].startswith("deviate-replicate: warning: replica=1: its run.json"), lines
    assert WHAT[kind] in lines[0] and lines[0].endswith(": rerun"), lines
    assert json.loads(manifest.read_text())["status"] == "completed"


@pytest.mark.parametrize("kind", ["fifo", "deep"])
def test_status_over_a_hostile_slurm_job_record_is_one_warning(study: Path, tmp_path: Path, kind: str) -> None:
    store = tmp_path / "runs"
    shutil.copytree(study / "runs", store, symlinks=True)
    record = _variant(store) / ".deviate-jobs.json"
    _plant(record, kind)
    proc = _run([bin_path("deviate"), "status", str(store)], study, "`deviate status`")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr, proc.stderr
    assert "2 replicas: 2 completed" in proc.stdout, proc.stdout
    lines = _naming(proc.stderr, record)
    assert len(lines) == 1 and lines[0].startswith("deviate: warning: "), proc.stderr
    assert {"fifo": "a FIFO, not a regular file", "deep": "nested more than"}[kind] in lines[0], lines


def test_a_table_of_too_many_rows_is_one_usage_line(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from deviate_cb.report.reading.table_input import MAX_TABLE_ROWS

    path = tmp_path / "bomb.parquet"
    rows = MAX_TABLE_ROWS + 1  # constant columns: a few KB on disk
    pq.write_table(pa.table({"setting": pa.repeat("impl", rows), "acc": pa.repeat(0.5, rows)}), path)
    assert path.stat().st_size < 1024**2
    proc = _run([bin_path("deviate"), "report", "--table", str(path), "--group-by", "setting"], tmp_path, "the report")
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "`--table`" in lines[0] and str(path) in lines[0], proc.stderr
    assert f"{rows:,} rows" in lines[0], lines


def _python(code: str, what: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter with a timeout: a reader blocked on a FIFO fails the test, never hangs it."""
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=child_env(), capture_output=True,
                              text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} still blocked after {TIMEOUT_S} s on a FIFO")


def test_the_launchers_log_readers_skip_a_fifo(tmp_path: Path) -> None:
    (tmp_path / "stdout.log").write_text("acc=0.5\n")
    os.mkfifo(tmp_path / "stderr.log")
    proc = _python(
        f"""
        from pathlib import Path
        import re
        from deviate_cb.launch.records import tail_lines
        from deviate_cb.store.output_metrics import parsed_metrics_from_logs
        folder = Path({str(tmp_path)!r})
        print(repr(tail_lines(folder / "stderr.log")))
        found, _ = parsed_metrics_from_logs([folder / "stderr.log", folder / "stdout.log"],
                                            [re.compile(r"acc=(?P<acc>\\S+)")])
        print(found)
        """,
        "the launcher's log readers",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["''", "{'acc': 0.5}"], proc.stdout


def test_the_isolate_origin_file_as_a_fifo_is_one_warning(tmp_path: Path) -> None:
    from deviate_cb.launch.replica.isolation import make_workdir

    project = tmp_path / "project"
    run_dir = project / "runs" / "replica=0"
    run_dir.mkdir(parents=True)
    make_workdir(run_dir, project, project / "runs")
    origin = run_dir / ".deviate-launch-dir"
    _plant(origin, "fifo")
    proc = _python(
        f"""
        from deviate_cb.launch.replica.isolation import recorded_launch_dir
        print(recorded_launch_dir({str(run_dir)!r}))
        """,
        "recorded_launch_dir",
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "None", proc.stdout + proc.stderr
    lines = _naming(proc.stderr, origin)
    assert len(lines) == 1 and "a FIFO, not a regular file" in lines[0], proc.stderr


def test_a_deep_keras_backup_metadata_is_recorded_not_raised(tmp_path: Path) -> None:
    from deviate_cb.capture.backup_restore import KerasResumePoint
    from deviate_cb.capture.resume_state import ResumePlan

    backup = tmp_path / "backups" / "checkpointed"
    backup.mkdir(parents=True)
    (backup / "latest.weights.h5").write_bytes(b"\0")
    (backup / "training_metadata.json").write_text('{"epoch": ' + DEEP + "}")
    point = KerasResumePoint(ResumePlan(at=2, steps=4, role="checkpointed", backup=str(backup)))
    point.record["states"]["end"] = {}
    point.changed = False
    point.train_end()  # used to raise RecursionError: the checkpoint was then never recorded
    assert point.changed and point.record["checkpoint"] == str(backup)
    assert "nested more than" in point.record["backup_metadata_error"]
    assert "backup_metadata" not in point.record
