"""deviate-replicate end to end: real replica processes, real Parquet, real signals."""

from __future__ import annotations

import json
import math
import os
import signal
import time
from pathlib import Path

import pytest

from deviate_cb.launch.runner import replicate
from deviate_cb.store.run_directory import RunDirectory
from tests.helpers.replicate_helpers import (
    TRAINERS,
    child_env,
    final_metrics,
    manifest,
    metrics,
    start_cli,
    trainer,
)


@pytest.mark.slow
def test_torch_control_replicas_are_bit_identical_and_algo_impl_differ(cli) -> None:
    control = cli("--trainer", trainer("torch_loop.py:train"), "-n", "2", "--variant", "control", "--parallel", "2")
    assert control.returncode == 0, control.stderr
    noisy = cli("--trainer", trainer("torch_loop.py:train"), "-n", "2", "--parallel", "2")
    assert noisy.returncode == 0, noisy.stderr

    def values(variant: str, replica: int) -> list[tuple[str, str, float]]:
        rows = metrics(control.run_dir("torch_loop", variant, replica))
        return [(r["stage"], r["name"], r["value"]) for r in rows]

    assert len(values("control", 0)) == 33  # 30 logged steps + 3 returned metrics
    assert values("control", 0) == values("control", 1)  # exact float equality
    assert values("algo+impl", 0) != values("algo+impl", 1)
    first = manifest(control.run_dir("torch_loop", "control", 0))
    assert first["determinism"]["verified"] is True
    assert first["determinism"]["in_effect"]["torch"]["deterministic_algorithms"] is True
    assert first["determinism"]["in_effect"]["torch"]["initial_seed"] == 0
    noisy_first = manifest(noisy.run_dir("torch_loop", "algo+impl", 1))
    assert noisy_first["determinism"]["in_effect"]["torch"]["deterministic_algorithms"] is False
    assert (control.run_dir("torch_loop", "control", 0) / "fingerprint.json").exists()


@pytest.mark.parametrize(
    ("variant", "seeds", "deterministic"),
    [("algo+impl", [10, 11], False), ("algo", [10, 11], True), ("impl", [10, 10], False), ("control", [10, 10], True)],
)
def test_replica_environment_and_seeds_follow_the_variant(cli, variant: str, seeds: list[int], deterministic: bool):
    args = ("--trainer", trainer("basic.py:echo"), "-n", "2", "--variant", variant, "--seed", "10", "--parallel", "2")
    done = cli(*args, "--gpus", "none")
    assert done.returncode == 0, done.stderr
    hashes = []
    for replica, seed in enumerate(seeds):
        run_dir = done.run_dir("basic", variant, replica)
        env = json.loads((run_dir / "env.json").read_text())
        assert env["DEVIATE_RUN_DIR"] == str(run_dir)
        assert (env["DEVIATE_REPLICA"], env["DEVIATE_SEED"], env["DEVIATE_VARIANT"]) == (
            str(replica),
            str(seed),
            variant,
        )
        assert env["DEVIATE_EXPERIMENT"] == "basic" and env["DEVIATE_TRAINER"] == trainer("basic.py:echo")
        assert env["PL_GLOBAL_SEED"] == str(seed)
        assert env["PYTHONHASHSEED"] == env["DEVIATE_HASH_SEED"] == "10"  # the study's base seed, in every variant
        assert (
            (env["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8") if deterministic else env["CUBLAS_WORKSPACE_CONFIG"] is None
        )
        assert env["CUDA_VISIBLE_DEVICES"] is None  # --gpus none: no placement, inherited (unset)
        values = final_metrics(run_dir)
        assert values["seed"] == seed and values["replica"] == replica and values["cublas_set"] == deterministic
        hashes.append((values["np_rand"], values["py_rand"]))
        assert values["hash"] == final_metrics(done.run_dir("basic", variant, 0))["hash"]
        record = manifest(run_dir)
        assert record["status"] == "completed" and record["exit_code"] == 0 and record["seed"] == seed
        assert record["variant"] == variant and record["replica"] == replica and record["base_seed"] == 10
        assert record["deterministic"] is deterministic and record["experiment"] == "basic"
        assert record["argv"][:3] == ["deviate-replicate", "--trainer", trainer("basic.py:echo")]
        assert record["final_metrics"] == ["seed", "replica", "np_rand", "py_rand", "hash", "cublas_set"]
        for key in ("started_at", "ended_at", "duration_s", "host", "pid", "launcher_pid", "deviate_version"):
            assert record[key] is not None, key
    # Same seed: same RNG draws (seeding happens before user code runs); str hashes are the same in every replica.
    assert (hashes[0] == hashes[1]) is (seeds[0] == seeds[1])
    assert "2 completed, 0 failed, 0 skipped in " in done.stdout and "run `deviate report " in done.stdout


@pytest.mark.slow
def test_failed_replica_is_recorded_and_never_stops_the_others_then_resume_and_force(cli, tmp_path: Path) -> None:
    log = tmp_path / "launches.txt"
    args = ("--trainer", trainer("basic.py:fail_on_replica"), "-n", "3", "--parallel", "2", "--experiment", "exp")
    first = cli(*args, env={"LAUNCH_LOG": str(log), "FAIL_REPLICA": "1"})
    assert first.returncode == 1
    assert "2 completed, 1 failed, 0 skipped" in first.stdout
    failed = manifest(first.run_dir("exp", "algo+impl", 1))
    assert failed["status"] == "failed" and failed["exit_code"] == 1 and failed["signal"] is None
    assert "RuntimeError: replica 1 fails on purpose" in failed["error"]
    assert "about to fail" in failed["error"] and len(failed["error"].splitlines()) <= 20
    assert failed["exception"] == "RuntimeError: replica 1 fails on purpose"
    assert [manifest(first.run_dir("exp", "algo+impl", k))["status"] for k in (0, 2)] == ["completed"] * 2
    started_0 = manifest(first.run_dir("exp", "algo+impl", 0))["started_at"]
    assert len(log.read_text().splitlines()) == 3

    resumed = cli(*args, env={"LAUNCH_LOG": str(log), "FAIL_REPLICA": "99"})
    assert resumed.returncode == 0, resumed.stderr
    assert "replica 0 (seed 0): skipped (already completed)" in resumed.stdout
    assert "replica 2 (seed 2): skipped (already completed)" in resumed.stdout
    assert "1 completed, 0 failed, 2 skipped" in resumed.stdout
    assert [line.split()[0] for line in log.read_text().splitlines()][3:] == ["1"]
    rerun = manifest(resumed.run_dir("exp", "algo+impl", 1))
    assert rerun["status"] == "completed" and rerun["attempt"] == 2
    assert "error" not in rerun and "exception" not in rerun  # the failed attempt's record was cleared
    assert "about to fail" not in (resumed.run_dir("exp", "algo+impl", 1) / "stderr.log").read_text()
    assert manifest(resumed.run_dir("exp", "algo+impl", 0))["started_at"] == started_0

    forced = cli(*args, "--force", env={"LAUNCH_LOG": str(log), "FAIL_REPLICA": "99"})
    assert forced.returncode == 0 and "3 completed, 0 failed, 0 skipped" in forced.stdout
    assert len(log.read_text().splitlines()) == 7
    assert manifest(forced.run_dir("exp", "algo+impl", 0))["started_at"] != started_0
    assert len(final_metrics(forced.run_dir("exp", "algo+impl", 0))) == 1  # cleared, not appended twice


def test_running_left_by_a_dead_launcher_is_rerun_from_scratch(cli, tmp_path: Path) -> None:
    stale = RunDirectory(tmp_path / "runs" / "experiment=basic" / "variant=algo+impl" / "replica=0")
    stale.update_manifest(status="running", seed=0, launcher_pid=999999, error="old")
    stale.metrics().append(
        {"step": [5], "epoch": [0], "stage": ["train"], "scope": ["step"], "name": ["stale"], "value": [1.0],
         "wall_time": [0.0]}
    )  # fmt: skip
    (stale.path / "stderr.log").write_text("old attempt\n")
    done = cli("--trainer", trainer("basic.py:counted"), "-n", "1")
    assert done.returncode == 0, done.stderr
    assert [r["name"] for r in metrics(stale.path)] == ["replica"]
    record = manifest(stale.path)
    assert record["status"] == "completed" and record["attempt"] == 2 and "error" not in record
    assert "old attempt" not in (stale.path / "stderr.log").read_text()


def test_sigkill_mid_training_keeps_flushed_metrics_and_is_marked_failed(cli) -> None:
    done = cli("--trainer", trainer("basic.py:sigkill_midway"), "-n", "1")
    assert done.returncode == 1
    run_dir = done.run_dir("basic", "algo+impl", 0)
    record = manifest(run_dir)
    assert (record["status"], record["signal"], record["exit_code"]) == ("failed", "SIGKILL", -signal.SIGKILL)
    assert record["error"] == "killed by SIGKILL"
    assert [(r["epoch"], r["name"]) for r in metrics(run_dir)] == [(0, "loss"), (1, "loss")]
    assert "epoch 2 starting" in (run_dir / "stdout.log").read_text()  # unbuffered: nothing lost
    assert "0 completed, 1 failed" in done.stdout and "SIGKILL" in done.stdout


def test_timeout_terminates_the_replica_and_marks_it(cli) -> None:
    started = time.monotonic()
    done = cli("--trainer", trainer("basic.py:sleep_forever"), "-n", "1", "--timeout", "1.5")
    assert done.returncode == 1 and time.monotonic() - started < 30
    record = manifest(done.run_dir("basic", "algo+impl", 0))
    assert record["status"] == "timeout" and record["timeout_s"] == 1.5 and record["duration_s"] >= 1.5
    assert record["reason"].startswith("timed out after")
    assert "1 timed out" in done.stdout
    pid = int((done.run_dir("basic", "algo+impl", 0) / "sleeping").read_text())
    assert not _alive(pid)


def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(tmp_path: Path) -> None:
    with open(os.devnull, "w") as sink:
        result = replicate(
            trainer("basic.py:ignore_sigterm"), out=tmp_path / "runs", timeout=1.0, kill_grace_s=0.5, stream=sink
        )
    assert result.exit_status == 1 and result.replicas[0].status == "timeout"
    record = manifest(result.replicas[0].run_dir)
    assert record["status"] == "timeout" and record["signal"] == "SIGKILL"


@pytest.mark.slow
def test_parallel_slots_get_their_own_gpu(cli) -> None:
    done = cli(
        "--trainer", trainer("basic.py:sleep_briefly"), "-n", "2", "--parallel", "2", "--gpus", "0,1",
        env={"SLEEP_S": "1.5"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    runs = [final_metrics(done.run_dir("basic", "algo+impl", k)) for k in (0, 1)]
    assert sorted(r["gpu"] for r in runs) == [0.0, 1.0]
    assert runs[0]["start"] < runs[1]["end"] and runs[1]["start"] < runs[0]["end"]  # they overlapped
    records = [manifest(done.run_dir("basic", "algo+impl", k)) for k in (0, 1)]
    assert sorted(r["cuda_visible_devices"] for r in records) == ["0", "1"]
    assert "(GPU 0)" in done.stdout and "(GPU 1)" in done.stdout


def test_gpus_default_to_cuda_visible_devices(cli) -> None:
    done = cli(
        "--trainer", trainer("basic.py:sleep_briefly"), "-n", "3", "--parallel", "2",
        env={"SLEEP_S": "0", "CUDA_VISIBLE_DEVICES": "3,5"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    gpus = [manifest(done.run_dir("basic", "algo+impl", k))["cuda_visible_devices"] for k in range(3)]
    assert set(gpus) == {"3", "5"} and "GPUs: 3, 5" in done.stdout


@pytest.mark.slow
def test_function_signatures_and_module_form(cli, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(TRAINERS)}
    for fn, expected in (("no_args", 0.0), ("keyword_only", 14.0), ("coroutine", 7.0)):
        done = cli("--trainer", f"basic:{fn}", "-n", "1", "--seed", "7", "--experiment", fn, env=env)
        assert done.returncode == 0, done.stderr
        assert final_metrics(done.run_dir(fn, "algo+impl", 0))["called_with"] == expected
    # `python -m` semantics: the current directory is importable; the default experiment is the module name.
    done = cli("--trainer", "basic:with_seed", "-n", "1", "--seed", "3", cwd=TRAINERS, out=tmp_path / "cwd_runs")
    assert done.returncode == 0, done.stderr
    assert final_metrics(done.run_dir("basic", "algo+impl", 0)) == {"called_with": 3.0}


def test_returned_values_that_are_not_numbers_are_skipped_with_one_warning(cli) -> None:
    done = cli("--trainer", trainer("basic.py:mixed_values"), "-n", "1")
    assert done.returncode == 0, done.stderr
    run_dir = done.run_dir("basic", "algo+impl", 0)
    rows = {r["name"]: r for r in metrics(run_dir)}
    assert set(rows) == {"int", "float32", "bool", "zero_d", "nan", "inf"}
    assert rows["float32"]["value"] == 2.5 and rows["bool"]["value"] == 1.0 and rows["zero_d"]["value"] == 4.0
    assert math.isnan(rows["nan"]["value"]) and not rows["nan"]["finite"] and not rows["inf"]["finite"]
    warnings = [line for line in (run_dir / "stderr.log").read_text().splitlines() if "warning" in line]
    assert len(warnings) == 3
    assert any("'text'" in w and "str" in w for w in warnings) and any("'vector'" in w for w in warnings)


def test_list_of_mappings_and_other_results(cli) -> None:
    done = cli("--trainer", trainer("basic.py:list_of_mappings"), "-n", "1")
    assert final_metrics(done.run_dir("basic", "algo+impl", 0)) == {
        "test_acc/dataloader_idx_0": 0.5,
        "test_acc/dataloader_idx_1": 0.25,
    }
    done = cli("--trainer", trainer("basic.py:returns_model"), "-n", "1", "--experiment", "model")
    assert done.returncode == 0 and not (done.run_dir("model", "algo+impl", 0) / "metrics.parquet").exists()
    stderr = (done.run_dir("model", "algo+impl", 0) / "stderr.log").read_text()
    assert "not a mapping of metrics; nothing recorded" in stderr


def test_a_users_exit_status_3_is_a_failure_not_a_usage_error(cli) -> None:
    done = cli("--trainer", trainer("basic.py:exits_three"), "-n", "1")
    assert done.returncode == 1
    assert manifest(done.run_dir("basic", "algo+impl", 0))["exit_code"] == 3


@pytest.mark.parametrize(("signum", "expected"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_kills_running_replicas_and_records_them(tmp_path: Path, signum: int, expected: int) -> None:
    out = tmp_path / "runs"
    args = ["--trainer", trainer("basic.py:sleep_forever"), "-n", "3", "--parallel", "2", "--out", str(out)]
    proc = start_cli(args, cwd=tmp_path)
    variant_dir = out / "experiment=basic" / "variant=algo+impl"
    deadline = time.monotonic() + 30
    while len(list(variant_dir.glob("replica=*/sleeping"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    pids = [int(p.read_text()) for p in variant_dir.glob("replica=*/sleeping")]
    assert len(pids) == 2
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == expected, stderr
    assert [manifest(variant_dir / f"replica={k}")["status"] for k in (0, 1)] == ["killed", "killed"]
    assert "interrupted" in manifest(variant_dir / "replica=0")["reason"]
    assert not (variant_dir / "replica=2").exists()
    assert "2 killed, 1 not started" in stdout and "Traceback" not in stderr
    assert not any(_alive(pid) for pid in pids)
    assert not (variant_dir / ".deviate-replicate.lock").exists()


def test_live_table_on_a_terminal(tmp_path: Path) -> None:
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    args = ["--trainer", trainer("basic.py:no_args"), "-n", "2", "--out", str(tmp_path / "runs")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "deviate_cb.cli.replicate", *args],
        stdout=follower, stderr=follower, env=child_env({"COLUMNS": "100"}), cwd=tmp_path,
    )  # fmt: skip
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    assert proc.wait(timeout=60) == 0
    text = output.decode(errors="replace")
    assert "slot/GPU" in text and "completed" in text and "2 completed, 0 failed, 0 skipped" in text


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True
