"""``metrics.parquet``: the Arrow schema of a run's recorded values and the file that holds them.

Long format, one row per recorded value (see :func:`metrics_schema`). Parquet cannot be appended to in place,
so :class:`MetricsFile` rewrites the whole table atomically on each flush, with the per-series summary of
:mod:`deviate_cb.store.footer_summary` in the footer. pyarrow and NumPy are imported only when a file is read or
written, so importing this module stays light.

Example:
    >>> metrics_schema().names
    ['seq', 'step', 'epoch', 'stage', 'scope', 'name', 'value', 'finite', 'wall_time']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from deviate_cb.store.atomic import atomic_write
from deviate_cb.store.footer_summary import SERIES_KEY, with_summary

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["MetricsFile", "metrics_schema"]


def metrics_schema() -> pa.Schema:
    """The Arrow schema of ``metrics.parquet``.

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
    """``metrics.parquet`` of one run, appended to by rewriting it atomically.

    Parquet files cannot be appended to in place, and a file whose footer was never written is unreadable;
    rewriting the whole (small: one row per logged value) table on each flush keeps the file valid at every
    moment, so a process killed at any point loses only what it had not flushed yet.

    Example:
        >>> import tempfile
        >>> f = MetricsFile(Path(tempfile.mkdtemp()) / "metrics.parquet")
        >>> f.append({"step": [0, 1], "epoch": [0, 0], "stage": ["train"] * 2, "scope": ["step"] * 2,
        ...           "name": ["loss"] * 2, "value": [1.0, float("nan")], "wall_time": [0.0, 1.0]})
        2
        >>> f.read().column("finite").to_pylist()
        [True, False]
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._table: Optional[pa.Table] = None
        self.summary: Optional[bytes] = None  # the series summary of the last write (JSON)

    def read(self) -> pa.Table:
        """All rows written so far (an empty table if the file does not exist)."""
        if self._table is None:
            import pyarrow.parquet as pq

            schema = metrics_schema()
            if self.path.is_file():
                self._table = pq.read_table(self.path, schema=schema)
            else:
                self._table = schema.empty_table()
        return self._table

    @property
    def next_seq(self) -> int:
        table = self.read()
        if table.num_rows == 0:
            return 0
        import pyarrow.compute as pc

        return int(pc.max(table.column("seq")).as_py()) + 1

    def append(self, columns: Mapping[str, Sequence[Any]]) -> int:
        """Append rows given as columns (``seq`` and ``finite`` are filled in when absent); return the row count."""
        import numpy as np
        import pyarrow as pa

        values = np.asarray(columns["value"], dtype=np.float64)
        n = len(values)
        if n == 0:
            return 0
        data: dict[str, Any] = dict(columns)
        data["value"] = values
        if "seq" not in data:
            first = self.next_seq  # a max over the table so far: computed once per append
            data["seq"] = np.arange(first, first + n, dtype=np.int64)
        data.setdefault("finite", np.isfinite(values))
        schema = metrics_schema()
        new = pa.table({field.name: pa.array(data[field.name], type=field.type) for field in schema}, schema=schema)
        table = pa.concat_tables([self.read(), new])
        self._write(table)
        self._table = table
        return n

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

        table = self.read()
        kept = table.filter(pc.less(table.column("seq"), next_seq))
        dropped = table.num_rows - kept.num_rows
        if dropped:
            self._write(kept)
            self._table = kept
        return dropped

    def _write(self, table: pa.Table) -> None:
        import pyarrow.parquet as pq

        self.path.parent.mkdir(parents=True, exist_ok=True)
        # The per-series summary in the footer lets reports skip the values (deviate_cb.store.footer_summary).
        table = with_summary(table)
        atomic_write(self.path, lambda handle: pq.write_table(table, handle))
        self.summary = table.schema.metadata[SERIES_KEY]
