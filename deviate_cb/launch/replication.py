"""The listener of a replication: it records each replica's start and end in its manifest, and what became of it.

Example:
    >>> r = ReplicationResult("runs", "mlp", "algo", [ReplicaResult(0, 0, Path("r0"), "completed")], 1.0)
    >>> r.exit_status, r.count("completed")
    (0, 1)
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import UsageError
from deviate_cb.launch.backends.base import Backend, Job, Outcome, Placement
from deviate_cb.launch.liveness import earlier_processes, stop_processes
from deviate_cb.launch.planner import ReplicaPlan, clear_previous_attempt
from deviate_cb.launch.progress import Progress
from deviate_cb.launch.records import (
    StoreWriteError,
    end_fields,
    exception_line,
    start_fields,
    status_of,
    tail_lines,
    writing,
)
from deviate_cb.launch.replica.child import EXIT_TRAINER_SPEC
from deviate_cb.launch.replica.final_metrics import record_final_metrics
from deviate_cb.launch.replica.isolation import isolation_note, make_workdir, workdir_of
from deviate_cb.launch.target.command import Command
from deviate_cb.store.completion import INCOMPLETE, INCOMPLETE_PREFIX
from deviate_cb.store.manifest import LaunchEnd, RunManifest
from deviate_cb.store.output_metrics import parsed_metrics_from_logs
from deviate_cb.store.run_directory import RunDirectory
from deviate_cb.store.settling import compact_what_it_left

__all__ = ["WARNING", "ReplicaResult", "Replication", "ReplicationResult"]

# How the launcher's warning lines start.
WARNING = "deviate-replicate: warning:"


@dataclass(frozen=True)
class ReplicaResult:
    """One replica's fate: ``completed``, ``failed``, ``incomplete`` (exited 0 before its training ended),
    ``audited`` (``deviate audit`` stopped it after its audited steps),
    ``timeout``, ``killed``, ``skipped``, ``not started``, ``submitted`` (``--no-wait``) or ``still running`` (under a
    job an earlier launcher submitted)."""

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
        replica did not complete, an ``incomplete`` one included, or the study stopped because the run directory
        could not be written)."""
        fine = ("completed", "skipped", "submitted", "still running", "audited")
        return 0 if not self.stopped and all(r.status in fine for r in self.replicas) else 1

    def summary(self) -> str:
        text = f"{self.count('completed')} completed, {self.count('failed')} failed, {self.count('skipped')} skipped"
        more = (
            ("incomplete", "incomplete"),
            ("audited", "stopped after the audited steps"),
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


class Replication:
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
        configuration: Optional[dict[str, Any]] = None,
    ) -> None:
        self.progress, self.launcher = progress, launcher
        self.configuration = configuration  # recorded in every manifest (deviate_cb.store.configuration)
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
                isolated = job.cwd is not None and Path(job.cwd) == workdir_of(plan.run_dir, Path.cwd())
                if isolated:  # --isolate: the replica's own working directory, linking the project's files
                    make_workdir(plan.run_dir, Path.cwd(), plan.run_dir.parents[2])
            run = RunDirectory(plan.run_dir)
            with writing(run.manifest_path):
                start = start_fields(
                    plan,
                    placement,
                    base_seed=self.base_seed,
                    argv=self.argv,
                    backend=self.launcher.name,
                    timeout_s=job.timeout_s,
                    keras_backend=self.keras_backend,
                    command=None if self.command is None else self.command.given,
                    command_run=None if self.command is None else job.argv,
                    configuration=self.configuration,
                )
                run.record(start.with_changes(isolate=True, workdir=str(job.cwd)) if isolated else start)
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

    def note(self, text: str) -> None:
        """A one-line note from the backend (why replicas start cold), shown where progress goes."""
        self.progress.message(f"deviate-replicate: {text}")

    def finished(self, job: Job, placement: Placement, outcome: Outcome) -> None:
        """Record the end; never raises for a run directory that cannot be written (that stops the study)."""
        plan: ReplicaPlan = job.payload
        self.unfinished.pop(plan.replica, None)
        run = RunDirectory(plan.run_dir)
        stopped = None if self.store_error is None else str(self.store_error)
        compact_what_it_left(run)  # a replica that died before its end left its last flushes as parts
        manifest = _manifest_as_left(run)  # whether it ran here; for exit 0, whether its training ended
        here = manifest is not None and manifest.host == socket.gethostname()
        end = end_fields(outcome, job.stderr_path, stopped=stopped, here=here, manifest=manifest, run_dir=run.path)
        status = str(end.status)
        reason = str(end.fields().get("reason", ""))  # UNSET for a replica that completed
        note = outcome.signal or (reason if status == "timeout" else "")
        if status == INCOMPLETE:
            note = reason.removeprefix(INCOMPLETE_PREFIX)
        elif status == "failed" and outcome.signal is None:  # what it raised, not "exited with code 1"
            recorded = manifest.exception if manifest is not None else None
            raised = recorded or exception_line(tail_lines(job.stderr_path, lines=400, max_bytes=256 * 1024))
            if raised:
                note = raised
                if not recorded:  # a command's Python, or a crash before the child could record it
                    end = end.with_changes(exception=raised)
            moved = isolation_note(job.cwd)  # --isolate: say that the working directory moved, and where `..` is
            note = f"{note}; {moved}" if note and moved else note or moved
        try:
            with writing(run.manifest_path):
                end = end.merged(self._command_fields(run, job, outcome))
                if self.spec_error is None and _ended_on_spec_error(outcome):
                    trainer_error = run.manifest().trainer_error
                    if trainer_error:
                        self.spec_error = trainer_error
                        self.launcher.cancel()
                run.record(end)
        except StoreWriteError as exc:
            status = self._record_unwritable_end(plan, job, outcome, end, exc)
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
        self, plan: ReplicaPlan, job: Job, outcome: Outcome, end: LaunchEnd, error: StoreWriteError
    ) -> str:
        """Record, in place, the end of a replica whose end could not be written: failed when it had completed
        (what it recorded may be incomplete), with the error that stopped the study; return its status."""
        stopped_by_another = self.store_error is not None and (
            outcome.cancelled or outcome.interrupted or outcome.returncode is None
        )
        self.stop(error)
        status = status_of(outcome)
        status = "failed" if status == "completed" else status
        end = end.with_changes(status=status)
        if not stopped_by_another:  # else its reason already says that (and why) the study stopped
            if outcome.launch_error:
                ended = outcome.launch_error
            elif outcome.signal:
                ended = f"the replica was killed by {outcome.signal}"
            else:
                ended = f"the replica exited with code {outcome.returncode}"
            reason = f"{error}; {ended}"
            tail = tail_lines(job.stderr_path)
            end = end.with_changes(reason=reason, error=f"{reason}; last stderr lines:\n{tail}" if tail else reason)
        if not RunDirectory(plan.run_dir).record_in_place(end):
            self.unrecorded.append(plan.replica)
        return status

    def _stop_earlier_attempt(self, plan: ReplicaPlan) -> None:
        """Stop what a killed launcher's attempt left running here, so it cannot write into the new attempt."""
        ours, refused = earlier_processes(plan.run_dir)  # only processes proven the replica's are signalled
        for line in refused:
            self.progress.message(f"{WARNING} replica {plan.replica}: {line}")
        if ours:
            listed = ", ".join(str(pid) for pid, _ in ours)
            self.progress.message(
                f"{WARNING} replica {plan.replica}: stopping {len(ours)} process{'es' * (len(ours) != 1)} still "
                f"running from an earlier attempt whose launcher is gone (pid {listed})"
            )
            stop_processes(ours, plan.run_dir, grace_s=getattr(self.launcher, "kill_grace_s", 5.0))

    def _command_fields(self, run: RunDirectory, job: Job, outcome: Outcome) -> LaunchEnd:
        """Final metrics matched in the output (``--metric-regex``); whether a command ran any bootstrapped Python."""
        fields = LaunchEnd()
        if outcome.returncode is None or not (self.patterns or self.command is not None):  # it never ran
            return fields
        manifest = run.manifest()
        if self.patterns:
            found, decimals = parsed_metrics_from_logs([job.stdout_path, job.stderr_path], self.patterns)
            with writing(run.metrics_path):
                names = set(record_final_metrics(found, run.path)) if found else set()
            wanted = {name for pattern in self.patterns for name in pattern.groupindex}
            fields = fields.with_changes(output_metrics=sorted(found))
            if decimals:  # the printed precision: identical printouts are identical to it, not bit-identical
                fields = fields.with_changes(output_metrics_decimals=dict(sorted(decimals.items())))
            missing = sorted(wanted - set(found))
            if missing:
                fields = fields.with_changes(output_metrics_missing=missing)
            if missing and outcome.returncode == 0:  # a failed replica's failure line says more; no noise before it
                self.progress.message(
                    f"{WARNING} replica {job.payload.replica}: --metric-regex found no value for "
                    f"{', '.join(missing)} in stdout.log or stderr.log"
                )
            if names:
                listed = list(manifest.final_metrics or [])
                fields = fields.with_changes(final_metrics=listed + sorted(names - set(listed)))
        if self.command is not None:
            if not manifest.bootstrap:
                note = _no_injection_note(self.command)
                fields = fields.with_changes(injection="none", injection_note=note)
                if not self.injection_warned:  # the same for every replica: the study's summary lists them all
                    self.injection_warned = True
                    self.progress.message(f"{WARNING} replica {job.payload.replica}: {note}")
            else:
                fields = fields.with_changes(injection="bootstrapped")
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


def _manifest_as_left(run: RunDirectory) -> Optional[RunManifest]:
    """The manifest a replica left, read once when it ended; ``None`` when it cannot be read (nothing is then known
    of where it ran or how far it trained: exit code 0 is taken as completed).

    From it the launcher tells whether the replica ran on this machine (its ``host``: the launcher then records the
    machine's load at its end; a Slurm or Ray node has recorded its own) and whether a replica that exited 0 ended
    its training (:func:`deviate_cb.store.completion.incomplete_reason`).

    Example:
        >>> import tempfile
        >>> run = RunDirectory(Path(tempfile.mkdtemp()))
        >>> from deviate_cb.store.manifest import LaunchStart
        >>> _ = run.record(LaunchStart(host="node-17.cluster"))
        >>> _manifest_as_left(run).host, _manifest_as_left(RunDirectory(Path("/nonexistent"))).is_empty
        ('node-17.cluster', True)
    """
    try:
        return run.manifest()
    except (OSError, ValueError, UsageError):  # unreadable
        return None


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


def _no_injection_note(command: Command) -> str:
    if command.kind == "program":
        why = f"{command.given[0]!r} is not a Python program and started none that could import deviate_cb"
    elif command.python is not None and command.python.isolated:
        why = "the interpreter runs isolated (-I, -E or -S), so it ignores PYTHONPATH and site"
    else:
        why = "its Python could not import deviate_cb (another environment?)"
    return f"no DeviateCallback could be injected ({why}): only the exit status, logs and --metric-regex values"
