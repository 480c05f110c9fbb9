"""What the launcher writes into a replica's manifest (``run.json``) before it starts and after it ends."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from deviate_cb.audit.recording.stopping import AUDITED, AUDITED_TEXT, stopped_after
from deviate_cb.launch.backends.base import Outcome, Placement
from deviate_cb.launch.planner import ReplicaPlan
from deviate_cb.store.bounded_read import read_regular
from deviate_cb.store.completion import INCOMPLETE, incomplete_reason
from deviate_cb.store.manifest import LaunchEnd, LaunchStart, RunManifest
from deviate_cb.store.run_directory import iso_time

__all__ = [
    "ERROR_TAIL_LINES",
    "StoreWriteError",
    "end_fields",
    "exception_line",
    "load_average",
    "machine_fields",
    "signal_name",
    "start_fields",
    "status_of",
    "tail_lines",
    "writing",
]

ERROR_TAIL_LINES = 20
_DISK_FULL = {errno.ENOSPC: "the disk is full", getattr(errno, "EDQUOT", errno.ENOSPC): "the disk quota is exceeded"}


class StoreWriteError(Exception):
    """The launcher (or a replica) could not write a file of the run directory: disk full, quota, I/O error.

    Its text is one line naming the file and the cause; ``disk_full`` tells a full disk (or quota) from other
    errors, and :attr:`remedy` says what to do before a rerun resumes the study.

    Example:
        >>> error = StoreWriteError(Path("runs/run.json"), OSError(errno.ENOSPC, "No space left on device"))
        >>> str(error), error.disk_full
        ("the disk is full: cannot write 'runs/run.json' (No space left on device)", True)
        >>> str(StoreWriteError(Path("runs/run.json"), OSError(errno.EIO, "Input/output error")))
        "cannot write 'runs/run.json': Input/output error (EIO)"
    """

    def __init__(self, path: Union[str, os.PathLike[str]], error: OSError) -> None:
        self.path = Path(path)
        self.error = error
        self.disk_full = error.errno in _DISK_FULL
        cause = " ".join(str(error.strerror or error).split())
        if self.disk_full:
            text = f"{_DISK_FULL[error.errno]}: cannot write {str(self.path)!r} ({cause})"
        else:
            code = errno.errorcode.get(error.errno, "") if isinstance(error.errno, int) else ""
            text = f"cannot write {str(self.path)!r}: {cause}" + (f" ({code})" if code else "")
        super().__init__(text)

    @property
    def remedy(self) -> str:
        """What to do before rerunning (``free space on that file system``...)."""
        if self.error.errno == getattr(errno, "EDQUOT", None):
            return "free space or raise the quota"
        return "free space on that file system" if self.disk_full else "fix the file system"


@contextlib.contextmanager
def writing(path: Union[str, os.PathLike[str]]) -> Iterator[None]:
    """Turn an ``OSError`` raised inside into :class:`StoreWriteError` naming ``path`` (the file being written).

    The errors of a write name a temporary file or nothing; the message names the file the user knows.

    Example:
        >>> try:
        ...     with writing("runs/run.json"):
        ...         raise OSError(errno.ENOSPC, "No space left on device")
        ... except StoreWriteError as exc:
        ...     print(exc)
        the disk is full: cannot write 'runs/run.json' (No space left on device)
    """
    try:
        yield
    except StoreWriteError:
        raise
    except OSError as exc:
        raise StoreWriteError(path, exc) from exc


def status_of(outcome: Outcome, manifest: Optional[RunManifest] = None) -> str:
    """The manifest status an outcome implies; with the replica's ``manifest``, exit code 0 is ``completed`` only
    when its training ended (:func:`deviate_cb.store.completion.incomplete_reason`), else ``incomplete``.

    Example:
        >>> status_of(Outcome(returncode=0)), status_of(Outcome(returncode=-15, timed_out=True))
        ('completed', 'timeout')
        >>> status_of(Outcome(returncode=0, scheduler_state="CANCELLED"))
        'failed'
        >>> status_of(Outcome(returncode=0), RunManifest.from_json({"framework": "lightning", "fit": "started"}))
        'incomplete'
        >>> status_of(Outcome(returncode=0), RunManifest.from_json({"audit_stopped": {"after_steps": 3, "by": "t"}}))
        'audited'
    """
    if outcome.interrupted or outcome.cancelled:
        return "killed"
    if outcome.timed_out or outcome.scheduler_state == "TIMEOUT":
        return "timeout"
    if outcome.scheduler_state not in (None, "COMPLETED"):
        return "failed"
    if outcome.returncode != 0:
        return "failed"
    if manifest is not None and stopped_after(manifest) is not None:  # deviate audit: stopped after its steps
        return AUDITED
    return INCOMPLETE if manifest is not None and incomplete_reason(manifest) is not None else "completed"


def tail_lines(path: Path, lines: int = ERROR_TAIL_LINES, max_bytes: int = 64 * 1024) -> str:
    """The last ``lines`` lines of a log, as a terminal would show them (progress-bar ``\\r`` redraws folded).

    Example:
        >>> import tempfile
        >>> log = Path(tempfile.mkdtemp()) / "stderr.log"
        >>> _ = log.write_text("a\\nbar 10%\\rbar 100%\\nTraceback\\nValueError: x\\n")
        >>> tail_lines(log, 3)
        'bar 100%\\nTraceback\\nValueError: x'
    """
    try:  # its last max_bytes, and only from a regular file: a FIFO left there never blocks the launcher
        data = read_regular(path, max_bytes, tail=True)
    except (OSError, ValueError):  # HostileFileError is a ValueError
        return ""
    text = data.decode("utf-8", errors="replace")
    shown = [line.rstrip("\r").rsplit("\r", 1)[-1].rstrip() for line in text.split("\n")]
    shown = [line for line in shown if line]
    return "\n".join(shown[-lines:])


def exception_line(text: str) -> Optional[str]:
    """The exception a Python traceback in ``text`` ends with (``Type: message``, its first line), else ``None``.

    The last traceback counts (a chained exception's, the one that ended the process); its exception line is the
    first line after the traceback's indented frames.

    Example:
        >>> frames = ["Traceback (most recent call last):", '  File "t.py", line 1', "    f()"]
        >>> exception_line("\\n".join(["epoch 3", *frames, "ValueError: bad lr", "more text"]))
        'ValueError: bad lr'
        >>> exception_line("epoch 3") is None
        True
    """
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return None
    for line in lines[starts[-1] + 1 :]:
        if line.strip() and not line[:1].isspace():
            found = " ".join(line.split())
            return found if len(found) <= 2000 else found[:1997] + "..."
    return None


def load_average() -> Optional[list[float]]:
    """This machine's load average over 1, 5 and 15 minutes (runnable processes, as ``uptime`` shows it), rounded
    to hundredths; ``None`` where the system has none (Windows).

    Example:
        >>> values = load_average()
        >>> values is None or (len(values) == 3 and min(values) >= 0)
        True
    """
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def machine_fields(when: str) -> Union[LaunchStart, LaunchEnd]:
    """The manifest's record of the machine a replica runs on, when it starts (``when="start"``: a
    :class:`LaunchStart`) or ends (``"end"``: a :class:`LaunchEnd`).

    ``start``: ``cpu_count`` (the machine's CPUs), ``cpus_usable`` (those this process may run on: its affinity,
    a Slurm allocation, ``taskset``) and ``load_avg_start``; ``end``: ``load_avg_end``. A value the system cannot
    tell is left out. The report compares them with the replicas that ran at once
    (:mod:`deviate_cb.report.answers.contention`).

    Example:
        >>> names = sorted(machine_fields("start").fields())
        >>> names in (["cpu_count", "cpus_usable", "load_avg_start"], ["cpu_count"], [])
        True
    """
    if when not in ("start", "end"):
        raise ValueError(f"`when` must be 'start' or 'end'. Received: when={when!r}.")
    load = load_average()
    if when == "end":
        return LaunchEnd() if load is None else LaunchEnd(load_avg_end=load)
    start = LaunchStart()
    if os.cpu_count():
        start = start.with_changes(cpu_count=os.cpu_count())
    if hasattr(os, "sched_getaffinity"):
        start = start.with_changes(cpus_usable=len(os.sched_getaffinity(0)))
    return start if load is None else start.with_changes(load_avg_start=load)


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
    configuration: Optional[Mapping[str, Any]] = None,
) -> LaunchStart:
    """The launcher's record before a replica starts (``keras_backend`` only when one was requested).

    ``command`` is the command line after ``--`` as given (placeholders unfilled) and ``command_run`` the one
    this replica runs; both only in command mode. ``configuration`` is what the replica trains
    (:func:`deviate_cb.store.configuration.configuration_fields`), recorded as ``configuration``.
    """
    from deviate_cb import __version__

    ctx = plan.context
    gpu_env = placement.env().get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
    start = LaunchStart(
        status="running",
        experiment=ctx.experiment,
        variant=ctx.variant,
        replica=ctx.replica,
        seed=ctx.seed,
        base_seed=base_seed,
        hash_seed=ctx.python_hash_seed,
        deterministic=ctx.deterministic,
        mode="trainer" if command is None else "command",
        trainer=ctx.trainer,
        keep_project_seeds=ctx.keep_project_seeds,
        keep_project_determinism=ctx.keep_project_determinism,
        argv=list(argv),
        launch_dir=os.getcwd(),  # where the launcher ran: a relaunch of the group (--until-decided) runs there
        started_at=iso_time(),
        host=placement.host or socket.gethostname(),
        launcher_pid=os.getpid(),
        deviate_version=__version__,
        cuda_visible_devices=gpu_env,
        backend=backend,
        slot=placement.slot,
        gpu=placement.gpu,
        attempt=plan.attempt,
        timeout_s=timeout_s,
    )
    start = start.merged(machine_fields("start"))
    if keras_backend is not None:
        start = start.with_changes(keras_backend=keras_backend)
    if ctx.trainer_args:
        start = start.with_changes(trainer_args=list(ctx.trainer_args))
    if command is not None:
        start = start.with_changes(command=list(command), command_run=list(command_run or command))
    if configuration is not None:
        start = start.with_changes(configuration=dict(configuration))
    return start


def end_fields(
    outcome: Outcome,
    stderr_path: Path,
    *,
    stopped: Optional[str] = None,
    here: bool = True,
    manifest: Optional[RunManifest] = None,
    run_dir: Optional[Path] = None,
) -> LaunchEnd:
    """The launcher's record after a replica ended.

    ``stopped`` is why the launcher stopped the study (the run directory could not be written), for the
    ``reason`` of the replicas it terminated or never started. ``here``: the replica ran on this machine, whose
    load average is then recorded as ``load_avg_end`` (the launcher of a replica that ran on a Slurm or Ray node
    leaves the node's own record alone). ``manifest``: the replica's manifest as it left it, which tells a
    replica that exited 0 before its training ended (status ``incomplete``, with why as ``reason``; ``run_dir``:
    where to read the last step it recorded, when the manifest does not say where its fit stopped); without it,
    exit code 0 is ``completed``. The backend's own end values (:attr:`Outcome.end`) are recorded too.

    Example:
        >>> left = RunManifest.from_json({"mode": "trainer"})
        >>> end = end_fields(Outcome(returncode=0), Path("/nonexistent/stderr.log"), manifest=left)
        >>> end.status, end.reason
        ('incomplete', 'exited with code 0 before its training ended: the --trainer function never returned (...)')
    """
    status = status_of(outcome, manifest)
    end = LaunchEnd(
        status=status,
        exit_code=outcome.returncode,
        signal=outcome.signal,
        ended_at=iso_time(outcome.ended_at),
        duration_s=None if outcome.duration_s is None else round(outcome.duration_s, 3),
    )
    if outcome.pid is not None:
        end = end.with_changes(pid=outcome.pid)
    if here:
        end = end.merged(machine_fields("end"))
    end = end.merged(outcome.end)
    if status == AUDITED:  # deviate audit stopped it after its audited steps: not completed, nothing failed
        steps = stopped_after(manifest or RunManifest())
        end = end.with_changes(reason=f"{AUDITED_TEXT} ({steps}): deviate audit without --finish")
    elif status == INCOMPLETE:  # the stderr tail of a replica that exited 0 is not why: the reason comes first
        reason = incomplete_reason(manifest or RunManifest(), run_dir=run_dir) or ""
        tail = tail_lines(stderr_path)
        end = end.with_changes(error=f"{reason}; last stderr lines:\n{tail}" if tail else reason, reason=reason)
    elif status != "completed":
        reason = _reason(outcome, status, stopped)
        end = end.with_changes(error=_error(outcome, reason, tail_lines(stderr_path)), reason=reason)
    return end


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


def _reason(outcome: Outcome, status: str, stopped: Optional[str] = None) -> str:
    if outcome.launch_error:
        return outcome.launch_error
    ended = f"killed by {outcome.signal}" if outcome.signal else f"exited with code {outcome.returncode}"
    if outcome.scheduler_state not in (None, "COMPLETED"):
        job = outcome.end.fields().get("slurm_job_id")  # UNSET where the backend has no job id
        ended = f"the cluster ended the replica{f' (job {job})' if job else ''}: {outcome.scheduler_state}"
        if not (outcome.interrupted or outcome.cancelled):
            return ended
    if status == "timeout":
        return f"timed out after {outcome.duration_s or 0:.1f} s; {ended}"
    if stopped and (outcome.interrupted or outcome.cancelled):
        return f"terminated because the study stopped: {stopped}; {ended}"
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
