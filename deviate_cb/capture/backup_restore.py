"""``deviate audit --resume-at K`` on Keras: the fit's ``keras.callbacks.BackupAndRestore`` is its resume path.

Example:
    >>> from deviate_cb.capture.resume_state import ResumePlan
    >>> possible_steps(ResumePlan(at=3, steps=8, role="checkpointed"), save_freq="epoch", steps_per_epoch=4)
    'multiples of 4 (the epoch boundaries: BackupAndRestore(save_freq="epoch") writes its backup at epoch ends)'
    >>> possible_steps(ResumePlan(at=6, steps=8, role="checkpointed"), save_freq=3, steps_per_epoch=4) is None
    True
"""

from __future__ import annotations

import os
import random
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from deviate_cb.capture.resume_state import ResumePlan, state_digest
from deviate_cb.store.bounded_read import load_json

__all__ = ["NO_BACKUP", "KerasResumePoint", "find_backups", "keras_state_digests", "possible_steps"]

NO_BACKUP = "the fit has no resume path: add keras.callbacks.BackupAndRestore(backup_dir) to its callbacks"


def find_backups(callbacks: Sequence[Any]) -> list[Any]:
    """The ``keras.callbacks.BackupAndRestore`` instances among ``callbacks``."""
    import keras

    return [item for item in callbacks if isinstance(item, keras.callbacks.BackupAndRestore)]


def _redirect(backup: Any, directory: str) -> None:
    """Point ``backup`` at ``directory`` (the paths Keras derives from ``backup_dir`` in its constructor)."""
    backup.backup_dir = directory
    backup._weights_path = os.path.join(directory, "latest.weights.h5")
    backup._training_metadata_path = os.path.join(directory, "training_metadata.json")
    backup._prev_weights_path = f"{backup._weights_path}.bkp"
    backup._prev_training_metadata_path = f"{backup._training_metadata_path}.bkp"
    backup.delete_checkpoint = False


def possible_steps(plan: ResumePlan, *, save_freq: Union[str, int], steps_per_epoch: Optional[int]) -> Optional[str]:
    """``None`` when the backup is written at the end of step ``plan.at - 1``, else the steps where it is, in words."""
    if save_freq == "epoch":
        if steps_per_epoch is None or plan.at % steps_per_epoch == 0:
            return None
        return (
            f'multiples of {steps_per_epoch} (the epoch boundaries: BackupAndRestore(save_freq="epoch") writes its '
            "backup at epoch ends)"
        )
    if isinstance(save_freq, int) and save_freq > 0:
        if plan.at % save_freq == 0:
            return None
        every = f"BackupAndRestore(save_freq={save_freq}) writes its backup every {save_freq} batches"
        return f"multiples of {save_freq} ({every})"
    return f"none (BackupAndRestore(save_freq={save_freq!r}) writes no backup during the fit)"


def keras_state_digests(model: Any) -> dict[str, str]:
    """The digest of each state a backup may restore, now (a state this run does not have is left out)."""
    import keras

    states: dict[str, Any] = {"numpy_rng": np.random.get_state(), "python_rng": random.getstate()}
    torch = sys.modules.get("torch")
    if keras.backend.backend() == "torch" and torch is not None:
        states["torch_rng"] = torch.get_rng_state()
    try:  # where Keras 3 keeps its global SeedGenerator (created by the first unseeded keras.random call)
        from keras.src.backend.common import global_state

        generator = global_state.get_global_attribute("global_seed_generator")
    except (ImportError, AttributeError):
        generator = None
    if generator is not None:
        states["keras_global_seed"] = keras.ops.convert_to_numpy(generator.state)
    own = [keras.ops.convert_to_numpy(g.state) for layer in model._flatten_layers(include_self=True)
           for g in getattr(layer, "_seed_generators", None) or []]  # fmt: skip
    if own:
        states["keras_seed_generators"] = own
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and getattr(optimizer, "built", False):
        states["optimizers"] = [keras.ops.convert_to_numpy(v) for v in optimizer.variables]
    return {name: state_digest(value) for name, value in states.items()}


class KerasResumePoint:
    """What a Keras replica does for ``--resume-at`` (see the module docstring); ``record`` is the manifest's
    ``resume`` object, ``changed`` says it must be written again."""

    def __init__(self, plan: ResumePlan, resumed_from: str = "") -> None:
        self.plan = plan
        self.record: dict[str, Any] = {"role": plan.role, "at": plan.at, "steps": plan.steps, "states": {}}
        if resumed_from:
            self.record["resumed_from"] = resumed_from
        self.resumed_from = resumed_from
        self.backups: Optional[list[Any]] = None  # None: the fit's callbacks were not seen
        self.changed = True
        self.first_step: Optional[int] = None

    def prepare(self, callbacks: Sequence[Any]) -> None:
        """Before ``fit``: find and redirect the fit's ``BackupAndRestore`` (the resumed run: onto a copy of the
        checkpointed run's backup)."""
        self.backups = find_backups(callbacks)
        if not self.backups or not self.plan.backup:
            return
        target = self.plan.backup
        if self.plan.role == "resumed" and self.resumed_from and not os.path.exists(target):
            shutil.copytree(self.resumed_from, target)
        for backup in self.backups:
            _redirect(backup, target)
        self.record["backup_dir"] = target

    def begin(self, params: Any) -> bool:
        """At ``on_train_begin``: whether the fit must stop after one step (no resume path, or a K without backup)."""
        if not self.backups:
            self.record["refused"] = "no_backup"
            return True
        steps = (params or {}).get("steps")
        if self.plan.role == "checkpointed":
            possible = possible_steps(
                self.plan,
                save_freq=self.backups[0].save_freq,
                steps_per_epoch=steps if isinstance(steps, int) else None,
            )
            if possible is not None:
                self.record.update(refused="bad_at", possible=possible)
                return True
        return False

    def epoch_begin(self, epoch: int, steps_per_epoch: Optional[int]) -> Optional[int]:
        """At the fit's first epoch: the global step it starts at (Keras starts a restored fit at an epoch)."""
        if self.first_step is not None:
            return None
        self.first_step = epoch * steps_per_epoch if steps_per_epoch else 0
        if self.plan.role == "resumed":
            self.record["restarted_at"] = self.first_step
            self.record["data_restarted"] = self.first_step != self.plan.at
            self.changed = True
        return self.first_step

    def batch_start(self, model: Any, step: int) -> None:
        """At the start of step K (the resumed run: of its first step, which is K unless Keras restarted an epoch):
        the ``start`` states, those the backup restored or not."""
        first = self.first_step if self.plan.role == "resumed" and self.first_step is not None else self.plan.at
        if step == first and "start" not in self.record["states"]:
            self.record["states"]["start"] = keras_state_digests(model)
            self.changed = True

    def batch_end(self, model: Any, step: int) -> bool:
        """At the end of a step: the ``end`` states after step K-1; whether the fit must stop now."""
        if step == self.plan.at - 1 and "end" not in self.record["states"]:
            self.record["states"]["end"] = keras_state_digests(model)
            self.changed = True
            if self.plan.role == "checkpointed":
                return True
        return self.plan.role != "checkpointed" and step >= self.plan.steps - 1

    def train_end(self) -> None:
        """At ``on_train_end`` of the checkpointed run: the backup Keras wrote, if it did."""
        if self.plan.role != "checkpointed" or "end" not in self.record["states"] or not self.plan.backup:
            return
        metadata = Path(self.plan.backup) / "training_metadata.json"
        if (Path(self.plan.backup) / "latest.weights.h5").is_file() and metadata.is_file():
            self.record["checkpoint"] = self.plan.backup
            self.record["global_step"] = self.plan.at
            try:  # Keras's few bytes; anything else (a FIFO, nested too deep, huge) is said, never parsed
                self.record["backup_metadata"] = load_json(metadata)
            except (OSError, ValueError) as exc:  # HostileFileError is a ValueError
                self.record["backup_metadata_error"] = " ".join(str(exc).split())[:300]
            self.changed = True
