"""The launcher's lock (``.deviate-replicate.lock``) names only a launcher that runs: it is removed however the
launcher ends short of SIGKILL, and two launchers never hold it at once.

- SIGTERM right after the lock is taken (before the replicas start, where no ``finally`` of the runner covers it
  yet) used to leave the file behind with the dead launcher's pid; a launcher called in-process kept the lock
  held until its process ended, so a second call in the same process was refused, naming its own pid;
- a launcher that opens the lock file just as the holder ends and removes it locked the removed file, so a
  third launcher could create a new one and run beside it.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deviate_cb.errors import UsageError
from deviate_cb.launch.outdir import LOCK_FILE, OutputDirectory

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

# deviate-replicate, held in the gap between taking the lock and starting the replicas (make_progress is the
# first call after the planner) until SIGTERM arrives
_HELD_AFTER_LOCKING = """
import pathlib, sys, time
import deviate_cb.launch.runner as runner
from deviate_cb.cli.replicate import main

def held(*args, **kwargs):
    pathlib.Path(sys.argv[1]).write_text("locked")
    time.sleep(60)

runner.make_progress = held
sys.exit(main(sys.argv[2:]))
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


@pytest.mark.slow
def test_a_launcher_terminated_before_its_replicas_start_leaves_no_lock_and_the_next_one_runs(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    args = ["--trainer", f"{HERE / 'seeded_fn.py'}:main", "-n", "2", "--experiment", "e", "--out", str(out)]
    flag = tmp_path / "locked"
    launcher = subprocess.Popen(
        [sys.executable, "-c", _HELD_AFTER_LOCKING, str(flag), *args],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not flag.exists() and launcher.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    lock = out / "experiment=e" / "variant=algo+impl" / LOCK_FILE
    assert lock.read_text() == f"pid {launcher.pid} on {socket.gethostname()}\n"
    launcher.send_signal(signal.SIGTERM)
    _, stderr = launcher.communicate(timeout=60)
    assert launcher.returncode == 128 + signal.SIGTERM, stderr
    assert "interrupted (SIGTERM)" in stderr
    assert not lock.exists()  # it was left naming the dead launcher

    nxt = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.replicate", *args],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert nxt.returncode == 0, nxt.stdout + nxt.stderr
    assert "2 completed" in nxt.stdout and not lock.exists()


def test_a_lock_whose_owner_is_dropped_without_close_is_released(tmp_path: Path) -> None:
    out = OutputDirectory(tmp_path / "runs", "e", "algo")
    lock = out.open() / LOCK_FILE
    assert lock.exists()
    del out  # what an interrupt between open() and close() leaves once its traceback is gone (or at exit)
    gc.collect()
    assert not lock.exists()
    again = OutputDirectory(tmp_path / "runs", "e", "algo")  # the same process: it used to be refused
    again.open()
    assert lock.read_text() == f"pid {os.getpid()} on {socket.gethostname()}\n"
    again.close()
    assert not lock.exists()


def test_a_launcher_that_opens_the_lock_as_its_holder_ends_locks_the_file_that_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = OutputDirectory(tmp_path / "runs", "e", "algo")
    lock = holder.open() / LOCK_FILE
    import fcntl

    real_flock = fcntl.flock
    calls = []

    def holder_ends_first(fd: int, operation: int) -> None:
        calls.append(fd)
        if len(calls) == 1:  # the newcomer opened the file; the holder removes it and ends before flock
            holder.close()
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", holder_ends_first)
    newcomer = OutputDirectory(tmp_path / "runs", "e", "algo")
    newcomer.open()
    monkeypatch.setattr(fcntl, "flock", real_flock)
    assert len(calls) == 2  # the removed file was let go and the new one locked
    assert lock.exists()
    with pytest.raises(UsageError, match=rf"`--out` is in use: another deviate-replicate \(pid {os.getpid()} on "):
        OutputDirectory(tmp_path / "runs", "e", "algo").open()  # the third one is refused: one holder at a time
    newcomer.close()
    assert not lock.exists()


def test_the_lock_file_is_only_removed_by_its_own_holder(tmp_path: Path) -> None:
    out = OutputDirectory(tmp_path / "runs", "e", "algo")
    lock = out.open() / LOCK_FILE
    lock.unlink()  # removed by hand, and another launcher's lock made there since
    lock.write_text("pid 1 on elsewhere\n")
    out.close()
    assert lock.read_text() == "pid 1 on elsewhere\n"
