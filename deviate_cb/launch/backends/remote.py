"""What a Slurm array task or a Ray task runs on its node: its replicas, one after another.

Example:
    >>> spec = TaskSpec(run_dir="/nonexistent/replica=0", env={}, timeout_s=None)
    >>> run_tasks([spec])[0]["error"]
    'run directory /nonexistent/replica=0 is not visible on this node'
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

if TYPE_CHECKING:
    from deviate_cb.store.manifest import LaunchEnd

__all__ = [
    "SLURM_ENV_JOB_ID",
    "GroupedTasks",
    "TaskSpec",
    "check_marker",
    "node_argv",
    "run_task",
    "run_tasks",
    "slurm_job_id_here",
    "task_groups",
]

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
        argv: The replica's command line (default: the ``--trainer`` bootstrap ``python -m
            deviate_cb.launch.replica.child`` with this node's interpreter); in command mode, the user's command with
            its placeholders filled.
        cwd: The launcher's working directory, where relative paths in the command point; used when it exists
            on this node.
        warm_modules: What a warm-start template imports before forking this replica, in a task of several
            replicas (:attr:`~deviate_cb.launch.backends.base.Job.warm_modules`); ``None``: a fresh process.
        cpus: The CPUs the scheduler gave the task (a Ray task's ``num_cpus``); ``None``: Slurm's
            ``SLURM_CPUS_PER_TASK`` on the node, else the CPUs the task may use. The replica's CPU threads.
    """

    run_dir: str
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: Optional[float] = None
    kill_grace_s: float = 5.0
    backend: str = ""
    unset: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()
    cwd: Optional[str] = None
    warm_modules: Optional[tuple[str, ...]] = None
    cpus: Optional[float] = None


def node_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """A job's command line for :attr:`TaskSpec.argv`: ``()`` for the ``--trainer`` bootstrap, which a node runs
    with its own interpreter; the command otherwise.

    Example:
        >>> node_argv(["/launcher/python", "-m", "deviate_cb.launch.replica.child"]), node_argv(["python", "t.py"])
        ((), ('python', 't.py'))
    """
    return () if tuple(argv[1:]) == ("-m", "deviate_cb.launch.replica.child") else tuple(argv)


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


def task_groups(items: Sequence[Any], per_task: int) -> list[list[Any]]:
    """``items`` in consecutive groups of ``per_task``, one group per cluster task (the last may be shorter).

    Example:
        >>> task_groups([0, 1, 2, 3, 4], 2)
        [[0, 1], [2, 3], [4]]
    """
    return [list(items[i : i + per_task]) for i in range(0, len(items), per_task)]


class GroupedTasks:
    """``--replicas-per-task`` for a cluster backend (mixed in before
    :class:`~deviate_cb.launch.backends.base.Backend`): ``replicas_per_task`` replicas per task, forked warm when there
    are several, ``parallel`` replicas at once.

    Example:
        >>> class Tasks(GroupedTasks):
        ...     parallel, replicas_per_task = 8, 3
        >>> Tasks().tasks_at_once, Tasks().warm_start
        (2, True)
    """

    parallel: int
    replicas_per_task: int

    @property
    def warm_start(self) -> bool:
        """A task of several replicas forks them from one template; a task of one starts it cold."""
        return self.replicas_per_task > 1

    @property
    def tasks_at_once(self) -> int:
        """Tasks running at once: ``parallel`` replicas, ``replicas_per_task`` in each task (at least one)."""
        return max(1, self.parallel // self.replicas_per_task)


def run_tasks(specs: Sequence[TaskSpec]) -> list[dict[str, Any]]:
    """Run the replicas of one task here, one after another (warm when there are several); record each one's start
    and end in its manifest; return their outcomes as dicts, in order."""
    from deviate_cb.launch.backends.warm import WarmStarter

    starter = WarmStarter() if len(specs) > 1 and any(s.warm_modules is not None for s in specs) else None
    try:
        return [run_task(spec, starter) for spec in specs]
    finally:
        if starter is not None:
            starter.close()


def run_task(spec: TaskSpec, starter: Optional[Any] = None) -> dict[str, Any]:
    """Run one replica here (forked by ``starter``, a :class:`~deviate_cb.launch.backends.warm.WarmStarter`, when given
    and the spec has ``warm_modules``); record its start and end in the manifest; return the outcome as a dict."""
    from deviate_cb.launch.backends.base import Outcome
    from deviate_cb.launch.backends.threads import task_thread_env
    from deviate_cb.launch.records import end_fields, machine_fields, signal_name
    from deviate_cb.store.manifest import LaunchStart
    from deviate_cb.store.run_directory import RunDirectory, iso_time
    from deviate_cb.store.settling import compact_what_it_left

    run_dir = Path(spec.run_dir)
    run = RunDirectory(run_dir)
    if not run.manifest_path.is_file():
        return {"error": f"run directory {run_dir} is not visible on this node", "host": socket.gethostname()}
    here = LaunchStart(
        host=socket.gethostname(),
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        started_at=iso_time(),
        **machine_fields("start").fields(),  # the node's CPUs and load, not the launcher's
    )
    job_id = slurm_job_id_here()
    if job_id and spec.backend == "slurm":
        here = here.with_changes(slurm_job_id=job_id)
    run.record(here)
    env = {k: v for k, v in os.environ.items() if k not in spec.unset}
    env.update(spec.env)
    env.update(task_thread_env(env, spec.cpus))  # never more threads than the task was given, unless the user chose
    stdout_path, stderr_path = run_dir / "stdout.log", run_dir / "stderr.log"
    started = time.time()
    process, start = _start(spec, env, stdout_path, stderr_path, starter)
    timed_out = False
    try:
        process.wait(timeout=spec.timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _signal(process, signal.SIGTERM)
        try:
            process.wait(timeout=spec.kill_grace_s)
        except subprocess.TimeoutExpired:
            _signal(process, signal.SIGKILL)
            process.wait()
    rc = process.returncode
    assert rc is not None
    name = signal_name(rc)
    lost = getattr(process, "lost", None)  # a forked replica whose template died
    if lost:
        start = start.with_changes(warm_lost=lost)
    outcome = Outcome(
        returncode=rc,
        signal=name,
        timed_out=timed_out,
        started_at=started,
        ended_at=time.time(),
        pid=process.pid,
        end=start,
    )
    compact_what_it_left(run)  # first: an exit 0 is judged on what the replica recorded (its fit, its steps)
    try:
        left = run.manifest()
    except Exception:  # unreadable: judged on the exit status alone
        left = None
    run.record(end_fields(outcome, stderr_path, manifest=left, run_dir=run.path))
    return {"returncode": rc, "signal": name, "timed_out": timed_out, "started_at": started, "pid": process.pid}


def _start(
    spec: TaskSpec, env: dict[str, str], stdout_path: Path, stderr_path: Path, starter: Optional[Any]
) -> tuple[Union[subprocess.Popen[bytes], Any], LaunchEnd]:
    """The replica's process, forked by ``starter`` or started fresh, and its ``start_mode`` (``cold_reason``)."""
    from deviate_cb.launch.backends.watchdog import die_with_parent
    from deviate_cb.store.manifest import LaunchEnd

    argv = list(spec.argv) or [sys.executable, "-m", "deviate_cb.launch.replica.child"]
    cwd = spec.cwd if spec.cwd and Path(spec.cwd).is_dir() else None
    start = LaunchEnd(start_mode="cold")
    if starter is not None and spec.warm_modules is not None:
        process, reason = starter.start(
            spec.warm_modules, argv, env, cwd or os.getcwd(), str(stdout_path), str(stderr_path)
        )
        if process is not None:
            return process, LaunchEnd(start_mode="warm")
        start = start.with_changes(cold_reason=str(reason))
    with open(stdout_path, "ab") as out, open(stderr_path, "ab") as err:
        popen = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            close_fds=True,
            preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
        )
    return popen, start


def _signal(process: Any, signum: int) -> None:
    """Signal a replica: a forked one as its whole group (it leads its own session), a fresh one as a process."""
    if isinstance(process, subprocess.Popen):
        process.send_signal(signum)
    elif process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)
