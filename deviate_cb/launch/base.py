"""What every backend (local processes now; Slurm and Ray later) does: run replica jobs, report their fate.

A backend receives :class:`Job` objects (a command line, the environment additions that carry the run
context, where stdout/stderr go, a timeout), decides where each runs (a :class:`Placement`: slot and GPU), and
tells a :class:`Listener` when a job is about to start, has started and has finished (an :class:`Outcome`).
Everything a run directory records is the listener's business, so backends stay small and interchangeable;
backends are picked by name with :func:`get_backend`, like submitit's executors.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Optional, Protocol

__all__ = ["BACKENDS", "Backend", "Job", "Listener", "Outcome", "Placement", "get_backend", "register_backend"]


@dataclass(frozen=True)
class Job:
    """One replica to run.

    Attributes:
        key: A unique, human-readable name (``replica=3``).
        argv: The command line (``[sys.executable, "-m", "deviate_cb.launch.child"]``).
        env: Variables to add to the launcher's environment (the run context).
        stdout_path: File that receives the job's standard output.
        stderr_path: File that receives the job's standard error.
        timeout_s: Seconds after which the job is terminated and its outcome marked ``timed_out``.
        cwd: Working directory (``None``: the launcher's).
        payload: Whatever the caller wants back with the job (the replica plan).
    """

    key: str
    argv: Sequence[str]
    env: Mapping[str, str]
    stdout_path: Path
    stderr_path: Path
    timeout_s: Optional[float] = None
    cwd: Optional[Path] = None
    payload: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class Placement:
    """Where a job runs: its concurrency slot, the GPU it sees (if GPUs are known) and the host.

    Example:
        >>> Placement(slot=1, gpu="1").env()
        {'CUDA_VISIBLE_DEVICES': '1'}
    """

    slot: int
    gpu: Optional[str] = None
    host: Optional[str] = None

    def env(self) -> dict[str, str]:
        """Environment variables the job gets for this placement."""
        return {} if self.gpu is None else {"CUDA_VISIBLE_DEVICES": self.gpu}

    def describe(self) -> str:
        """``slot 0 (GPU 1)`` or ``slot 0``."""
        return f"slot {self.slot}" + (f" (GPU {self.gpu})" if self.gpu is not None else "")


@dataclass(frozen=True)
class Outcome:
    """How a job ended.

    Attributes:
        returncode: The exit status; negative ``-N`` when killed by signal ``N`` (as :mod:`subprocess` says);
            ``None`` when the job never started.
        signal: The name of the signal that killed it (``"SIGKILL"``), if one did.
        timed_out: The backend terminated it because it ran past its timeout.
        interrupted: The backend terminated it because the launcher was interrupted (Ctrl-C, SIGTERM).
        cancelled: The backend terminated it (or never started it) because :meth:`Backend.cancel` was called.
        started_at: Unix time the job started (``None`` if it never did).
        ended_at: Unix time the job ended.
        pid: Process id, where the backend has one.
        launch_error: Why the job could not be started, if it could not.
    """

    returncode: Optional[int]
    signal: Optional[str] = None
    timed_out: bool = False
    interrupted: bool = False
    cancelled: bool = False
    started_at: Optional[float] = None
    ended_at: Optional[float] = None
    pid: Optional[int] = None
    launch_error: Optional[str] = None

    @property
    def succeeded(self) -> bool:
        """Exit status 0 and not terminated by the backend.

        Example:
            >>> Outcome(returncode=0).succeeded, Outcome(returncode=-9, signal="SIGKILL").succeeded
            (True, False)
        """
        return self.returncode == 0 and not (self.timed_out or self.interrupted or self.cancelled)

    @property
    def duration_s(self) -> Optional[float]:
        if self.started_at is None or self.ended_at is None:
            return None
        return max(0.0, self.ended_at - self.started_at)


class Listener(Protocol):
    """Receives a backend's events, in this order per job: ``prepare``, ``started``, ``finished``.

    ``prepare`` runs before the job starts (write the manifest, clear a previous attempt); an exception there
    is the caller's error and stops the backend. ``finished`` is called exactly once for every job that
    ``prepare`` was called for; jobs never prepared (after :meth:`Backend.cancel`) get no events.
    """

    def prepare(self, job: Job, placement: Placement) -> None: ...

    def started(self, job: Job, placement: Placement, pid: Optional[int]) -> None: ...

    def finished(self, job: Job, placement: Placement, outcome: Outcome) -> None: ...


class Backend(abc.ABC):
    """Runs jobs, at most ``parallel`` at once, and reports to a :class:`Listener`.

    Subclasses set :attr:`name` and implement :meth:`run` and :meth:`cancel`.

    Example:
        >>> backend = get_backend("local", parallel=2)
        >>> backend.name, backend.parallel
        ('local', 2)
    """

    name: ClassVar[str] = ""

    def __init__(self, *, parallel: int = 1) -> None:
        if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
            raise ValueError(f"`parallel` must be a positive integer. Received: parallel={parallel!r}.")
        self.parallel = parallel

    @abc.abstractmethod
    def run(self, jobs: Sequence[Job], listener: Listener) -> None:
        """Run every job and return when all have finished (or were cancelled).

        On ``KeyboardInterrupt`` (or any exception) the backend terminates the jobs still running, reports
        them ``finished`` with ``interrupted=True``, and re-raises.
        """

    @abc.abstractmethod
    def cancel(self) -> None:
        """Start no further job and terminate the running ones (their outcomes say ``cancelled``).

        Safe to call from a listener callback.
        """

    def describe(self) -> str:
        """One line for the launcher's header."""
        return f"{self.name} backend, {self.parallel} at a time"


BACKENDS: dict[str, Callable[..., Backend]] = {}


def register_backend(name: str, factory: Callable[..., Backend]) -> None:
    """Make a backend available to :func:`get_backend` under ``name``."""
    BACKENDS[name] = factory


def get_backend(name: str, **options: Any) -> Backend:
    """Build the backend called ``name`` (``local``; later ``slurm``, ``ray``) with ``options``.

    Example:
        >>> get_backend("local").name
        'local'
    """
    if name == "local" and name not in BACKENDS:
        import deviate_cb.launch.local  # noqa: F401  (registers itself)
    try:
        factory = BACKENDS[name]
    except KeyError:
        from deviate_cb.errors import UsageError

        known = ", ".join(sorted(BACKENDS)) or "local"
        raise UsageError(f"`backend` must be one of {known}. Received: backend={name!r}.") from None
    return factory(**options)
