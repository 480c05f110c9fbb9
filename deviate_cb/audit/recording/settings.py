"""What ``audit=`` asks of a callback, and writing what the audit recorded into the run directory.

Example:
    >>> audit_steps(True, environ={}), audit_steps(5, environ={}), audit_steps(None, environ={"DEVIATE_AUDIT": "7"})
    (20, 5, 7)
    >>> audit_steps(False, environ={}) is None
    True
"""

from __future__ import annotations

import numbers
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from deviate_cb.audit.recording.log import DEFAULT_STEPS, AuditLog
from deviate_cb.errors import UsageError
from deviate_cb.store.audit import write_audit
from deviate_cb.store.manifest import CaptureRecord
from deviate_cb.store.run_directory import RunDirectory

__all__ = ["AUDIT_ENV", "audit_steps", "write_audit_record", "write_rank_audit"]

AUDIT_ENV = "DEVIATE_AUDIT"


def _steps(value: Any, name: str) -> Optional[int]:
    if value is None or value is False:
        return None
    if value is True:
        return DEFAULT_STEPS
    if isinstance(value, numbers.Integral) and int(value) >= 0:
        return int(value) or None
    raise UsageError(f"`{name}` must be True, False or a number of training steps >= 1. Received: {name}={value!r}.")


def audit_steps(value: Union[bool, int, None], environ: Optional[Mapping[str, str]] = None) -> Optional[int]:
    """Training steps to audit: ``DEVIATE_AUDIT`` when set (``deviate audit``), else ``value``; ``None``: off.

    Raises:
        UsageError: ``value`` is not ``True``, ``False``, ``None`` or a non-negative integer.
    """
    environ = os.environ if environ is None else environ
    asked = _steps(value, "audit")
    text = environ.get(AUDIT_ENV, "").strip()
    if not text:
        return asked
    try:
        steps = _steps(int(text), AUDIT_ENV)
    except ValueError:
        raise UsageError(f"`{AUDIT_ENV}` must be a number of training steps. Received: {AUDIT_ENV}={text}.") from None
    if value is not None and asked != steps:
        warnings.warn(
            f"DeviateCallback(audit={value!r}) is overridden by `deviate audit`: {steps} step(s) are audited.",
            stacklevel=3,
        )
    return steps


def write_audit_record(
    run: RunDirectory,
    log: AuditLog,
    *,
    framework: str,
    covered: Sequence[str],
    not_covered: str = "",
    world_size: int = 1,
) -> None:
    """Write ``audit.parquet`` and the manifest's ``audit``: steps asked and recorded, what was covered, and with
    ``world_size`` > 1 (distributed training, written by global rank 0) ``ranks``: the records the run has."""
    metadata = {"steps": str(log.steps), "recorded_steps": str(log.recorded_steps), "framework": framework}
    if world_size > 1:
        metadata.update(rank="0", world_size=str(world_size))
    write_audit(run.path, log.rows, metadata)
    record: dict[str, Any] = {
        "steps": log.steps,
        "recorded_steps": log.recorded_steps,
        "rows": len(log.rows),
        "framework": framework,
        "covered": list(covered),
    }
    if not_covered:
        record["not_covered"] = not_covered
    if world_size > 1:
        record["ranks"] = world_size
    run.record(CaptureRecord(audit=record))


def write_rank_audit(
    run_dir: Union[str, os.PathLike[str]],
    log: AuditLog,
    *,
    rank: int,
    world_size: int,
    framework: str,
    error: str = "",
) -> None:
    """Write global rank ``rank``'s (> 0) record to ``<run_dir>/audit.rank<rank>.parquet``; nothing else: the
    manifest is rank 0's. ``error``: the exception that stopped this rank's fit (the file's ``exception``).

    Example:
        >>> import tempfile
        >>> from deviate_cb.store.audit import audit_ranks
        >>> run_dir = tempfile.mkdtemp()
        >>> write_rank_audit(run_dir, AuditLog(2), rank=1, world_size=2, framework="lightning")
        >>> audit_ranks(run_dir)
        [1]
    """
    if rank < 1:
        raise ValueError(f"rank 0 writes its record with write_audit_record, not write_rank_audit (rank={rank})")
    metadata = {"steps": str(log.steps), "recorded_steps": str(log.recorded_steps), "framework": framework,
                "rank": str(rank), "world_size": str(world_size)}  # fmt: skip
    if error:
        metadata["exception"] = error[:500]
    write_audit(run_dir, log.rows, metadata, rank=rank)
