"""The Slurm backend without a cluster: sbatch parameters, squeue/sacct parsing, and how job ends are judged
(accounting lag, no ``sacct`` at all, jobs killed from outside), with Slurm's answers faked. The real cluster
is integrations/slurm's business.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest

from deviate_cb.errors import UsageError
from deviate_cb.launch.backends.base import Job, Outcome, Placement
from deviate_cb.launch.backends.slurm import backend as slurm_module
from deviate_cb.launch.backends.slurm.backend import SlurmBackend
from deviate_cb.launch.backends.slurm.jobs import (
    SlurmQueryError,
    parse_sacct,
    parse_squeue,
    read_jobs_file,
    write_jobs_file,
)
from deviate_cb.launch.backends.slurm.outcome import outcome_from_manifest
from deviate_cb.launch.records import end_fields, status_of
from deviate_cb.launch.status import collect_status, format_status
from deviate_cb.store.manifest import RunManifest


class Recorder:
    def __init__(self) -> None:
        self.starts: list[str] = []
        self.ends: dict[str, Outcome] = {}
        self.messages: list[str] = []

    def prepare(self, job: Job, placement: Placement) -> None:
        pass

    def started(self, job: Job, placement: Placement, pid: Optional[int]) -> None:
        self.starts.append(job.key)

    def finished(self, job: Job, placement: Placement, outcome: Outcome) -> None:
        self.ends[job.key] = outcome

    def message(self, text: str) -> None:
        self.messages.append(text)


def _job(tmp_path: Path, k: int, status: str = "running", **fields: Any) -> Job:
    run_dir = tmp_path / f"replica={k}"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps({"schema_version": 1, "status": status, **fields}))
    return Job(f"replica={k}", ["python"], {}, run_dir / "stdout.log", run_dir / "stderr.log")


def _fake(monkeypatch: pytest.MonkeyPatch, squeue: list[dict[str, str]], sacct: list[Any]) -> None:
    """Successive answers of squeue and sacct (an exception instance is raised)."""

    def answer(seq: list[Any], ids: Any) -> dict[str, str]:
        value = seq.pop(0) if len(seq) > 1 else seq[0]
        if isinstance(value, Exception):
            raise value
        return value

    monkeypatch.setattr(slurm_module, "query_squeue", lambda ids, timeout_s=30.0: answer(squeue, ids))
    monkeypatch.setattr(slurm_module, "query_sacct", lambda ids, timeout_s=30.0: answer(sacct, ids))
    monkeypatch.setattr(slurm_module, "_scancel", lambda ids: None)


def _watch(backend: SlurmBackend, jobs: dict[str, Job]) -> Recorder:
    recorder = Recorder()
    backend._watch({jid: [(job, Placement(slot=i))] for i, (jid, job) in enumerate(jobs.items())}, recorder)
    return recorder


def test_sbatch_parameters() -> None:
    backend = SlurmBackend(parallel=2, partition="gpu", gpus_per_replica=1, cpus_per_replica=4, mem="8G", time=30,
                           account="a", qos="q", slurm_opt={"constraint": "a100"})  # fmt: skip
    assert backend.sbatch_parameters(5, "mlp") == {
        "job_name": "deviate-mlp", "time": 30, "array_parallelism": 2, "additional_parameters": {"constraint": "a100"},
        "partition": "gpu", "account": "a", "qos": "q", "mem": "8G", "gpus_per_node": 1, "cpus_per_task": 4,
    }  # fmt: skip
    assert SlurmBackend().sbatch_parameters(3, "x")["time"] == slurm_module.DEFAULT_TIME_MIN
    assert "partition gpu, 1 GPU(s) per replica, 4 CPU(s) per replica" in backend.describe()


def test_parsers_and_jobs_file(tmp_path: Path) -> None:
    assert parse_squeue("7_0|RUNNING\n7_1|PENDING\ngarbage\n") == {"7_0": "RUNNING", "7_1": "PENDING"}
    sacct = "7_0|COMPLETED|0:0\n7_0.batch|COMPLETED|0:0\n7_1|OUT_OF_MEMORY|0:125\n7|CANCELLED by 0|0:0\n"
    assert parse_sacct(sacct) == {
        "7_0": "COMPLETED", "7_1": "OUT_OF_MEMORY", "7": "CANCELLED",
    }  # fmt: skip
    write_jobs_file(tmp_path, "slurm", {"replica=0": "7_0"}, submitit_folder="f")
    write_jobs_file(tmp_path, "slurm", {"replica=1": "8_0"})
    assert read_jobs_file(tmp_path)["replicas"] == {"replica=0": "7_0", "replica=1": "8_0"}
    assert read_jobs_file(tmp_path / "nowhere") == {}


def test_states_from_outside_map_to_statuses() -> None:
    running = RunManifest.from_json({"status": "running"})
    assert status_of(outcome_from_manifest(running, "CANCELLED", "1_0")) == "failed"
    assert status_of(outcome_from_manifest(running, "OUT_OF_MEMORY", "1_0")) == "failed"
    assert status_of(outcome_from_manifest(running, "NODE_FAIL", "1_0")) == "failed"
    assert status_of(outcome_from_manifest(running, "TIMEOUT", "1_0")) == "timeout"
    done = RunManifest.from_json({"status": "completed", "exit_code": 0})
    assert status_of(outcome_from_manifest(done, "COMPLETED", "1_0")) == "completed"
    end = end_fields(outcome_from_manifest(running, "OUT_OF_MEMORY", "1_3"), Path("/nonexistent"))
    assert end.slurm_state == "OUT_OF_MEMORY" and end.slurm_job_id == "1_3"
    assert end.reason == "the cluster ended the replica (job 1_3): OUT_OF_MEMORY"
    lost = outcome_from_manifest(running, "COMPLETED", "1_0")  # ran, but wrote nothing where we look
    assert status_of(lost) == "failed" and "not visible from the compute node" in (lost.launch_error or "")


def test_watch_waits_for_accounting_then_records_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = {"5_0": _job(tmp_path, 0, "completed", exit_code=0), "5_1": _job(tmp_path, 1)}
    _fake(monkeypatch, [{"5_0": "RUNNING", "5_1": "RUNNING"}, {}], [{}, {"5_0": "COMPLETED", "5_1": "CANCELLED"}])
    recorder = _watch(SlurmBackend(poll_interval_s=0.01, sacct_wait_s=30), jobs)
    assert sorted(recorder.starts) == ["replica=0", "replica=1"]
    assert recorder.ends["replica=0"].end.slurm_state == "COMPLETED"
    assert status_of(recorder.ends["replica=0"]) == "completed"
    assert status_of(recorder.ends["replica=1"]) == "failed"
    assert recorder.ends["replica=1"].scheduler_state == "CANCELLED"


def test_watch_without_sacct_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = {"6_0": _job(tmp_path, 0, "completed", exit_code=0), "6_1": _job(tmp_path, 1)}
    _fake(monkeypatch, [{}], [SlurmQueryError("`sacct` is not on PATH")])
    recorder = _watch(SlurmBackend(poll_interval_s=0.01, sacct_wait_s=0.2), jobs)
    assert status_of(recorder.ends["replica=0"]) == "completed"  # the manifest decides at once
    lost = recorder.ends["replica=1"]  # never recorded its end: failed after sacct_wait_s
    assert status_of(lost) == "failed" and lost.end.slurm_state == "UNKNOWN"
    assert "sacct is unavailable" in (lost.launch_error or "")
    assert len([m for m in recorder.messages if "sacct is unavailable" in m]) == 1


def test_a_task_of_several_replicas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--replicas-per-task``: replicas show as started when their task starts them; when the task runs out of
    time in its second replica, the first, which completed, stays completed."""
    first = _job(tmp_path, 0, "completed", exit_code=0, slurm_job_id="9_0")
    second = _job(tmp_path, 1)  # never started: its task ran out of time first
    _fake(monkeypatch, [{"9_0": "RUNNING"}, {}], [{"9_0": "TIMEOUT"}])
    recorder = Recorder()
    backend = SlurmBackend(poll_interval_s=0.01, replicas_per_task=2, parallel=4, time=10)
    backend._watch({"9_0": [(first, Placement(slot=0)), (second, Placement(slot=1))]}, recorder)
    assert recorder.starts == ["replica=0"]
    assert status_of(recorder.ends["replica=0"]) == "completed"
    assert status_of(recorder.ends["replica=1"]) == "timeout"
    assert recorder.ends["replica=1"].end.fields() == {"slurm_job_id": "9_0", "slurm_state": "TIMEOUT"}
    params = backend.sbatch_parameters(3, "mlp")
    assert (params["time"], params["array_parallelism"]) == (20, 2)  # a task's limit; P // K tasks at once
    assert "2 replicas per task, one after another" in backend.describe() and backend.warm_start
    with pytest.raises(UsageError, match=r"Received: --replicas-per-task=0\."):
        SlurmBackend(replicas_per_task=0)


def test_no_slurm_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="`--backend slurm` needs Slurm's client commands"):
        SlurmBackend().check_cluster()


def test_status_from_manifests(tmp_path: Path) -> None:
    var = tmp_path / "experiment=e" / "variant=algo"
    for k, status in enumerate(["completed", "running", "failed"]):
        (var / f"replica={k}").mkdir(parents=True)
        manifest = {"status": status, "seed": k, "backend": "slurm", "host": "n1", "duration_s": 2.0}
        if status == "failed":
            manifest["slurm_state"] = "CANCELLED"
        (var / f"replica={k}" / "run.json").write_text(json.dumps(manifest))
    write_jobs_file(var, "slurm", {"replica=0": "9_0", "replica=1": "9_1", "replica=2": "9_2"})
    rows = collect_status(tmp_path, ask_cluster=False)
    assert [(r.replica, r.status, r.job, r.job_state) for r in rows] == [
        (0, "completed", "9_0", ""), (1, "running", "9_1", ""), (2, "failed", "9_2", "CANCELLED"),
    ]  # fmt: skip
    text = format_status(rows, "runs")
    assert text.splitlines()[-1] == "runs: 3 replicas: 1 completed, 1 failed, 1 running"
    with pytest.raises(UsageError, match="holds no replica run directories"):
        format_status([], "empty")
