"""A stand-in for ``torch.cuda.Event(enable_timing=True)`` on the CPU, for the hot paths that time steps with
CUDA events (tests/lightning_cb/test_hot_path.py, tests/keras_cb/test_timings.py): ``record`` stamps
``time.perf_counter`` (a stream that is always caught up), ``synchronize`` is counted, ``elapsed_time`` is in
milliseconds. The step timer's own reading is tested with a stream clock of its own (tests/timing)."""

from __future__ import annotations

import time


class StampEvent:
    """Counts the events made (:attr:`made`) and the waits (:attr:`waits`) since :meth:`reset`."""

    made = 0
    waits = 0

    def __init__(self) -> None:
        StampEvent.made += 1
        self.stamp = 0.0

    @classmethod
    def reset(cls) -> None:
        cls.made = cls.waits = 0

    def record(self) -> None:
        self.stamp = time.perf_counter()

    def synchronize(self) -> None:
        StampEvent.waits += 1

    def elapsed_time(self, end: StampEvent) -> float:
        return (end.stamp - self.stamp) * 1000.0
