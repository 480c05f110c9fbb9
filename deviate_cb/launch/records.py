"""What the launcher writes into a replica's manifest (``run.json``) before it starts and after it ends.

Before: ``status="running"`` and who/what/where (experiment, variant, replica, seed, base seed, requested
determinism, ``mode`` (``trainer`` or ``command``) with the trainer and its arguments or the command as given
and as run, whether the project's seeds are kept, argv, start time, host, launcher pid, deviate-cb version,
``CUDA_VISIBLE_DEVICES``, the requested Keras backend).
After: the status the :class:`~deviate_cb.launch.base.Outcome` implies, exit code, signal, end time,
duration and, for runs that did not complete, ``reason`` (what ended it) and ``error``: the tail of the replica's
stderr, after the ``reason`` when a signal, the launcher or the cluster ended it (the tail is then not the cause).
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from deviate_cb.launch.base import Outcome, Placement
from deviate_cb.launch.planner import ReplicaPlan
from deviate_cb.store.run_directory import iso_time

__all__ = ["ERROR_TAIL_LINES", "end_fields", "signal_name", "start_fields", "status_of", "tail_lines"]

ERROR_TAIL_LINES = 20


def status_of(outcome: Outcome) -> str:
    """The manifest status an outcome implies.

    Example:
        >>> status_of(Outcome(returncode=0)), status_of(Outcome(returncode=-15, timed_out=True))
        ('completed', 'timeout')
        >>> status_of(Outcome(returncode=0, scheduler_state="CANCELLED"))
        'failed'
    """
    if outcome.interrupted or outcome.cancelled:
        return "killed"
    if outcome.timed_out or outcome.scheduler_state == "TIMEOUT":
        return "timeout"
    if outcome.scheduler_state not in (None, "COMPLETED"):
        return "failed"
    return "completed" if outcome.returncode == 0 else "failed"


def tail_lines(path: Path, lines: int = ERROR_TAIL_LINES, max_bytes: int = 64 * 1024) -> str:
    """The last ``lines`` lines of a log, as a terminal would show them (progress-bar ``\\r`` redraws folded).

    Example:
        >>> import tempfile
        >>> log = Path(tempfile.mkdtemp()) / "stderr.log"
        >>> _ = log.write_text("a\\nbar 10%\\rbar 100%\\nTraceback\\nValueError: x\\n")
        >>> tail_lines(log, 3)
        'bar 100%\\nTraceback\\nValueError: x'
    """
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    shown = [line.rstrip("\r").rsplit("\r", 1)[-1].rstrip() for line in text.split("\n")]
    shown = [line for line in shown if line]
    return "\n".join(shown[-lines:])


def start_fields(
    plan: ReplicaPlan,
    placement: Placement,
    *,
    base_seed: int,
    argv: Sequence[str],
    backend: str,
    timeout_s: Optional[float],
    keras_backend: Optional[str] = None,
    command: Optional[Sequence[str]] = None,
    command_run: Optional[Sequence[str]] = None,
) -> dict[str, Any]:
    """The manifest fields written before a replica starts (``keras_backend`` only when one was requested).

    ``command`` is the command line after ``--`` as given (placeholders unfilled) and ``command_run`` the one
    this replica runs; both only in command mode.
    """
    from deviate_cb import __version__

    ctx = plan.context
    gpu_env = placement.env().get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
    fields: dict[str, Any] = {
        "status": "running",
        "experiment": ctx.experiment,
        "variant": ctx.variant,
        "replica": ctx.replica,
        "seed": ctx.seed,
        "base_seed": base_seed,
        "deterministic": ctx.deterministic,
        "mode": "trainer" if command is None else "command",
        "trainer": ctx.trainer,
        "keep_project_seeds": ctx.keep_project_seeds,
        "argv": list(argv),
        "started_at": iso_time(),
        "host": placement.host or socket.gethostname(),
        "launcher_pid": os.getpid(),
        "deviate_version": __version__,
        "cuda_visible_devices": gpu_env,
        "backend": backend,
        "slot": placement.slot,
        "gpu": placement.gpu,
        "attempt": plan.attempt,
        "timeout_s": timeout_s,
    }
    if keras_backend is not None:
        fields["keras_backend"] = keras_backend
    if ctx.trainer_args:
        fields["trainer_args"] = list(ctx.trainer_args)
    if command is not None:
        fields["command"] = list(command)
        fields["command_run"] = list(command_run or command)
    return fields


def end_fields(outcome: Outcome, stderr_path: Path) -> dict[str, Any]:
    """The manifest fields written after a replica ended."""
    status = status_of(outcome)
    fields: dict[str, Any] = {
        "status": status,
        "exit_code": outcome.returncode,
        "signal": outcome.signal,
        "ended_at": iso_time(outcome.ended_at),
        "duration_s": None if outcome.duration_s is None else round(outcome.duration_s, 3),
    }
    if outcome.pid is not None:
        fields["pid"] = outcome.pid
    fields.update(outcome.fields)
    if status != "completed":
        reason = _reason(outcome, status)
        fields["error"] = _error(outcome, reason, tail_lines(stderr_path))
        fields["reason"] = reason
    return fields


def _error(outcome: Outcome, reason: str, tail: str) -> str:
    """The manifest's ``error``: the stderr tail, after what happened when the replica did not end by itself.

    A replica killed by a signal or stopped by the launcher or the cluster leaves in its stderr whatever it
    printed last (a Lightning warning, a progress bar): that is not the cause, so ``reason`` comes first.

    Example:
        >>> _error(Outcome(returncode=-9, signal="SIGKILL"), "killed by SIGKILL", "UserWarning: few workers")
        'killed by SIGKILL; last stderr lines:\\nUserWarning: few workers'
        >>> _error(Outcome(returncode=1), "exited with code 1", "Traceback ...\\nValueError: x")
        'Traceback ...\\nValueError: x'
    """
    if not tail:
        return reason
    stopped = outcome.timed_out or outcome.interrupted or outcome.cancelled or outcome.launch_error is not None
    if outcome.signal is not None or stopped or outcome.scheduler_state not in (None, "COMPLETED"):
        return f"{reason}; last stderr lines:\n{tail}"
    return tail


def _reason(outcome: Outcome, status: str) -> str:
    if outcome.launch_error:
        return outcome.launch_error
    ended = f"killed by {outcome.signal}" if outcome.signal else f"exited with code {outcome.returncode}"
    if outcome.scheduler_state not in (None, "COMPLETED"):
        job = outcome.fields.get("slurm_job_id") or outcome.fields.get("ray_task_id")
        ended = f"the cluster ended the replica{f' (job {job})' if job else ''}: {outcome.scheduler_state}"
        if not (outcome.interrupted or outcome.cancelled):
            return ended
    if status == "timeout":
        return f"timed out after {outcome.duration_s or 0:.1f} s; {ended}"
    if outcome.interrupted:
        return f"deviate-replicate was interrupted; {ended}"
    if outcome.cancelled:
        return f"terminated because another replica could not start its trainer; {ended}"
    return ended


def signal_name(returncode: Optional[int]) -> Optional[str]:
    """The name of the signal that ended a process with this return code (``-9`` -> ``SIGKILL``), else ``None``.

    Example:
        >>> signal_name(-9), signal_name(1), signal_name(None)
        ('SIGKILL', None, None)
    """
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"
