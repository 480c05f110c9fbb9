"""What every backend (local processes, Slurm, Ray, third-party ones) does: run replica jobs, report their fate."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Optional, Protocol

from deviate_cb.store.manifest import LaunchEnd

__all__ = [
    "BACKENDS",
    "BUILTIN_BACKENDS",
    "ENTRY_POINT_GROUP",
    "Backend",
    "BackendOption",
    "Job",
    "Listener",
    "Outcome",
    "Placement",
    "available_backends",
    "backend_class",
    "get_backend",
    "register_backend",
    "tell",
    "tell_cold_start",
]

ENTRY_POINT_GROUP = "deviate_cb.backends"


@dataclass(frozen=True)
class BackendOption:
    """One option a backend takes: declared once, beside the backend's code, and turned into its command-line flag.

    Attributes:
        name: The keyword of the backend's ``__init__`` (``partition``).
        flag: The command-line flag (``--partition``).
        help: The flag's help line.
        group: The title of the help section the flag is listed in.
        metavar: The value's placeholder in the help (``None`` for a switch).
        parse: Turns the value as typed into what the backend takes, or raises a one-line
            :class:`~deviate_cb.errors.UsageError`; ``None``: the value as typed.
        repeatable: The flag may be given several times (its values are a list).
        switch: The flag takes no value (``--no-wait``).

    Example:
        >>> BackendOption("qos", "--qos", "Slurm quality of service", "slurm backend", "NAME").flag
        '--qos'
    """

    name: str
    flag: str
    help: str
    group: str
    metavar: Optional[str] = None
    parse: Optional[Callable[[Any], Any]] = None
    repeatable: bool = False
    switch: bool = False


@dataclass(frozen=True)
class Job:
    """One replica to run.

    Attributes:
        key: A unique, human-readable name (``replica=3``).
        argv: The command line (``[sys.executable, "-m", "deviate_cb.launch.replica.child"]``).
        env: Variables to add to the launcher's environment (the run context).
        stdout_path: File that receives the job's standard output.
        stderr_path: File that receives the job's standard error.
        timeout_s: Seconds after which the job is terminated and its outcome marked ``timed_out``.
        cwd: Working directory (``None``: the launcher's).
        payload: Whatever the caller wants back with the job (the replica plan).
        warm_modules: The modules a warm-start template imports before forking this job
            (:mod:`deviate_cb.launch.backends.warm`); ``None``: start it cold, as a fresh process. Backends that cannot
            fork replicas start every job cold.
    """

    key: str
    argv: Sequence[str]
    env: Mapping[str, str]
    stdout_path: Path
    stderr_path: Path
    timeout_s: Optional[float] = None
    cwd: Optional[Path] = None
    payload: Any = field(default=None, compare=False)
    warm_modules: Optional[tuple[str, ...]] = None


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
        """``slot 0 (GPU 1)`` or ``slot 0``; the host (or cluster job) instead of the slot when one is known."""
        where = self.host if self.host else f"slot {self.slot}"
        return where + (f" (GPU {self.gpu})" if self.gpu is not None else "")


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
        scheduler_state: The cluster's word for how the job ended (Slurm's ``CANCELLED``, ``OUT_OF_MEMORY``...,
            Ray's ``WorkerCrashedError``), where there is a scheduler; anything but ``COMPLETED`` means failed.
        end: The backend's own values for the replica's end record (``slurm_job_id``, ``start_mode``...).
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
    scheduler_state: Optional[str] = None
    end: LaunchEnd = field(default_factory=LaunchEnd, compare=False)

    @property
    def succeeded(self) -> bool:
        """Exit status 0 and not terminated by the backend.

        Example:
            >>> Outcome(returncode=0).succeeded, Outcome(returncode=-9, signal="SIGKILL").succeeded
            (True, False)
        """
        if self.scheduler_state not in (None, "COMPLETED"):
            return False
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
    ``prepare`` was called for; jobs never prepared (after :meth:`Backend.cancel`) get no events. A listener may
    also take ``note(text)``: a one-line note for the user, such as why replicas start cold (:func:`tell`).
    """

    def prepare(self, job: Job, placement: Placement) -> None: ...

    def started(self, job: Job, placement: Placement, pid: Optional[int]) -> None: ...

    def finished(self, job: Job, placement: Placement, outcome: Outcome) -> None: ...


def tell(listener: Listener, text: str) -> None:
    """Give ``listener`` a one-line note for the user (``listener.note(text)``), if it takes notes.

    Example:
        >>> class Quiet:
        ...     pass
        >>> tell(Quiet(), "warm start off")  # no ``note`` method: nothing happens
    """
    note = getattr(listener, "note", None)
    if callable(note):
        note(text)


def tell_cold_start(listener: Listener, reason: Any, told: set[str]) -> None:
    """Tell ``listener`` why replicas started cold (``cold start: <reason>``), once per reason: ``told`` holds
    the reasons said so far; a reason that is not a non-empty string says nothing.

    Example:
        >>> class Notes:
        ...     def note(self, text):
        ...         print(text)
        >>> told = set()
        >>> tell_cold_start(Notes(), "no fork here", told); tell_cold_start(Notes(), "no fork here", told)
        cold start: no fork here
    """
    if isinstance(reason, str) and reason and reason not in told:
        told.add(reason)
        tell(listener, f"cold start: {reason}")


class Backend(abc.ABC):
    """Runs jobs, at most ``parallel`` at once, and reports to a :class:`Listener`.

    Subclasses set :attr:`name` and implement :meth:`run` and :meth:`cancel`.

    Example:
        >>> backend = get_backend("local", parallel=2)
        >>> backend.name, backend.parallel
        ('local', 2)
    """

    name: ClassVar[str] = ""
    #: Backend options (keywords of ``__init__``) this backend takes; any other one given on the command line is
    #: a usage error. A plug-in may list bare names; the built-in backends derive them from :attr:`declared`.
    options: ClassVar[tuple[str, ...]] = ()
    #: The options with their flags, help and parsers (:class:`BackendOption`): ``deviate-replicate`` builds its
    #: backend flags from those of the built-in backends.
    declared: ClassVar[tuple[BackendOption, ...]] = ()
    #: Whether :meth:`run` takes its jobs as an iterator, one at a time (the local backend): the launcher then
    #: makes each job when it is asked for, so a study of any length starts at once in constant memory. Otherwise
    #: :meth:`run` gets a list.
    lazy_jobs: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A backend that declares its options and lists no names takes the names of what it declares."""
        super().__init_subclass__(**kwargs)
        if "declared" in cls.__dict__ and "options" not in cls.__dict__:
            cls.options = tuple(option.name for option in cls.declared)

    def __init__(self, *, parallel: int = 1) -> None:
        if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
            raise ValueError(f"`parallel` must be a positive integer. Received: parallel={parallel!r}.")
        self.parallel = parallel

    @abc.abstractmethod
    def run(self, jobs: Sequence[Job], listener: Listener) -> None:
        """Run every job and return when all have finished (or were cancelled); ``jobs`` is an iterator when
        :attr:`lazy_jobs` is set.

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

    def preflight(self) -> None:
        """Check, before any directory is created, that this backend can run here (its engine is installed, its
        cluster answers); raise :class:`~deviate_cb.errors.UsageError` or
        :class:`~deviate_cb.errors.MissingDependencyError` with one line otherwise. Default: nothing to check.
        """
        return None

    @property
    def detached(self) -> bool:
        """Whether :meth:`run` returned with jobs still queued or running elsewhere (``--no-wait``)."""
        return False

    @property
    def warm_start(self) -> bool:
        """Whether this backend forks jobs with :attr:`Job.warm_modules` from a warm-start template (the local
        backend; a cluster backend when each task runs several replicas). Default: every job starts cold."""
        return False

    def live_jobs(self, run_dirs: Mapping[int, Path]) -> dict[int, str]:
        """Replicas (index -> job description) still queued or running under a job this backend submitted earlier.

        A rerun skips them instead of starting them twice. Backends without detached jobs return ``{}``.
        """
        return {}


BACKENDS: dict[str, Callable[..., Backend]] = {}
# The built-in backends by name, with the module that registers each (imported on demand, never their engines).
BUILTIN_BACKENDS = {
    "local": "deviate_cb.launch.backends.local",
    "slurm": "deviate_cb.launch.backends.slurm.backend",
    "ray": "deviate_cb.launch.backends.ray_backend",
}


def register_backend(name: str, factory: Callable[..., Backend]) -> None:
    """Make a backend available to :func:`get_backend` under ``name``.

    Example:
        >>> class Echo(Backend):
        ...     name = "echo"
        ...     def run(self, jobs, listener): pass
        ...     def cancel(self): pass
        >>> register_backend("echo", Echo); get_backend("echo").name
        'echo'
        >>> del BACKENDS["echo"]
    """
    BACKENDS[name] = factory


def _entry_points() -> dict[str, Any]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_backends() -> list[str]:
    """Names :func:`get_backend` accepts: built-in, registered, and from the ``deviate_cb.backends`` entry points.

    Example:
        >>> {"local", "slurm", "ray"} <= set(available_backends())
        True
    """
    return sorted({*BUILTIN_BACKENDS, *BACKENDS, *_entry_points()})


def backend_class(name: str) -> Callable[..., Backend]:
    """The factory registered as ``name``: importing its module (never its engine) or loading its entry point.

    Raises:
        UsageError: No backend has that name, or its entry point cannot be loaded.

    Example:
        >>> backend_class("slurm").options[:2]
        ('partition', 'gpus_per_replica')
    """
    from deviate_cb.errors import UsageError

    if name not in BACKENDS and name in BUILTIN_BACKENDS:
        import importlib

        importlib.import_module(BUILTIN_BACKENDS[name])  # registers itself
    if name not in BACKENDS:
        entry = _entry_points().get(name)
        if entry is None:
            known = ", ".join(available_backends())
            raise UsageError(f"`--backend` must be one of {known}. Received: --backend={name}.")
        try:
            factory = entry.load()
        except Exception as exc:
            raise UsageError(
                f"`--backend` {name} comes from entry point {entry.value!r} ({ENTRY_POINT_GROUP}), which cannot be "
                f"loaded: {type(exc).__name__}: {exc}. Received: --backend={name}."
            ) from None
        if not callable(factory):
            raise UsageError(
                f"`--backend` {name}: entry point {entry.value!r} is not a Backend class or factory. "
                f"Received: --backend={name}."
            )
        BACKENDS[name] = factory
    return BACKENDS[name]


def get_backend(name: str, **options: Any) -> Backend:
    """Build the backend called ``name`` (``local``, ``slurm``, ``ray`` or an entry point's) with ``options``.

    Example:
        >>> get_backend("local").name
        'local'
    """
    return backend_class(name)(**options)
