"""``deviate audit``'s logic once its flags are read: whether the target can be audited, running the recorded
replicas through the launcher, comparing their records (replicas, then ranks) and deciding the exit status.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Optional

from deviate_cb.audit.divergence import AuditResult, compare_audits
from deviate_cb.audit.ranks import RankedAudit, rank_comparison
from deviate_cb.audit.replicas import AuditedReplica, after_steps_line, not_audited_lines, read_replicas, stopped_line
from deviate_cb.errors import UsageError

__all__ = ["EXIT_NOT_AUDITED", "AuditOutcome", "AuditRequest", "run_audit", "target_refusal"]

#: The exit status of an audit that could not be made or is incomplete.
EXIT_NOT_AUDITED = 3


@dataclass(frozen=True)
class AuditRequest:
    """What ``deviate audit`` was asked, its flags checked.

    Attributes:
        trainer: The ``--trainer`` spec, or ``None`` for a command.
        after: What follows ``--``: the trainer's arguments, or the command.
        runs: Replicas run (``-n``).
        steps: Training steps audited (``--steps``).
        variant: ``control`` or ``impl``.
        seed: The replicas' seed.
        out: The run store.
        experiment: The experiment's name, or ``None`` for the launcher's default.
        parallel: Replicas at once.
        timeout: Seconds before a replica is stopped, or ``None``.
        finish: Whether every replica trains to its end (else it stops after its audited steps).
        keras_backend: ``KERAS_BACKEND`` for the replicas, or ``None``.
        cold: Whether every replica starts as a fresh interpreter.
        shown: Divergences shown after the first (``--next``).
        argv: The command line, as the run's manifests record it.
    """

    trainer: Optional[str]
    after: Sequence[str]
    runs: int
    steps: int
    variant: str
    seed: int
    out: str
    experiment: Optional[str]
    parallel: int
    timeout: Optional[float]
    finish: bool
    keras_backend: Optional[str]
    cold: bool
    shown: int
    argv: Sequence[str]


@dataclass(frozen=True)
class AuditOutcome:
    """What an audit found.

    Attributes:
        audited: What became of each replica (with ``--against``, the reference's replica first, as replica 0).
        not_covered: What the audit could not cover on this framework (``""``: everything).
        where: The directory of the replicas' records.
        errors: Why nothing could be compared (fewer records than needed), one line each; empty when compared.
        compared: The comparison of the replicas (of the rank that diverged first when distributed).
        ranked: The comparison of each rank, when distributed and not ``--against``.
        stopped: Why the comparison does not cover every replica over the steps asked; ``""`` when it does.
        after: The replicas that timed out after every audited step (a note); ``""`` when none.

    Example:
        >>> agree = AuditResult(False, (0, 1), 20)
        >>> AuditOutcome([], "", Path("runs"), compared=agree).exit_status
        0
        >>> AuditOutcome([], "", Path("runs"), compared=agree, stopped="replica 1 failed").exit_status
        3
    """

    audited: list[AuditedReplica]
    not_covered: str
    where: Path
    errors: tuple[str, ...] = ()
    compared: Optional[AuditResult] = None
    ranked: Optional[RankedAudit] = None
    stopped: str = ""
    after: str = ""

    @property
    def exit_status(self) -> int:
        """0 agree, 1 diverged within the steps every replica recorded (whatever stopped one later), 3 not audited."""
        if self.compared is not None and self.compared.diverged:
            return 1
        return EXIT_NOT_AUDITED if self.errors or self.stopped else 0

    def to_dict(self, request: AuditRequest, against: Any = None) -> dict[str, Any]:
        """The ``--format json`` object of a compared audit."""
        assert self.compared is not None, "only a compared audit has a verdict"
        payload = {**self.compared.to_dict(), "steps": request.steps, "variant": request.variant}
        payload["runs"] = str(self.where)
        payload["not_covered"] = self.not_covered or None
        payload["verdict"] = "diverged" if self.compared.diverged else "incomplete" if self.stopped else "agree"
        payload["stopped"] = self.stopped or None
        payload["after_audited_steps"] = self.after or None
        payload["not_completed"] = [
            {"replica": a.replica, "status": a.status, "how": a.how, "recorded_steps": a.recorded_steps}
            for a in self.audited
            if not a.ended
        ]
        if self.ranked is not None:
            payload.update(ranks=self.ranked.to_dict(), first_ranks=list(self.ranked.first))
        if against is not None:
            payload.update(against.to_dict())
        return payload


def target_refusal(trainer: Optional[str], after: Optional[Sequence[str]]) -> str:
    """Why the target cannot be audited, read from its source (:mod:`deviate_cb.launch.target.audit_scan`).

    Returns:
        The reason, or ``""`` when it may be, when the source does not tell, or when the target is wrong (the
        launcher then says how).
    """
    from deviate_cb.launch.target.audit_scan import audit_refusal
    from deviate_cb.launch.target.command import Command
    from deviate_cb.launch.target.trainer_spec import TrainerSpec

    try:
        target: TrainerSpec | Command = (
            TrainerSpec.parse(trainer) if trainer is not None else Command.parse(after or ())
        )
        target.precheck()
    except UsageError:
        return ""
    return audit_refusal(target, Path.cwd())


def run_audit(request: AuditRequest, err: IO[str], against: Any = None) -> AuditOutcome:
    """Run the recorded replicas and compare their records.

    Args:
        request: What was asked.
        err: Where the replicas' progress goes.
        against: The kept recording of ``--against`` (:func:`deviate_cb.cli.against_check.open_against`): its
            replica is compared as replica 0, and this machine's replica ``i`` as ``i + 1``.

    Returns:
        The outcome; its ``errors`` are set, and nothing is compared, when too few replicas recorded anything.
    """
    result = _record(request, err)
    audited, not_covered = read_replicas(result.replicas)
    where = Path(result.out) / f"experiment={result.experiment}" / f"variant={result.variant}"
    records = _records(audited)
    if len(records) < (1 if against else 2):
        return AuditOutcome(audited, not_covered, where, errors=tuple(not_audited_lines(audited, len(records), where)))
    if against is not None:
        audited = against.relabel(read_replicas(against.replicas)[0], audited, result.replicas, err)
        records = _records(audited)
    complete = [a.replica for a in audited if a.ended]
    compared = compare_audits(records, next_count=request.shown, complete=complete)
    ranked = None  # not distributed, or --against (its recording's ranks are not read: rank 0 is compared)
    if against is None:
        ranked = rank_comparison(result.replicas, next_count=request.shown, complete=complete)
    if ranked is not None and ranked.lead is not None:
        compared = ranked.lead  # the rank that diverged first (rank 0 when none did)
    stopped = stopped_line(audited, compared, request.steps)
    after = "" if stopped else after_steps_line(audited, request.steps)  # a note, no cut
    if ranked is not None and ranked.incomplete:  # a rank without a record, or that failed: incomplete
        stopped = "; ".join(part for part in (stopped, ranked.incomplete) if part)
    return AuditOutcome(audited, not_covered, where, (), compared, ranked, stopped, after)


def _records(audited: Sequence[AuditedReplica]) -> dict[int, list[dict[str, Any]]]:
    return {a.replica: a.rows for a in audited if a.rows}


def _record(request: AuditRequest, err: IO[str]) -> Any:
    """Run the replicas through the launcher, each recording its audited steps."""
    from deviate_cb.launch.runner import replicate

    return replicate(
        request.trainer,
        command=request.after if request.trainer is None else None,
        trainer_args=request.after if request.trainer is not None else (),
        runs=request.runs,
        variant=request.variant,
        seed=request.seed,
        out=request.out,
        experiment=request.experiment,
        parallel=request.parallel,
        timeout=request.timeout,
        force=True,  # an audit runs its replicas again: a record from an earlier audit says nothing about now
        keras_backend=request.keras_backend,
        cold=request.cold,
        stream=err,  # type: ignore[arg-type]  # a text stream: the progress goes where warnings go
        live=False,
        audit=request.steps,
        audit_stop=not request.finish,  # deviate_cb.audit.recording.stopping: status `audited`
        argv=list(request.argv),
    )
