"""Reduce every metric series of many ``metrics.parquet`` files, from their footers or one DuckDB query.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from deviate_cb.store.metrics import MetricsFile
    >>> path = Path(tempfile.mkdtemp()) / "metrics.parquet"
    >>> _ = MetricsFile(path).append({"step": [0, 1, 2], "epoch": [0, 0, 0], "stage": ["val"] * 3,
    ...                               "scope": ["step"] * 3, "name": ["acc"] * 3,
    ...                               "value": [0.5, 0.9, float("nan")], "wall_time": [0.0] * 3})
    >>> scan = SeriesScan([str(path)], reduce="summary")
    >>> scan.result()[(str(path), "val", "acc")], scan.uncovered
    ((0.9, 0.5, 0.7), [])
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any, Optional

__all__ = ["ENGINES", "REDUCTIONS", "SeriesScan", "duckdb_last", "duckdb_summary", "import_duckdb"]

REDUCTIONS = ("last", "summary")
ENGINES = ("auto", "duckdb", "footers")
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
    """Every series of many metrics files reduced to what a report needs, in a background thread.

    First from the footers: files the store wrote carry a summary of each series
    (:mod:`deviate_cb.store.footer_summary`), taken when the footer agrees with it. The other files go through one
    DuckDB query, when DuckDB is installed and every one of them has the store's column types.
    :attr:`uncovered` lists what neither did: the reader checks those file by file.

    Args:
        files: The ``metrics.parquet`` paths (paths that are not files are left out).
        reduce: ``"last"``: per series ``(order key, last value)``, the last by ``seq`` and then by row in the
            file; ``"summary"``: per series ``(largest, smallest, mean)`` of the finite values (NaN when none).
        engine: ``"auto"``: DuckDB when it can be imported; ``"duckdb"``: DuckDB is required; ``"footers"``:
            footers only (the rest is left to the reader).
        known: Values already known (from the manifests' copies of the summaries), for ``known_files``.
        known_files: Existing files whose values are in ``known``: they are not checked for existence again, and
            neither their footer nor DuckDB reads them.
    """

    def __init__(
        self,
        files: Sequence[str],
        *,
        reduce: str = "last",
        engine: str = "auto",
        known: Optional[Found] = None,
        known_files: Iterable[str] = (),
    ) -> None:
        if reduce not in REDUCTIONS:
            raise ValueError(f"`reduce` must be one of {', '.join(REDUCTIONS)}. Received: reduce={reduce!r}.")
        if engine not in ENGINES:
            raise ValueError(f"`engine` must be one of {', '.join(ENGINES)}. Received: engine={engine!r}.")
        self.reduce = reduce
        self._known, self._known_files = dict(known or {}), set(known_files)
        # The caller has just found the known files (stat'ed against the manifests): no second stat for them.
        # A FIFO or device counts as present: the footer read refuses it with one problem line, and nothing reads it.
        self.files = [path for path in map(os.fspath, files) if path in self._known_files or _present(path)]
        self._found: Found = {}
        self._uncovered = list(self.files)
        self._problems: list[str] = []
        if engine == "duckdb":
            import_duckdb(required=True)  # fail here, not in the thread, when DuckDB is required but missing
        self._thread: Optional[threading.Thread] = None
        if set(self.files) <= self._known_files:
            self._run(engine)  # nothing to read: no thread
        else:
            self._thread = threading.Thread(target=self._run, args=(engine,), name="deviate-scan", daemon=True)
            self._thread.start()

    def _run(self, engine: str) -> None:
        try:
            self._scan(engine)
        except Exception as exc:  # never a traceback from the thread: every file is then left to the reader
            self._problems.append(
                f"the metrics scan failed ({' '.join(str(exc).split())[:200]}); files are read one by one."
            )

    def _scan(self, engine: str) -> None:
        from deviate_cb.report.reading.metrics.footers import footer_values

        todo = [f for f in self.files if f not in self._known_files]
        found, rest = footer_values(todo, self.reduce, self._problems)
        found.update(self._known)
        # DuckDB (0.25 s to import) only when some file has no footer summary.
        duckdb = import_duckdb(required=False) if rest and engine != "footers" else None
        if rest and duckdb is not None and _store_types(duckdb, rest):
            scanned = (duckdb_last if self.reduce == "last" else duckdb_summary)(duckdb, rest)
            if scanned is not None:
                found.update(scanned)
                rest = []
        self._found, self._uncovered = found, rest

    def covers(self, files: Sequence[str]) -> bool:
        """Whether every one of ``files`` is in this scan."""
        return set(map(str, files)) <= set(self.files)

    def result(self) -> Found:
        """What the footers and the query found (waiting for them), for every file not :attr:`uncovered`."""
        self._wait()
        return self._found

    @property
    def problems(self) -> list[str]:
        """One line per file whose footer summary is malformed (such a file is :attr:`uncovered`), and one if the
        scan itself failed (every file is then uncovered); waiting for the scan."""
        self._wait()
        return list(self._problems)

    @property
    def uncovered(self) -> list[str]:
        """The files neither a footer summary nor DuckDB reduced (waiting for the scan)."""
        self._wait()
        return self._uncovered

    def _wait(self) -> None:
        if self._thread is not None:
            self._thread.join()


def _present(path: str) -> bool:
    return os.path.exists(path) and not os.path.isdir(path)


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
