"""How a Slurm job's end becomes a replica's :class:`~deviate_cb.launch.backends.base.Outcome`.

Example:
    >>> o = outcome_from_manifest(RunManifest.from_json({"status": "completed", "exit_code": 0}), "COMPLETED", "7_0")
    >>> o.returncode, o.launch_error, o.end.slurm_state
    (0, None, 'COMPLETED')
    >>> lost_note("7_1")
    "Slurm job 7_1 left the queue without recording the replica's end"
"""

from __future__ import annotations

import time as _time
from typing import Optional

from deviate_cb.launch.backends.base import Outcome
from deviate_cb.store.manifest import LaunchEnd, RunManifest
from deviate_cb.store.run_directory import unix_time

__all__ = ["ENDED_STATUSES", "lost_note", "outcome_from_manifest"]

# Manifest statuses of a replica that recorded its end.
ENDED_STATUSES = ("completed", "incomplete", "failed", "timeout", "killed", "audited")


def lost_note(job_id: str) -> str:
    """The launch error of a replica whose job left the queue without recording its end in the manifest."""
    return f"Slurm job {job_id} left the queue without recording the replica's end"


def outcome_from_manifest(
    manifest: RunManifest, state: Optional[str], job_id: str, *, cancelled: bool = False, note: str = ""
) -> Outcome:
    """The outcome of a replica whose job ended in Slurm ``state``, from what its task wrote in the manifest.

    Example:
        >>> m = RunManifest.from_json({"status": "failed", "exit_code": 143, "started_at": "2026-01-01T00:00:00Z"})
        >>> o = outcome_from_manifest(m, "CANCELLED", "12_1")
        >>> o.returncode, o.scheduler_state, o.end.fields()
        (143, 'CANCELLED', {'slurm_job_id': '12_1', 'slurm_state': 'CANCELLED'})
    """
    status = manifest.status
    ended = status in ENDED_STATUSES
    code = manifest.exit_code
    launch_error = None
    if not ended and state == "COMPLETED":
        launch_error = (
            f"Slurm job {job_id} ended COMPLETED without recording the replica's end in its run directory: the "
            "run directory is probably not visible from the compute node (put --out on a shared file system)"
        )
    elif not ended and note:
        launch_error = note
    return Outcome(
        returncode=code if ended else None,
        signal=manifest.signal if ended else None,
        timed_out=status == "timeout",
        cancelled=cancelled,
        started_at=unix_time(manifest.started_at),
        ended_at=unix_time(manifest.ended_at) if ended else _time.time(),
        pid=manifest.pid,
        launch_error=launch_error,
        scheduler_state=state or (None if ended else "UNKNOWN"),
        end=LaunchEnd(slurm_job_id=job_id, slurm_state=state or "UNKNOWN"),
    )
