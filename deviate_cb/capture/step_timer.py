"""The step timer: wall time of every training step, cheaply, and its per-stage statistics.

The adapters time every training step (a clock read and a list append, a few microseconds); the rows the
timer holds are the step rows of ``timings.parquet`` (:mod:`deviate_cb.store.timings`), and the steps a
profiler window recorded (:mod:`deviate_cb.profiling.drivers`) are flagged so that statistics leave them out.

Example:
    >>> timer = StepTimer()                       # StepTimer(synchronize=torch.cuda.synchronize) on a GPU
    >>> for step in range(3):
    ...     timer.start_step()
    ...     _ = sum(range(1000))                  # the training step
    ...     _ = timer.end_step("train", epoch=0, step=step, profiled=(step == 1))
    >>> stats = timer.compute()["train"]
    >>> stats["steps"], stats["profiled"]         # the profiled step is left out of the statistics
    (2, 1)
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional

__all__ = ["StepTimer", "step_statistics", "synchronizer"]


class StepTimer:
    """Wall time of each step, measured with ``time.perf_counter`` around the step.

    Call :meth:`start_step` when a step begins and :meth:`end_step` when it ends. With ``synchronize``
    (``torch.cuda.synchronize`` when the model runs on CUDA) the device is synchronised before each clock read,
    so a step's time includes the kernels it queued rather than only their launch. Statistics
    (:meth:`compute`) leave out steps flagged ``profiled``: the profiler slows the steps it records.

    Args:
        synchronize: Called before each clock read; ``None`` (CPU) reads the clock directly.
        clock: The clock, in seconds (a parameter for tests).

    Example:
        >>> timer = StepTimer(clock=iter([0.0, 0.5, 1.0, 2.0]).__next__)
        >>> timer.start_step(); timer.end_step("train", 0, 0)
        0.5
        >>> timer.start_step(); timer.end_step("train", 0, 1)
        1.0
        >>> timer.compute()["train"]["median_s"]
        0.75
    """

    def __init__(self, synchronize: Optional[Callable[[], Any]] = None, clock: Callable[[], float] = time.perf_counter):
        if synchronize is not None and not callable(synchronize):
            raise TypeError(f"`synchronize` must be a callable or None. Received: synchronize={synchronize!r}.")
        self._sync = synchronize
        self._clock = clock
        self._started: Optional[float] = None
        self.reset()

    def reset(self) -> None:
        """Forget every recorded step."""
        self._stage: list[str] = []
        self._epoch: list[int] = []
        self._step: list[int] = []
        self._wall: list[float] = []
        self._profiled: list[bool] = []
        self._started = None

    def start_step(self) -> None:
        """Mark the beginning of a step (after synchronising the device, when a sync function was given)."""
        if self._sync is not None:
            self._sync()
        self._started = self._clock()

    def end_step(self, stage: str, epoch: int, step: int, *, profiled: bool = False) -> Optional[float]:
        """Mark the end of the step begun by :meth:`start_step`, record it and return its wall time in seconds.

        Returns ``None`` (and records nothing) when no step was started, e.g. the first step after a resume.
        """
        if self._started is None:
            return None
        if self._sync is not None:
            self._sync()
        wall = self._clock() - self._started
        self._started = None
        self.update(stage, epoch, step, wall, profiled=profiled)
        return wall

    def update(self, stage: str, epoch: int, step: int, wall_s: float, *, profiled: bool = False) -> None:
        """Record a step whose wall time was measured elsewhere."""
        self._stage.append(stage)
        self._epoch.append(int(epoch))
        self._step.append(int(step))
        self._wall.append(float(wall_s))
        self._profiled.append(bool(profiled))

    def __len__(self) -> int:
        return len(self._wall)

    def compute(self) -> dict[str, dict[str, Any]]:
        """Per stage: ``steps`` (unprofiled), ``profiled``, and the mean/median/std/min/max/total of their times."""
        return step_statistics(self.rows())

    def rows(self, start: int = 0) -> list[dict[str, Any]]:
        """The recorded steps from the ``start``-th on as step rows of ``timings.parquet`` (dicts with the step
        columns): what is new since an earlier call costs only what is new."""
        columns = (self._stage, self._epoch, self._step, self._wall, self._profiled)
        return [
            {"stage": s, "epoch": e, "step": k, "wall_s": w, "profiled": p}
            for s, e, k, w, p in zip(*(column[start:] for column in columns), strict=True)
        ]


def synchronizer(device: Any) -> Optional[Callable[[], Any]]:
    """The ``synchronize`` argument of :class:`StepTimer` for a torch device: a CUDA sync on CUDA, else ``None``.

    Accepts a ``torch.device``, a string (``"cuda:0"``, ``"cpu"``) or ``None``; imports torch only for CUDA.

    Example:
        >>> synchronizer("cpu") is None, synchronizer(None) is None
        (True, True)
    """
    kind = getattr(device, "type", None) or (str(device).split(":")[0] if device is not None else None)
    if kind != "cuda":
        return None
    import functools

    import torch

    return functools.partial(torch.cuda.synchronize, device)


def step_statistics(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Summarise step rows per stage, leaving out profiled steps.

    Example:
        >>> times = [(1.0, False), (3.0, False), (9.0, True)]
        >>> rows = [{"stage": "train", "wall_s": w, "profiled": p} for w, p in times]
        >>> step_statistics(rows)["train"]["mean_s"], step_statistics(rows)["train"]["profiled"]
        (2.0, 1)
    """
    walls: dict[str, list[float]] = {}
    profiled: dict[str, int] = {}
    for row in rows:
        stage = row["stage"]
        walls.setdefault(stage, [])
        profiled.setdefault(stage, 0)
        if row.get("profiled"):
            profiled[stage] += 1
        else:
            walls[stage].append(float(row["wall_s"]))
    summary: dict[str, dict[str, Any]] = {}
    for stage, values in walls.items():
        summary[stage] = {
            "steps": len(values),
            "profiled": profiled[stage],
            "mean_s": statistics.fmean(values) if values else None,
            "median_s": statistics.median(values) if values else None,
            "std_s": statistics.stdev(values) if len(values) > 1 else None,
            "min_s": min(values) if values else None,
            "max_s": max(values) if values else None,
            "total_s": sum(values),
        }
    return summary
