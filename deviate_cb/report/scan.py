"""Reduce every metric series of many ``metrics.parquet`` files in one DuckDB query, in a background thread.

The report needs one number per (run, stage, metric): the last value, the best (largest or smallest finite
value) or the mean of the finite values. DuckDB computes these while it streams the files (about 100 MiB for
a 20M-row study, against several GiB to hold the long table), and it releases the GIL while it runs, so a
:class:`SeriesScan` started before the manifests are read overlaps with them. The scan only covers files with
the store's column types: when any file is corrupt or typed otherwise, the result is ``None`` and the reader
checks file by file. DuckDB is optional (the ``report`` extra); without it, nothing here runs.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from deviate_cb.store import MetricsFile
    >>> path = Path(tempfile.mkdtemp()) / "metrics.parquet"
    >>> _ = MetricsFile(path).append({"step": [0, 1, 2], "epoch": [0, 0, 0], "stage": ["val"] * 3,
    ...                               "scope": ["step"] * 3, "name": ["acc"] * 3,
    ...                               "value": [0.5, 0.9, float("nan")], "wall_time": [0.0] * 3})
    >>> result = SeriesScan([str(path)], reduce="summary").result()
    >>> result is None or result[(str(path), "val", "acc")] == (0.9, 0.5, 0.7)
    True
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

__all__ = ["REDUCTIONS", "SeriesScan", "duckdb_last", "duckdb_summary", "import_duckdb"]

REDUCTIONS = ("last", "summary")
# What the store writes: seq int64, stage and name UTF-8 strings, value float64 (Parquet physical types).
_STORE_TYPES = {"seq": ("INT64", None), "stage": ("BYTE_ARRAY", "UTF8"), "name": ("BYTE_ARRAY", "UTF8")}
# (path, stage, name) -> what the reduction found for that series of that file.
Found = dict[tuple[str, str, str], tuple[Any, ...]]


def import_duckdb(required: bool) -> Any:
    """The ``duckdb`` module, or ``None`` when it is not installed and not ``required``."""
    try:
        import duckdb
    except ImportError:
        if required:
            raise
        return None
    return duckdb


class SeriesScan:
    """One DuckDB query over many metrics files, started in a background thread when made.

    Args:
        files: The ``metrics.parquet`` paths (paths that are not files are left out).
        reduce: ``"last"``: per series ``(order key, last value)``, the last by ``seq`` and then by row in the
            file; ``"summary"``: per series ``(largest, smallest, mean)`` of the finite values (NaN when none).
        engine: ``"auto"``: scan only when DuckDB can be imported; ``"duckdb"``: DuckDB is required.
    """

    def __init__(self, files: Sequence[str], *, reduce: str = "last", engine: str = "auto") -> None:
        if reduce not in REDUCTIONS:
            raise ValueError(f"`reduce` must be one of {', '.join(REDUCTIONS)}. Received: reduce={reduce!r}.")
        if engine not in ("auto", "duckdb"):
            raise ValueError(f"`engine` must be 'auto' or 'duckdb'. Received: engine={engine!r}.")
        self.reduce = reduce
        self.files = [str(f) for f in files if Path(f).is_file()]
        self._found: Optional[Found] = None
        self._thread: Optional[threading.Thread] = None
        duckdb = import_duckdb(required=engine == "duckdb") if self.files else None
        if duckdb is not None:
            self._thread = threading.Thread(target=self._run, args=(duckdb,), name="deviate-scan", daemon=True)
            self._thread.start()

    def _run(self, duckdb: Any) -> None:
        if _store_types(duckdb, self.files):
            self._found = (duckdb_last if self.reduce == "last" else duckdb_summary)(duckdb, self.files)

    def covers(self, files: Sequence[str]) -> bool:
        """Whether every one of ``files`` is in this scan."""
        return set(map(str, files)) <= set(self.files)

    def result(self) -> Optional[Found]:
        """What the query found (waiting for it), or ``None`` when DuckDB could not reduce every file."""
        if self._thread is not None:
            self._thread.join()
        return self._found


def _store_types(duckdb: Any, files: list[str]) -> bool:
    """Whether every file is readable Parquet with the store's column types (DuckDB reads all footers at once)."""
    query = """
        SELECT file_name, name, type, converted_type FROM parquet_schema($files)
        WHERE name IN ('seq', 'stage', 'name', 'value')
    """
    try:
        with duckdb.connect() as con:
            rows = con.execute(query, {"files": files}).fetchall()
    except duckdb.Error:
        return False
    seen: dict[str, set[str]] = {}
    for path, column, physical, converted in rows:
        expected = _STORE_TYPES.get(column, ("DOUBLE", None))
        if (physical, converted) != expected or column in seen.setdefault(str(path), set()):
            return False
        seen[str(path)].add(column)
    return len(seen) == len(files) and all(len(columns) == 4 for columns in seen.values())


def duckdb_last(duckdb: Any, files: list[str]) -> Optional[Found]:
    """Per (file, stage, name): ``(order key, value)`` of the row with the largest ``seq`` (ties: the later row).

    A null stage is reported as ``"unknown"``; rows without a name are not metrics and are left out; a null
    value is NaN. ``None`` when DuckDB fails on a file (the reader then checks file by file).
    """
    query = """
        SELECT filename, stage, name, arg_max_null(value, seq * 4294967296 + file_row_number),
               max(seq * 4294967296 + file_row_number)
        FROM read_parquet($files, filename = true, file_row_number = true, hive_partitioning = false)
        WHERE name IS NOT NULL
        GROUP BY ALL
    """
    rows = _fetch(duckdb, query, files)
    if rows is None:
        return None
    found: Found = {}
    for path, stage, name, value, key in rows:
        ident = (str(path), "unknown" if stage is None else str(stage), str(name))
        if ident not in found or key > found[ident][0]:  # a null stage and the stage "unknown" are one series
            found[ident] = (int(key), math.nan if value is None else float(value))
    return found


def duckdb_summary(duckdb: Any, files: list[str]) -> Optional[Found]:
    """Per (file, stage, name): ``(largest, smallest, mean)`` of the finite values, NaN when there are none.

    Stages and names as in :func:`duckdb_last`; ``None`` when DuckDB fails on a file.
    """
    query = """
        SELECT filename, coalesce(stage, 'unknown'), name,
               max(value) FILTER (WHERE isfinite(value)), min(value) FILTER (WHERE isfinite(value)),
               sum(value) FILTER (WHERE isfinite(value)), count(value) FILTER (WHERE isfinite(value))
        FROM read_parquet($files, filename = true, hive_partitioning = false)
        WHERE name IS NOT NULL
        GROUP BY ALL
    """
    rows = _fetch(duckdb, query, files)
    if rows is None:
        return None
    found: Found = {}
    for path, stage, name, high, low, total, count in rows:
        found[(str(path), str(stage), str(name))] = (
            math.nan if high is None else float(high),
            math.nan if low is None else float(low),
            float(total) / count if count else math.nan,
        )
    return found


def _fetch(duckdb: Any, query: str, files: list[str]) -> Optional[list[tuple[Any, ...]]]:
    try:
        with duckdb.connect() as con:
            return con.execute(query, {"files": files}).fetchall()
    except duckdb.Error:  # an unreadable file, or seq beyond 2**31 (the order key overflows): use pyarrow
        return None
