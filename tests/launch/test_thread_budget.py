"""The thread budget of a replica (:mod:`deviate_cb.launch.backends.threads`): the pure rules, then a Slurm task's and a
Ray task's replica run for real by :func:`~deviate_cb.launch.backends.remote.run_task` with the threads of its
allocation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deviate_cb.context import RunContext
from deviate_cb.launch.backends.base import Job
from deviate_cb.launch.backends.local import LocalBackend
from deviate_cb.launch.backends.ray_backend import RayBackend
from deviate_cb.launch.backends.remote import TaskSpec, run_task
from deviate_cb.launch.backends.slurm.backend import SlurmBackend
from deviate_cb.launch.backends.threads import (
    BUDGET_ENV,
    THREAD_VARIABLES,
    allocated_cpus,
    budget_note,
    replica_thread_env,
    task_thread_env,
    usable_cpus,
)
from tests.helpers.replicate_helpers import REPO, trainer


def test_unset_variables_get_the_cores_shared_by_the_replicas_at_once() -> None:
    env = replica_thread_env(cores=16, at_once=4, environ={"PATH": "/bin"})
    assert {name: env[name] for name in THREAD_VARIABLES} == dict.fromkeys(THREAD_VARIABLES, "4")
    assert env[BUDGET_ENV] == "4"
    assert replica_thread_env(cores=7, at_once=2, environ={})["OMP_NUM_THREADS"] == "3"  # rounded down


def test_more_replicas_than_cores_get_one_thread_each() -> None:
    assert replica_thread_env(cores=2, at_once=8, environ={})["OMP_NUM_THREADS"] == "1"
    assert replica_thread_env(cores=1, at_once=2, environ={})["MKL_NUM_THREADS"] == "1"


def test_what_the_user_set_is_kept() -> None:
    assert replica_thread_env(cores=16, at_once=2, environ={"OMP_NUM_THREADS": "1"}) == {}  # the user chose
    env = replica_thread_env(cores=16, at_once=2, environ={"MKL_NUM_THREADS": "2", "TF_NUM_INTEROP_THREADS": "1"})
    assert "MKL_NUM_THREADS" not in env and "TF_NUM_INTEROP_THREADS" not in env and env["OMP_NUM_THREADS"] == "8"
    assert budget_note(cores=16, at_once=2, environ={"OMP_NUM_THREADS": "1"}) == "CPU threads as OMP_NUM_THREADS=1 says"


def test_a_sequential_local_study_keeps_every_core() -> None:
    assert replica_thread_env(cores=64, at_once=1, environ={}) == {}
    assert budget_note(cores=64, at_once=1, environ={}) == ""


def test_a_cluster_task_gets_its_allocation() -> None:
    assert allocated_cpus({"SLURM_CPUS_PER_TASK": "6"}) == 6
    assert allocated_cpus({"SLURM_CPUS_PER_TASK": "x"}) == usable_cpus()  # unreadable: the CPUs it may use
    assert allocated_cpus({}, num_cpus=0.5) == 1 and allocated_cpus({"SLURM_CPUS_PER_TASK": "6"}, 2.0) == 2
    assert task_thread_env({"SLURM_CPUS_PER_TASK": "6"})["TF_NUM_INTRAOP_THREADS"] == "6"
    assert task_thread_env({"OMP_NUM_THREADS": "2"}, num_cpus=8) == {}


def test_the_local_plan_line_names_the_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cores = usable_cpus()
    line = LocalBackend(parallel=cores * 2).describe()
    assert line == (
        f"{cores * 2} at a time, 1 CPU thread each (OMP/MKL/OpenBLAS/torch/TF; set OMP_NUM_THREADS to choose), "
        "GPUs: none"
    )
    assert LocalBackend(parallel=1).describe() == "1 at a time, GPUs: none"


def test_the_cluster_plan_lines_name_the_threads_and_a_ray_task_carries_its_cpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert "4 CPU(s) per replica, time limit 60 min, 4 CPU threads each" in SlurmBackend(cpus_per_replica=4).describe()
    assert "CPU threads: the task's CPUs" in SlurmBackend().describe()
    assert "3.0 CPU, 0.0 GPU per replica; 3 CPU threads each" in RayBackend(num_cpus=3).describe()
    job = Job("replica=0", ("python", "t.py"), {}, Path("/r/replica=0/stdout.log"), Path("/r/replica=0/stderr.log"))
    assert RayBackend(num_cpus=3)._spec(job, {}, ()).cpus == 3.0


def _prepared(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    run_dir = tmp_path / "experiment=e" / "variant=algo" / "replica=0"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"schema_version": 1, "status": "running", "seed": 7}))
    ctx = RunContext(
        run_dir=run_dir, experiment="e", variant="algo", replica=0, seed=7, deterministic=True,
        trainer=trainer("basic.py:echo"),
    )  # fmt: skip
    return run_dir, {**ctx.to_env(), "PYTHONPATH": str(REPO)}


def _threads_in_effect(run_dir: Path) -> dict[str, object]:
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "completed", manifest
    return dict(manifest["determinism"]["in_effect"]["env"])


def test_a_slurm_task_replica_gets_the_cpus_per_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "3")  # as Slurm sets it in a task of --cpus-per-task 3
    run_dir, env = _prepared(tmp_path)
    assert run_task(TaskSpec(str(run_dir), env, 60.0, 2.0, "slurm"))["returncode"] == 0
    in_effect = _threads_in_effect(run_dir)
    assert in_effect["OMP_NUM_THREADS"] == "3" and in_effect["MKL_NUM_THREADS"] == "3", in_effect


def test_a_ray_task_replica_gets_its_num_cpus_unless_the_driver_chose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "5")  # as Ray sets it in its worker: removed, replaced by the budget
    run_dir, env = _prepared(tmp_path)
    spec = TaskSpec(str(run_dir), env, 60.0, 2.0, "ray", unset=("OMP_NUM_THREADS",), cpus=2.0)
    assert run_task(spec)["returncode"] == 0
    assert _threads_in_effect(run_dir)["OMP_NUM_THREADS"] == "2"
    run_dir, env = _prepared(tmp_path / "driver")
    chosen = TaskSpec(str(run_dir), {**env, "OMP_NUM_THREADS": "1"}, 60.0, 2.0, "ray", cpus=2.0)  # the driver's
    assert run_task(chosen)["returncode"] == 0
    in_effect = _threads_in_effect(run_dir)
    assert in_effect["OMP_NUM_THREADS"] == "1" and in_effect["MKL_NUM_THREADS"] is None, in_effect
