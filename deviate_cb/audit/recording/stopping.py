"""A replica of ``deviate audit`` stops once its audited steps are recorded: nothing after them is compared.

Example:
    >>> stops_after_audit({"DEVIATE_AUDIT": "3", "DEVIATE_AUDIT_STOP": "1"}), stops_after_audit({"DEVIATE_AUDIT": "3"})
    (True, False)
    >>> from deviate_cb.store.manifest import RunManifest
    >>> stopped = RunManifest.from_json({"audit_stopped": {"after_steps": 3, "by": "torch"}})
    >>> stopped_after(stopped), stopped_after(RunManifest.from_json({"status": "completed"}))
    (3, None)
    >>> exc = AuditStepsDone(3); exc.code, isinstance(exc, SystemExit), exc.steps
    (0, True, 3)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from deviate_cb.store.manifest import RunManifest

__all__ = [
    "AUDITED",
    "AUDITED_TEXT",
    "STOPPED_FIELD",
    "STOP_ENV",
    "AuditStepsDone",
    "record_stop",
    "stop_line",
    "stopped_after",
    "stops_after_audit",
]

AUDITED = "audited"  # the manifest status of a replica stopped after its audited steps
AUDITED_TEXT = "stopped after the audited steps"  # how the launcher, status and report say it
STOP_ENV = "DEVIATE_AUDIT_STOP"
STOPPED_FIELD = "audit_stopped"  # the manifest's {"after_steps": K, "by": framework}
_AUDIT_ENV = "DEVIATE_AUDIT"  # deviate_cb.audit.recording.settings.AUDIT_ENV (importing it imports NumPy)


class AuditStepsDone(SystemExit):
    """``SystemExit(0)``: a plain loop's replica stops once its ``steps`` audited steps are recorded."""

    def __init__(self, steps: int) -> None:
        super().__init__(0)
        self.steps = steps


def stops_after_audit(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether this process is a replica of ``deviate audit`` that stops after its audited steps (not ``--finish``)."""
    environ = os.environ if environ is None else environ
    return bool(environ.get(_AUDIT_ENV, "").strip()) and environ.get(STOP_ENV, "").strip() == "1"


def record_stop(run: Any, steps: int, by: str) -> None:
    """Record in ``run``'s manifest (a :class:`~deviate_cb.store.run_directory.RunDirectory`) that the replica
    stops after its ``steps`` audited steps, ``by`` the framework whose training it stops."""
    from deviate_cb.store.manifest import CaptureRecord

    run.record(CaptureRecord(audit_stopped={"after_steps": int(steps), "by": by}))


def stopped_after(manifest: RunManifest) -> Optional[int]:
    """The audited steps after which the replica of ``manifest`` stopped, or ``None`` when it did not stop so."""
    record = manifest.audit_stopped
    steps = record.get("after_steps") if record is not None else None
    return steps if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0 else None


def stop_line(steps: int) -> str:
    """The line a stopping replica writes to its stderr.

    Example:
        >>> first, then = stop_line(3).split("; ")
        >>> first, then
        ('deviate audit: the 3 audited step(s) are recorded', 'stopping the training (deviate audit --finish ...)')
    """
    return (
        f"deviate audit: the {steps} audited step(s) are recorded; stopping the training "
        "(deviate audit --finish runs it to its end)"
    )
