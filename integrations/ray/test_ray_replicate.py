"""``deviate-replicate --backend ray`` on real local Ray clusters (loopback only).

Lightning on a private cluster the backend starts itself, Keras and the rest on the session's ``ray start`` cluster
(``--address``): results equal the local backend's, also forked warm several to a task (``--replicas-per-task``),
where a crash, a segfault or a timeout stays its replica's own; a worker that dies is recorded failed; each task
gets its own fake GPU through ``--num-gpus``; asking for more GPUs than the cluster has is a usage error.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.helpers.cluster_helpers import (
    COMMAND_PROJECT,
    KERAS_TRAINERS,
    TRAINERS,
    assert_same_run_dirs,
    metric_rows,
    replicate,
)

RAY_FIELDS = ("ray_error",)


def test_lightning_control_on_private_ray_equals_local(tmp_path: Path) -> None:
    args = ["--trainer", f"{TRAINERS}/lightning_tiny.py:main", "-n", "3", "--variant", "control", "--experiment", "l"]
    local = replicate([*args, "--parallel", "2"], tmp_path / "local")
    ray = replicate([*args, "--backend", "ray"], tmp_path / "ray")
    assert local.returncode == 0, local.stderr
    assert ray.returncode == 0, ray.stdout + ray.stderr
    for k in range(3):
        assert_same_run_dirs(local.run_dir("l", "control", k), ray.run_dir("l", "control", k), RAY_FIELDS)
        assert ray.manifest("l", "control", k)["backend"] == "ray"
    assert metric_rows(ray.run_dir("l", "control", 0)) == metric_rows(ray.run_dir("l", "control", 1))


def test_keras_control_on_ray_cluster_equals_local(tmp_path: Path, ray_address: str) -> None:
    args = ["--trainer", f"{KERAS_TRAINERS}/keras_tiny.py:main", "-n", "2", "--variant", "control"]
    args += ["--experiment", "k", "--keras-backend", "torch"]
    local = replicate([*args, "--parallel", "2"], tmp_path / "local")
    ray = replicate([*args, "--backend", "ray", "--address", ray_address], tmp_path / "ray")
    assert local.returncode == 0, local.stderr
    assert ray.returncode == 0, ray.stdout + ray.stderr
    for k in range(2):
        assert_same_run_dirs(local.run_dir("k", "control", k), ray.run_dir("k", "control", k), RAY_FIELDS)


def test_command_mode_on_ray_runs_in_the_launchers_directory_and_equals_local(tmp_path: Path, ray_address: str) -> None:
    shutil.copy(COMMAND_PROJECT, tmp_path / "train.py")  # a relative script: the task must run where the launcher does
    args = ["-n", "2", "--variant", "control", "--experiment", "c"]
    command = ["--", "python", "train.py", "--epochs", "1"]
    local = replicate([*args, *command], tmp_path / "local")
    ray = replicate([*args, "--backend", "ray", "--address", ray_address, *command], tmp_path / "ray")
    assert local.returncode == 0, local.stderr
    assert ray.returncode == 0, ray.stdout + ray.stderr
    for k in range(2):
        assert_same_run_dirs(local.run_dir("c", "control", k), ray.run_dir("c", "control", k), RAY_FIELDS)
        manifest = ray.manifest("c", "control", k)
        assert manifest["mode"] == "command" and manifest["injection"] == "bootstrapped"
        assert manifest["seeding"]["calls"][0]["asked"] == 42
        # the task's CPU (--num-cpus, default 1) is the replica's thread count, never the node's cores
        assert manifest["determinism"]["in_effect"]["env"]["OMP_NUM_THREADS"] == "1", manifest["determinism"]
        threads = json.loads((ray.run_dir("c", "control", k) / "fingerprint.json").read_text())["threads"]
        assert threads["launcher_budget"] == 1 and threads["torch_intra_op"] == 1, threads


def test_replicas_per_task_are_forked_warm_in_their_task_and_equal_local(tmp_path: Path, ray_address: str) -> None:
    args = ["--trainer", f"{TRAINERS}/lightning_tiny.py:main", "-n", "4", "--variant", "control", "--experiment", "l"]
    local = replicate([*args, "--parallel", "2"], tmp_path / "local")
    grouped = ["--backend", "ray", "--address", ray_address, "--replicas-per-task", "2", "--parallel", "4"]
    ray = replicate([*args, *grouped], tmp_path / "ray")
    # lightning_tiny's replica 3 SIGKILLs itself (the last of the second task): it fails alone, as it does locally
    assert local.returncode == 1, local.stdout + local.stderr
    assert ray.returncode == 1, ray.stdout + ray.stderr
    assert "task of 2 replicas" in ray.stdout and "2 at a time" in ray.stdout, ray.stdout
    manifests = [ray.manifest("l", "control", k) for k in range(4)]
    for k in range(3):
        assert_same_run_dirs(local.run_dir("l", "control", k), ray.run_dir("l", "control", k), RAY_FIELDS)
    assert [m["start_mode"] for m in manifests] == ["warm"] * 4, manifests
    assert [m["status"] for m in manifests] == ["completed"] * 3 + ["failed"] and manifests[3]["signal"] == "SIGKILL"
    templates = [m["warm"]["template_pid"] for m in manifests]
    assert templates[0] == templates[1] != templates[2] == templates[3], templates  # one template per task


def test_replicas_of_one_task_fail_alone(tmp_path: Path, ray_address: str) -> None:
    args = ["--trainer", f"{TRAINERS}/warm_cases.py:main", "-n", "5", "--backend", "ray", "--address", ray_address]
    result = replicate([*args, "--experiment", "i", "--replicas-per-task", "5", "--timeout", "10"], tmp_path / "runs")
    assert result.returncode == 1, result.stdout + result.stderr
    found = [result.manifest("i", "algo+impl", k) for k in range(5)]
    assert [m["status"] for m in found] == ["completed", "failed", "failed", "timeout", "completed"], found
    assert "replica 1 fails on purpose" in found[1]["exception"] and found[2]["signal"] == "SIGSEGV"
    assert {m["start_mode"] for m in found} == {"warm"} and len({m["warm"]["template_pid"] for m in found}) == 1


def test_dead_worker_is_recorded_failed(tmp_path: Path, ray_address: str) -> None:
    result = replicate(
        ["--trainer", f"{TRAINERS}/cluster_probe.py:kill_worker_on_replica_one", "-n", "3", "--backend", "ray",
         "--address", ray_address, "--experiment", "w"],
        tmp_path / "runs",
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    dead = result.manifest("w", "algo+impl", 1)
    assert dead["status"] == "failed" and dead["ray_error"].startswith("WorkerCrashedError"), dead
    assert [result.manifest("w", "algo+impl", k)["status"] for k in (0, 2)] == ["completed", "completed"]


def test_each_task_gets_its_own_fake_gpu(tmp_path: Path, ray_address: str) -> None:
    result = replicate(
        ["--trainer", f"{TRAINERS}/cluster_probe.py:slow", "-n", "2", "--backend", "ray", "--address", ray_address,
         "--num-gpus", "1", "--experiment", "g"],
        tmp_path / "runs",
        {"DEVIATE_TEST_SLEEP_S": "3"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    seen = sorted(result.manifest("g", "algo+impl", k)["cuda_visible_devices"] for k in range(2))
    assert seen == ["0", "1"]


def test_more_gpus_than_the_cluster_has_is_a_usage_error(tmp_path: Path, ray_address: str) -> None:
    result = replicate(
        ["--trainer", f"{TRAINERS}/cluster_probe.py:quick", "-n", "2", "--backend", "ray", "--address", ray_address,
         "--num-gpus", "4"],
        tmp_path / "runs",
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--num-gpus=4" in result.stderr and result.stderr.count("\n") == 1


ROUNDS_TRAINER = """\
import random
import sys


def base(seed):
    return {"acc": 0.80 + 0.01 * random.Random(seed).gauss(0.0, 1.0)}


if __name__ == "__main__":  # the new group, in command mode: its final line is read with --metric-regex
    print(f"acc={0.90 + 0.01 * random.Random(int(sys.argv[1])).gauss(0.0, 1.0):.6f}")
"""


def test_until_decided_runs_its_rounds_on_ray(tmp_path: Path, ray_address: str) -> None:
    (tmp_path / "fns.py").write_text(ROUNDS_TRAINER)
    out = tmp_path / "runs"
    ray = ["--backend", "ray", "--address", ray_address]
    base = replicate(["--trainer", "fns.py:base", "-n", "2", "--variant", "algo", "--experiment", "a", *ray], out)
    assert base.returncode == 0, base.stdout + base.stderr
    args = ["-n", "2", "--variant", "algo", "--experiment", "b", "--until-decided", "--against", "experiment=a",
            "--metric", "acc", "--max-runs", "6", "--parallel", "2", "--metric-regex", r"acc=(?P<acc>[0-9.]+)", *ray,
            "--", "python", "fns.py", "{seed}"]  # fmt: skip
    done = replicate(args, out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "A better" in done.stdout, done.stdout
    record = json.loads(next((out / ".sequential").glob("*.json")).read_text())
    assert record["decision"] == "A better"
    n = record["looks"][-1]["n_a"]
    assert done.manifest("b", "algo", n - 1)["backend"] == "ray"
    assert done.manifest("a", "algo", n - 1)["backend"] == "ray"  # B topped up on Ray in the same rounds
    assert done.manifest("a", "algo", n - 1)["configuration"]["trainer"] == "fns.py:base"


ISOLATED = """\
import os


def main():
    with open("history.json", "w") as f:  # a fixed path in the working directory
        f.write(os.getcwd())
    return {"acc": 0.5}
"""


def test_isolate_on_ray_gives_each_replica_its_own_working_directory(tmp_path: Path, ray_address: str) -> None:
    (tmp_path / "fns.py").write_text(ISOLATED)  # the launcher runs in tmp_path, the project's folder
    args = ["--trainer", "fns.py:main", "-n", "2", "--variant", "algo", "--experiment", "i", "--isolate"]
    done = replicate([*args, "--backend", "ray", "--address", ray_address], tmp_path / "runs")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (tmp_path / "history.json").exists()  # the project folder is left as it was
    for k in range(2):
        workdir = done.run_dir("i", "algo", k) / ".workdir" / tmp_path.name  # .workdir/<launch dir name>
        assert (workdir / "history.json").read_text() == str(workdir)  # each replica ran in its own
        assert done.manifest("i", "algo", k)["isolate"] is True
