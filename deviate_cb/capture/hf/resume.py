"""``deviate audit --resume-at K`` for a Hugging Face ``Trainer``, the replica's side: the states around step K
digested, the checkpoint written by the Trainer itself (``<output_dir>/checkpoint-K``), the run stopped.

Example:
    >>> from deviate_cb.capture.resume_state import ResumePlan
    >>> point = TrainerResumePoint(ResumePlan(at=2, steps=4, role="checkpointed"))
    >>> point.record["role"], point.record["states"]
    ('checkpointed', {})
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from deviate_cb.capture.resume_state import ResumePlan, training_digests

__all__ = ["TrainerResumePoint"]


class TrainerResumePoint:
    """What a Trainer replica does for ``--resume-at``: record the states around step K, save the checkpoint or stop.

    The callback calls :meth:`step_begin` in ``on_step_begin`` and :meth:`step_end` in ``on_step_end``; each returns
    whether :attr:`record` (the manifest's ``resume`` object) changed.

    Args:
        plan: The replica's part.
        resumed_from: The checkpoint the ``resumed`` replica's ``train()`` was given.
    """

    def __init__(self, plan: ResumePlan, resumed_from: str = "") -> None:
        self.plan = plan
        self.record: dict[str, Any] = {"role": plan.role, "at": plan.at, "steps": plan.steps, "states": {}}
        if resumed_from:
            self.record["resumed_from"] = resumed_from

    def step_begin(self, args: Any, state: Any, events: Mapping[str, Any]) -> bool:
        """At the start of step K (``global_step == K``), digest the ``start`` states."""
        if state.global_step != self.plan.at or "start" in self.record["states"]:
            return False
        self.record["states"]["start"] = _digests(events)
        if self.plan.role == "resumed":  # the Trainer skips the batches of the epoch it had trained on
            self.record["data_restarted"] = bool(getattr(args, "ignore_data_skip", False))
        return True

    def step_end(self, args: Any, state: Any, control: Any, events: Mapping[str, Any]) -> bool:
        """At the end of step K-1 (``global_step == K``), digest the ``end`` states; ``checkpointed``: have the Trainer
        save ``checkpoint-K`` and stop. At the end of step N-1, stop."""
        changed = False
        if state.global_step == self.plan.at and "end" not in self.record["states"]:
            self.record["states"]["end"] = _digests(events)
            changed = True
            if self.plan.role == "checkpointed":
                control.should_save = True  # saved after this event, with the Trainer's own RNG and data states
                control.should_training_stop = True
                self.record["checkpoint"] = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
                self.record["global_step"] = int(state.global_step)
        if state.global_step >= self.plan.steps and self.plan.role != "checkpointed":
            control.should_training_stop = True
        return changed


def _digests(events: Mapping[str, Any]) -> dict[str, str]:
    """The states of :data:`~deviate_cb.capture.resume_state.STATES` from what the Trainer hands its callbacks."""
    scheduler, optimizer = events.get("lr_scheduler"), events.get("optimizer")
    schedulers = [scheduler] if scheduler is not None else []
    optimizers = [optimizer] if optimizer is not None else []
    return training_digests(events.get("train_dataloader"), schedulers, optimizers)
