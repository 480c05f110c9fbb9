"""A launcher killed outright (SIGKILL) leaves no replica behind that could write into a later attempt, and its
replicas' manifests stop saying ``running`` as soon as anyone looks (``deviate status``, ``deviate report``, a
rerun)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.replicate_helpers import alive, manifest_or_empty, wait_for

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SLEEPER = HERE / "sleeper.py"

pytestmark = pytest.mark.slow


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _launch(args: list[str], out: Path, **env: str) -> subprocess.Popen[str]:
    cut = args.index("--") if "--" in args else len(args)
    return subprocess.Popen(
        [sys.executable, "-m", "deviate_cb.cli.replicate", *args[:cut], "--out", str(out), *args[cut:]],
        cwd=out.parent,
        env=_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _final_names(run_dir: Path) -> list[str]:
    import pyarrow.parquet as pq

    return sorted(r["name"] for r in pq.read_table(run_dir / "metrics.parquet").to_pylist() if r["stage"] == "final")


@pytest.mark.parametrize("mode", ["trainer", "command"])
def test_a_killed_launcher_leaves_no_replica_writing_and_a_rerun_gets_one_attempt(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "runs"
    if mode == "trainer":
        target = ["--trainer", f"{HERE / 'sleeper_fn.py'}:main"]
    else:  # a shell between the launcher and Python: the shell dies with the launcher, Python may not
        target = ["--", "bash", "-c", f"exec_python() {{ {sys.executable} {SLEEPER}; }}; exec_python"]
    args = ["-n", "1", "--experiment", "e", *target]
    run_dir = out / "experiment=e" / "variant=algo+impl" / "replica=0"
    first = _launch(args, out, SLEEPER_SECONDS="60")
    wait_for(lambda: (run_dir / "metrics.parquet").exists() and manifest_or_empty(run_dir).get("bootstrap"))
    pids = [entry["pid"] for entry in manifest_or_empty(run_dir)["bootstrap"]]
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    assert manifest_or_empty(run_dir)["status"] == "running"  # nobody could record the end

    # the replica is the launcher's child: it dies with it (SIGTERM, its callbacks flush); a Python behind a shell
    # is ended by the launcher's watchdog (SIGTERM, then SIGKILL to its process group after the kill grace)
    wait_for(lambda: not any(alive(pid) for pid in pids), timeout=30)
    status = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "status", str(out)], env=_env(), capture_output=True, text=True
    )
    assert status.returncode == 0, status.stderr
    row = next(line for line in status.stdout.splitlines() if line.split()[:3] == ["e", "algo+impl", "0"])
    # gone: settled as killed the moment someone looked
    assert row.split()[4] == "killed", status.stdout
    rerun = _launch(args, out, SLEEPER_SECONDS="0")
    stdout, stderr = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, stdout + stderr
    assert not any(alive(pid) for pid in pids)
    time.sleep(1.0)  # an orphan would have written by now
    assert _final_names(run_dir) == ["finished", "started"]  # one attempt's rows, not two
    manifest = manifest_or_empty(run_dir)
    assert manifest["status"] == "completed" and manifest["attempt"] == 2


def test_report_on_a_study_whose_launcher_was_killed_shows_its_replica_killed(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    trainer = ["--trainer", f"{HERE / 'sleeper_fn.py'}:main", "--experiment", "e"]
    first = _launch(["-n", "1", *trainer], out, SLEEPER_SECONDS="0")
    stdout, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stdout + stderr
    second = _launch(["-n", "2", *trainer], out, SLEEPER_SECONDS="60")  # replica 0 is skipped, 1 sleeps
    run_dir = out / "experiment=e" / "variant=algo+impl" / "replica=1"
    wait_for(lambda: (run_dir / "metrics.parquet").exists() and manifest_or_empty(run_dir).get("bootstrap"))
    pids = [entry["pid"] for entry in manifest_or_empty(run_dir)["bootstrap"]]
    second.send_signal(signal.SIGKILL)
    second.communicate(timeout=30)
    assert manifest_or_empty(run_dir)["status"] == "running"  # nobody could record the end
    wait_for(lambda: not any(alive(pid) for pid in pids), timeout=30)  # it died with its launcher

    report = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "report", str(out), "--format", "json"],
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert report.returncode == 0, report.stderr
    left_out = [line for line in report.stderr.splitlines() if "replica=1 left out of the statistics" in line]
    assert len(left_out) == 1 and ": killed" in left_out[0], report.stderr
    assert f"the launcher (pid {second.pid}) is gone" in left_out[0], left_out
    assert {row["n"] for row in json.loads(report.stdout)} == {1}  # replica 0 alone
    manifest = manifest_or_empty(run_dir)  # recorded on disk: every later reader, and a rerun, sees it killed
    assert manifest["status"] == "killed" and "lost before it ended" in manifest["reason"]
    assert manifest["ended_at"]
