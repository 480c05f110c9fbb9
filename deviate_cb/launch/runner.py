"""Replicate a trainer ``n`` times under a noise variant: plan, launch, record, summarise.

This is ``deviate-replicate`` as a function. Usage errors (bad arguments, a ``--trainer`` that cannot be
imported or called, an unusable ``--out``, a manifest from a newer deviate-cb) raise
:class:`~deviate_cb.errors.UsageError` and leave no new directories behind; failed replicas never stop the
others; ``KeyboardInterrupt`` terminates the running replicas, records them ``killed`` and is re-raised.
A run directory the launcher cannot write (the disk is full, a quota, an I/O error) stops the study: no further
replica starts, running ones are terminated, each one's end is recorded (in place if need be), and the result's
``stopped`` says why in one line; a rerun of the same command resumes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, TextIO, Union

from deviate_cb.errors import UsageError
from deviate_cb.launch.base import Backend, Job, Outcome, Placement, backend_class
from deviate_cb.launch.child import EXIT_TRAINER_SPEC
from deviate_cb.launch.command import Command
from deviate_cb.launch.final_metrics import record_final_metrics
from deviate_cb.launch.keras_backend import check_keras_backend
from deviate_cb.launch.liveness import compact_what_it_left, live_processes, stop_processes
from deviate_cb.launch.local import detect_gpus, parse_gpus
from deviate_cb.launch.options import parse_backend_options
from deviate_cb.launch.outdir import OutputDirectory
from deviate_cb.launch.output_metrics import compile_metric_patterns, metrics_from_logs
from deviate_cb.launch.planner import ReplicaPlan, clear_previous_attempt, plan_replicas
from deviate_cb.launch.progress import Progress, make_progress
from deviate_cb.launch.records import (
    StoreWriteError,
    end_fields,
    rewrite_manifest_in_place,
    start_fields,
    status_of,
    tail_lines,
    writing,
)
from deviate_cb.launch.trainer_spec import TrainerSpec, TrainerSpecError
from deviate_cb.store.run_directory import RunDirectory, check_partition_value
from deviate_cb.variants import VARIANTS

__all__ = ["KEEP_SEEDS_WARNING", "SITE_DIR", "ReplicaResult", "ReplicationResult", "replicate"]

CHILD_COMMAND = (sys.executable, "-m", "deviate_cb.launch.child")
# Put first on every replica's PYTHONPATH: its sitecustomize bootstraps each Python process of the replica.
SITE_DIR = Path(__file__).resolve().parent / "sitedir"
KEEP_SEEDS_WARNING = (
    "--keep-project-seeds: the project's own seeding calls keep their seeds, so a project that seeds itself "
    "with a fixed seed (seed_everything(42)) trains every replica from that seed and seed variance is suppressed"
)
_WARNING = "deviate-replicate: warning:"


@dataclass(frozen=True)
class ReplicaResult:
    """One replica's fate: ``completed``, ``failed``, ``timeout``, ``killed``, ``skipped``, ``not started``,
    ``submitted`` (``--no-wait``) or ``still running`` (under a job an earlier launcher submitted)."""

    replica: int
    seed: int
    run_dir: Path
    status: str
    exit_code: Optional[int] = None
    signal: Optional[str] = None
    duration_s: Optional[float] = None
    note: str = ""


@dataclass
class ReplicationResult:
    """What :func:`replicate` did.

    ``stopped`` is set when the study stopped because the run directory could not be written (the disk is
    full, an I/O error): one line naming the file and the cause, what became of the replicas and what to do.

    Example:
        >>> r = ReplicationResult("runs", "mlp", "algo", [ReplicaResult(0, 0, Path("r0"), "completed")], 1.0)
        >>> r.exit_status, r.summary()
        (0, '1 completed, 0 failed, 0 skipped in 1.0 s; run `deviate report runs`')
    """

    out: str
    experiment: str
    variant: str
    replicas: list[ReplicaResult]
    elapsed_s: float
    interrupted: bool = False
    stopped: str = ""

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.replicas)

    @property
    def exit_status(self) -> int:
        """0 when every replica completed (now or before) or is queued/running on a cluster, 1 otherwise (some
        replica did not complete, or the study stopped because the run directory could not be written)."""
        fine = ("completed", "skipped", "submitted", "still running")
        return 0 if not self.stopped and all(r.status in fine for r in self.replicas) else 1

    def summary(self) -> str:
        text = f"{self.count('completed')} completed, {self.count('failed')} failed, {self.count('skipped')} skipped"
        more = (
            ("timeout", "timed out"),
            ("killed", "killed"),
            ("not started", "not started"),
            ("submitted", "submitted"),
            ("still running", "still running"),
        )
        for status, label in more:
            if self.count(status):
                text += f", {self.count(status)} {label}"
        if self.count("submitted") or self.count("still running"):
            return f"{text} in {self.elapsed_s:.1f} s; follow them with `deviate status {self.out}`"
        return f"{text} in {self.elapsed_s:.1f} s; run `deviate report {self.out}`"


def replicate(
    trainer: Optional[str] = None,
    *,
    command: Optional[Sequence[str]] = None,
    trainer_args: Sequence[str] = (),
    keep_project_seeds: bool = False,
    metric_regex: Sequence[str] = (),
    runs: int = 1,
    variant: str = "algo+impl",
    seed: int = 0,
    out: Union[str, Path] = "deviate_runs",
    experiment: Optional[str] = None,
    parallel: Optional[int] = None,
    timeout: Optional[float] = None,
    force: bool = False,
    gpus: Union[str, Sequence[str], None] = None,
    keras_backend: Optional[str] = None,
    backend: str = "local",
    backend_options: Optional[Mapping[str, Any]] = None,
    argv: Optional[Sequence[str]] = None,
    stream: Optional[TextIO] = None,
    live: Optional[bool] = None,
    kill_grace_s: float = 5.0,
) -> ReplicationResult:
    """Run ``runs`` replicas of ``trainer`` (``module:fn`` or ``path/to/file.py:fn``) or of ``command``.

    Args:
        trainer: The ``--trainer`` spec; give it or ``command``.
        command: The command line after ``--`` (:mod:`deviate_cb.launch.command`): each replica runs it with
            the placeholders ``{seed}``, ``{replica}``, ``{run_dir}``, ``{variant}``, ``{experiment}`` filled.
        trainer_args: With ``trainer``: the arguments after ``--``, which the function sees as ``sys.argv[1:]``.
        keep_project_seeds: Leave the project's own seeding calls alone (no seeding takeover); the launcher
            warns that seed variance may be suppressed.
        metric_regex: Regular expressions with named groups; their last matches in a replica's output are
            recorded as final metrics (:mod:`deviate_cb.launch.output_metrics`).
        parallel: Replicas at once (default: 1 locally; all of them on a cluster backend, which queues them).
        backend: ``local`` (default), ``slurm``, ``ray`` or a backend from the ``deviate_cb.backends`` entry points.
        backend_options: The backend's options by name (``partition``, ``gpus_per_replica``, ``address``...; see
            :mod:`deviate_cb.launch.options`); one that the backend does not take is a usage error.
        gpus: GPU ids to spread slots over (``"0,1"`` or a list); ``None`` detects them
            (``CUDA_VISIBLE_DEVICES``, else NVML), ``"none"`` or ``[]`` disables placement.
        keras_backend: ``tensorflow``, ``torch`` or ``jax``: ``KERAS_BACKEND`` of every replica (checked here
            without importing anything: Keras 3 and the backend's package must be installed); ``None`` leaves
            the environment's.
        argv: The command line recorded in every manifest (default ``sys.argv``).
        stream: Where progress goes (default stdout); ``live`` forces (or disables) the live table.
        kill_grace_s: Seconds between SIGTERM and SIGKILL when a replica is terminated.

    Returns:
        What became of each replica; ``stopped`` says why the study stopped early when the run directory could
        not be written (disk full, I/O error: exit status 1 on the command line, with that line on stderr).

    Raises:
        UsageError: Exit status 2 on the command line; nothing was run, or (a ``--trainer`` that fails in
            the replica) the replicas were stopped and their new, empty run directories removed.
        MissingDependencyError: The backend's engine (submitit, Ray) is not installed; nothing was created.

    Example:
        >>> result = replicate("examples/train.py:main", runs=4, variant="control", out="runs")  # doctest: +SKIP
        >>> result.exit_status, result.summary()  # doctest: +SKIP
        (0, '4 completed, 0 failed, 0 skipped in 9.8 s; run `deviate report runs`')
    """
    started = time.monotonic()
    _check_options(runs=runs, variant=variant, seed=seed, parallel=parallel, timeout=timeout)
    factory = backend_class(backend)
    accepted = tuple(getattr(factory, "options", ()))
    raw_options = {**(backend_options or {}), **({"gpus": gpus} if gpus is not None else {})}
    options = parse_backend_options(backend, raw_options, accepted)
    keras_backend = check_keras_backend(keras_backend)
    patterns = compile_metric_patterns(list(metric_regex))
    target = _target(trainer, command, trainer_args)
    experiment = _check_experiment(experiment, target)
    if "gpus" in accepted:
        options["gpus"] = detect_gpus() if gpus is None else parse_gpus(gpus) if isinstance(gpus, str) else tuple(gpus)
    slots = parallel if parallel is not None else (1 if backend == "local" else runs)
    launcher = factory(parallel=slots, kill_grace_s=kill_grace_s, **options)
    launcher.preflight()
    outdir = OutputDirectory(Path(out).absolute(), experiment, variant, given=str(out))
    outdir.open()
    try:
        plans = plan_replicas(
            outdir.root,
            experiment,
            variant,
            runs,
            seed,
            trainer=target.text if isinstance(target, TrainerSpec) else None,
            trainer_args=tuple(trainer_args),
            keep_project_seeds=keep_project_seeds,
            force=force,
        )
    except BaseException:
        outdir.close(remove_created=True)
        raise
    progress = make_progress(stream, live=live)
    seeds = sorted({p.seed for p in plans})
    what = target.text if isinstance(target, TrainerSpec) else f"`{shlex.join(target.given)}`"
    progress.message(
        f"deviate-replicate: {runs} replica{'s' * (runs != 1)} of {what}, variant {variant} "
        f"(seed{'s' * (len(seeds) > 1)} {seeds[0]}{f'..{seeds[-1]}' if len(seeds) > 1 else ''}) in "
        f"{Path(str(out)) / f'experiment={experiment}' / f'variant={variant}'}; {launcher.describe()}"
        + (f"; Keras backend {keras_backend}" if keras_backend else "")
    )
    if keep_project_seeds:
        progress.message(f"{_WARNING} {KEEP_SEEDS_WARNING}")
    replication = _Replication(
        progress,
        launcher,
        base_seed=seed,
        argv=sys.argv if argv is None else argv,
        keras_backend=keras_backend,
        command=target if isinstance(target, Command) else None,
        patterns=patterns,
    )
    running = launcher.live_jobs({p.replica: p.run_dir for p in plans if p.run and p.previous_status == "running"})
    plans = [dataclasses.replace(p, run=False) if p.replica in running else p for p in plans]
    replication.live = running
    jobs = []
    for plan in plans:
        reason = f"still queued/running: {running[plan.replica]}" if plan.replica in running else "already completed"
        progress.add(plan.replica, plan.seed, skipped="" if plan.run else reason)
        if plan.run:
            jobs.append(_job(plan, timeout, keras_backend, target if isinstance(target, Command) else None))
    interrupted = False
    try:
        launcher.run(jobs, replication)
    except KeyboardInterrupt:
        interrupted = True
        raise
    except StoreWriteError as exc:  # from the listener's prepare: recorded there; the backend stopped the others
        replication.stop(exc)
    finally:
        replication.settle_unfinished()
        progress.close()
        if replication.spec_error is None:
            outdir.close(remove_created=True)  # only what is still empty: nothing ran there
        results = [replication.result_of(plan) for plan in plans]
        result = ReplicationResult(
            str(out),
            experiment,
            variant,
            results,
            time.monotonic() - started,
            interrupted,
            stopped=replication.stop_line(results),
        )
        if replication.spec_error is None:
            progress.message(result.summary())
            if not interrupted:
                for line in _problem_lines(outdir.root / f"experiment={experiment}" / f"variant={variant}"):
                    progress.message(f"{_WARNING} {line}")
    if replication.spec_error is not None:
        empty = tuple(d for d in replication.created_run_dirs if not RunDirectory(d).metrics_path.exists())
        outdir.close(remove_created=True, remove_run_dirs=empty)
        raise TrainerSpecError(replication.spec_error)
    return result


class _Replication:
    """The listener: records each replica's start and end in its manifest and shows progress."""

    def __init__(
        self,
        progress: Progress,
        launcher: Backend,
        *,
        base_seed: int,
        argv: Sequence[str],
        keras_backend: Optional[str] = None,
        command: Optional[Command] = None,
        patterns: Sequence[re.Pattern[str]] = (),
    ) -> None:
        self.progress, self.launcher = progress, launcher
        self.base_seed, self.argv, self.keras_backend = base_seed, list(argv), keras_backend
        self.command, self.patterns = command, list(patterns)
        self.injection_warned = False
        self.created_run_dirs: list[Path] = []
        self.statuses: dict[int, tuple[str, Optional[int], Optional[str], Optional[float]]] = {}
        self.spec_error: Optional[str] = None
        self.live: dict[int, str] = {}
        self.store_error: Optional[StoreWriteError] = None  # the first write that failed: the study stops
        self.unrecorded: list[int] = []  # replicas whose manifest could not be updated even in place
        self.unfinished: dict[int, tuple[Job, Placement]] = {}  # prepared, not yet finished

    def message(self, text: str) -> None:
        """A line from the backend (a submitted job id, a warning)."""
        self.progress.message(text)

    def prepare(self, job: Job, placement: Placement) -> None:
        """Clear an earlier attempt and record the start; :class:`StoreWriteError` (the study stops) when the
        run directory cannot be written: the replica is then failed and never started."""
        plan: ReplicaPlan = job.payload
        created = False
        moved: Optional[Path] = None
        earlier = plan.run_dir.is_dir()
        try:
            if earlier:
                self._stop_earlier_attempt(plan)
            with writing(plan.run_dir):
                if earlier:
                    moved = clear_previous_attempt(plan.run_dir)
                else:
                    plan.run_dir.mkdir(parents=True)
                    created = True
                    self.created_run_dirs.append(plan.run_dir)
            run = RunDirectory(plan.run_dir)
            with writing(run.manifest_path):
                run.update_manifest(
                    **start_fields(
                        plan,
                        placement,
                        base_seed=self.base_seed,
                        argv=self.argv,
                        backend=self.launcher.name,
                        timeout_s=job.timeout_s,
                        keras_backend=self.keras_backend,
                        command=None if self.command is None else self.command.given,
                        command_run=None if self.command is None else job.argv,
                    )
                )
        except StoreWriteError as exc:
            self.stop(exc)
            if created:  # nothing of this replica is there: leave no empty folder behind
                with contextlib.suppress(OSError):
                    plan.run_dir.rmdir()
            elif moved is not None:  # this attempt never started: the earlier one's record stays the replica's
                _put_back(moved, plan.run_dir)
            self.statuses[plan.replica] = ("failed", None, None, None)
            note = "not started: the disk is full" if exc.disk_full else "not started"
            self.progress.finished(plan.replica, "failed", exit_code=None, duration_s=None, note=note)
            raise
        self.unfinished[plan.replica] = (job, placement)

    def started(self, job: Job, placement: Placement, pid: Optional[int]) -> None:
        self.progress.started(job.payload.replica, placement.describe())

    def finished(self, job: Job, placement: Placement, outcome: Outcome) -> None:
        """Record the end; never raises for a run directory that cannot be written (that stops the study)."""
        plan: ReplicaPlan = job.payload
        self.unfinished.pop(plan.replica, None)
        run = RunDirectory(plan.run_dir)
        stopped = None if self.store_error is None else str(self.store_error)
        fields = end_fields(outcome, job.stderr_path, stopped=stopped)
        status = status_of(outcome)
        note = outcome.signal or (fields.get("reason", "") if status == "timeout" else "")
        compact_what_it_left(run)  # a replica that died before its end left its last flushes as parts
        try:
            with writing(run.manifest_path):
                fields.update(self._command_fields(run, job, outcome))
                if self.spec_error is None and _ended_on_spec_error(outcome):
                    trainer_error = run.read_manifest().get("trainer_error")
                    if isinstance(trainer_error, str) and trainer_error:
                        self.spec_error = trainer_error
                        self.launcher.cancel()
                run.update_manifest(**fields)
        except StoreWriteError as exc:
            status = self._record_unwritable_end(plan, job, outcome, fields, exc)
            note = "the disk is full" if exc.disk_full else "its end could not be written"
        self.statuses[plan.replica] = (status, outcome.returncode, outcome.signal, outcome.duration_s)
        self.progress.finished(
            plan.replica, status, exit_code=outcome.returncode, duration_s=outcome.duration_s, note=note
        )

    def settle_unfinished(self) -> None:
        """After a stop, record the replicas prepared but never started or finished (a backend that prepares
        every job before it submits any) as failed: not started."""
        if self.store_error is None:
            return
        for job, placement in list(self.unfinished.values()):
            now = time.time()
            outcome = Outcome(None, started_at=now, ended_at=now, launch_error=f"not started: {self.store_error}")
            self.finished(job, placement, outcome)

    def stop_line(self, results: Sequence[ReplicaResult]) -> str:
        """Why the study stopped, what became of its replicas and what to do, in one line ("" when it did not)."""
        if self.store_error is None:
            return ""
        counts: dict[str, int] = {}
        for result in results:
            if result.status not in ("completed", "skipped"):
                counts[result.status] = counts.get(result.status, 0) + 1
        fates = ", ".join(f"{n} {status}" for status, n in counts.items())
        line = f"{self.store_error}; the study stopped ({fates})"
        if self.unrecorded:
            which = ", ".join(str(r) for r in self.unrecorded)
            many = len(self.unrecorded) > 1
            line += (
                f"; the manifest{'s' * many} of replica{'s' * many} {which} could not be updated and still "
                f"say{'s' * (not many)} running (`deviate status` records {'them' if many else 'it'} killed)"
            )
        return f"{line}. To resume, {self.store_error.remedy} and rerun the same command."

    def stop(self, error: StoreWriteError) -> None:
        """Stop the study on the first write that failed: start no further replica, terminate the running ones."""
        if self.store_error is None:
            self.store_error = error
            self.launcher.cancel()

    def _record_unwritable_end(
        self, plan: ReplicaPlan, job: Job, outcome: Outcome, fields: dict[str, Any], error: StoreWriteError
    ) -> str:
        """Record, in place, the end of a replica whose end could not be written: failed when it had completed
        (what it recorded may be incomplete), with the error that stopped the study; return its status."""
        stopped_by_another = self.store_error is not None and (
            outcome.cancelled or outcome.interrupted or outcome.returncode is None
        )
        self.stop(error)
        status = status_of(outcome)
        status = "failed" if status == "completed" else status
        fields["status"] = status
        if not stopped_by_another:  # else its reason already says that (and why) the study stopped
            if outcome.launch_error:
                ended = outcome.launch_error
            elif outcome.signal:
                ended = f"the replica was killed by {outcome.signal}"
            else:
                ended = f"the replica exited with code {outcome.returncode}"
            reason = f"{error}; {ended}"
            tail = tail_lines(job.stderr_path)
            fields.update(reason=reason, error=f"{reason}; last stderr lines:\n{tail}" if tail else reason)
        if not rewrite_manifest_in_place(plan.run_dir, fields):
            self.unrecorded.append(plan.replica)
        return status

    def _stop_earlier_attempt(self, plan: ReplicaPlan) -> None:
        """Stop what a killed launcher's attempt left running here, so it cannot write into the new attempt."""
        pids = live_processes(plan.run_dir)
        if pids:
            listed = ", ".join(str(pid) for pid in pids)
            self.progress.message(
                f"{_WARNING} replica {plan.replica}: stopping {len(pids)} process{'es' * (len(pids) != 1)} still "
                f"running from an earlier attempt whose launcher is gone (pid {listed})"
            )
            stop_processes(pids, grace_s=getattr(self.launcher, "kill_grace_s", 5.0))

    def _command_fields(self, run: RunDirectory, job: Job, outcome: Outcome) -> dict[str, Any]:
        """Final metrics matched in the output (``--metric-regex``); whether a command ran any bootstrapped Python."""
        fields: dict[str, Any] = {}
        if outcome.returncode is None or not (self.patterns or self.command is not None):  # it never ran
            return fields
        manifest = run.read_manifest()
        if self.patterns:
            found = metrics_from_logs([job.stdout_path, job.stderr_path], self.patterns)
            with writing(run.metrics_path):
                names = set(record_final_metrics(found, run.path)) if found else set()
            wanted = {name for pattern in self.patterns for name in pattern.groupindex}
            fields["output_metrics"] = sorted(found)
            missing = sorted(wanted - set(found))
            if missing:
                fields["output_metrics_missing"] = missing
                self.progress.message(
                    f"{_WARNING} replica {job.payload.replica}: --metric-regex found no value for "
                    f"{', '.join(missing)} in stdout.log or stderr.log"
                )
            if names:
                previous = manifest.get("final_metrics")
                listed = list(previous) if isinstance(previous, list) else []
                fields["final_metrics"] = listed + sorted(names - set(listed))
        if self.command is not None:
            if not manifest.get("bootstrap"):
                note = _no_injection_note(self.command)
                fields.update(injection="none", injection_note=note)
                if not self.injection_warned:  # the same for every replica: the study's summary lists them all
                    self.injection_warned = True
                    self.progress.message(f"{_WARNING} replica {job.payload.replica}: {note}")
            else:
                fields["injection"] = "bootstrapped"
        return fields

    def result_of(self, plan: ReplicaPlan) -> ReplicaResult:
        if plan.replica in self.live:
            return ReplicaResult(plan.replica, plan.seed, plan.run_dir, "still running", note=self.live[plan.replica])
        if not plan.run:
            return ReplicaResult(plan.replica, plan.seed, plan.run_dir, "skipped")
        if plan.replica not in self.statuses:
            status = "submitted" if self.launcher.detached else "not started"
            return ReplicaResult(plan.replica, plan.seed, plan.run_dir, status)
        status, code, signal, duration = self.statuses[plan.replica]
        return ReplicaResult(plan.replica, plan.seed, plan.run_dir, status, code, signal, duration)


def _put_back(folder: Path, run_dir: Path) -> None:
    """Move what :func:`clear_previous_attempt` moved into ``folder`` back into ``run_dir`` (renames: no space).

    Example:
        >>> import tempfile
        >>> run_dir = Path(tempfile.mkdtemp()); _ = (run_dir / "run.json").write_text("{}")
        >>> _put_back(clear_previous_attempt(run_dir), run_dir); sorted(p.name for p in run_dir.iterdir())
        ['run.json']
    """
    with contextlib.suppress(OSError):
        for entry in list(folder.iterdir()):
            if not (run_dir / entry.name).exists():
                os.rename(entry, run_dir / entry.name)
        folder.rmdir()
        folder.parent.rmdir()  # .attempts, when this was its only folder


def _ended_on_spec_error(outcome: Outcome) -> bool:
    """Whether a replica may have stopped on a bad ``--trainer``: it exited by itself with exactly status 3.

    A replica the launcher or the cluster stopped (``--timeout``, Ctrl-C, a cancelled study, a scheduler's end)
    or that a signal killed is never a spec error, whatever it wrote; the caller also needs ``trainer_error``
    in the manifest.

    Example:
        >>> _ended_on_spec_error(Outcome(returncode=3)), _ended_on_spec_error(Outcome(returncode=3, timed_out=True))
        (True, False)
    """
    stopped = outcome.timed_out or outcome.interrupted or outcome.cancelled or outcome.launch_error is not None
    return (
        outcome.returncode == EXIT_TRAINER_SPEC
        and outcome.signal is None
        and not stopped
        and outcome.scheduler_state in (None, "COMPLETED")
    )


def _job(
    plan: ReplicaPlan, timeout: Optional[float], keras_backend: Optional[str] = None, command: Optional[Command] = None
) -> Job:
    env = plan.context.to_env()
    if keras_backend is not None:
        env["KERAS_BACKEND"] = keras_backend
    env.setdefault("PYTHONUNBUFFERED", os.environ.get("PYTHONUNBUFFERED", "1"))  # logs up to date if killed
    inherited = os.environ.get("PYTHONPATH")
    env["PYTHONPATH"] = str(SITE_DIR) + (os.pathsep + inherited if inherited else "")
    if command is None:
        argv: Sequence[str] = CHILD_COMMAND
    else:
        ctx = plan.context
        argv = command.fill(
            seed=ctx.seed, replica=ctx.replica, run_dir=ctx.run_dir, variant=ctx.variant, experiment=ctx.experiment
        )
    return Job(
        key=f"replica={plan.replica}",
        argv=tuple(argv),
        env=env,
        stdout_path=plan.run_dir / "stdout.log",
        stderr_path=plan.run_dir / "stderr.log",
        timeout_s=timeout,
        cwd=Path.cwd(),
        payload=plan,
    )


def _target(
    trainer: Optional[str], command: Optional[Sequence[str]], trainer_args: Sequence[str]
) -> Union[TrainerSpec, Command]:
    """The parsed ``--trainer`` or command, prechecked (nothing of the project runs)."""
    if trainer is None and not command:
        raise UsageError(
            "`--trainer` or a command after `--` is required, e.g. `--trainer train.py:main` or "
            "`-- python train.py --seed {seed}`. Received: neither."
        )
    if trainer is not None and command:
        raise UsageError(
            "`--trainer` and a command cannot be given together (with --trainer, the words after `--` are the "
            f"function's sys.argv[1:]). Received: --trainer={trainer} and a command."
        )
    if trainer is not None:
        spec = TrainerSpec.parse(trainer)
        spec.precheck()
        return spec
    parsed = Command.parse(command or ())
    parsed.precheck()
    return parsed


def _no_injection_note(command: Command) -> str:
    if command.kind == "program":
        why = f"{command.given[0]!r} is not a Python program and started none that could import deviate_cb"
    elif command.python is not None and command.python.isolated:
        why = "the interpreter runs isolated (-I, -E or -S), so it ignores PYTHONPATH and site"
    else:
        why = "its Python could not import deviate_cb (another environment?)"
    return f"no DeviateCallback could be injected ({why}): only the exit status, logs and --metric-regex values"


def _problem_lines(variant_dir: Path) -> list[str]:
    """What the study's manifests and metrics show to be wrong (seeds not in effect, identical replicas...)."""
    try:
        from deviate_cb.report.problems import format_problem, study_problems

        return [format_problem(problem) for problem in study_problems(variant_dir)]
    except Exception as exc:  # the study ran; a failed check must not hide its summary
        return [f"could not check the study for problems: {type(exc).__name__}: {exc}"]


def _check_options(*, runs: object, variant: object, seed: object, parallel: object, timeout: object) -> None:
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise UsageError(f"`--runs` must be a positive integer. Received: --runs={runs}.")
    if variant not in VARIANTS:
        raise UsageError(f"`--variant` must be one of {', '.join(VARIANTS)}. Received: --variant={variant}.")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise UsageError(f"`--seed` must be an integer in [0, 2**32). Received: --seed={seed}.")
    if parallel is not None and (isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1):
        raise UsageError(f"`--parallel` must be a positive integer. Received: --parallel={parallel}.")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf")
    ):
        raise UsageError(f"`--timeout` must be a positive number of seconds. Received: --timeout={timeout}.")


def _check_experiment(experiment: Optional[str], spec: Union[TrainerSpec, Command]) -> str:
    name = experiment if experiment is not None else spec.default_experiment()
    try:
        return check_partition_value("experiment", name)
    except UsageError as exc:
        source = "--trainer" if isinstance(spec, TrainerSpec) else "the command"
        derived = "" if experiment is not None else f" (derived from {source}; pass --experiment)"
        message = (
            str(exc)
            .replace("`experiment`", "`--experiment`", 1)
            .replace("Received: experiment=", "Received: --experiment=", 1)
        )
        raise UsageError(message.rstrip(".") + f"{derived}.") from None
