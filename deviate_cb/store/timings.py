"""``timings.parquet``: the per-step wall times and per-op timings of a run, written and read atomically.

The adapters time every training step (:class:`deviate_cb.capture.step_timer.StepTimer`) and, optionally,
profile a short window of steps (:mod:`deviate_cb.profiling.drivers`); both end up in this one file of the run
directory, written atomically (temporary file, fsync, rename) like ``metrics.parquet``.

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
    >>> run_dir = tempfile.mkdtemp()
    >>> steps = [{"stage": "train", "epoch": 0, "step": k, "wall_s": 0.1, "profiled": False} for k in range(3)]
    >>> path = write_timings(run_dir, steps, [])
    >>> path.name, read_timings(run_dir).num_rows
    ('timings.parquet', 3)
    >>> _ = write_timings(run_dir, steps[:1], [])   # the same (stage, epoch, step) replaces, never duplicates
    >>> read_timings(run_dir).num_rows
    3
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deviate_cb.store.atomic import atomic_write_bytes

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["STEP_KEY", "TIMINGS_FILE", "read_timings", "timings_schema", "write_timings"]

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


def _check_columns(row: Mapping[str, Any], columns: tuple[str, ...], kind: str) -> None:
    missing = [c for c in columns if c not in row]
    if missing:
        raise ValueError(f"`{kind}_rows` rows must have the columns {list(columns)}. Received a row without {missing}.")
