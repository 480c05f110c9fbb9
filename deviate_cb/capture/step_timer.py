"""The step timer: wall time of every training step, cheaply, and its per-stage statistics.

Example:
    >>> timer = StepTimer()                       # StepTimer(events=cuda_events(device)) on a GPU
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

from deviate_cb.store.timings import StepColumns

__all__ = ["StepTimer", "cuda_events", "step_statistics", "synchronizer"]


class StepTimer:
    """Time of each step: host wall time (``time.perf_counter``) around the step, or GPU time between two events.

    Call :meth:`start_step` when a step begins and :meth:`end_step` when it ends. Statistics (:meth:`compute`)
    leave out steps flagged ``profiled``: the profiler slows the steps it records.

    Two clocks:

    - **Host clock** (default; CPU, and TF/JAX on any device): ``wall_s`` is the host wall time between the two
      calls, read with ``clock``. Nothing blocks.
    - **Device events** (``events``: :func:`cuda_events` when a torch model runs on CUDA): :meth:`start_step`
      and :meth:`end_step` each *record* an event on the current stream and return at once (no
      synchronisation, the host keeps running ahead of the GPU); ``wall_s`` is the GPU time elapsed between
      the two events, i.e. from when the stream reached the step's first queued work to when it finished the
      step's last queued work. The events are read when the rows are asked for (:meth:`rows`,
      :meth:`compute`, i.e. at a flush): one wait for the last recorded event, then ``elapsed_time`` of each
      pair. Read events go back to a pool, so a long run creates about two events per step of one flush.
      :meth:`extend` also takes steps timed by an adapter's chain of events (``[start, end]`` lists from
      :meth:`record_event`, where one step's end is the next one's start): read the same way; a chain's start
      events go back to the pool, its last end does not (the chain may still be running from it).

    ``synchronize`` (kept for :mod:`deviate_cb.bench`, which measures with the device drained) is called before
    each host clock read; it cannot be combined with ``events``.

    Args:
        synchronize: Called before each host clock read; ``None`` reads the clock directly.
        clock: The host clock, in seconds (a parameter for tests).
        events: Makes a timing event (an object with ``record()``, ``synchronize()`` and
            ``elapsed_time(end)`` in milliseconds, like ``torch.cuda.Event(enable_timing=True)``); ``None``
            uses the host clock.

    Example:
        >>> timer = StepTimer(clock=iter([0.0, 0.5, 1.0, 2.0]).__next__)
        >>> timer.start_step(); timer.end_step("train", 0, 0)
        0.5
        >>> timer.start_step(); timer.end_step("train", 0, 1)
        1.0
        >>> timer.compute()["train"]["median_s"]
        0.75
    """

    def __init__(
        self,
        synchronize: Optional[Callable[[], Any]] = None,
        clock: Callable[[], float] = time.perf_counter,
        events: Optional[Callable[[], Any]] = None,
    ):
        if synchronize is not None and not callable(synchronize):
            raise TypeError(f"`synchronize` must be a callable or None. Received: synchronize={synchronize!r}.")
        if events is not None and synchronize is not None:
            raise ValueError("StepTimer: give `synchronize` (host clock) or `events` (device clock), not both.")
        self._sync = synchronize
        self._clock = clock
        self._events = events
        self._pool: list[Any] = []  # events read at a flush, ready to be recorded again
        self._started: Any = None  # the start: a clock reading, or a recorded event
        self.reset()

    def reset(self) -> None:
        """Forget every recorded step."""
        self._stage: list[str] = []
        self._epoch: list[int] = []
        self._step: list[int] = []
        self._wall: list[Any] = []  # seconds, or a (start, end) pair of events not read yet
        self._profiled: list[bool] = []
        self._unread = 0  # index of the first entry of `_wall` that may still be an event pair
        self._started = None

    def record_event(self) -> Any:
        """A device event recorded now on the current stream: one read at an earlier flush when there is one
        (creating and destroying an event a step costs more than recording one), else a new one."""
        event = self._pool.pop() if self._pool else self._events()  # type: ignore[misc]
        event.record()
        return event

    def start_step(self) -> None:
        """Mark the beginning of a step: read the host clock (after ``synchronize``), or record an event."""
        if self._events is not None:
            self._started = self.record_event()
            return
        if self._sync is not None:
            self._sync()
        self._started = self._clock()

    def end_step(self, stage: str, epoch: int, step: int, *, profiled: bool = False) -> Optional[float]:
        """Mark the end of the step begun by :meth:`start_step` and record it; return its time in seconds.

        Returns ``None`` (and records nothing) when no step was started, e.g. the first step after a resume.
        With ``events`` the step is recorded and ``None`` returned: its time is read at the next :meth:`rows`.
        """
        started = self._started
        if started is None:
            return None
        self._started = None
        if self._events is not None:
            self._wall.append((started, self.record_event()))
            wall = None
        else:
            if self._sync is not None:
                self._sync()
            wall = self._clock() - started
            self._wall.append(wall)
        self._stage.append(stage)
        self._epoch.append(epoch)
        self._step.append(step)
        self._profiled.append(profiled)
        return wall

    def update(self, stage: str, epoch: int, step: int, wall_s: float, *, profiled: bool = False) -> None:
        """Record a step whose wall time was measured elsewhere."""
        self._stage.append(stage)
        self._epoch.append(int(epoch))
        self._step.append(int(step))
        self._wall.append(float(wall_s))
        self._profiled.append(bool(profiled))

    def extend(self, stage: str, epoch: int, steps: list[int], walls: list[Any]) -> None:
        """Record several unprofiled steps of one stage and epoch timed elsewhere (an adapter's hot path,
        :class:`~deviate_cb.capture.run_timings.HostSteps`): host seconds, or ``[start, end]`` lists of this
        timer's kind of events, read at the next :meth:`rows`/:meth:`columns` like its own pairs."""
        n = len(steps)
        if len(walls) != n:
            raise ValueError(f"`steps` and `walls` must have the same length. Received: {n} and {len(walls)}.")
        self._stage += [stage] * n
        self._epoch += [int(epoch)] * n
        self._step += steps
        self._wall += walls
        self._profiled += [False] * n

    @property
    def events(self) -> Optional[Callable[[], Any]]:
        """What makes this timer's device events (``None``: host clock)."""
        return self._events

    @property
    def host_clock(self) -> bool:
        """Whether steps are timed with ``time.perf_counter`` and nothing else (no ``synchronize``, no events)."""
        return self._events is None and self._sync is None and self._clock is time.perf_counter

    def __len__(self) -> int:
        return len(self._wall)

    def _read_events(self) -> None:
        """Turn the event pairs recorded since the last read into seconds: one wait, for the last event."""
        walls = self._wall
        pairs = [i for i in range(self._unread, len(walls)) if isinstance(walls[i], (tuple, list))]
        if pairs:
            walls[pairs[-1]][1].synchronize()  # the stream runs in order: every earlier event has completed too
            for i in pairs:
                pair = walls[i]
                walls[i] = pair[0].elapsed_time(pair[1]) / 1000.0
                if type(pair) is tuple:  # the timer's own pair: both events are free again
                    self._pool += pair
                else:  # a chain's: its start was the previous step's end (read by now); its end may start the next
                    self._pool.append(pair[0])
        self._unread = len(walls)  # only once read: a failed read (a CUDA error) is tried again at the next flush

    def compute(self) -> dict[str, dict[str, Any]]:
        """Per stage: ``steps`` (unprofiled), ``profiled``, and the mean/median/std/min/max/total of their times."""
        return step_statistics(self.rows())

    def rows(self, start: int = 0) -> list[dict[str, Any]]:
        """The recorded steps from the ``start``-th on as step rows of ``timings.parquet`` (dicts with the step
        columns): what is new since an earlier call costs only what is new. Reads pending device events."""
        columns = self.columns(start)
        return [
            {"stage": s, "epoch": e, "step": k, "wall_s": w, "profiled": p}
            for s, e, k, w, p in zip(*columns, strict=True)
        ]

    def columns(self, start: int = 0) -> StepColumns:
        """The same rows as :meth:`rows`, as columns (:class:`~deviate_cb.store.timings.StepColumns`): what a
        flush writes, without a dict per row. Reads pending device events."""
        if self._events is not None and self._unread < len(self._wall):  # the host clock records seconds only
            self._read_events()
        return StepColumns(
            self._stage[start:],
            list(map(int, self._epoch[start:])),
            list(map(int, self._step[start:])),
            list(map(float, self._wall[start:])),
            list(map(bool, self._profiled[start:])),
        )


def cuda_events(device: Any) -> Optional[Callable[[], Any]]:
    """The ``events`` argument of :class:`StepTimer` for a torch device: CUDA timing events on CUDA, else ``None``.

    Accepts a ``torch.device``, a string (``"cuda:0"``, ``"cpu"``) or ``None``; imports torch only for CUDA.

    Example:
        >>> cuda_events("cpu") is None, cuda_events(None) is None
        (True, True)
    """
    if _device_kind(device) != "cuda":
        return None
    import functools

    import torch

    return functools.partial(torch.cuda.Event, enable_timing=True)


def _device_kind(device: Any) -> Optional[str]:
    return getattr(device, "type", None) or (str(device).split(":")[0] if device is not None else None)


def synchronizer(device: Any) -> Optional[Callable[[], Any]]:
    """The ``synchronize`` argument of :class:`StepTimer` for a torch device: a CUDA sync on CUDA, else ``None``.

    For :mod:`deviate_cb.bench`, which times steps with the device drained; the callbacks use :func:`cuda_events`
    instead and never block per step.

    Accepts a ``torch.device``, a string (``"cuda:0"``, ``"cpu"``) or ``None``; imports torch only for CUDA.

    Example:
        >>> synchronizer("cpu") is None, synchronizer(None) is None
        (True, True)
    """
    if _device_kind(device) != "cuda":
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
