"""What a Slurm array task or a Ray task runs on its node: the replica bootstrap, as a fresh process.

:func:`run_task` receives a :class:`TaskSpec` (plain data, so submitit and Ray pickle it by value and the
function by reference), checks that the run directory the launcher prepared is visible here, records where the
replica runs (host, ``CUDA_VISIBLE_DEVICES`` as the scheduler set it, the Slurm job id), starts
``python -m deviate_cb.launch.child`` with the replica's environment exactly as the local backend does, applies
the ``--timeout``, and writes the end of the manifest itself. The manifest and the Parquet files are the
truth: the small dict it returns is only a convenience for the launcher, which reads the manifest anyway.

The replica dies with its task: it gets ``SIGTERM`` when the task process dies (Linux ``PR_SET_PDEATHSIG``), so
a crashed Ray worker or a cancelled Slurm task leaves no orphan training behind.

Example:
    >>> spec = TaskSpec(run_dir="/nonexistent/replica=0", env={}, timeout_s=None)
    >>> run_task(spec)["error"]
    'run directory /nonexistent/replica=0 is not visible on this node'
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

__all__ = ["SLURM_ENV_JOB_ID", "TaskSpec", "check_marker", "node_argv", "run_task", "slurm_job_id_here"]

SLURM_ENV_JOB_ID = "SLURM_JOB_ID"


@dataclass(frozen=True)
class TaskSpec:
    """One replica as a task: its run directory, the environment additions, the timeout.

    Attributes:
        run_dir: The replica's run directory (must already hold the manifest the launcher wrote).
        env: Variables added to the node's environment (the run context, ``KERAS_BACKEND``...).
        timeout_s: ``--timeout``: SIGTERM after this long, SIGKILL ``kill_grace_s`` later; status ``timeout``.
        kill_grace_s: Seconds between SIGTERM and SIGKILL.
        backend: Recorded in the manifest as the place the replica ran.
        unset: Variables removed from the node's environment: those a scheduler injects into its workers that the
            launcher's environment lacks (Ray sets ``OMP_NUM_THREADS``), so a replica sees what it would locally.
        argv: The replica's command line (default: the ``--trainer`` bootstrap ``python -m deviate_cb.launch.child``
            with this node's interpreter); in command mode, the user's command with its placeholders filled.
        cwd: The launcher's working directory, where relative paths in the command point; used when it exists
            on this node.
    """

    run_dir: str
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: Optional[float] = None
    kill_grace_s: float = 5.0
    backend: str = ""
    unset: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()
    cwd: Optional[str] = None


def node_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """A job's command line for :attr:`TaskSpec.argv`: ``()`` for the ``--trainer`` bootstrap, which a node runs
    with its own interpreter; the command otherwise.

    Example:
        >>> node_argv(["/launcher/python", "-m", "deviate_cb.launch.child"]), node_argv(["python", "t.py"])
        ((), ('python', 't.py'))
    """
    return () if tuple(argv[1:]) == ("-m", "deviate_cb.launch.child") else tuple(argv)


def slurm_job_id_here(environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """This task's Slurm id as ``squeue``/``sacct`` print it: ``<array job>_<index>``, or the plain job id.

    Example:
        >>> slurm_job_id_here({"SLURM_ARRAY_JOB_ID": "12", "SLURM_ARRAY_TASK_ID": "3", "SLURM_JOB_ID": "15"})
        '12_3'
        >>> slurm_job_id_here({}) is None
        True
    """
    environ = os.environ if environ is None else environ
    array, index = environ.get("SLURM_ARRAY_JOB_ID"), environ.get("SLURM_ARRAY_TASK_ID")
    if array and index:
        return f"{array}_{index}"
    return environ.get(SLURM_ENV_JOB_ID) or None


def check_marker(path: str) -> tuple[bool, str]:
    """Whether ``path`` (a marker file the launcher wrote) is readable here, and this host's name.

    Example:
        >>> check_marker("/nonexistent/marker")[0]
        False
    """
    return Path(path).is_file(), socket.gethostname()


def run_task(spec: TaskSpec) -> dict[str, Any]:
    """Run one replica here; record its start and end in the manifest; return the outcome as a dict."""
    from deviate_cb.launch.base import Outcome
    from deviate_cb.launch.liveness import compact_what_it_left, die_with_parent
    from deviate_cb.launch.records import end_fields, signal_name
    from deviate_cb.store.run_directory import RunDirectory, iso_time

    run_dir = Path(spec.run_dir)
    run = RunDirectory(run_dir)
    if not run.manifest_path.is_file():
        return {"error": f"run directory {run_dir} is not visible on this node", "host": socket.gethostname()}
    fields: dict[str, Any] = {
        "host": socket.gethostname(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "started_at": iso_time(),
    }
    job_id = slurm_job_id_here()
    if job_id and spec.backend == "slurm":
        fields["slurm_job_id"] = job_id
    run.update_manifest(**fields)
    env = {k: v for k, v in os.environ.items() if k not in spec.unset}
    env.update(spec.env)
    stdout_path, stderr_path = run_dir / "stdout.log", run_dir / "stderr.log"
    started = time.time()
    timed_out = False
    with open(stdout_path, "ab") as out, open(stderr_path, "ab") as err:
        popen = subprocess.Popen(
            list(spec.argv) or [sys.executable, "-m", "deviate_cb.launch.child"],
            env=env,
            cwd=spec.cwd if spec.cwd and Path(spec.cwd).is_dir() else None,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            close_fds=True,
            preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
        )
        try:
            popen.wait(timeout=spec.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            popen.terminate()
            try:
                popen.wait(timeout=spec.kill_grace_s)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()
    rc = popen.returncode
    name = signal_name(rc)
    outcome = Outcome(returncode=rc, signal=name, timed_out=timed_out, started_at=started, ended_at=time.time())
    end = end_fields(outcome, stderr_path)
    end["pid"] = popen.pid
    compact_what_it_left(run)
    run.update_manifest(**end)
    return {"returncode": rc, "signal": name, "timed_out": timed_out, "started_at": started, "pid": popen.pid}
