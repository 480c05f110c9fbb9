"""A store file that is not what it claims costs that file only, never a hang or a crash (issue 45, items 4 and 5).

A real study: ``deviate-replicate`` (the console script, from the project's folder) runs a tiny PyTorch model three
times in command mode. Into a copy of it, one replica's file is replaced by something hostile:

- a FIFO at ``metrics.parquet``, ``run.json`` or ``fingerprint.json`` (every reader blocked forever on open);
- JSON nested 200,000 deep in ``run.json``, ``fingerprint.json`` or the ``metrics.parquet`` footer's key-value
  metadata (``RecursionError`` in every reader);
- a 2-GB sparse ``run.json`` (read whole);
- a ``metrics.parquet`` of constant columns holding more rows than a run may (``MAX_RUN_ROWS``; a few MB on disk).

Each ``deviate`` command runs as a subprocess with a timeout (a hang fails): it exits 0, exactly one line of its
stderr names the hostile file (a warning, saying what was found), and the other two replicas are still reported.
A rerun of the launcher over a replica whose ``run.json`` is a FIFO or nested too deep reruns that replica and
skips the others.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hostile_study import DEEP, TIMEOUT_S, bin_path, launch_args, make_study

from deviate_cb.store.bounded_read import MAX_RUN_ROWS
from tests.helpers.replicate_helpers import child_env

pytestmark = pytest.mark.slow

LAUNCH = launch_args(3)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_study(tmp_path_factory.mktemp("project"), 3)


def _replica(store: Path, k: int) -> Path:
    return store / "experiment=e" / "variant=algo" / f"replica={k}"


def _plant(store: Path, kind: str, name: str) -> Path:
    path = _replica(store, 1) / name
    if kind == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif kind == "deep":
        path.write_text('{"schema_version": 1, "a": ' + DEEP + "}")
    elif kind == "huge":
        os.truncate(path, 2 * 1024**3)  # sparse: no disk used
    elif kind == "deep_footer":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        metadata = {**(table.schema.metadata or {}), b"deviate.series": DEEP.encode()}
        pq.write_table(table.replace_schema_metadata(metadata), path)
    elif kind == "rows":  # the run's own columns, constant, in row groups of 1 M rows: a few MB on disk
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        block = 1_000_000
        chunk = pa.table({c: pa.repeat(table.column(c)[0], block) for c in table.column_names}, schema=table.schema)
        with pq.ParquetWriter(path, table.schema) as writer:
            for _ in range(MAX_RUN_ROWS // block + 1):
                writer.write_table(chunk)
    return path


def _deviate(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([bin_path("deviate"), *args], cwd=project, env=child_env(), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"`deviate {' '.join(args)}` still running after {TIMEOUT_S} s (blocked on a hostile file)")


def _one_warning(proc: subprocess.CompletedProcess[str], path: Path, most: int = 1) -> str:
    naming = [line for line in proc.stderr.splitlines() if str(path) in line]
    assert 1 <= len(naming) <= most and all(line.startswith("deviate: warning: ") for line in naming), proc.stderr
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr, proc.stderr
    return naming[0]


CASES = [  # (what is planted, at which file, the commands that must survive it, the runs still counted)
    ("fifo", "metrics.parquet", ("report", "power", "html", "status", "export"), 2),
    ("fifo", "run.json", ("report", "power", "status", "html"), 2),
    ("fifo", "fingerprint.json", ("report", "html"), 3),
    ("deep", "run.json", ("report", "power", "status", "html"), 2),
    ("deep", "fingerprint.json", ("report", "html"), 3),
    ("deep_footer", "metrics.parquet", ("report", "power", "html"), 2),
    ("huge", "run.json", ("report", "power", "status"), 2),
    ("rows", "metrics.parquet", ("report", "html", "export"), 2),
]
WHAT = {"fifo": "a FIFO, not a regular file", "deep": "nested more than", "deep_footer": "nested more than",
        "huge": "2147483648 bytes", "rows": f"{MAX_RUN_ROWS // 1_000_000 * 1_000_000 + 1_000_000} rows"}  # fmt: skip


@pytest.mark.parametrize(("kind", "name", "commands", "counted"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_hostile_file_is_one_warning_and_the_other_replicas_are_reported(
    study: Path, tmp_path: Path, kind: str, name: str, commands: tuple[str, ...], counted: int
) -> None:
    store = tmp_path / "runs"
    shutil.copytree(study / "runs", store, symlinks=True)
    path = _plant(store, kind, name)
    for command in commands:
        if command == "report":
            proc = _deviate(study, "report", str(store), "--format", "json")
            assert proc.returncode == 0, proc.stderr
            assert [row["n"] for row in json.loads(proc.stdout) if row["metric"] == "acc"] == [counted]
        elif command == "power":
            proc = _deviate(study, "power", str(store), "--effect", "0.01", "--format", "json")
            assert proc.returncode == 0, proc.stderr
            assert [row["n"] for row in json.loads(proc.stdout) if row["metric"] == "acc"] == [counted]
        elif command == "html":
            proc = _deviate(study, "report", str(store), "--format", "html")
            assert proc.returncode == 0 and proc.stdout.lstrip().startswith("<!DOCTYPE html>"), proc.stderr
        elif command == "status":
            proc = _deviate(study, "status", str(store))
            assert proc.returncode == 0, proc.stderr
            if name == "run.json":  # status reads the manifest: the replica is shown unreadable, named once
                assert "3 replicas: 2 completed" in proc.stdout, proc.stdout
                assert WHAT[kind] in _one_warning(proc, path, 1), proc.stderr
            else:
                assert "3 replicas: 3 completed" in proc.stdout, proc.stdout
        else:
            uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
            proc = _deviate(study, "export", "mlflow", str(store), "--tracking-uri", uri, "--no-page")
            assert proc.returncode == 0, proc.stderr
        if command != "status":  # status: checked above
            # export: the exporter's own line for the replica it sends without metrics may follow the report's
            assert WHAT[kind] in _one_warning(proc, path, 2 if command == "export" else 1), (command, proc.stderr)


@pytest.mark.parametrize("kind", ["fifo", "deep"])
def test_a_rerun_over_a_hostile_manifest_reruns_that_replica_only(study: Path, tmp_path: Path, kind: str) -> None:
    project = tmp_path / "project"
    shutil.copytree(study, project, symlinks=True)
    _plant(project / "runs", kind, "run.json")
    try:
        done = subprocess.run([bin_path("deviate-replicate"), "--out", "runs", *LAUNCH], cwd=project, env=child_env(),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("the rerun is still running after 120 s (blocked on a FIFO at run.json)")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "RecursionError" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "1 completed, 0 failed, 2 skipped" in done.stdout + done.stderr, done.stdout + done.stderr
    manifest = json.loads((_replica(project / "runs", 1) / "run.json").read_text())
    assert manifest["status"] == "completed"
