"""``deviate audit --resume-at K``, the replica's side: digests of what a checkpoint should restore, the checkpoint.

Example:
    >>> resume_plan({RESUME_ENV: '{"at": 3, "steps": 6, "role": "checkpointed"}'})
    ResumePlan(at=3, steps=6, role='checkpointed')
    >>> resume_plan({}) is None
    True
    >>> a, b = state_digest({"lr": 0.1, "step": [1, 2]}), state_digest({"lr": 0.1, "step": [1, 3]})
    >>> len(a), a == state_digest({"step": [1, 2], "lr": 0.1}), a == b
    (32, True, False)
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from deviate_cb.errors import UsageError

__all__ = [
    "RESUME_ENV",
    "RESUME_FROM_ENV",
    "ROLES",
    "STATES",
    "ResumePlan",
    "ResumePoint",
    "checkpoint_name",
    "resume_plan",
    "state_digest",
    "state_digests",
    "training_digests",
]

RESUME_ENV = "DEVIATE_RESUME"
RESUME_FROM_ENV = "DEVIATE_RESUME_FROM"
ROLES = ("uninterrupted", "checkpointed", "resumed")
#: The states digested (:func:`state_digests`); :mod:`deviate_cb.audit.resume` names them in words.
STATES = ("torch_rng", "cuda_rng", "numpy_rng", "python_rng", "sampler_generator", "lr_schedulers", "optimizers")


@dataclass(frozen=True)
class ResumePlan:
    """A replica's part in ``--resume-at``: the step ``at`` (K), the steps ``steps`` (N) and its ``role``;
    ``backup``: the directory a Keras fit's ``BackupAndRestore`` is redirected to (:mod:`.backup_restore`)."""

    at: int
    steps: int
    role: str
    backup: str = field(default="", repr=False)


def resume_plan(environ: Optional[Mapping[str, str]] = None) -> Optional[ResumePlan]:
    """The replica's :class:`ResumePlan` from ``DEVIATE_RESUME``; ``None`` when unset.

    Raises:
        UsageError: The variable is not the JSON object ``deviate audit`` writes.
    """
    environ = os.environ if environ is None else environ
    text = environ.get(RESUME_ENV, "").strip()
    if not text:
        return None
    try:
        raw = json.loads(text)
        plan = ResumePlan(int(raw["at"]), int(raw["steps"]), str(raw["role"]), str(raw.get("backup") or ""))
    except (ValueError, TypeError, KeyError):
        plan = ResumePlan(0, 0, "")
    if not (0 < plan.at < plan.steps and plan.role in ROLES):
        raise UsageError(
            f'`{RESUME_ENV}` must be {{"at": K, "steps": N, "role": ...}} with 0 < K < N and a role among '
            f"{', '.join(ROLES)}. Received: {RESUME_ENV}={text}."
        )
    return plan


def checkpoint_name(at: int) -> str:
    """The checkpoint file the ``checkpointed`` replica writes into its run directory.

    Example:
        >>> checkpoint_name(4)
        'checkpoint-step=4.ckpt'
    """
    return f"checkpoint-step={at}.ckpt"


def _feed(value: Any, out: Any) -> None:
    """Feed ``out`` a canonical byte form of ``value`` (tensors and arrays by their bytes, mappings by key)."""
    torch = sys.modules.get("torch")  # a torch tensor exists only where torch is imported; Keras never imports it
    if torch is not None and isinstance(value, torch.Tensor):
        flat = value.detach().cpu().reshape(-1).contiguous()
        out.update(f"T{flat.dtype}{tuple(value.shape)}:".encode())
        out.update(flat.view(torch.uint8).numpy().tobytes())
    elif isinstance(value, np.ndarray):
        out.update(f"A{value.dtype}{value.shape}:".encode())
        out.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, Mapping):
        out.update(b"{")
        for key in sorted(value, key=repr):
            out.update(repr(key).encode() + b":")
            _feed(value[key], out)
        out.update(b"}")
    elif isinstance(value, (list, tuple)):
        out.update(b"[")
        for item in value:
            _feed(item, out)
            out.update(b",")
        out.update(b"]")
    elif isinstance(value, float):
        out.update(float(value).hex().encode())
    elif value is None or isinstance(value, (bool, int, str, bytes, np.generic)):
        out.update(repr(value).encode())
    else:  # a function (LambdaLR's lambdas are not in its state), an object: only its kind
        out.update(f"<{type(value).__name__}>".encode())


def state_digest(value: Any) -> str:
    """A digest of ``value``'s exact contents (32 hex digits of SHA-256): equal iff equal bits, keys and structure."""
    out = hashlib.sha256()
    _feed(value, out)
    return out.hexdigest()[:32]


def _generators(loaders: Any) -> list[Any]:
    """The torch generators the train DataLoader(s) shuffle with: the sampler's, then the loader's own."""
    import torch

    found: list[torch.Generator] = []
    items = loaders if isinstance(loaders, (list, tuple)) else list(loaders.values()) if isinstance(
        loaders, Mapping) else [loaders]  # fmt: skip
    for loader in items:
        batch_sampler = getattr(loader, "batch_sampler", None)
        for owner in (getattr(loader, "sampler", None), getattr(batch_sampler, "sampler", None), loader):
            generator = getattr(owner, "generator", None)
            if isinstance(generator, torch.Generator) and all(generator is not g for g in found):
                found.append(generator)
    return found


def state_digests(trainer: Any) -> dict[str, str]:
    """The digest of each state a checkpoint may restore (:data:`STATES`), now, for a Lightning
    ``trainer``; a state this run does not have (no CUDA, no sampler generator, no scheduler) is left out."""
    schedulers = [config.scheduler for config in getattr(trainer, "lr_scheduler_configs", None) or []]
    return training_digests(
        getattr(trainer, "train_dataloader", None), schedulers, getattr(trainer, "optimizers", None)
    )


def training_digests(loaders: Any, schedulers: Any, optimizers: Any) -> dict[str, str]:
    """The digest of each state of :data:`STATES`, now: the global generators, the train DataLoader(s)' sampler
    generators, the learning-rate schedulers' and optimizers' ``state_dict()`` (any of them ``None`` or empty: left
    out). Shared by Lightning (:func:`state_digests`) and the Hugging Face Trainer."""
    import torch

    states: dict[str, Any] = {
        "torch_rng": torch.get_rng_state(),
        "numpy_rng": np.random.get_state(),
        "python_rng": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda_rng"] = torch.cuda.get_rng_state_all()
    generators = _generators(loaders) if loaders is not None else []
    if generators:
        states["sampler_generator"] = [g.get_state() for g in generators]
    if schedulers:
        states["lr_schedulers"] = [scheduler.state_dict() for scheduler in schedulers]
    if optimizers:
        states["optimizers"] = [optimizer.state_dict() for optimizer in optimizers]
    return {name: state_digest(value) for name, value in states.items()}


class ResumePoint:
    """What a Lightning replica does for ``--resume-at``: record the states around step K, checkpoint or stop.

    The callback calls :meth:`batch_start` in ``on_train_batch_start`` and :meth:`batch_end` at the end of
    ``on_train_batch_end``; ``record`` receives the manifest's ``resume`` object each time it changes.

    Args:
        plan: The replica's part.
        resumed_from: The checkpoint the ``resumed`` replica's fit was given.
    """

    def __init__(self, plan: ResumePlan, resumed_from: str = "") -> None:
        self.plan = plan
        self.record: dict[str, Any] = {"role": plan.role, "at": plan.at, "steps": plan.steps, "states": {}}
        if resumed_from:
            self.record["resumed_from"] = resumed_from

    def batch_start(self, trainer: Any, step: int) -> bool:
        """At the start of step K, record the ``start`` states; whether the record changed."""
        if step != self.plan.at or "start" in self.record["states"]:
            return False
        self.record["states"]["start"] = state_digests(trainer)
        if self.plan.role == "resumed":
            self.record["data_restarted"] = _data_restarted(trainer)
        return True

    def batch_end(self, trainer: Any, step: int, run_dir: Optional[os.PathLike[str]]) -> bool:
        """At the end of step K-1, record the ``end`` states (``checkpointed``: save the checkpoint into ``run_dir``
        and stop); at the end of step N-1, stop. Whether the record changed."""
        changed = False
        if step == self.plan.at - 1 and "end" not in self.record["states"]:
            self.record["states"]["end"] = state_digests(trainer)
            changed = True
            if self.plan.role == "checkpointed" and run_dir is not None:
                path = Path(run_dir) / checkpoint_name(self.plan.at)
                trainer.save_checkpoint(str(path))
                self.record["checkpoint"] = str(path)
                self.record["global_step"] = int(trainer.global_step)
                _stop(trainer)
        if step >= self.plan.steps - 1 and self.plan.role != "checkpointed":
            _stop(trainer)
        return changed


def _data_restarted(trainer: Any) -> bool:
    """Whether the resumed fit starts mid-epoch with a train DataLoader that cannot say where it was: Lightning 2 then
    iterates it again from its first batch (it restores a loader with ``state_dict``/``load_state_dict``)."""
    fit_loop = trainer.fit_loop
    loaders = getattr(getattr(fit_loop, "_combined_loader", None), "flattened", None) or []
    resumable = all(callable(getattr(x, "state_dict", None)) and callable(getattr(x, "load_state_dict", None))
                    for x in loaders)  # fmt: skip
    return bool(fit_loop.epoch_loop.batch_idx > 0 and not resumable)


def _stop(trainer: Any) -> None:
    """End the fit after this batch, as early stopping does (Lightning 2 leaves the epoch loop after the batch that
    sets ``should_stop``), also where ``min_epochs``/``min_steps`` would have kept it going."""
    trainer.should_stop = True
    fit_loop = trainer.fit_loop
    fit_loop.min_epochs = None
    fit_loop.epoch_loop.min_steps = None
