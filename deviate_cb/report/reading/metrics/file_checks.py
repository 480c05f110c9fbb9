"""Checks shared by the metrics readers: is a ``metrics.parquet`` file readable, and is it a metrics file?

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> path = str(Path(tempfile.mkdtemp()) / "metrics.parquet")
    >>> pq.write_table(pa.table({"seq": [0], "stage": ["val"], "name": ["acc"], "value": [0.5]}), path)
    >>> check_metrics_file(path, []).names
    ['seq', 'stage', 'name', 'value']
    >>> warnings = []
    >>> pq.write_table(pa.table({"seq": [0]}), path)
    >>> check_metrics_file(path, warnings) is None, warnings[0].endswith("(no column stage, name, value); skipped.")
    (True, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deviate_cb.store.bounded_read import HostileFileError, check_parquet

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["METRIC_COLUMNS", "TEXT_COLUMNS", "check_metrics_file", "is_numeric", "short_reason"]

METRIC_COLUMNS = ("seq", "stage", "name", "value")
# The text columns that repeat on every row: the readers read them dictionary-encoded.
TEXT_COLUMNS = ("stage", "name")


def check_metrics_file(path: str, warnings: list[str]) -> pa.Schema | None:
    """The file's schema (only the columns the report needs), or ``None`` after a warning."""
    import pyarrow as pa

    try:
        schema = check_parquet(path).schema.to_arrow_schema()  # the footer only, of a regular file
    except HostileFileError as exc:  # a FIFO, more rows than a run holds, metadata nested too deep
        warnings.append(f"{exc.path}: {exc.reason}; skipped.")
        return None
    except (OSError, pa.ArrowException) as exc:
        warnings.append(f"{path}: not a readable Parquet file ({short_reason(exc)}); skipped.")
        return None
    missing = [c for c in METRIC_COLUMNS if c not in schema.names]
    if missing:
        warnings.append(f"{path}: not a deviate metrics file (no column {', '.join(missing)}); skipped.")
        return None
    fields = [schema.field(c) for c in METRIC_COLUMNS]
    seq, stage, name, value = (f.type for f in fields)
    text = (pa.types.is_string(t) or pa.types.is_large_string(t) for t in (stage, name))
    if not pa.types.is_integer(seq) or not all(text):
        warnings.append(
            f"{path}: columns seq/stage/name have types {seq}/{stage}/{name}, expected int/string; skipped."
        )
        return None
    if not (is_numeric(value) or pa.types.is_string(value) or pa.types.is_large_string(value)):
        warnings.append(f"{path}: column `value` has type {value}, expected float64; the file is skipped.")
        return None
    return pa.schema(fields)


def is_numeric(type_: pa.DataType) -> bool:
    """Whether ``type_`` is an integer, floating-point or decimal type.

    Example:
        >>> import pyarrow as pa
        >>> is_numeric(pa.int32()), is_numeric(pa.string())
        (True, False)
    """
    import pyarrow as pa

    return pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_decimal(type_)


def short_reason(exc: BaseException) -> str:
    """The message of ``exc`` on one line, cut to 120 characters (for a warning).

    Example:
        >>> short_reason(OSError("Parquet magic bytes   not found"))
        'Parquet magic bytes not found'
    """
    text = " ".join(str(exc).split())
    return text if len(text) <= 120 else text[:117] + "..."
