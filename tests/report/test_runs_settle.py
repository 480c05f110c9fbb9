"""Reading a study settles a replica whose launcher is gone: ``running`` becomes ``killed`` in the records and
on disk; a replica whose launcher is alive, of another host or of a cluster backend stays ``running``.
(tests/faults/test_orphans.py does it with a real launcher killed by SIGKILL.)"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from deviate_cb.report.reading.runs import find_runs
from deviate_cb.store.run_directory import RunDirectory, iso_time, run_path


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _running(root: Path, replica: int, **fields: object) -> Path:
    run_dir = run_path(root, "e", "algo", replica)
    manifest = {
        "status": "running",
        "backend": "local",
        "host": socket.gethostname(),
        "launcher_pid": _dead_pid(),
        "started_at": iso_time(),
        **fields,
    }
    RunDirectory(run_dir).update_manifest(**manifest)
    return run_dir


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process start times are read from /proc")
def test_find_runs_settles_only_replicas_whose_launcher_is_gone(tmp_path: Path) -> None:
    gone = _running(tmp_path, 0)
    alive = _running(tmp_path, 1, launcher_pid=os.getpid())
    elsewhere = _running(tmp_path, 2, host="another-host")
    cluster = _running(tmp_path, 3, backend="slurm")
    warnings: list[str] = []
    statuses = {r.replica: (r.status, r.error) for r in find_runs(tmp_path, warnings)}
    assert warnings == []
    assert statuses["0"][0] == "killed" and "is gone" in (statuses["0"][1] or "")
    assert [statuses[k][0] for k in "123"] == ["running"] * 3
    on_disk = json.loads((gone / "run.json").read_text())
    assert on_disk["status"] == "killed" and on_disk["ended_at"] and "lost before it ended" in on_disk["reason"]
    for run_dir in (alive, elsewhere, cluster):
        assert json.loads((run_dir / "run.json").read_text())["status"] == "running"


def test_a_failure_while_settling_is_a_warning_and_the_run_stays_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _running(tmp_path, 0)

    def broken(run_dir: Path, host: object = None) -> None:
        raise RuntimeError("cannot tell")

    monkeypatch.setattr("deviate_cb.store.settling.settle_replica", broken)
    warnings: list[str] = []
    (run,) = find_runs(tmp_path, warnings)
    assert run.status == "running"
    assert len(warnings) == 1 and "could not be checked" in warnings[0] and "RuntimeError: cannot tell" in warnings[0]
