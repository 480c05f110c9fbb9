"""The audit of a Lightning fit as its callback drives it: attach at ``setup``, a step at a time, the record at the end.

Every rank records its own steps; rank zero writes ``audit.parquet`` and ``run.json``, a rank ``k`` > 0 its own
``audit.rank<k>.parquet`` in the run directory rank zero broadcast (:mod:`deviate_cb.audit.recording.settings`).
"""

from __future__ import annotations

from typing import Any, Optional

from deviate_cb.audit.recording.hooks import TorchAudit, named_modules, named_parameters
from deviate_cb.audit.recording.log import KINDS
from deviate_cb.audit.recording.settings import write_audit_record, write_rank_audit
from deviate_cb.audit.recording.stopping import record_stop, stops_after_audit
from deviate_cb.capture.guard import guarded
from deviate_cb.capture.session import RunSession

__all__ = ["FitAudit"]

_FRAMEWORK = "lightning"


class FitAudit:
    """One callback's audit (one fit: a second fit is not audited again).

    Args:
        steps: The training steps to audit (``None``: no audit).
        session: The run's session (problems, the run directory on rank zero).

    Example:
        >>> import tempfile
        >>> audit = FitAudit(None, RunSession(tempfile.mkdtemp()))
        >>> audit.attach(trainer=None, pl_module=None, stage="fit"); audit.recording  # audit=None: nothing attached
        False
    """

    def __init__(self, steps: Optional[int], session: RunSession) -> None:
        self.steps, self.session = steps, session
        self.audit: Optional[TorchAudit] = None  # attached while the audited fit runs
        self._audited = False
        self._ranks = (0, 1)  # (global rank, world size) of the audited fit
        self._run_dir: Optional[str] = None  # where a rank other than zero writes its record (from rank zero)

    @property
    def recording(self) -> bool:
        """Whether a step is to be recorded now (the audit's hooks are on)."""
        return self.audit is not None and self.audit.attached

    def _should_attach(self, stage: str) -> bool:
        return stage == "fit" and bool(self.steps) and not self._audited

    def attach(self, trainer: Any, pl_module: Any, stage: str) -> None:
        """``setup``: hook the module for the first fit (every rank records its own steps)."""
        if not self._should_attach(stage):
            return
        self._audited = True
        self._ranks = (trainer.global_rank, trainer.world_size)
        self.audit = TorchAudit(self.steps or 0)
        self.audit.attach(named_modules(pl_module), named_parameters(pl_module))

    def share_run_dir(self, trainer: Any) -> None:
        """``on_train_start``, every rank: rank zero says where the run is."""
        if self.audit is None or self._ranks[1] <= 1:
            return
        with guarded(self.session, "on_train_start: audit run directory"):
            run = self.session.run if trainer.is_global_zero else None
            self._run_dir = trainer.strategy.broadcast(str(run.path) if run is not None else None, src=0)

    def begin_step(self, step: int, batch: Any) -> None:
        if self.audit is not None and self.audit.attached:
            with guarded(self.session, "on_train_batch_start: audit"):
                self.audit.begin_step(step, batch)

    def record_loss(self, loss: Any) -> None:
        if self.audit is not None and self.audit.attached:
            with guarded(self.session, "on_before_backward: audit"):
                self.audit.record_loss(loss)

    def end_step(self, trainer: Any) -> None:
        """The step's digests; after the last audited step the record, and the fit stops unless told to go on."""
        audit, session = self.audit, self.session
        if audit is None or not audit.attached:
            return
        with guarded(session, "on_train_batch_end: audit"):
            audit.end_step()
        if not audit.done:
            return
        self.end("on_train_batch_end", trainer=trainer)
        if stops_after_audit():  # deviate audit without --finish: every rank stops its fit here
            with guarded(session, "on_train_batch_end: audit stop"):
                if trainer.is_global_zero and session.run is not None:
                    record_stop(session.run, self.steps or 0, _FRAMEWORK)
                trainer.should_stop = True

    def end(self, hook: str, error: Optional[BaseException] = None, trainer: Any = None) -> None:
        """Remove the audit's hooks and write what it recorded (also after fewer steps than asked: fit ended);
        ``error``: the exception that stopped the fit (a rank other than zero records it with its steps).
        ``trainer``: every rank is here at once (not after an exception): wait until each has written its record,
        since rank zero's process ending may end the others (Lightning's launcher, the replica's process group)."""
        audit, self.audit = self.audit, None
        if audit is None:
            return
        audit.detach()
        session, (rank, world_size) = self.session, self._ranks
        if session.enabled and session.run is not None:
            with guarded(session, f"{hook}: audit record"):
                write_audit_record(  # the torch hooks record every kind of row (audit.recording.log.KINDS)
                    session.run, audit.log, framework=_FRAMEWORK, covered=KINDS, world_size=world_size
                )
        elif rank > 0 and self._run_dir is not None:  # its own audit.rank<k>.parquet, never run.json
            with guarded(session, f"{hook}: audit record of rank {rank}"):
                stopped = " ".join(f"{type(error).__name__}: {error}".split()) if error is not None else ""
                write_rank_audit(
                    self._run_dir, audit.log, rank=rank, world_size=world_size, framework=_FRAMEWORK, error=stopped
                )
        if world_size > 1 and trainer is not None:
            with guarded(session, f"{hook}: audit records of every rank"):
                trainer.strategy.barrier("deviate_audit_records")
