"""``deviate-replicate --backend slurm`` against a real single-node Slurm (slurmdbd, two fake GPUs).

Lightning and Keras replicas on Slurm equal the local backend's, also forked warm several to a task
(``--replicas-per-task``), where a crash, a segfault or a timeout stays its replica's own; a replica cancelled with
``scancel`` is recorded failed within a bounded time; each task gets its own ``CUDA_VISIBLE_DEVICES``;
``--no-wait``, ``deviate status`` and reruns; a cluster without ``sacct``; a bad partition.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.cluster_helpers import (
    COMMAND_PROJECT,
    KERAS_TRAINERS,
    TRAINERS,
    assert_same_run_dirs,
    env,
    replicate,
    start,
)

SLURM_FIELDS = ("slurm_job_id", "slurm_state")


def test_lightning_control_on_slurm_equals_local(tmp_path: Path) -> None:
    args = ["--trainer", f"{TRAINERS}/lightning_tiny.py:main", "-n", "3", "--variant", "control", "--experiment", "l"]
    local = replicate([*args, "--parallel", "2"], tmp_path / "local")
    slurm = replicate([*args, "--backend", "slurm", "--cpus-per-replica", "1"], tmp_path / "slurm")
    assert local.returncode == 0, local.stderr
    assert slurm.returncode == 0, slurm.stdout + slurm.stderr
    for k in range(3):
        assert_same_run_dirs(local.run_dir("l", "control", k), slurm.run_dir("l", "control", k), SLURM_FIELDS)
        manifest = slurm.manifest("l", "control", k)
        assert manifest["backend"] == "slurm" and manifest["slurm_state"] == "COMPLETED"
        assert manifest["slurm_job_id"].endswith(f"_{k}")
    # control replicas are bit-identical across replicas too (same seed, deterministic tooling)
    from tests.helpers.cluster_helpers import metric_rows

    assert metric_rows(slurm.run_dir("l", "control", 0)) == metric_rows(slurm.run_dir("l", "control", 2))


def test_keras_control_on_slurm_equals_local(tmp_path: Path) -> None:
    args = ["--trainer", f"{KERAS_TRAINERS}/keras_tiny.py:main", "-n", "2", "--variant", "control"]
    args += ["--experiment", "k", "--keras-backend", "torch"]
    local = replicate([*args, "--parallel", "2"], tmp_path / "local")
    slurm = replicate([*args, "--backend", "slurm"], tmp_path / "slurm")
    assert local.returncode == 0, local.stderr
    assert slurm.returncode == 0, slurm.stdout + slurm.stderr
    for k in range(2):
        assert_same_run_dirs(local.run_dir("k", "control", k), slurm.run_dir("k", "control", k), SLURM_FIELDS)


def test_command_mode_on_slurm_runs_in_the_launchers_directory_and_equals_local(tmp_path: Path) -> None:
    shutil.copy(COMMAND_PROJECT, tmp_path / "train.py")  # a relative script: the task must run where the launcher does
    args = ["-n", "2", "--variant", "control", "--experiment", "c"]
    command = ["--", "python", "train.py", "--epochs", "1"]
    local = replicate([*args, *command], tmp_path / "local")
    slurm = replicate([*args, "--backend", "slurm", *command], tmp_path / "slurm")
    assert local.returncode == 0, local.stderr
    assert slurm.returncode == 0, slurm.stdout + slurm.stderr
    for k in range(2):
        assert_same_run_dirs(local.run_dir("c", "control", k), slurm.run_dir("c", "control", k), SLURM_FIELDS)
        manifest = slurm.manifest("c", "control", k)
        assert manifest["mode"] == "command" and manifest["injection"] == "bootstrapped"


def test_replicas_per_task_are_forked_warm_in_their_task_and_equal_local(tmp_path: Path) -> None:
    args = ["--trainer", f"{TRAINERS}/lightning_tiny.py:main", "-n", "4", "--variant", "control", "--experiment", "l"]
    local = replicate([*args, "--parallel", "2"], tmp_path / "local")
    grouped = ["--backend", "slurm", "--replicas-per-task", "2", "--cpus-per-replica", "1"]
    slurm = replicate([*args, *grouped], tmp_path / "slurm")
    # lightning_tiny's replica 3 SIGKILLs itself (the last of the second task): it fails alone, as it does locally
    assert local.returncode == 1, local.stdout + local.stderr
    assert slurm.returncode == 1, slurm.stdout + slurm.stderr
    assert "2 replicas per task" in slurm.stdout and "warm start (the template imports" in slurm.stdout, slurm.stdout
    manifests = [slurm.manifest("l", "control", k) for k in range(4)]
    for k in range(3):
        assert_same_run_dirs(local.run_dir("l", "control", k), slurm.run_dir("l", "control", k), SLURM_FIELDS)
    assert [m["start_mode"] for m in manifests] == ["warm"] * 4, manifests
    assert [m["status"] for m in manifests] == ["completed"] * 3 + ["failed"] and manifests[3]["signal"] == "SIGKILL"
    jobs = [m["slurm_job_id"] for m in manifests]
    assert jobs[0] == jobs[1] != jobs[2] == jobs[3] and jobs[0].endswith("_0") and jobs[2].endswith("_1"), jobs
    templates = [m["warm"]["template_pid"] for m in manifests]
    assert templates[0] == templates[1] and templates[2] == templates[3], templates  # one template per task
    assert [m["slurm_state"] for m in manifests] == ["COMPLETED"] * 4  # the task itself ended normally


def test_replicas_of_one_task_fail_alone(tmp_path: Path) -> None:
    args = ["--trainer", f"{TRAINERS}/warm_cases.py:main", "-n", "5", "--backend", "slurm", "--experiment", "i"]
    result = replicate([*args, "--replicas-per-task", "5", "--timeout", "10"], tmp_path / "runs")
    assert result.returncode == 1, result.stdout + result.stderr
    found = [result.manifest("i", "algo+impl", k) for k in range(5)]
    assert [m["status"] for m in found] == ["completed", "failed", "failed", "timeout", "completed"], found
    assert "replica 1 fails on purpose" in found[1]["exception"] and found[2]["signal"] == "SIGSEGV"
    assert {m["start_mode"] for m in found} == {"warm"} and len({m["warm"]["template_pid"] for m in found}) == 1
    assert found[4]["slurm_state"] == "COMPLETED"  # the replicas after a crash, a segfault and a timeout ran


def test_scancel_is_recorded_failed_within_bounded_time(tmp_path: Path) -> None:
    proc = start(
        [
            "--trainer",
            f"{TRAINERS}/cluster_probe.py:hang_on_replica_one",
            "-n",
            "2",
            "--backend",
            "slurm",
            "--experiment",
            "c",
        ],
        tmp_path / "runs",
    )
    manifest_path = tmp_path / "runs/experiment=c/variant=algo+impl/replica=1/run.json"
    job_id = None
    deadline = time.monotonic() + 120
    while job_id is None and time.monotonic() < deadline:
        if manifest_path.exists():
            job_id = json.loads(manifest_path.read_text()).get("slurm_job_id")  # written by the task on its node
        time.sleep(0.2)
    assert job_id, "replica 1 never started"
    time.sleep(1.0)  # the replica is in its trainer
    cancelled = time.monotonic()
    subprocess.run(["scancel", job_id], check=True)
    stdout, stderr = proc.communicate(timeout=60)
    detected_s = time.monotonic() - cancelled
    print(f"scancel of {job_id} recorded after {detected_s:.1f} s")
    assert proc.returncode == 1, stdout + stderr
    manifest = json.loads(manifest_path.read_text())
    assert manifest["status"] == "failed" and manifest["slurm_state"] == "CANCELLED", manifest
    assert "CANCELLED" in manifest["reason"]
    assert detected_s < 20
    other = json.loads((manifest_path.parent.parent / "replica=0/run.json").read_text())
    assert other["status"] == "completed"


def test_each_task_gets_its_own_fake_gpu(tmp_path: Path) -> None:
    result = replicate(
        [
            "--trainer",
            f"{TRAINERS}/cluster_probe.py:slow",
            "-n",
            "2",
            "--backend",
            "slurm",
            "--experiment",
            "g",
            "--gpus-per-replica",
            "1",
            "--cpus-per-replica",
            "1",
        ],
        tmp_path / "runs",
        {"DEVIATE_TEST_SLEEP_S": "4"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    seen = sorted(result.manifest("g", "algo+impl", k)["cuda_visible_devices"] for k in range(2))
    assert seen == ["0", "1"]


def test_no_wait_status_and_rerun(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    args = ["--trainer", f"{TRAINERS}/cluster_probe.py:slow", "-n", "2", "--backend", "slurm", "--experiment", "w"]
    extra = {"DEVIATE_TEST_SLEEP_S": "10"}
    began = time.monotonic()
    first = replicate([*args, "--no-wait"], out, extra)
    assert first.returncode == 0, first.stdout + first.stderr
    assert time.monotonic() - began < 15 and "2 submitted" in first.stdout
    jobs_file = out / "experiment=w/variant=algo+impl/.deviate-jobs.json"
    submitted = json.loads(jobs_file.read_text())["replicas"]
    again = replicate([*args, "--no-wait"], out, extra)
    assert again.returncode == 0 and "2 still running" in again.stdout, again.stdout + again.stderr
    assert json.loads(jobs_file.read_text())["replicas"] == submitted  # nothing resubmitted
    status = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "status", str(out)],
        env=env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert status.returncode == 0, status.stderr
    assert all(job in status.stdout for job in submitted.values())
    assert "queued" in status.stdout or "running" in status.stdout
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        states = [
            json.loads((out / f"experiment=w/variant=algo+impl/replica={k}/run.json").read_text())["status"]
            for k in range(2)
        ]
        if states == ["completed", "completed"]:
            break
        time.sleep(0.5)
    assert states == ["completed", "completed"]
    last = replicate(args, out, extra)
    assert last.returncode == 0 and "2 skipped" in last.stdout, last.stdout
    status = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "status", str(out)],
        env=env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert "2 completed" in status.stdout, status.stdout


def test_without_sacct_manifests_decide(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "sacct"
    fake.write_text("#!/bin/sh\necho 'sacct: error: Slurm accounting storage is disabled' >&2\nexit 1\n")
    fake.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    assert shutil.which("sacct", path=path) == str(fake)
    result = replicate(
        ["--trainer", f"{TRAINERS}/cluster_probe.py:quick", "-n", "2", "--backend", "slurm", "--experiment", "s"],
        tmp_path / "runs",
        {"PATH": path},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "sacct is unavailable" in result.stdout
    assert result.manifest("s", "algo+impl", 1)["status"] == "completed"


def test_unknown_partition_is_a_usage_error(tmp_path: Path) -> None:
    result = replicate(
        ["--trainer", f"{TRAINERS}/cluster_probe.py:quick", "-n", "2", "--backend", "slurm", "--partition", "nope"],
        tmp_path / "runs",
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "--partition=nope" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_ctrl_c_cancels_the_array_and_records_killed(tmp_path: Path) -> None:
    import signal

    proc = start(["--trainer", f"{TRAINERS}/cluster_probe.py:hang_on_replica_one", "-n", "2", "--backend", "slurm",
                  "--experiment", "i"], tmp_path / "runs")  # fmt: skip
    manifest_path = tmp_path / "runs/experiment=i/variant=algo+impl/replica=1/run.json"
    job_id = None
    deadline = time.monotonic() + 120
    while job_id is None and time.monotonic() < deadline:
        if manifest_path.exists():
            job_id = json.loads(manifest_path.read_text()).get("slurm_job_id")
        time.sleep(0.2)
    assert job_id, "replica 1 never started"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    manifest = json.loads(manifest_path.read_text())
    assert manifest["status"] == "killed" and "interrupted" in manifest["reason"], manifest
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        queue = subprocess.run(["squeue", "-h", "-j", job_id.split("_")[0]], capture_output=True, text=True).stdout
        if job_id not in queue.replace("_[", "_"):
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"{job_id} still queued after Ctrl-C: {queue}")


ROUNDS_TRAINER = """\
import random
import sys


def base(seed):
    return {"acc": 0.80 + 0.01 * random.Random(seed).gauss(0.0, 1.0)}


if __name__ == "__main__":  # the new group, in command mode: its final line is read with --metric-regex
    print(f"acc={0.90 + 0.01 * random.Random(int(sys.argv[1])).gauss(0.0, 1.0):.6f}")
"""


def test_until_decided_runs_its_rounds_on_slurm(tmp_path: Path) -> None:
    (tmp_path / "fns.py").write_text(ROUNDS_TRAINER)
    out = tmp_path / "runs"
    base = replicate(["--trainer", "fns.py:base", "-n", "2", "--variant", "algo", "--experiment", "a"], out)
    assert base.returncode == 0, base.stdout + base.stderr  # the baseline, made locally
    args = ["-n", "2", "--variant", "algo", "--experiment", "b", "--until-decided", "--against", "experiment=a",
            "--metric", "acc", "--max-runs", "6", "--parallel", "2", "--metric-regex", r"acc=(?P<acc>[0-9.]+)",
            "--backend", "slurm", "--", "python", "fns.py", "{seed}"]  # fmt: skip
    done = replicate(args, out)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(next((out / ".sequential").glob("*.json")).read_text())
    assert record["decision"] == "A better", record["looks"]
    n = record["looks"][-1]["n_a"]
    assert done.manifest("b", "algo", n - 1)["backend"] == "slurm"
    if n > 2:  # B topped up in the same rounds, on the backend of this launch, as its manifests record it
        assert done.manifest("a", "algo", n - 1)["backend"] == "slurm"
        assert done.manifest("a", "algo", n - 1)["configuration"]["trainer"] == "fns.py:base"
    no_wait = replicate([*args[:-4], "--no-wait", "--", "python", "fns.py", "{seed}"], out)
    assert no_wait.returncode == 2 and "`--no-wait` cannot be used with --until-decided" in no_wait.stderr


ISOLATED = """\
import os


def main():
    with open("history.json", "w") as f:  # a fixed path in the working directory
        f.write(os.getcwd())
    return {"acc": 0.5}
"""


def test_isolate_on_slurm_gives_each_replica_its_own_working_directory(tmp_path: Path) -> None:
    (tmp_path / "fns.py").write_text(ISOLATED)  # the launcher runs in tmp_path, the project's folder
    args = ["--trainer", "fns.py:main", "-n", "2", "--variant", "algo", "--experiment", "i", "--isolate"]
    done = replicate([*args, "--backend", "slurm"], tmp_path / "runs")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (tmp_path / "history.json").exists()  # the project folder is left as it was
    for k in range(2):
        workdir = done.run_dir("i", "algo", k) / ".workdir" / tmp_path.name  # .workdir/<launch dir name>
        assert (workdir / "history.json").read_text() == str(workdir)  # each replica ran in its own
        assert done.manifest("i", "algo", k)["isolate"] is True
