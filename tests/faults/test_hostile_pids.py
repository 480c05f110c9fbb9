"""A run store is untrusted input: a ``run.json`` naming a process never makes a rerun signal it (issue 45, item 1).

- a replica's manifest edited to ``killed`` or ``running`` with the ``pid`` of an unrelated live process (with no
  start time, as an older deviate-cb wrote, with another start time, as after the id was reused, or with that
  process's own start time forged in): the rerun of
  ``deviate-replicate`` leaves the process alone and says so in one warning line;
- a genuine orphan of ours (a replica's Python in its own session, alive after its launcher was SIGKILLed) is
  still stopped by the rerun, as before.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from deviate_cb.launch.ownership import why_not_ours
from deviate_cb.store.processes import start_ticks
from tests.helpers.replicate_helpers import child_env, manifest_or_empty, wait_for

HERE = Path(__file__).resolve().parent
SLEEPER = HERE / "sleeper.py"
RUN_DIR = ("experiment=e", "variant=algo+impl", "replica=0")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process start times are read from /proc"),
]


def _deviate_replicate() -> str:
    """The ``deviate-replicate`` console script next to the running interpreter, as a user runs it."""
    script = Path(sys.executable).parent / "deviate-replicate"
    if not script.exists():
        pytest.fail(f"deviate-replicate is not installed next to {sys.executable} (pip install -e .)")
    return str(script)


def _start(args: Sequence[str], out: Path, env: Mapping[str, str]) -> subprocess.Popen[str]:
    cut = list(args).index("--") if "--" in args else len(args)
    argv = [_deviate_replicate(), *args[:cut], "--out", str(out), "--experiment", "e", *args[cut:]]
    return subprocess.Popen(
        argv, cwd=out.parent, env=child_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _run(args: Sequence[str], out: Path, **env: str) -> str:
    proc = _start(args, out, env)
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stdout + stderr
    return stdout + stderr


@pytest.fixture
def unrelated() -> Iterator[subprocess.Popen[bytes]]:
    """A real process of the user's that has nothing to do with deviate: a ``sleep`` in a session of its own."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize(("status", "start"), [("killed", "forged"), ("running", "none"), ("killed", "other")])
def test_a_rerun_leaves_a_process_the_store_names_alone(
    tmp_path: Path, unrelated: subprocess.Popen[bytes], status: str, start: str
) -> None:
    out = tmp_path / "runs"
    args = ["-n", "1", "--trainer", f"{HERE / 'sleeper_fn.py'}:main"]
    _run(args, out, SLEEPER_SECONDS="0")  # a real store: one completed replica
    run_dir = out.joinpath(*RUN_DIR)
    record = manifest_or_empty(run_dir)
    assert isinstance(record.get("pid_start"), int) and all("start" in entry for entry in record["bootstrap"])

    # the store edited (a shared folder): the replica unfinished, its process the user's unrelated sleep
    record.update(status=status, pid=unrelated.pid)  # its launcher_pid: the first launcher, gone
    record.pop("pid_start")
    record["bootstrap"] = [{"pid": unrelated.pid, "python": sys.executable, "argv": ["train.py"]}]
    ticks = start_ticks(unrelated.pid)
    assert ticks is not None
    if start == "forged":  # with the sleep's own start time: it passes the start-time check, not the rest
        record["pid_start"] = record["bootstrap"][0]["start"] = ticks
    elif start == "other":  # as if the replica's process had ended and its id been reused by the sleep
        record["pid_start"] = record["bootstrap"][0]["start"] = ticks - 1
    (run_dir / "run.json").write_text(json.dumps(record))

    output = _run(args, out, SLEEPER_SECONDS="0")
    time.sleep(0.5)
    assert unrelated.poll() is None, f"the unrelated process was signalled ({unrelated.returncode}):\n{output}"
    refused = [line for line in output.splitlines() if f"(pid {unrelated.pid}) is not proven" in line]
    assert len(refused) == 1 and refused[0].endswith("left alone"), output
    assert "stopping" not in output, output
    assert manifest_or_empty(run_dir)["status"] == "completed"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs setsid (util-linux)")
def test_an_orphaned_replica_of_ours_is_still_stopped_by_the_rerun(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    # the replica's Python in a session of its own: neither its launcher's death nor the watchdog reaches it
    command = ["--", "bash", "-c", f"setsid {sys.executable} {SLEEPER} & wait"]
    first = _start(["-n", "1", *command], out, {"SLEEPER_SECONDS": "60"})
    run_dir = out.joinpath(*RUN_DIR)
    wait_for(lambda: (run_dir / "metrics.parquet").exists() and manifest_or_empty(run_dir).get("bootstrap"))
    orphan = manifest_or_empty(run_dir)["bootstrap"][0]["pid"]
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    time.sleep(1.0)
    try:
        assert _alive(orphan), "the orphan did not outlive its launcher: nothing left to test"
        output = _run(["-n", "1", *command], out, SLEEPER_SECONDS="0")
        wait_for(lambda: not _alive(orphan), timeout=30)
        # the dead launcher's watchdog stops it too (its DEVIATE_RUN_DIR proves it): whichever comes first, the
        # rerun either stopped it, saying so, or found it gone; it never left it alone as not proven
        stopped = f"stopping 1 process still running from an earlier attempt whose launcher is gone (pid {orphan})"
        assert stopped in output or "still running from an earlier attempt" not in output, output
        assert "not proven" not in output, output
        assert manifest_or_empty(run_dir)["status"] == "completed"
    finally:
        if _alive(orphan):
            os.kill(orphan, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_only_a_process_that_names_the_run_directory_is_proven_ours(tmp_path: Path) -> None:
    run_dir = tmp_path.joinpath(*RUN_DIR)
    run_dir.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    with (run_dir / "stdout.log").open("w") as log:
        started = [
            subprocess.Popen(["sleep", "60"], env={**env, "DEVIATE_RUN_DIR": str(run_dir)}, start_new_session=True),
            subprocess.Popen(["sleep", "60"], env=env, stdout=log, start_new_session=True),  # as one forked warm
            subprocess.Popen(["sleep", "60"], env={**env, "DEVIATE_RUN_DIR": str(tmp_path)}, start_new_session=True),
            subprocess.Popen(["sleep", "60"], env=env, start_new_session=True),
        ]
    try:
        named, logging, elsewhere, unrelated = started
        assert why_not_ours(named.pid, run_dir, start_ticks(named.pid)) is None
        assert why_not_ours(logging.pid, run_dir, start_ticks(logging.pid)) is None
        assert "is another folder" in str(why_not_ours(elsewhere.pid, run_dir, start_ticks(elsewhere.pid)))
        assert "sets no DEVIATE_RUN_DIR" in str(why_not_ours(unrelated.pid, run_dir, start_ticks(unrelated.pid)))
        assert "another time" in str(why_not_ours(named.pid, run_dir, int(start_ticks(named.pid) or 0) + 1))
        assert "older deviate-cb" in str(why_not_ours(named.pid, run_dir, None))
        assert "launcher itself" in str(why_not_ours(os.getpid(), run_dir, start_ticks(os.getpid())))
    finally:
        for proc in started:
            proc.kill()
            proc.wait()
