"""``timings.parquet``: the per-step wall times and per-op timings of a run, written and read atomically.

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

import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Union

from deviate_cb.store.arrow_columns import bool_array, float64_array, int64_array, repeated_string, string_array
from deviate_cb.store.atomic import atomic_write_parquet
from deviate_cb.store.bounded_read import check_parquet
from deviate_cb.store.parts import Part, find_parts, list_parts, recorded_attempt, remove_parts, write_part

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "STEP_KEY",
    "TIMINGS_FILE",
    "StepColumns",
    "append_timings_part",
    "compact_timings",
    "read_timings",
    "timings_schema",
    "write_timings",
]

TIMINGS_FILE = "timings.parquet"
STEP_KEY = ("stage", "epoch", "step")
_STEP_COLUMNS = ("stage", "epoch", "step", "wall_s", "profiled")
# The step columns built without pandas (deviate_cb.store.arrow_columns): a replica's training never imports it.
_STEP_BUILDERS = {
    "stage": string_array,
    "epoch": int64_array,
    "step": int64_array,
    "wall_s": float64_array,
    "profiled": bool_array,
}
_OP_COLUMNS = ("op", "device_type", "calls", "self_time_us", "total_time_us", "window", "source")


class StepColumns(NamedTuple):
    """Step rows as columns (what :class:`~deviate_cb.capture.step_timer.StepTimer` holds): the same rows as a
    list of step-row dicts, without building a dict per row. Accepted wherever step rows are.

    Example:
        >>> columns = StepColumns(["train"], [0], [3], [0.25], [False])
        >>> len(columns.step), columns.wall_s
        (1, [0.25])
    """

    stage: Sequence[str]
    epoch: Sequence[int]
    step: Sequence[int]
    wall_s: Sequence[float]
    profiled: Sequence[bool]


StepRows = Union[StepColumns, Iterable[Mapping[str, Any]]]


@functools.lru_cache(maxsize=1)
def timings_schema() -> pa.Schema:
    """The Arrow schema of ``timings.parquet`` (each column's meaning: docs/architecture.md, section
    ``timings.parquet``); built once: a schema is immutable."""
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
    rows of the windows they belong to. This rewrites the whole file: a live run appends its rows with
    :func:`append_timings_part` instead and compacts once at its end (:func:`compact_timings`).
    """
    path = Path(run_dir) / TIMINGS_FILE
    append_timings_part(run_dir, step_rows, op_rows)
    if not compact_timings(run_dir) and not path.is_file():  # no rows at all: an empty file says "timed nothing"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_parquet(path, timings_schema().empty_table())
    return path


def append_timings_part(
    run_dir: str | os.PathLike[str],
    step_rows: StepRows,
    op_rows: Iterable[Mapping[str, Any]],
    *,
    attempt: Optional[int] = None,
    compact: bool = False,
) -> Optional[Path]:
    """Write step and op rows as one new part of ``timings.parquet`` (:mod:`deviate_cb.store.parts`); return
    its path (``None`` when there are no rows). Costs time in proportion to these rows only; a later part's rows
    replace earlier ones as :func:`write_timings` says, when the parts are compacted or read.

    Args:
        run_dir: The run directory.
        step_rows: Step rows (keys ``stage``, ``epoch``, ``step``, ``wall_s``, ``profiled``), or
            :class:`StepColumns`.
        op_rows: Op rows (keys ``op``, ``device_type``, ``calls``, ``self_time_us``, ``total_time_us``,
            ``window``, ``source``).
        attempt: The run's attempt (default: the manifest's, 1 without one).
        compact: The run ends: merge the rows with the file and the attempt's parts straight into
            ``timings.parquet`` (what appending a part and :func:`compact_timings` would give, without writing the
            part and reading it back) and delete the parts; return the file's path (``None``: nothing to write).
    """
    table = _rows_table(step_rows, op_rows)
    path = Path(run_dir) / TIMINGS_FILE
    attempt = _attempt(run_dir, attempt)
    listed = find_parts(path)
    parts = [p for p in listed if p.attempt == attempt] if listed else []
    if compact:
        if table is None and not parts:
            return None
        atomic_write_parquet(path, _file_and_parts(path, parts, table))
        if listed is not None:  # no folder: no part to delete, nor a folder
            remove_parts(path, parts)
        return path
    if table is None:
        return None
    return write_part(path, table, attempt=attempt, first=max((p.first for p in parts), default=-1) + 1)


def _rows_table(step_rows: StepRows, op_rows: Iterable[Mapping[str, Any]]) -> Optional[pa.Table]:
    """The rows as one table of :func:`timings_schema` (``None`` when there are none), built column by column:
    a row dict per row costs more than the rows."""
    import pyarrow as pa

    if isinstance(step_rows, StepColumns):
        steps: dict[str, Sequence[Any]] = step_rows._asdict()
        n = len(step_rows.step)
        if any(len(column) != n for column in step_rows):
            raise ValueError("`step_rows` columns must all have the same length.")
    else:
        rows = list(step_rows)
        for row in rows:
            _check_columns(row, _STEP_COLUMNS, "step")
        steps, n = {name: [row[name] for row in rows] for name in _STEP_COLUMNS}, len(rows)
    ops = list(op_rows)
    for row in ops:
        _check_columns(row, _OP_COLUMNS, "op")
    if not n and not ops:
        return None
    schema = timings_schema()
    if not ops:  # step rows only (every flush without a profiling window): no list of nulls per op column
        return pa.Table.from_arrays(
            [
                repeated_string("step", n),
                *(
                    _STEP_BUILDERS[field.name](steps[field.name]) if field.name in steps else pa.nulls(n, field.type)
                    for field in schema
                    if field.name != "kind"
                ),
            ],
            schema=schema,
        )
    columns: dict[str, list[Any]] = {"kind": ["step"] * n + ["op"] * len(ops)}
    for name in schema.names[1:]:
        column = list(steps[name]) if name in _STEP_COLUMNS else [None] * n
        column += [row[name] for row in ops] if name in _OP_COLUMNS else [None] * len(ops)
        columns[name] = column
    return pa.table(columns, schema=schema)


def compact_timings(run_dir: str | os.PathLike[str], *, attempt: Optional[int] = None) -> int:
    """Merge the attempt's parts into ``timings.parquet`` (atomically), then delete them; return how many parts.

    Merging the same part twice gives the same file (later rows replace earlier ones by key), so a compaction
    interrupted between writing the file and deleting the parts is simply done again.
    """
    path = Path(run_dir) / TIMINGS_FILE
    attempt = _attempt(run_dir, attempt)
    parts = [p for p in list_parts(path) if p.attempt == attempt]
    if not parts:
        return 0
    atomic_write_parquet(path, _file_and_parts(path, parts))
    remove_parts(path, parts)
    return len(parts)


def read_timings(run_dir: str | os.PathLike[str], *, attempt: Optional[int] = None) -> pa.Table:
    """``timings.parquet`` of a run directory merged with the attempt's parts not yet compacted (an empty table
    with the schema when there is neither)."""
    path = Path(run_dir) / TIMINGS_FILE
    parts = list_parts(path)
    if parts:
        attempt = _attempt(run_dir, attempt)
        parts = [p for p in parts if p.attempt == attempt]
    return _file_and_parts(path, parts)


def _file_and_parts(path: Path, parts: list[Part], new: Optional[pa.Table] = None) -> pa.Table:
    """``path`` (when it exists) merged with ``parts`` and then ``new`` rows, in that order (:func:`_merge`)."""
    import pyarrow.parquet as pq

    schema = timings_schema()
    for file in ([path] if os.path.isfile(path) else []) + [p.path for p in parts]:
        check_parquet(file)  # a FIFO or more rows than a run holds: HostileFileError (a UsageError), never read
    tables = [pq.read_table(path, schema=schema)] if os.path.isfile(path) else []
    tables += [pq.ParquetFile(p.path).read(use_threads=False).cast(schema) for p in parts]  # small: no thread pool
    tables += [new] if new is not None else []
    if len(tables) == 1:
        return tables[0]
    return _merge(tables) if tables else schema.empty_table()


def _merge(tables: list[pa.Table]) -> pa.Table:
    """Concatenate ``tables`` in order; a later step row replaces an earlier one with the same key, and the
    op rows of a window come from the last table that has that window."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.concat_tables(tables)
    source = np.repeat(np.arange(len(tables)), [t.num_rows for t in tables])
    row = np.arange(table.num_rows)
    is_step = pc.fill_null(pc.equal(table.column("kind"), "step"), False).to_numpy(zero_copy_only=False)
    steps = table.filter(pa.array(is_step))
    stage = pc.dictionary_encode(steps.column("stage")).combine_chunks().indices.fill_null(-1).to_numpy()
    epoch, step = (steps.column(name).fill_null(-1).to_numpy() for name in ("epoch", "step"))
    step_row = row[is_step]
    order = np.lexsort((step_row, step, epoch, stage))  # by key, then by row: the last of a run of equal keys wins
    key = np.stack([stage[order], epoch[order], step[order]])
    last = np.ones(order.size, dtype=bool)
    last[:-1] = np.any(key[:, 1:] != key[:, :-1], axis=0)
    keep = [step_row[order][last]]
    windows = table.column("window").fill_null(-1).to_numpy()[~is_step]
    op_source = source[~is_step]
    if windows.size:
        newest_source: dict[int, int] = {}
        for window, src in zip(windows.tolist(), op_source.tolist(), strict=True):
            newest_source[window] = src  # sources only grow: the last seen is the latest
        newest = np.array([newest_source[w] for w in windows.tolist()])
        keep.append(row[~is_step][op_source == newest])
    return table.take(pa.array(np.sort(np.concatenate(keep))))


def _attempt(run_dir: str | os.PathLike[str], attempt: Optional[int]) -> int:
    return attempt if attempt is not None else recorded_attempt(run_dir)


def _check_columns(row: Mapping[str, Any], columns: tuple[str, ...], kind: str) -> None:
    missing = [c for c in columns if c not in row]
    if missing:
        raise ValueError(f"`{kind}_rows` rows must have the columns {list(columns)}. Received a row without {missing}.")
