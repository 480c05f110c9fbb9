"""The Ray backend's checks and the node-side task runner, without Ray: a stub stands in for the ``ray`` module
where one is needed (the real cluster is integrations/ray's business), and :func:`run_task` and
:func:`run_tasks` (a task of several replicas, forked warm) run for real.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from deviate_cb.context import RunContext
from deviate_cb.errors import UsageError
from deviate_cb.launch.backends.ray_backend import RayBackend
from deviate_cb.launch.backends.remote import TaskSpec, run_task, run_tasks
from deviate_cb.launch.target.preimport import preimports, project_files
from deviate_cb.launch.target.trainer_spec import TrainerSpec
from tests.helpers.replicate_helpers import REPO, trainer


class StubRay:
    """Just enough of ``ray`` for the pre-flight checks: tasks run inline, the second node sees nothing."""

    def __init__(self, resources: dict[str, float], blind_node: bool = False) -> None:
        self.resources, self.blind_node = resources, blind_node

    def cluster_resources(self) -> dict[str, float]:
        return self.resources

    def nodes(self) -> list[dict[str, Any]]:
        return [{"NodeID": n * 28, "Alive": alive} for n, alive in (("aa", True), ("bb", True), ("cc", False))]

    def remote(self, fn: Any) -> Any:
        stub = self

        class Remote:
            def options(self, **options: Any) -> Any:
                node = options["scheduling_strategy"].node_id
                return SimpleNamespace(
                    remote=lambda *a: (False, "node-b") if node == "bb" * 28 and stub.blind_node else fn(*a)
                )

        return Remote()

    def get(self, refs: Any, timeout: float = 0) -> Any:
        return refs


def test_task_options_and_description() -> None:
    backend = RayBackend(address="10.0.0.1:6379", num_gpus=1, parallel=4)
    assert backend.task_options() == {"num_cpus": 1.0, "num_gpus": 1.0, "max_retries": 0, "retry_exceptions": False}
    assert backend.describe(environ={}) == (
        "Ray tasks on Ray cluster 10.0.0.1:6379 (1.0 CPU, 1.0 GPU per replica; 1 CPU thread each), 4 at a time"
    )
    assert "CPU threads as OMP_NUM_THREADS=2 says" in backend.describe(environ={"OMP_NUM_THREADS": "2"})
    assert RayBackend(address="local").address is None


def test_resources_the_cluster_lacks_are_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"`--num-gpus` asks 2 GPU per replica, but the Ray cluster has 1 in all"):
        RayBackend(num_gpus=2)._check_resources(StubRay({"CPU": 8, "GPU": 1}))
    RayBackend(num_gpus=1, num_cpus=8)._check_resources(StubRay({"CPU": 8, "GPU": 1}))


def test_run_directory_must_be_visible_from_every_node(tmp_path: Path) -> None:
    pytest.importorskip("ray")  # the node-affinity strategy class comes from Ray itself
    variant_dir = tmp_path / "runs" / "experiment=e" / "variant=algo"
    variant_dir.mkdir(parents=True)
    RayBackend()._check_shared(StubRay({}), variant_dir)
    with pytest.raises(UsageError, match=r"node\(s\) node-b cannot read"):
        RayBackend()._check_shared(StubRay({}, blind_node=True), variant_dir)
    assert list(variant_dir.iterdir()) == []  # the marker is removed either way


def _prepared(tmp_path: Path, spec: str, replica: int = 0) -> tuple[Path, dict[str, str]]:
    run_dir = tmp_path / "experiment=e" / "variant=algo" / f"replica={replica}"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"schema_version": 1, "status": "running", "seed": 7}))
    ctx = RunContext(run_dir=run_dir, experiment="e", variant="algo", replica=replica, seed=7, deterministic=True,
                     trainer=spec)  # fmt: skip
    env = {**ctx.to_env(), "PYTHONPATH": str(REPO)}
    return run_dir, env


def test_run_task_runs_the_replica_and_records_its_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # as Ray would set it in a worker
    run_dir, env = _prepared(tmp_path, trainer("basic.py:echo"))
    result = run_task(TaskSpec(str(run_dir), env, None, 5.0, "ray", unset=("OMP_NUM_THREADS",), cpus=2.0))
    manifest = json.loads((run_dir / "run.json").read_text())
    assert result["returncode"] == 0 and manifest["status"] == "completed" and manifest["exit_code"] == 0
    assert manifest["host"] and "slurm_job_id" not in manifest
    assert manifest["determinism"]["in_effect"]["env"]["OMP_NUM_THREADS"] == "2"  # the task's CPUs, not Ray's value


@pytest.mark.slow
def test_run_task_applies_the_timeout(tmp_path: Path) -> None:
    run_dir, env = _prepared(tmp_path, trainer("basic.py:sleep_forever"))
    os.environ.pop("SLURM_JOB_ID", None)
    result = run_task(TaskSpec(str(run_dir), env, 3.0, 2.0, "slurm"))
    manifest = json.loads((run_dir / "run.json").read_text())
    assert result["timed_out"] and manifest["status"] == "timeout", manifest


def test_run_tasks_forks_the_replicas_of_a_task_from_one_template(tmp_path: Path) -> None:
    """``--replicas-per-task``: one template per task; a replica that raises leaves the next one's start warm."""
    spec = trainer("warm_cases.py:main")
    modules = preimports(project_files(TrainerSpec.parse(spec), Path.cwd()), Path.cwd())
    specs = []
    for replica in (0, 1, 4):
        run_dir, env = _prepared(tmp_path, spec, replica)
        env["DEVIATE_PREIMPORT"] = json.dumps(modules)
        specs.append(TaskSpec(str(run_dir), env, 60.0, 2.0, "ray", warm_modules=modules))
    results = run_tasks(specs)
    found = [json.loads((Path(s.run_dir) / "run.json").read_text()) for s in specs]
    assert [r["returncode"] for r in results] == [0, 1, 0]
    assert [m["status"] for m in found] == ["completed", "failed", "completed"], found
    assert [m["start_mode"] for m in found] == ["warm"] * 3
    assert len({m["warm"]["template_pid"] for m in found}) == 1
    assert "replica 1 fails on purpose" in (Path(specs[1].run_dir) / "stderr.log").read_text()
    cold = run_tasks([dataclasses.replace(specs[0], warm_modules=None)])  # one replica, or --cold: a fresh process
    assert (
        cold[0]["returncode"] == 0
        and json.loads((Path(specs[0].run_dir) / "run.json").read_text())["start_mode"] == "cold"
    )
