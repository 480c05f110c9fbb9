"""The ``torch.profiler`` driver of a profiling window: one op row per op and CUDA kernel of each window.

Example:
    >>> driver = TorchProfileWindow(ProfileWindow(wait=1, warmup=1, active=1))
    >>> driver.start()
    >>> driver.profiling, driver.rows()
    (False, [])
    >>> driver.stop()
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

from deviate_cb.profiling.window import PROFILING_PHASES, ProfileDriver, ProfileWindow

__all__ = ["TorchProfileWindow"]


class TorchProfileWindow(ProfileDriver):
    """Drive ``torch.profiler`` over the steps of a :class:`ProfileWindow` and keep ``key_averages()`` as op rows.

    Example:
        >>> import torch
        >>> window = TorchProfileWindow(ProfileWindow(wait=1, warmup=1, active=1))
        >>> window.start()
        >>> for _ in range(4):
        ...     _ = torch.ones(8, 8) @ torch.ones(8, 8)
        ...     window.step()
        >>> window.stop()
        >>> "aten::mm" in {row["op"] for row in window.rows()}
        True
    """

    def __init__(self, window: ProfileWindow, *, cuda: Optional[bool] = None) -> None:
        super().__init__(window)
        self._cuda = cuda
        self._profiler: Any = None
        self._window_id = 0
        self._collected: set[int] = set()

    def _enter_phase(self) -> None:
        if self._open or self.window.phase(self._step) not in PROFILING_PHASES:
            return
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        cuda = torch.cuda.is_available() if self._cuda is None else self._cuda
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        self._window_id = self.window.window_of(self._step)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "won't be using warmup" when warmup=0: asked for
            plan = schedule(wait=0, warmup=self.window.warmup, active=self.window.active, repeat=1)
            self._profiler = profile(activities=activities, schedule=plan, on_trace_ready=self._collect)
            self._profiler.start()
        self._open = True

    def _advance(self) -> None:
        if not self._open:
            return
        self._profiler.step()  # the step that ends the active phase calls _collect
        if (
            self.window.phase(self._step + 1) not in PROFILING_PHASES
            or self.window.window_of(self._step + 1) != self._window_id
        ):
            self._close()

    def _close(self) -> None:
        profiler, self._profiler, self._open = self._profiler, None, False
        profiler.stop()
        if self.window.phase(self._step) == "active":
            self._collect(profiler)  # stopped inside the active phase: keep what its steps recorded

    def _collect(self, profiler: Any) -> None:
        if self._window_id in self._collected:  # torch may report a finished trace again on stop()
            return
        self._collected.add(self._window_id)
        for event in profiler.key_averages():
            if event.key.startswith("ProfilerStep"):
                continue
            device = getattr(event.device_type, "name", str(event.device_type)).lower()
            on_cpu = device == "cpu"
            self._rows.append(
                {
                    "op": event.key,
                    "device_type": device,
                    "calls": int(event.count),
                    "self_time_us": float(event.self_cpu_time_total if on_cpu else event.self_device_time_total),
                    "total_time_us": float(event.cpu_time_total if on_cpu else event.device_time_total),
                    "window": self._window_id,
                    "source": "torch",
                }
            )
