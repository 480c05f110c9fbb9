"""``metrics.parquet``: the Arrow schema of a run's recorded values and the file that holds them.

Example:
    >>> metrics_schema().names
    ['seq', 'step', 'epoch', 'stage', 'scope', 'name', 'value', 'finite', 'wall_time']
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from deviate_cb.store.arrow_columns import bool_array, float64_array, int64_array, numpy_view, string_array
from deviate_cb.store.atomic import atomic_write_parquet
from deviate_cb.store.bounded_read import check_parquet
from deviate_cb.store.footer_summary import SERIES_KEY, with_summary
from deviate_cb.store.parts import Part, find_parts, list_parts, parts_dir, remove_parts, write_part

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["CACHED_PART_ROWS", "MetricsFile", "metrics_schema"]

CACHED_PART_ROWS = 250_000
"""A :class:`MetricsFile` keeps the parts it wrote in memory, up to this many rows in all (a few megabytes), so that
its compaction at the end of the run does not read them back; parts past it are read from their files."""


@functools.lru_cache(maxsize=1)
def metrics_schema() -> pa.Schema:
    """The Arrow schema of ``metrics.parquet`` (built once: a schema is immutable).

    Columns: ``seq`` (order of recording within the run), ``step`` (global step), ``epoch``, ``stage``
    (train/val/test, or ``final`` for values returned by the trainer function), ``scope`` (``step``: one
    batch; ``epoch``: reduced over an epoch; ``final``), ``name``, ``value`` (float64; NaN and Inf kept),
    ``finite`` (False flags NaN/Inf), ``wall_time`` (Unix time in seconds).
    """
    import pyarrow as pa

    return pa.schema(
        [
            ("seq", pa.int64()),
            ("step", pa.int64()),
            ("epoch", pa.int64()),
            ("stage", pa.string()),
            ("scope", pa.string()),
            ("name", pa.string()),
            ("value", pa.float64()),
            ("finite", pa.bool_()),
            ("wall_time", pa.float64()),
        ]
    )


class MetricsFile:
    """``metrics.parquet`` of one run: appended to in parts while the run is live, compacted when it ends.

    :meth:`append_part` writes only the new rows, as one part (:mod:`deviate_cb.store.parts`): its cost does
    not grow with the rows recorded before. :meth:`compact` merges the parts into ``metrics.parquet``, with the
    per-series summary of :mod:`deviate_cb.store.footer_summary` in its footer, which is what reports read;
    the run's session compacts when the run ends, and whoever settles a replica that died compacts what it left.
    :meth:`append` is both at once (for one-off writes). Every file is written atomically, so a process killed
    at any moment loses only what it had not flushed, and :meth:`read` always sees every row flushed so far.

    Args:
        path: The ``metrics.parquet`` path.
        attempt: The run's attempt (``run.json`` ``attempt``): parts of other attempts are never read as this
            run's rows.

    Example:
        >>> import tempfile
        >>> f = MetricsFile(Path(tempfile.mkdtemp()) / "metrics.parquet")
        >>> f.append_part({"step": [0, 1], "epoch": [0, 0], "stage": ["train"] * 2, "scope": ["step"] * 2,
        ...                "name": ["loss"] * 2, "value": [1.0, float("nan")], "wall_time": [0.0, 1.0]})
        2
        >>> f.path.exists(), f.read().column("finite").to_pylist()
        (False, [True, False])
        >>> f.compact(), f.path.exists(), f.read().num_rows
        (2, True, 2)
    """

    def __init__(self, path: Path, *, attempt: int = 1) -> None:
        self.path = Path(path)
        self.attempt = attempt
        self._next_seq: Optional[int] = None
        self._warned = False
        self.summary: Optional[bytes] = None  # the series summary of the last compaction (JSON)
        self._cached: dict[str, pa.Table] = {}  # part file name -> the table this object wrote there
        self._cached_rows = 0

    def read(self) -> pa.Table:
        """All rows flushed so far: ``metrics.parquet`` and the parts not yet compacted into it (an empty table
        when there is neither)."""
        import pyarrow as pa

        compacted = self._read_compacted()
        pending, _ = self._split(compacted, list_parts(self.path))
        return pa.concat_tables([compacted, *self._read_parts(pending)])

    @property
    def next_seq(self) -> int:
        """The ``seq`` the next appended row gets (read from the files once, then counted)."""
        if self._next_seq is None:
            self._next_seq = _next_seq([self.read()])
        return self._next_seq

    def append_part(self, columns: Mapping[str, Sequence[Any]]) -> int:
        """Write rows given as columns as one new part (``seq`` and ``finite`` are filled in when absent); return
        the row count. Costs time in proportion to these rows only."""
        values = _values(columns)
        if not values.size:
            return 0
        new, first = self._new_rows(columns, values)
        part = write_part(self.path, new, attempt=self.attempt, first=first)
        if self._cached_rows + new.num_rows <= CACHED_PART_ROWS:  # parts are never rewritten: the copy stays
            self._cached[part.name] = new
            self._cached_rows += new.num_rows
        return new.num_rows

    def append(self, columns: Mapping[str, Sequence[Any]]) -> int:
        """Write rows given as columns straight into ``metrics.parquet``, with the parts not compacted yet (what
        :meth:`append_part` then :meth:`compact` give, without a part written and read back: the run's end, and
        one-off writes); return the row count. ``metrics.parquet`` holds them when this returns."""
        values = _values(columns)
        if not values.size:
            return 0
        self._merge(columns, values)
        return values.size

    def compact(self) -> int:
        """Merge this attempt's parts into ``metrics.parquet`` (atomically), then delete them; return the number
        of rows merged. Parts already merged (a compaction interrupted before it deleted them) are deleted
        without being merged twice; parts of other attempts are left alone, with a warning."""
        return self._merge()

    def _new_rows(self, columns: Mapping[str, Sequence[Any]], values: Any) -> tuple[pa.Table, int]:
        """``columns`` (at least one row; ``values``: their ``value`` column as float64) as a table of
        :func:`metrics_schema` (``seq`` from :attr:`next_seq` and ``finite`` filled in when absent), counted into
        :attr:`next_seq`, and its smallest ``seq``."""
        import numpy as np
        import pyarrow as pa

        n = values.size
        data: dict[str, Any] = dict(columns)
        data["value"] = values
        given = "seq" in data
        if not given:
            low = self.next_seq
            data["seq"] = np.arange(low, low + n, dtype=np.int64)
        data.setdefault("finite", np.isfinite(values))
        schema = metrics_schema()
        new = pa.Table.from_arrays([_column(data[field.name], field.type) for field in schema], schema=schema)
        if given:
            seq = numpy_view(new.column("seq"))
            low = int(seq.min())
            if low < 0:
                raise ValueError(f"`seq` must be >= 0. Received: seq={low}.")
            high = int(seq.max())
        else:
            high = low + n - 1
        self._next_seq = max(self._next_seq or 0, high + 1)
        return new, low

    def _merge(self, columns: Optional[Mapping[str, Sequence[Any]]] = None, values: Any = None) -> int:
        """``metrics.parquet`` rewritten with this attempt's pending parts and the new rows ``columns`` (when given;
        ``values``: their ``value`` column as float64), then the parts deleted; return the rows added. The file and
        the parts are listed and read once, for :attr:`next_seq` (when it is not known yet) and the merge alike."""
        listed = find_parts(self.path)
        if not listed and columns is None:
            return 0  # the usual case once the run compacted itself: not even the file is read
        compacted = self._read_compacted()
        pending, merged = self._split(compacted, listed or [])
        tables = self._read_parts(pending)
        if columns is not None:
            if self._next_seq is None and "seq" not in columns:
                self._next_seq = _next_seq([compacted, *tables])
            tables.append(self._new_rows(columns, values)[0])
        rows = sum(t.num_rows for t in tables)
        if rows or (pending and not os.path.isfile(self.path)):
            pieces = [compacted, *tables] if compacted is not _empty_table() else tables or [compacted]  # no file
            self._write(pieces[0] if len(pieces) == 1 else _concat(pieces))
        if listed is not None:  # no folder: no part to delete, nor a folder
            remove_parts(self.path, pending + merged)
        self._cached.clear()
        self._cached_rows = 0
        return rows

    def truncate(self, next_seq: int) -> int:
        """Drop the rows recorded at or after ``next_seq`` (a resumed run re-records them); return how many.

        Example:
            >>> import tempfile
            >>> f = MetricsFile(Path(tempfile.mkdtemp()) / "metrics.parquet")
            >>> f.append({"step": [0, 1], "epoch": [0, 1], "stage": ["train"] * 2, "scope": ["epoch"] * 2,
            ...           "name": ["loss"] * 2, "value": [1.0, 0.5], "wall_time": [0.0, 1.0]})
            2
            >>> f.truncate(1), f.read().num_rows, f.next_seq
            (1, 1, 1)
        """
        import pyarrow.compute as pc

        self.compact()
        table = self._read_compacted()
        kept = table.filter(pc.less(table.column("seq"), next_seq))
        dropped = table.num_rows - kept.num_rows
        if dropped:
            self._write(kept)
        self._next_seq = None
        return dropped

    def _read_compacted(self) -> pa.Table:
        """``metrics.parquet`` as a table of :func:`metrics_schema` (:func:`_empty_table` when there is no file)."""
        import pyarrow.parquet as pq

        if not os.path.isfile(self.path):
            return _empty_table()
        schema = metrics_schema()
        check_parquet(self.path)  # a FIFO or more rows than a run holds: HostileFileError, never read
        table = pq.ParquetFile(self.path).read()  # lighter than read_table, which sets up a dataset
        if table.schema.remove_metadata() == schema:
            return table
        return pq.read_table(self.path, schema=schema)  # another column order or types: let pyarrow map them

    def _split(self, compacted: pa.Table, parts: list[Part]) -> tuple[list[Part], list[Part]]:
        """This attempt's ``parts`` not yet in ``compacted``, and those already in it; warn about other attempts'."""
        import pyarrow.compute as pc

        largest = pc.max(compacted.column("seq")).as_py() if compacted.num_rows else None
        done = -1 if largest is None else int(largest)
        foreign = sorted({p.attempt for p in parts if p.attempt != self.attempt})
        if foreign and not self._warned:
            self._warned = True
            warnings.warn(
                f"deviate-cb: {parts_dir(self.path)} holds metric parts of attempt(s) {foreign}, not of this "
                f"run's attempt {self.attempt}; they are left out.",
                stacklevel=3,
            )
        mine = [p for p in parts if p.attempt == self.attempt]
        return [p for p in mine if p.first > done], [p for p in mine if p.first <= done]

    def _read_parts(self, parts: list[Part]) -> list[pa.Table]:
        """The parts' tables: those this object wrote from memory, the others read from their files."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        tables = []
        for part in parts:
            cached = self._cached.get(part.path.name) if part.attempt == self.attempt else None
            if cached is not None:
                tables.append(cached)
                continue
            try:
                check_parquet(part.path)  # a FIFO or a row bomb planted among the parts: left out, never read
                tables.append(pq.ParquetFile(part.path).read(use_threads=False).cast(metrics_schema()))
            except (OSError, ValueError, pa.ArrowException) as exc:
                warnings.warn(f"deviate-cb: {part.path}: unreadable metrics part ({exc}); left out.", stacklevel=3)
        return tables

    def _write(self, table: pa.Table) -> None:
        """``table``, with its summary in the footer, as ``metrics.parquet``: serialized in memory, then written
        atomically (:func:`~deviate_cb.store.atomic.atomic_write_parquet`)."""
        # The per-series summary in the footer lets reports skip the values (deviate_cb.store.footer_summary).
        table = with_summary(table)
        try:
            atomic_write_parquet(self.path, table)
        except FileNotFoundError:
            if self.path.parent.is_dir():
                raise
            self.path.parent.mkdir(parents=True, exist_ok=True)  # the run directory does not exist yet
            atomic_write_parquet(self.path, table)
        self.summary = table.schema.metadata[SERIES_KEY]


@functools.lru_cache(maxsize=1)
def _empty_table() -> pa.Table:
    """An empty table of :func:`metrics_schema` (built once: a table is immutable; ``Schema.empty_table`` builds
    each column from a Python list, which costs more than the rest of a small append)."""
    import pyarrow as pa

    return pa.Table.from_batches([], schema=metrics_schema())


_BUILDERS = {"int64": int64_array, "double": float64_array, "bool": bool_array, "string": string_array}


def _column(values: Any, arrow_type: pa.DataType) -> pa.Array:
    """One column of :func:`metrics_schema` from a list or a NumPy array, built without pandas
    (:mod:`deviate_cb.store.arrow_columns`): a replica whose training never imports pandas does not at its end."""
    return _BUILDERS[str(arrow_type)](values)


def _values(columns: Mapping[str, Sequence[Any]]) -> Any:
    """The ``value`` column as a float64 NumPy array."""
    import numpy as np

    return np.asarray(columns["value"], dtype=np.float64)


def _next_seq(tables: list[pa.Table]) -> int:
    """One past the largest ``seq`` in ``tables`` (0 when they have no rows)."""
    import pyarrow.compute as pc

    largest = [pc.max(t.column("seq")).as_py() for t in tables if t.num_rows]
    largest = [x for x in largest if x is not None]
    return int(max(largest)) + 1 if largest else 0


def _concat(tables: list[pa.Table]) -> pa.Table:
    """``tables`` concatenated (pyarrow imported here)."""
    import pyarrow as pa

    return pa.concat_tables(tables)
