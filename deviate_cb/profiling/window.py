"""Which training steps a profiling window covers, and the step counting its framework drivers share.

Example:
    >>> window = ProfileWindow(wait=1, warmup=0, active=2, repeat=2)
    >>> window.cycle, [window.window_of(step) for step in range(6)], window.phase(6)
    (3, [0, 0, 0, 1, 1, 1], 'done')
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Union

__all__ = ["PROFILING_PHASES", "ProfileDriver", "ProfileWindow"]

#: Phases whose steps run under the profiler (warm-up or recorded): their wall time is not representative.
PROFILING_PHASES = ("warmup", "active")


@dataclasses.dataclass(frozen=True)
class ProfileWindow:
    """Which steps to profile: ``wait`` plain, ``warmup`` start-up and ``active`` recorded steps, ``repeat`` times.

    Args:
        wait: Steps before each window (non-negative).
        warmup: Steps the profiler runs without keeping their records (non-negative).
        active: Steps recorded (at least 1).
        repeat: Number of windows (at least 1).
    """

    wait: int = 5
    warmup: int = 1
    active: int = 3
    repeat: int = 1

    def __post_init__(self) -> None:
        for name, low in (("wait", 0), ("warmup", 0), ("active", 1), ("repeat", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                kind = "a non-negative integer" if low == 0 else "a positive integer"
                raise ValueError(f"`{name}` must be {kind}. Received: {name}={value!r}.")

    @classmethod
    def coerce(cls, value: Union[bool, dict, ProfileWindow, None]) -> Optional[ProfileWindow]:
        """Read a ``profile=`` argument: ``None``/``False`` (off), ``True`` (defaults), a dict, or a ProfileWindow.

        Example:
            >>> ProfileWindow.coerce({"wait": 1, "active": 2})
            ProfileWindow(wait=1, warmup=1, active=2, repeat=1)
            >>> ProfileWindow.coerce(False) is None
            True
        """
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            unknown = sorted(set(value) - {f.name for f in dataclasses.fields(cls)})
            if unknown:
                raise ValueError(
                    f"`profile` keys must be among wait, warmup, active, repeat. Received: profile={value!r}."
                )
            return cls(**value)
        raise TypeError(
            "`profile` must be True, False, None, a dict of wait/warmup/active/repeat or a ProfileWindow. "
            f"Received: profile={value!r}."
        )

    @property
    def cycle(self) -> int:
        """Steps in one window, waiting steps included."""
        return self.wait + self.warmup + self.active

    def phase(self, step: int) -> str:
        """``wait``, ``warmup``, ``active`` or ``done`` for the step with this 0-based index."""
        if step >= self.cycle * self.repeat:
            return "done"
        offset = step % self.cycle
        if offset < self.wait:
            return "wait"
        return "warmup" if offset < self.wait + self.warmup else "active"

    def window_of(self, step: int) -> int:
        """The 0-based window a step belongs to."""
        return step // self.cycle


class ProfileDriver:
    """Step counting shared by the framework drivers; subclasses open and close the profiler.

    Subclasses implement ``_enter_phase`` (called when a step begins: open the profiler if a window starts),
    ``_advance`` (called after a step: step the profiler, close it if its window ends) and ``_close`` (close
    it now, keeping its records in ``self._rows``), and set ``self._open`` while their profiler runs.
    """

    def __init__(self, window: ProfileWindow) -> None:
        if not isinstance(window, ProfileWindow):
            raise TypeError(f"`window` must be a ProfileWindow. Received: window={window!r}.")
        self.window = window
        self._step = -1  # not started
        self._rows: list[dict[str, Any]] = []
        self._open = False

    @property
    def profiling(self) -> bool:
        """True while the current step is in a window (warm-up or recorded): its wall time is not representative."""
        return self._step >= 0 and self.window.phase(self._step) in PROFILING_PHASES

    def start(self) -> None:
        """Begin counting steps; call before the first step."""
        self._step = 0
        self._enter_phase()

    def step(self) -> None:
        """Call after each step: advances the window, starting or finishing the profiler as needed."""
        if self._step < 0:
            self.start()
            return
        self._advance()
        self._step += 1
        self._enter_phase()

    def stop(self) -> None:
        """Finish: a window still open is closed and its records kept."""
        if self._open:
            self._close()
        self._step = max(self._step, self.window.cycle * self.window.repeat)

    def rows(self) -> list[dict[str, Any]]:
        """The op rows of every finished window (columns of ``timings.parquet``'s op rows)."""
        return list(self._rows)

    def __enter__(self) -> ProfileDriver:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _enter_phase(self) -> None:
        raise NotImplementedError

    def _advance(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError
