"""What became of each replica of an audit: how its training ended, its audit rows, and the lines that say why
the comparison does not cover every replica over the steps asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deviate_cb.audit.recording.stopping import AUDITED, stopped_after
from deviate_cb.errors import UsageError
from deviate_cb.store.manifest import RunManifest

__all__ = [
    "AuditedReplica",
    "after_steps_line",
    "how_it_ended",
    "not_audited_lines",
    "read_replicas",
    "stopped_line",
]

# How the launcher's reason for a replica that exited 0 before its training ended (status incomplete) starts.
_EXITED_EARLY = "exited with code 0 before its training ended"
# What a replica that ended with no record and no fit did (its stderr.log has nothing to add).
_NOT_HOOKED = "trained without a Lightning Trainer.fit, a Keras Model.fit or a torch.optim optimizer step"


@dataclass(frozen=True)
class AuditedReplica:
    """What became of one replica of an audit.

    Attributes:
        replica: Its index.
        status: The launcher's status (``completed``, ``failed``, ``timeout``, ``killed``, ``incomplete``...).
        ended: Whether its training ended normally: it completed, and no ``fit`` stopped on an exception (the
            manifest's ``exception``) or was left unfinished (``fit: "started"``).
        how: How it ended when it did not end normally (``failed with RuntimeError: boom``); ``""`` otherwise.
        rows: Its audit rows (empty: none recorded, or unreadable).
        recorded_steps: Training steps its record holds.
        problem: Why its record could not be read, or why it has none; ``""`` when it has one.
    """

    replica: int
    status: str
    ended: bool
    how: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    recorded_steps: int = 0
    problem: str = ""


def how_it_ended(status: str, manifest: RunManifest, note: str = "") -> tuple[bool, str]:
    """Whether a replica's training ended normally, and when not, how it ended in a few words, from its launcher
    ``status`` and its manifest: the exception that stopped it (``exception``), else what ended it (``reason``, a
    timeout or a signal), else the last line of its stderr (``error``).

    Example:
        >>> from deviate_cb.store.manifest import RunManifest
        >>> M = RunManifest.from_json
        >>> how_it_ended("completed", M({"status": "completed"}))
        (True, '')
        >>> how_it_ended("audited", M({"status": "audited", "audit_stopped": {"after_steps": 3, "by": "torch"}}))
        (True, '')
        >>> how_it_ended("failed", M({"exception": "RuntimeError: boom", "reason": "exited with code 1"}))
        (False, 'failed with RuntimeError: boom')
        >>> how_it_ended("failed", M({"reason": "exited with code 1", "error": "Traceback...\\nKeyError: 'x'"}))
        (False, "failed with KeyError: 'x'")
        >>> how_it_ended("timeout", M({"reason": "timed out after 3.0 s; killed by SIGTERM", "exception": "Exit"}))
        (False, 'timed out after 3.0 s; killed by SIGTERM')
        >>> how_it_ended("completed", M({"exception": "SystemExit: 0"}))  # sys.exit(0) inside fit
        (False, 'stopped before its training ended: SystemExit: 0')
        >>> how_it_ended("incomplete", M({"fit": "started", "reason": "the process exited while fit() was running"}))
        (False, 'stopped before its training ended: the process exited while fit() was running')
        >>> how_it_ended("incomplete", M({"reason": "exited with code 0 before its training ended: os._exit(0)"}))
        (False, 'exited with code 0 before its training ended: os._exit(0)')
    """
    exception = _one_line(manifest.exception)
    reason = _one_line(manifest.reason)
    error = manifest.error
    tail = _one_line(error.strip().splitlines()[-1]) if error is not None and error.strip() else ""
    fit_open = manifest.fit == "started"
    if status == "completed" and manifest.status in (None, "completed") and not exception and not fit_open:
        return True, ""
    if status == AUDITED and stopped_after(manifest) is not None:  # stopped after its audited steps, as asked
        return True, ""
    stopped = bool(reason) and not (error and not error.startswith(reason))
    if status in ("timeout", "killed", "not started"):  # what the launcher did says more than the exception it raised
        detail = reason or exception or tail
    elif status == "failed":
        detail = exception or (reason if stopped else tail) or reason
    else:
        detail = exception or reason or tail
    detail = detail or _one_line(note) or f"status {status}"
    if status == "failed":
        return False, f"failed with {detail}" if detail in (exception, tail) else f"failed: {detail}"
    if status == "timeout":
        return False, detail if detail.startswith("timed out") else f"timed out ({detail})"
    if status == "killed":
        return False, f"was {detail}" if detail.startswith("killed") else f"was killed ({detail})"
    if status == "not started":
        return False, f"did not start ({detail})"
    if status == "incomplete" and reason.startswith(_EXITED_EARLY):  # the launcher's reason says it all
        return False, reason
    return False, f"stopped before its training ended: {detail}"


def _one_line(text: Any, limit: int = 300) -> str:
    if not isinstance(text, str):
        return ""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def read_replicas(replicas: Any) -> tuple[list[AuditedReplica], str]:
    """What became of each replica (:class:`AuditedReplica`, with its audit rows), and what the audit could not
    cover on this framework (the manifests' ``audit.not_covered``)."""
    from deviate_cb.store.audit import read_audit
    from deviate_cb.store.run_directory import RunDirectory

    found = []
    not_covered = ""
    for replica in replicas:
        try:
            manifest = RunDirectory(replica.run_dir).manifest()
        except (UsageError, OSError):  # an unreadable manifest: its audit file still says what was recorded
            manifest = RunManifest.from_json({})
        audit = manifest.audit
        if audit is not None and isinstance(audit.get("not_covered"), str):
            not_covered = audit["not_covered"]
        status = replica.status
        if manifest.status == "incomplete" and status == "completed":
            status = "incomplete"
        ended, how = how_it_ended(status, manifest, replica.note)
        problem = ""
        rows: list[dict[str, Any]] = []
        try:
            rows = read_audit(replica.run_dir)
        except FileNotFoundError:
            pass
        except ValueError as exc:
            problem = f"{how + ' and ' if how else ''}has an unreadable audit record: {exc}"
        failed = audit.get("error") if audit is not None else None
        if not rows and not problem and isinstance(failed, str) and failed:  # the audit's own error, not the training's
            problem = f"recorded no audit: {_one_line(failed)}" + (f" ({how})" if how else "")
        if not rows and not problem:
            if ended and not manifest.is_empty and not manifest.recorded("fit"):  # no callback saw a fit start
                ran = getattr(replica, "duration_s", None)
                problem = f"{_NOT_HOOKED}, so nothing was hooked" + (
                    f" (it ran {ran:.0f} s)" if isinstance(ran, (int, float)) else ""
                )
            elif ended:
                problem = "completed without recording any training step: its fit trained no step"
            else:
                problem = f"{how} before recording any training step"
        steps = len({row["step"] for row in rows})
        found.append(AuditedReplica(replica.replica, status, ended, how, rows, steps, problem))
    return found, not_covered


def not_audited_lines(audited: Sequence[AuditedReplica], recorded: int, where: Path) -> list[str]:
    """The error lines when fewer than two replicas recorded anything."""
    if not recorded and audited and all(a.problem.startswith(_NOT_HOOKED) for a in audited):  # one line says it all
        return ["nothing to audit: " + "; ".join(f"replica {a.replica} {a.problem}" for a in audited)]
    if not any(a.ended for a in audited):
        named = "; ".join(f"replica {a.replica} {a.how}" for a in audited)
        return [f"no replica completed: {named}; see their stderr.log in {where}"]
    lines = [f"replica {a.replica} {a.problem}" + ("" if a.problem.startswith(_NOT_HOOKED) else
             f"; see {where / f'replica={a.replica}' / 'stderr.log'}") for a in audited if not a.rows]  # fmt: skip
    lines.append(f"the audit needs the records of at least 2 replicas; {recorded} recorded one.")
    return lines


def stopped_line(audited: Sequence[AuditedReplica], compared: Any, steps: int) -> str:
    """Why the comparison does not cover every replica over the steps asked, in one line; ``""`` when it does
    (every replica ended its training normally and has a record).

    Example:
        >>> from deviate_cb.audit.divergence import AuditResult
        >>> rows = [{"step": 0}, {"step": 1}]
        >>> crashed = AuditedReplica(0, "failed", False, "failed with RuntimeError: boom", rows, recorded_steps=2)
        >>> ended = AuditedReplica(1, "completed", True, rows=rows * 3, recorded_steps=6)
        >>> stopped_line([crashed, ended], AuditResult(False, (0, 1), 2, last_step=1), steps=20)
        'nothing to compare after step 1: replica 0 failed with RuntimeError: boom'
        >>> stopped_line([ended, ended], AuditResult(False, (1, 1), 6, last_step=5), steps=20)
        ''
        >>> late = AuditedReplica(0, "timeout", False, "timed out after 9.0 s", rows, recorded_steps=2)
        >>> stopped_line([late, ended], AuditResult(False, (0, 1), 2, last_step=1), steps=2)  # after its 2 steps
        ''
    """
    if all((a.ended and a.rows) or _timed_out_after(a, steps) for a in audited):
        return ""  # every replica ended its training or timed out after every step asked: the timeout is a note
    if not any(a.ended or _timed_out_after(a, steps) for a in audited):
        return "no replica completed: " + "; ".join(f"replica {a.replica} {a.how}" for a in audited)
    stopped = [a for a in audited if not a.ended and a.rows and not _timed_out_after(a, steps)]
    cut = [f"replica {a.replica} {a.how}" for a in stopped if a.recorded_steps < steps]  # it limits the comparison
    later = [f"replica {a.replica} {a.how} after its {a.recorded_steps} audited step(s)"
             for a in stopped if a.recorded_steps >= steps]  # fmt: skip
    unrecorded = [f"replica {a.replica} {a.problem or 'recorded nothing'}" for a in audited if not a.rows]
    named = "; ".join([*cut, *later, *unrecorded])
    if not cut:
        return named
    if compared.last_step is None:
        return f"nothing to compare: {named}"
    return f"nothing to compare after step {compared.last_step}: {named}"


def _timed_out_after(replica: AuditedReplica, steps: int) -> bool:
    """Whether ``replica`` timed out after recording every one of the ``steps`` audited steps: its record is whole
    (a replica that failed after them is not: what made it fail may be what the audit looks for)."""
    return replica.status == "timeout" and bool(replica.rows) and replica.recorded_steps >= steps


def after_steps_line(audited: Sequence[AuditedReplica], steps: int) -> str:
    """The replicas that timed out after recording every one of the ``steps`` audited steps: a note beside an
    answer they do not change; ``""`` when none.

    Example:
        >>> rows = [{"step": 0}, {"step": 1}]
        >>> late = AuditedReplica(1, "timeout", False, "timed out after 9.0 s", rows, recorded_steps=2)
        >>> after_steps_line([late], steps=2)
        'replica 1 timed out after 9.0 s after its 2 audited step(s)'
    """
    return "; ".join(
        f"replica {a.replica} {a.how} after its {a.recorded_steps} audited step(s)"
        for a in audited
        if _timed_out_after(a, steps)
    )
