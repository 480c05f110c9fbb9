"""What a Lightning Trainer tells about a run: its planned steps, its DataLoader workers, its setup for the fingerprint.

Public attributes only (Lightning's private ones are behind :mod:`deviate_cb.capture.lightning_tap`).
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["num_workers", "planned_steps", "trainer_facts"]


def planned_steps(trainer: Any) -> Optional[int]:
    """The optimizer steps the fit plans (``estimated_stepping_batches``), once its training data is loaded; ``None``
    when unknown or unbounded. Never loads data itself, never raises."""
    if trainer.train_dataloader is None:
        return None
    try:
        planned = trainer.estimated_stepping_batches
    except Exception:  # e.g. accumulation that changes between epochs
        return None
    return int(planned) if isinstance(planned, (int, float)) and 0 <= planned < float("inf") else None


def num_workers(dataloaders: Any) -> Optional[int]:
    """The most DataLoader workers among ``dataloaders`` (one or a list), ``None`` when none says.

    Example:
        >>> from types import SimpleNamespace
        >>> num_workers([SimpleNamespace(num_workers=0), SimpleNamespace(num_workers=2)]), num_workers(object())
        (2, None)
    """
    loaders = dataloaders if isinstance(dataloaders, (list, tuple)) else [dataloaders]
    workers = [getattr(loader, "num_workers", None) for loader in loaders]
    known = [w for w in workers if isinstance(w, int)]
    return max(known) if known else None


def trainer_facts(trainer: Any) -> dict[str, Any]:
    """What the fingerprint records of the Trainer (``lightning`` in ``fingerprint.json``)."""
    return {
        "accelerator": type(trainer.accelerator).__name__,
        "strategy": type(trainer.strategy).__name__,
        "precision": str(trainer.precision),
        "num_devices": trainer.num_devices,
        "num_nodes": trainer.num_nodes,
        "world_size": trainer.world_size,
        "accumulate_grad_batches": trainer.accumulate_grad_batches,
    }
