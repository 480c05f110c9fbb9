"""What a launcher killed outright, or a warm-start template that dies, leaves behind (issue 25, items 4 and 7).

With real ``deviate-replicate`` runs:

- while the SIGKILLed launcher is a zombie (its parent has not reaped it yet), it counts as dead: ``deviate
  status`` records its replica ``killed`` as soon as the replica's processes are gone;
- a ``--cold`` replica that handles SIGTERM itself (and ignores it) still ends within the kill grace after its
  launcher was killed: the launcher's watchdog sends its group SIGKILL;
- a warm replica lost with its killed template is recorded with the signal it got (SIGTERM), not SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.replicate_helpers import child_env, manifest, manifest_or_empty, start_cli, wait_for

pytestmark = pytest.mark.slow

KILL_GRACE_S = 5.0  # LocalBackend's default kill_grace_s, which deviate-replicate uses


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _status_rows(out: Path) -> dict[int, list[str]]:
    done = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "status", str(out)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[1:-1]]
    return {int(row[2]): row for row in rows}


def _stop(launcher: subprocess.Popen[str]) -> None:
    if launcher.poll() is None:
        launcher.kill()
    launcher.communicate(timeout=30)


def test_a_zombie_launcher_counts_as_dead(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    sleeper = Path(__file__).with_name("sleeper_fn.py")
    launcher = start_cli(
        ["--trainer", f"{sleeper}:main", "-n", "1", "--experiment", "e", "--out", str(out)],
        cwd=tmp_path,
        env={"SLEEPER_SECONDS": "120"},
    )
    run_dir = out / "experiment=e" / "variant=algo+impl" / "replica=0"
    try:
        wait_for(lambda: manifest_or_empty(run_dir).get("bootstrap"))
        pids = [entry["pid"] for entry in manifest(run_dir)["bootstrap"]]
        launcher.send_signal(signal.SIGKILL)  # and not reaped: it stays a zombie until communicate() below
        wait_for(lambda: not _running(launcher.pid), timeout=30)
        assert Path(f"/proc/{launcher.pid}").exists()  # the zombie is still there
        wait_for(lambda: not any(_running(pid) for pid in pids), timeout=30)  # the replica died with it

        row = _status_rows(out)[0]
        assert row[4] == "killed", row
        record = manifest(run_dir)
        assert record["status"] == "killed" and f"the launcher (pid {launcher.pid}) is gone" in record["reason"]
        assert Path(f"/proc/{launcher.pid}").exists()  # judged while it was a zombie
    finally:
        _stop(launcher)


def test_a_cold_replica_that_ignores_sigterm_ends_after_its_launcher_is_killed(tmp_path: Path) -> None:
    trainer = tmp_path / "stubborn.py"
    trainer.write_text(
        "import signal, time\n\n\n"
        "def main():\n"
        "    signal.signal(signal.SIGTERM, lambda signum, frame: print('SIGTERM ignored', flush=True))\n"
        "    print('training', flush=True)\n"
        "    time.sleep(120)\n"
    )
    out = tmp_path / "runs"
    launcher = start_cli(
        ["--trainer", f"{trainer}:main", "-n", "1", "--cold", "--timeout", "6", "--out", str(out)], cwd=tmp_path
    )
    run_dir = out / "experiment=stubborn" / "variant=algo+impl" / "replica=0"
    pid = 0
    try:
        wait_for(lambda: "training" in _text(run_dir / "stdout.log"))
        wait_for(lambda: manifest_or_empty(run_dir).get("bootstrap"))
        pid = manifest(run_dir)["bootstrap"][0]["pid"]
        assert manifest(run_dir)["status"] == "running"
        launcher.send_signal(signal.SIGKILL)
        launcher.communicate(timeout=30)
        killed_at = time.monotonic()
        wait_for(lambda: "SIGTERM ignored" in _text(run_dir / "stdout.log"), timeout=10)  # it got SIGTERM
        wait_for(lambda: not _running(pid), timeout=KILL_GRACE_S + 4)  # and SIGKILL after the grace
        assert time.monotonic() - killed_at >= KILL_GRACE_S - 1.0  # not before: the grace is the replica's

        assert _status_rows(out)[0][4] == "killed"
        assert manifest(run_dir)["status"] == "killed"
    finally:
        _stop(launcher)
        if pid and _running(pid):  # never leave it behind, whatever failed
            os.kill(pid, signal.SIGKILL)


def test_a_replica_lost_with_its_template_is_recorded_with_the_signal_it_got(tmp_path: Path) -> None:
    trainer = tmp_path / "warm_sleeper.py"
    trainer.write_text("import time\n\n\ndef main():\n    time.sleep(120)\n")
    out = tmp_path / "runs"
    launcher = start_cli(["--trainer", f"{trainer}:main", "-n", "1", "--out", str(out)], cwd=tmp_path)
    run_dir = out / "experiment=warm_sleeper" / "variant=algo+impl" / "replica=0"
    try:
        wait_for(lambda: "warm" in manifest_or_empty(run_dir) and manifest_or_empty(run_dir).get("bootstrap"))
        template = manifest(run_dir)["warm"]["template_pid"]
        os.kill(template, signal.SIGKILL)  # the replica gets SIGTERM from its template's death, nothing else
        stdout, stderr = launcher.communicate(timeout=120)
    finally:
        _stop(launcher)
    assert launcher.returncode == 1, (stdout, stderr)
    record = manifest(run_dir)
    assert record["warm_lost"] == f"its warm-start template (pid {template}) died"
    assert record["signal"] == "SIGTERM" and record["exit_code"] == -signal.SIGTERM, record
    assert record["reason"] == "killed by SIGTERM" and "SIGKILL" not in record["error"], record
