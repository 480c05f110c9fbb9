"""Per-step wall times and per-op timings: the :class:`StepTimer` core and ``timings.parquet``.

The adapters time every training step cheaply (a clock read and a list append, a few microseconds) and,
optionally, profile a short window of steps (:mod:`deviate_cb.profiling`); both end up in one file of the run
directory, ``timings.parquet``, written atomically (temporary file, fsync, rename) like ``metrics.parquet``.

Schema of ``timings.parquet`` (one table, long format; a column that does not apply to a row's ``kind`` is null):

=============  =======  ======================================================================================
column         type     meaning
=============  =======  ======================================================================================
kind           string   ``step`` (one training/validation step) or ``op`` (one op or kernel in one window)
stage          string   step rows: ``train`` | ``val`` | ``test`` | ``predict``
epoch          int64    step rows: the epoch of the step
step           int64    step rows: the step number (the global step for ``train``, the batch index otherwise)
wall_s         float64  step rows: wall-clock seconds of the step (device synchronised when a sync is given)
profiled       bool     step rows: True when the profiler was recording; such steps are left out of statistics
op             string   op rows: op or kernel name (``aten::convolution``, a CUDA kernel, a TensorFlow op type)
device_type    string   op rows: where the time was spent: ``cpu``, ``cuda``, ``gpu`` (TensorFlow devices)
calls          int64    op rows: number of calls within the window
self_time_us   float64  op rows: time in the op itself, children excluded, microseconds
total_time_us  float64  op rows: time including the ops it called, microseconds
window         int64    op rows: which profiling window (0, 1, ...) the row aggregates
source         string   op rows: the profiler: ``torch`` or ``tensorflow``
=============  =======  ======================================================================================

Writing merges with what the file already holds: a step row replaces the row with the same
``(stage, epoch, step)`` and an op row replaces the rows of its ``window``, so a resumed run that records its
steps again (or an adapter that rewrites the file at each epoch end) never duplicates rows.

Example:
    >>> import tempfile
    >>> timer = StepTimer()                       # StepTimer(synchronize=torch.cuda.synchronize) on a GPU
    >>> for step in range(3):
    ...     timer.start_step()
    ...     _ = sum(range(1000))                  # the training step
    ...     _ = timer.end_step("train", epoch=0, step=step, profiled=(step == 1))
    >>> stats = timer.compute()["train"]
    >>> stats["steps"], stats["profiled"]         # the profiled step is left out of the statistics
    (2, 1)
    >>> run_dir = tempfile.mkdtemp()
    >>> path = write_timings(run_dir, timer.rows(), [])
    >>> path.name, read_timings(run_dir).num_rows
    ('timings.parquet', 3)
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "STEP_KEY",
    "TIMINGS_FILE",
    "StepTimer",
    "read_timings",
    "step_statistics",
    "synchronizer",
    "timings_schema",
    "top_ops",
    "write_timings",
]

TIMINGS_FILE = "timings.parquet"
STEP_KEY = ("stage", "epoch", "step")
_STEP_COLUMNS = ("stage", "epoch", "step", "wall_s", "profiled")
_OP_COLUMNS = ("op", "device_type", "calls", "self_time_us", "total_time_us", "window", "source")


def timings_schema() -> pa.Schema:
    """The Arrow schema of ``timings.parquet`` (see the module docstring for the meaning of each column)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("kind", pa.string()),
            ("stage", pa.string()),
            ("epoch", pa.int64()),
            ("step", pa.int64()),
            ("wall_s", pa.float64()),
            ("profiled", pa.bool_()),
            ("op", pa.string()),
            ("device_type", pa.string()),
            ("calls", pa.int64()),
            ("self_time_us", pa.float64()),
            ("total_time_us", pa.float64()),
            ("window", pa.int64()),
            ("source", pa.string()),
        ]
    )


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

    def rows(self) -> list[dict[str, Any]]:
        """The recorded steps as step rows of ``timings.parquet`` (dicts with the step columns)."""
        return [
            {"stage": s, "epoch": e, "step": k, "wall_s": w, "profiled": p}
            for s, e, k, w, p in zip(self._stage, self._epoch, self._step, self._wall, self._profiled, strict=True)
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


def write_timings(
    run_dir: str | os.PathLike[str], step_rows: Iterable[Mapping[str, Any]], op_rows: Iterable[Mapping[str, Any]]
) -> Path:
    """Merge step and op rows into ``<run_dir>/timings.parquet`` atomically; return the file's path.

    A step row replaces the stored row with the same ``(stage, epoch, step)``; op rows replace the stored op
    rows of the windows they belong to. Call it as often as convenient (each epoch end, at the end of the run)
    with all rows so far or only the new ones.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from deviate_cb.store import atomic_write_bytes

    path = Path(run_dir) / TIMINGS_FILE
    schema = timings_schema()
    steps = [dict(row) for row in step_rows]
    ops = [dict(row) for row in op_rows]
    for row in steps:
        _check_columns(row, _STEP_COLUMNS, "step")
    for row in ops:
        _check_columns(row, _OP_COLUMNS, "op")
    new_keys = {tuple(row[k] for k in STEP_KEY) for row in steps}
    new_windows = {row["window"] for row in ops}
    kept = []
    if path.is_file():
        for row in read_timings(run_dir).to_pylist():
            if row["kind"] == "step" and tuple(row[k] for k in STEP_KEY) in new_keys:
                continue
            if row["kind"] == "op" and row["window"] in new_windows:
                continue
            kept.append(row)
    rows = kept + [{"kind": "step", **row} for row in steps] + [{"kind": "op", **row} for row in ops]
    table = pa.Table.from_pylist(rows, schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer)
    atomic_write_bytes(path, buffer.getvalue().to_pybytes())
    return path


def read_timings(run_dir: str | os.PathLike[str]) -> pa.Table:
    """``timings.parquet`` of a run directory (an empty table with the schema when there is none)."""
    import pyarrow.parquet as pq

    path = Path(run_dir) / TIMINGS_FILE
    if not path.is_file():
        return timings_schema().empty_table()
    return pq.read_table(path, schema=timings_schema())


def top_ops(
    op_rows: Iterable[Mapping[str, Any]], n: int = 10, device_type: Optional[str] = None
) -> list[dict[str, Any]]:
    """The ``n`` ops with the most self time, summed over windows (and devices, unless ``device_type`` is given).

    Example:
        >>> rows = [{"op": "aten::mm", "device_type": "cpu", "calls": 2, "self_time_us": 5.0, "total_time_us": 6.0},
        ...         {"op": "aten::add", "device_type": "cpu", "calls": 1, "self_time_us": 9.0, "total_time_us": 9.0},
        ...         {"op": "aten::mm", "device_type": "cpu", "calls": 2, "self_time_us": 5.0, "total_time_us": 6.0}]
        >>> [(r["op"], r["self_time_us"], r["calls"]) for r in top_ops(rows, n=2)]
        [('aten::mm', 10.0, 4), ('aten::add', 9.0, 1)]
    """
    totals: dict[tuple[str, str], dict[str, Any]] = {}
    for row in op_rows:
        if row.get("kind", "op") != "op" or (device_type is not None and row["device_type"] != device_type):
            continue
        key = (row["op"], row["device_type"] if device_type is not None else "*")
        total = totals.setdefault(
            key, {"op": row["op"], "device_type": key[1], "calls": 0, "self_time_us": 0.0, "total_time_us": 0.0}
        )
        total["calls"] += int(row["calls"])
        total["self_time_us"] += float(row["self_time_us"])
        total["total_time_us"] += float(row["total_time_us"])
    return sorted(totals.values(), key=lambda r: (-r["self_time_us"], r["op"]))[:n]


def _check_columns(row: Mapping[str, Any], columns: tuple[str, ...], kind: str) -> None:
    missing = [c for c in columns if c not in row]
    if missing:
        raise ValueError(f"`{kind}_rows` rows must have the columns {list(columns)}. Received a row without {missing}.")
