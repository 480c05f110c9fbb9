"""The machine a replica ran on, in its manifest: CPU counts and load averages at its start and end, recorded by
the launcher locally and by the task on a Slurm or Ray node (never overwritten by the launcher's own machine); and
`deviate-replicate`/`deviate audit` print what a replica wrote without its escape sequences.

Real replicas run here (tiny NumPy trainers); no assumption is made on the machine's cores or load.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from deviate_cb.context import RunContext
from deviate_cb.launch.backends.base import Outcome
from deviate_cb.launch.backends.remote import TaskSpec, run_task
from deviate_cb.launch.records import end_fields, machine_fields
from tests.helpers.replicate_helpers import REPO, child_env, manifest, trainer

START = ("cpu_count", "cpus_usable", "load_avg_start")


def _check_machine(record: dict[str, Any]) -> None:
    """The fields this system can tell are there, with values of the right kind."""
    assert record["cpu_count"] == os.cpu_count()
    if hasattr(os, "sched_getaffinity"):
        assert record["cpus_usable"] == len(os.sched_getaffinity(0))  # the replica inherits the test's affinity
    if hasattr(os, "getloadavg"):
        for key in ("load_avg_start", "load_avg_end"):
            values = record[key]
            assert len(values) == 3 and all(isinstance(v, float) and v >= 0 for v in values), (key, values)


def test_replicate_records_the_machine_at_each_replicas_start_and_end(cli) -> None:
    done = cli("--trainer", trainer("basic.py:echo"), "-n", "2", "--parallel", "2", "--gpus", "none")
    assert done.returncode == 0, done.stderr
    for replica in (0, 1):
        _check_machine(manifest(done.run_dir("basic", "algo+impl", replica)))


def test_end_fields_record_the_load_only_for_a_replica_that_ran_here(tmp_path: Path) -> None:
    ended = Outcome(returncode=0, started_at=0.0, ended_at=1.0)
    assert "load_avg_end" not in end_fields(ended, tmp_path / "stderr.log", here=False).fields()
    if hasattr(os, "getloadavg"):
        assert len(end_fields(ended, tmp_path / "stderr.log").load_avg_end or []) == 3
    assert set(machine_fields("start").fields()) <= set(START)
    assert set(machine_fields("end").fields()) <= {"load_avg_end"}
    with pytest.raises(ValueError, match="`when` must be 'start' or 'end'"):
        machine_fields("middle")


def test_a_cluster_task_records_its_nodes_machine(tmp_path: Path) -> None:
    """`run_task` (what a Slurm or Ray task runs on its node) records the node's CPUs and load itself."""
    run_dir = tmp_path / "experiment=e" / "variant=algo" / "replica=0"
    run_dir.mkdir(parents=True)
    node = {"host": "launcher", "cpu_count": 9999, "load_avg_start": [99.0, 99.0, 99.0]}  # the launcher's view
    (run_dir / "run.json").write_text(json.dumps({"schema_version": 1, "status": "running", "seed": 7, **node}))
    spec = trainer("basic.py:echo")
    ctx = RunContext(
        run_dir=run_dir, experiment="e", variant="algo", replica=0, seed=7, deterministic=False, trainer=spec
    )
    env = {**ctx.to_env(), "PYTHONPATH": str(REPO)}
    result = run_task(TaskSpec(str(run_dir), env, 60.0, 2.0, "slurm"))
    record = json.loads((run_dir / "run.json").read_text())
    assert result["returncode"] == 0 and record["status"] == "completed", record
    _check_machine(record)  # this machine's, not the launcher's


COLOURED = "\\x1b[31mcannot load the data module\\x1b[0m\\x07"


@pytest.fixture
def coloured_trainer(tmp_path: Path) -> str:
    """A trainer whose module raises at import with a coloured message (a spec error: exit status 3)."""
    path = tmp_path / "coloured.py"
    # main imports Lightning (never reached): `deviate audit` would refuse a trainer that imports no framework
    body = '\n\n\ndef main():\n    import lightning  # noqa: F401\n\n    return {"acc": 1.0}\n'
    path.write_text(f'raise RuntimeError("{COLOURED}")' + body)
    return f"{path}:main"


def test_replicate_prints_a_replicas_error_without_escapes(cli, coloured_trainer: str) -> None:
    done = cli("--trainer", coloured_trainer, "-n", "2", "--gpus", "none")
    assert done.returncode == 2, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("deviate-replicate: error: `--trainer`")
    assert "cannot load the data module\\x07" in line and "\\x1b[31m" not in line  # colours dropped, BEL shown


def test_audit_prints_a_replicas_error_without_escapes(tmp_path: Path, coloured_trainer: str) -> None:
    import subprocess

    cmd = [sys.executable, "-m", "deviate_cb.cli.main", "audit", "--trainer", coloured_trainer, "--out", "audit"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("deviate: error: `--trainer`")
    assert "cannot load the data module\\x07" in proc.stderr
