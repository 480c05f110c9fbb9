"""Results from elsewhere: a CSV or Parquet table with one row per run.

Example:
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "runs.csv"
    >>> _ = path.write_text("setting,acc,note\\nimpl,0.8,x\\nimpl,0.82,y\\n")
    >>> warnings = []
    >>> runs = read_run_table(path, "setting", warnings)
    >>> [(r.keys["setting"], r.values) for r in runs]
    [('impl', {'acc': 0.8}), ('impl', {'acc': 0.82})]
    >>> warnings
    ['runs.csv: non-numeric column ignored as a metric: note.']
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import UsageError
from deviate_cb.report.reading.metrics.names import metric_options
from deviate_cb.report.reading.selection import RunValues
from deviate_cb.store.bounded_read import HostileFileError, check_parquet

__all__ = ["MAX_TABLE_ROWS", "RUN_COLUMNS", "read_run_table", "read_table"]

_PARQUET = (".parquet", ".pq")
# The most rows a `--table` may hold: one row per run, so a million runs is already far beyond any study.
MAX_TABLE_ROWS = 1_000_000
# Text columns that name the run itself, not its configuration (compared in lower case).
RUN_COLUMNS = frozenset(
    {"replica", "seed", "run", "run_id", "run_name", "id", "trial", "repeat", "repetition", "path", "date", "timestamp"}
)


def read_table(path: Any, option: str = "--table") -> Any:
    """The file as a ``pyarrow.Table``; one-line :class:`UsageError` for a missing, unreadable or empty file."""
    import pyarrow as pa

    text = os.fspath(path)
    file = Path(text)
    if not file.exists():
        raise UsageError(f"`{option}` file does not exist. Received: {option}={text!r}.")
    if not file.is_file():
        kind = "a directory" if file.is_dir() else "not a regular file: a FIFO, socket or device"
        raise UsageError(f"`{option}` must be a CSV or Parquet file. Received: {option}={text!r} ({kind}).")
    try:
        if file.suffix.lower() in _PARQUET:
            import pyarrow.parquet as pq

            _check_parquet_rows(file, option, text)  # its footer only: a row bomb is refused before it is read
            table = pq.read_table(file)
        else:
            import pyarrow.csv as pcsv

            table = pcsv.read_csv(file)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        kind = "Parquet" if file.suffix.lower() in _PARQUET else "CSV"
        reason = " ".join(str(exc).split())[:200]
        raise UsageError(f"`{option}` could not be read as {kind} ({reason}). Received: {option}={text!r}.") from None
    if table.num_rows == 0:
        raise UsageError(f"`{option}` table is empty (no rows). Received: {option}={text!r}.")
    _check_columns(table, option, text)
    return table


def _check_parquet_rows(file: Path, option: str, text: str) -> None:
    """One line for a Parquet file that holds more than :data:`MAX_TABLE_ROWS` rows (a few MB on disk can hold
    hundreds of millions of constant rows), or that is not a regular file; read from its footer alone."""
    try:
        rows = check_parquet(file, max_rows=sys.maxsize).num_rows  # regular, footer metadata not nested too deep
    except HostileFileError as exc:
        raise UsageError(
            f"`{option}` could not be read as Parquet ({exc.reason}). Received: {option}={text!r}."
        ) from None
    if rows > MAX_TABLE_ROWS:
        raise UsageError(
            f"`{option}` holds {rows:,} rows. Received: {option}={text!r}. "
            f"Expected: a table of one row per run, at most {MAX_TABLE_ROWS:,} rows."
        )


def _check_columns(table: Any, option: str, text: str) -> None:
    """One line for a header that names a column twice, or a column of bytes that are not UTF-8 text."""
    import pyarrow as pa

    seen: set[str] = set()
    for column in table.column_names:
        if column in seen:
            raise UsageError(
                f"`{option}` names column {column!r} twice. Received: {option}={text!r}. "
                "Expected: one header with a distinct name per column."
            )
        seen.add(column)
    binary = [f.name for f in table.schema if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]
    if binary:
        raise UsageError(
            f"`{option}` column {binary[0]!r} is not UTF-8 text. Received: {option}={text!r}. "
            "Expected: a CSV file saved as UTF-8."
        )


def read_run_table(
    path: Any, group_by: Optional[str], warnings: list[str], metrics: Optional[Sequence[str]] = None
) -> list[RunValues]:
    """One :class:`RunValues` per row: text columns (and ``group_by``) as keys, numeric columns as metrics.

    Args:
        path: A CSV or Parquet file.
        group_by: The column naming each row's group (``None``: no group column).
        warnings: Where to append one line naming the non-numeric columns ignored as metrics.
        metrics: Keep only metrics matching one of these fnmatch patterns.

    Raises:
        UsageError: A missing, unreadable or empty file, an unknown ``group_by`` column, no numeric column,
            or ``metrics`` matching none.
    """
    import fnmatch

    import pyarrow as pa

    table = read_table(path)
    name = Path(os.fspath(path)).name
    columns = list(table.column_names)
    if group_by is not None and group_by not in columns:
        raise UsageError(
            f"`--group-by` names no column of {name}. Received: --group-by={group_by!r}. "
            f"Expected one of: {', '.join(columns)}."
        )

    def numeric(column: str) -> bool:
        t = table.schema.field(column).type
        return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)

    metric_columns = [c for c in columns if c != group_by and numeric(c)]
    ignored = [c for c in columns if c != group_by and not numeric(c)]
    if ignored:
        plural = "s" if len(ignored) > 1 else ""
        warnings.append(f"{name}: non-numeric column{plural} ignored as a metric: {', '.join(ignored)}.")
    if not metric_columns:
        raise UsageError(
            f"`--table` has no numeric column to use as a metric. Received: --table={os.fspath(path)!r} "
            f"(columns: {', '.join(columns)})."
        )
    if metrics:
        kept = [c for c in metric_columns if any(fnmatch.fnmatchcase(c, p) for p in metrics)]
        if not kept:
            raise UsageError(
                f"`--metric` matches no metric. Received: {metric_options(metrics)}. "
                f"Expected one of: {', '.join(metric_columns)}."
            )
        metric_columns = kept
    keys = {c: table.column(c).to_pylist() for c in columns if c not in metric_columns and c in [group_by, *ignored]}
    values = {c: table.column(c).to_pylist() for c in metric_columns}
    texts = {c: ["" if x is None else str(x) for x in v] for c, v in keys.items()}
    own = frozenset(
        c
        for c, v in texts.items()
        if c != group_by and (c.strip().lower() in RUN_COLUMNS or (len(v) > 1 and len(set(v)) == len(v)))
    )
    runs = []
    for i in range(table.num_rows):
        run_keys = {c: v[i] for c, v in texts.items()}
        run_values = {c: math.nan if v[i] is None else float(v[i]) for c, v in values.items()}
        runs.append(RunValues(run_keys, run_values, run_keys=own))
    return runs
