"""A process a replica starts outside its process group (a child in its own session, a double-forked daemon) is
stopped with the replica, and the launcher says so (issue 45, item 6).

Each case runs the real ``deviate-replicate`` console script in command mode on a tiny project whose script
starts an orphan that appends to a marker file in its run folder every 0.1 s. After the launcher returns (the
replica completed, ran past ``--timeout``, or the launcher got SIGTERM), the orphan's pid is gone, the marker stops
growing and the launcher named what it stopped; ``run.json`` records it. Linux only (``/proc``, a subreaper).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finding a replica's orphans needs /proc"),
]

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "deviate-replicate"

PROJECT = """
import os, subprocess, sys, time

run_dir = os.environ["DEVIATE_RUN_DIR"]
marker = os.path.join(run_dir, "orphan.marker")
loop = f"import time\\nwhile True:\\n    open({marker!r}, 'a').write('x')\\n    time.sleep(0.1)\\n"
if os.environ["ORPHAN_MODE"] == "session":
    quiet = subprocess.DEVNULL
    pid = subprocess.Popen(
        [sys.executable, "-c", loop], start_new_session=True, stdin=quiet, stdout=quiet, stderr=quiet
    ).pid
else:  # a daemon: fork, setsid, fork again, stdio to /dev/null; the middle process exits at once
    read, write = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.write(write, str(os.getpid()).encode())
            os.close(write)
            exec(loop)
        os._exit(0)
    os.close(write)
    pid = int(os.read(read, 32))
    os.wait()
with open(os.path.join(run_dir, "orphan.pid"), "w") as handle:
    handle.write(str(pid))
while not os.path.exists(marker):
    time.sleep(0.05)
time.sleep(float(os.environ.get("AFTER_S", "0")))
print("trained")
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a zombie writes nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "proj.py").write_text(PROJECT)
    yield tmp_path
    for pid_file in tmp_path.glob("runs/**/orphan.pid"):  # never leave an orphan behind, whatever failed
        pid = int(pid_file.read_text())
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if _running(pid) and (b"orphan.marker" in cmdline or b"proj.py" in cmdline):
                os.kill(pid, signal.SIGKILL)


def _launch(project: Path, mode: str, *args: str, after_s: float = 0.0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(SCRIPT), "-n", "1", "--experiment", "e", "--out", "runs", *args, "--", sys.executable, "proj.py"],
        cwd=project,
        env=_env(ORPHAN_MODE=mode, AFTER_S=str(after_s)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _check_stopped(run_dir: Path, output: str) -> dict[str, object]:
    pid = int((run_dir / "orphan.pid").read_text())
    deadline = time.monotonic() + 5
    while _running(pid) and time.monotonic() < deadline:  # the launcher has returned: nothing more may wait
        time.sleep(0.1)
    assert not _running(pid), f"the orphan (pid {pid}) outlived its launcher:\n{output}"
    size = (run_dir / "orphan.marker").stat().st_size
    time.sleep(0.5)
    assert (run_dir / "orphan.marker").stat().st_size == size, "the orphan still writes into the run folder"
    said = [line for line in output.splitlines() if "leftover process" in line]
    assert len(said) == 1 and f"pid {pid}" in said[0], output
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["leftovers_stopped"] == 1 and not manifest.get("survivors"), manifest
    return manifest


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["session", "daemon"])
def test_an_orphan_of_a_completed_replica_is_stopped_and_named(project: Path, mode: str) -> None:
    launcher = _launch(project, mode)
    stdout, stderr = launcher.communicate(timeout=120)
    assert launcher.returncode == 0, stdout + stderr
    manifest = _check_stopped(project / "runs/experiment=e/variant=algo+impl/replica=0", stdout + stderr)
    assert manifest["status"] == "completed"  # its main process completed: the leftover does not fail it


@pytest.mark.slow
def test_an_orphan_of_a_replica_past_its_timeout_is_stopped(project: Path) -> None:
    launcher = _launch(project, "session", "--timeout", "3", after_s=60)
    stdout, stderr = launcher.communicate(timeout=120)
    manifest = _check_stopped(project / "runs/experiment=e/variant=algo+impl/replica=0", stdout + stderr)
    assert manifest["status"] == "timeout"


def test_an_orphan_is_stopped_when_the_launcher_gets_sigterm(project: Path) -> None:
    launcher = _launch(project, "daemon", after_s=60)
    run_dir = project / "runs/experiment=e/variant=algo+impl/replica=0"
    deadline = time.monotonic() + 60
    while not (run_dir / "orphan.marker").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    launcher.send_signal(signal.SIGTERM)
    stdout, stderr = launcher.communicate(timeout=60)
    assert launcher.returncode == 143, stdout + stderr
    manifest = _check_stopped(run_dir, stdout + stderr)
    assert manifest["status"] == "killed"


def test_an_orphan_is_stopped_when_the_launcher_is_killed_outright(project: Path) -> None:
    """SIGKILL leaves the launcher no time: its watchdog ends the replica's group and sweeps its orphans too."""
    launcher = _launch(project, "session", after_s=60)
    run_dir = project / "runs/experiment=e/variant=algo+impl/replica=0"
    deadline = time.monotonic() + 60
    while not (run_dir / "orphan.marker").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (run_dir / "orphan.marker").exists(), "the replica never started its orphan"
    pid = int((run_dir / "orphan.pid").read_text())
    launcher.kill()
    launcher.communicate(timeout=60)
    deadline = time.monotonic() + 30  # the watchdog's grace for the group, then the orphan's
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pid), f"the orphan (pid {pid}) outlived its launcher, killed outright"
    size = (run_dir / "orphan.marker").stat().st_size
    time.sleep(0.5)
    assert (run_dir / "orphan.marker").stat().st_size == size, "the orphan still writes into the run folder"


USER_PROGRAM = """
import subprocess, sys, threading, time

from deviate_cb.launch.runner import replicate

started = {}


def start_own_server():  # the user's own process, started beside replicate() while its replica runs
    time.sleep(1.0)
    quiet = subprocess.DEVNULL
    started["pid"] = subprocess.Popen(["sleep", "60"], start_new_session=True, stdin=quiet, stdout=quiet,
                                      stderr=quiet).pid


threading.Thread(target=start_own_server).start()
result = replicate(command=[sys.executable, "-c", "import time; time.sleep(3); print('acc=0.5')"], runs=1,
                   out="runs", experiment="e", metric_regex=[r"acc=(?P<acc>\\S+)"])
print("pid", started["pid"], "completed", result.count("completed"), flush=True)
"""


@pytest.mark.slow
def test_the_users_own_child_beside_replicate_is_never_taken_for_a_leftover(tmp_path: Path) -> None:
    """``replicate()`` in a user's Python process: a child that process starts itself while a replica runs (in its
    own session, so outside the launcher's) is a child of the launcher but not proven the replica's: left alone."""
    (tmp_path / "user.py").write_text(USER_PROGRAM)
    done = subprocess.run([sys.executable, "user.py"], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    words = done.stdout.split()
    pid = int(words[words.index("pid") + 1])
    try:
        assert _running(pid), f"the user's own process (pid {pid}) was stopped: {done.stdout}{done.stderr}"
        assert "completed 1" in done.stdout and "leftover" not in done.stdout + done.stderr, done.stdout + done.stderr
    finally:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def test_a_dead_launchers_watchdog_never_takes_a_later_attempts_process(tmp_path: Path) -> None:
    """After a launcher dies, a rerun may already run a new attempt in the same run directory (same
    ``DEVIATE_RUN_DIR``) while the dead launcher's watchdog sweeps; only processes started before the watchdog saw
    the launcher gone are its replica's (``until``). Seen as a rerun's replica ``failed (exit -15, SIGTERM)``."""
    from deviate_cb.launch.backends.survivors import find_leftovers, now_ticks

    run_dir = tmp_path / "replica=0"
    run_dir.mkdir()
    died = now_ticks()
    time.sleep(0.05)  # a few clock ticks later, the rerun's replica starts
    later = subprocess.Popen(["sleep", "60"], env={**_env(), "DEVIATE_RUN_DIR": str(run_dir)}, start_new_session=True)
    try:
        assert [p.pid for p in find_leftovers(run_dir, since=0)] == [later.pid]  # proven by its run directory
        assert find_leftovers(run_dir, since=0, until=died) == []  # but started after the launcher was gone
    finally:
        later.kill()
        later.wait()
