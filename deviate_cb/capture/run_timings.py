"""One run's step times and profiling window, as the callbacks record them into ``timings.parquet``.

Example:
    >>> import tempfile
    >>> timings = RunTimings()
    >>> for step in range(3):
    ...     timings.step_started("train", epoch=0, step=step)
    ...     _ = sum(range(1000))                      # the training step
    ...     timings.step_ended()
    >>> run_dir = tempfile.mkdtemp()
    >>> timings.flush(run_dir)
    3
    >>> from deviate_cb.store.timings import read_timings
    >>> read_timings(run_dir).column("step").to_pylist()
    [0, 1, 2]
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from typing import Any, Optional, Union

from deviate_cb.capture.step_timer import StepTimer
from deviate_cb.profiling.drivers import profile_window
from deviate_cb.profiling.window import ProfileWindow
from deviate_cb.store.timings import append_timings_part, compact_timings

__all__ = ["PROFILERS", "HostSteps", "RunTimings"]

# Which profiler each framework (or Keras backend) uses; others record step times only.
PROFILERS = {"torch": "torch", "lightning": "torch", "tensorflow": "tensorflow"}


class HostSteps:
    """Training steps of one stage and epoch that an adapter's hot path times itself (host clock or CUDA events).

    When a step begins the adapter sets :attr:`step` and :attr:`started`; when it ends, it appends the step and
    ``time.perf_counter() - started`` to :attr:`steps` and :attr:`walls`, and sets :attr:`started` to ``None``, or
    to the same clock reading when the next step starts as this one ends (Lightning's chain of steps): attribute
    writes and two appends, no call. The :class:`RunTimings` that made it (:meth:`RunTimings.host_steps`)
    hands the steps to its :class:`~deviate_cb.capture.step_timer.StepTimer` before anything reads or writes the
    step rows (a flush, a checkpoint, the run's end): the rows the timer would have recorded itself. A step begun
    and not ended when the run ends (an exception) is recorded up to then, as the timer records an open step.

    With device events (:attr:`events` records one and returns it, the step timer's
    :meth:`~deviate_cb.capture.step_timer.StepTimer.record_event`: the model is on CUDA), :attr:`started` is an
    event recorded on the stream when the step began instead of a clock reading, and a step that ends records another
    and appends ``[started, ended]`` to :attr:`walls` (the step timer reads them at the flush, one wait for all);
    within a chain the event a step ends with is the one the next step starts with.

    Example:
        >>> import tempfile
        >>> timings = RunTimings()
        >>> steps = timings.host_steps("train", epoch=0)
        >>> for step in range(2):
        ...     steps.step, steps.started = step, time.perf_counter()
        ...     _ = sum(range(1000))                   # the training step
        ...     steps.walls.append(time.perf_counter() - steps.started)
        ...     steps.steps.append(steps.step); steps.started = None
        >>> run_dir = tempfile.mkdtemp()
        >>> timings.unwritten, timings.flush(run_dir), timings.unwritten
        (2, 2, 0)
    """

    __slots__ = ("epoch", "events", "stage", "started", "step", "steps", "walls")

    def __init__(self, stage: str, epoch: int, events: Optional[Callable[[], Any]] = None) -> None:
        self.stage, self.epoch, self.events = stage, epoch, events
        self.steps: list[int] = []
        self.walls: list[Any] = []  # seconds, or [start, end] events
        self.step = 0  # the step begun last
        self.started: Any = None  # when it began (perf_counter, or a recorded event), while it has not ended

    def mark(self) -> Any:
        """Now, on this clock: ``time.perf_counter()``, or an event recorded on the current stream."""
        return time.perf_counter() if self.events is None else self.events()

    def lasted(self, started: Any, ended: Any) -> Any:
        """What :attr:`walls` holds for a step between two :meth:`mark` readings."""
        return ended - started if self.events is None else [started, ended]


class RunTimings:
    """Step wall times of one run and, optionally, a profiled window of steps.

    Args:
        profile: The window to profile (:class:`~deviate_cb.profiling.window.ProfileWindow`), or ``None``.
        framework: ``torch`` (Lightning, Keras on torch), ``tensorflow`` or ``jax``: which profiler runs the
            window (JAX has none here: its steps are timed and a warning says the window is not profiled).
        synchronize: Called before each host clock read (see :class:`~deviate_cb.capture.step_timer.StepTimer`).
        events: Makes the device timing events of :class:`~deviate_cb.capture.step_timer.StepTimer`
            (:func:`~deviate_cb.capture.step_timer.cuda_events` when the model is on CUDA): steps are timed on the
            GPU's stream and read at the flush, without a synchronisation per step.
    """

    def __init__(
        self,
        profile: Optional[ProfileWindow] = None,
        *,
        framework: str = "torch",
        synchronize: Optional[Callable[[], Any]] = None,
        events: Optional[Callable[[], Any]] = None,
    ) -> None:
        self.timer = StepTimer(synchronize=synchronize, events=events)
        self.window: Any = None
        if profile is not None:
            if framework in PROFILERS:
                self.window = profile_window(profile, PROFILERS[framework])
            else:
                warnings.warn(
                    f"DeviateCallback(profile=...): no op profiler for {framework}; step times are recorded, "
                    "op times are not.",
                    stacklevel=3,
                )
        self._open: Optional[tuple[str, int, int, bool]] = None
        self._host: Optional[HostSteps] = None  # the adapter's hot path, handed to the timer by _take_host_steps
        self._written = 0  # step rows already written
        self._ops_written = 0  # op rows (of all finished windows) already written
        self._window_started = False

    def host_steps(self, stage: str, epoch: int) -> Optional[HostSteps]:
        """A :class:`HostSteps` for the adapter's hot path to time ``stage``'s steps of ``epoch`` with, or ``None``
        when steps must go through :meth:`step_started`/:meth:`step_ended` (a profiling window flags them, or the
        timer synchronizes). The previous one's steps are taken first; it is used no more."""
        self._take_host_steps()
        self._host = None
        timer = self.timer
        if self.window is not None or not (timer.host_clock or timer.events is not None):
            return None
        if self._open is not None:
            self.step_ended()
        self._host = HostSteps(stage, epoch, timer.record_event if timer.events is not None else None)
        return self._host

    def _take_host_steps(self, *, end_open: bool = False) -> None:
        """Hand the hot path's ended steps to the timer (``end_open``: the one still open too, ending now)."""
        host = self._host
        if host is None:
            return
        if end_open and host.started is not None:
            host.walls.append(host.lasted(host.started, host.mark()))
            host.steps.append(host.step)
            host.started = None
        if host.steps:
            steps, walls = host.steps, host.walls
            host.steps, host.walls = [], []
            self.timer.extend(host.stage, host.epoch, steps, walls)

    def step_started(self, stage: str, epoch: int, step: int) -> None:
        """A step begins (a step still open ends now). The hot path: a few attribute reads and one clock read."""
        if self._host is not None:  # the adapter left its hot path: its steps come first
            self._take_host_steps(end_open=True)
            self._host = None
        if self._open is not None:
            self.step_ended()
        window = self.window
        if window is None:
            self._open = (stage, epoch, step, False)
        else:
            if not self._window_started:
                window.start()
                self._window_started = True
            self._open = (stage, epoch, step, window.profiling)
        self.timer.start_step()

    def step_ended(self) -> None:
        """The open step ends: its time is recorded and the profiling window moves on."""
        opened = self._open
        if opened is None:
            return
        self._open = None
        self.timer.end_step(opened[0], opened[1], opened[2], profiled=opened[3])
        if self.window is not None:
            self.window.step()

    @property
    def unwritten(self) -> int:
        """Step rows recorded and not written yet."""
        host = self._host
        return len(self.timer) - self._written + (len(host.steps) if host is not None else 0)

    def flush(
        self, run_dir: Union[str, os.PathLike[str]], *, attempt: Optional[int] = None, compact: bool = False
    ) -> int:
        """Append the step rows recorded since the last flush and the op rows of windows finished since, as one
        part of ``timings.parquet`` of the run's ``attempt`` (default: the manifest's); return the number of new
        step rows. Costs what it adds, not what is stored. ``compact`` (the run ends): write them straight into
        ``timings.parquet`` with the parts written before, and delete the parts (what a flush then
        :meth:`compact` give, without writing a part and reading it back)."""
        self._take_host_steps()
        steps = self.timer.columns(self._written)
        ops = (self.window.rows() if self.window is not None else [])[self._ops_written :]  # windows finished since
        if steps.step or ops or compact:
            append_timings_part(run_dir, steps, ops, attempt=attempt, compact=compact)
        self._written += len(steps.step)
        self._ops_written += len(ops)
        return len(steps.step)

    def compact(self, run_dir: Union[str, os.PathLike[str]], *, attempt: Optional[int] = None) -> int:
        """Merge the parts written so far into ``timings.parquet`` (the run ended); return how many parts."""
        return compact_timings(run_dir, attempt=attempt)

    def close(self, run_dir: Union[str, os.PathLike[str], None]) -> None:
        """End the open step, close an open profiling window, and write everything left."""
        self._take_host_steps(end_open=True)
        self.step_ended()
        if self.window is not None:
            self.window.stop()
        if run_dir is not None:
            self.flush(run_dir, compact=True)
