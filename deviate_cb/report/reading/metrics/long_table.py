"""Read the ``metrics.parquet`` files of many runs as one long table, in one ``pyarrow.dataset`` scan.

Example:
    >>> import tempfile
    >>> from deviate_cb.store.manifest import LaunchEnd
    >>> from deviate_cb.store.run_directory import RunDirectory, run_path
    >>> from deviate_cb.report.reading.runs import find_runs, partition_base
    >>> root = Path(tempfile.mkdtemp())
    >>> run = RunDirectory(run_path(root, "mlp", "algo", 0))
    >>> _ = run.record(LaunchEnd(status="completed"))
    >>> _ = run.metrics().append({"step": [0], "epoch": [0], "stage": ["val"], "scope": ["epoch"],
    ...                           "name": ["val_acc"], "value": [0.5], "wall_time": [0.0]})
    >>> table = read_metrics(find_runs(root), partition_base(root), [])
    >>> table.select(["experiment", "variant", "run", "name", "value"]).to_pylist()
    [{'experiment': 'mlp', 'variant': 'algo', 'run': 0, 'name': 'val_acc', 'value': 0.5}]
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from deviate_cb.report.reading.metrics.file_checks import METRIC_COLUMNS, TEXT_COLUMNS, check_metrics_file, short_reason
from deviate_cb.report.reading.runs import RunRecord
from deviate_cb.store.run_directory import METRICS_FILE

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["read_metrics"]

_PARTITIONS = ("experiment", "variant", "replica")


def read_metrics(runs: Sequence[RunRecord], base: Path, warnings: list[str]) -> pa.Table:
    """The metrics of ``runs`` as one table, with a ``run`` column indexing into ``runs``.

    Args:
        runs: The runs to read (those without a ``metrics.parquet`` contribute nothing).
        base: The folder above the Hive partitions (``partition_base_dir``).
        warnings: Where to append one line per skipped file or metric.

    Returns:
        Columns ``experiment``, ``variant``, ``replica`` (from the Hive partitions), ``run`` (int32),
        ``seq`` (int64), ``stage``, ``name`` (strings) and ``value`` (float64).
    """
    import pyarrow as pa

    index = {os.path.join(run.path, METRICS_FILE): i for i, run in enumerate(runs)}
    groups: dict[tuple[str, ...], tuple[pa.Schema, list[str]]] = {}
    for path in index:
        if not Path(path).is_file():
            continue
        schema = check_metrics_file(path, warnings)
        if schema is not None:
            groups.setdefault(tuple(str(f.type) for f in schema), (schema, []))[1].append(path)
    tables = [_scan(schema, files, base, index, warnings) for schema, files in groups.values()]
    return pa.concat_tables([_empty(), *[t for t in tables if t.num_rows]])


def _scan(schema: pa.Schema, files: list[str], base: Path, index: dict[str, int], warnings: list[str]) -> pa.Table:
    """Read files sharing one schema in one dataset scan; on a read error, fall back to one file at a time."""
    import pyarrow as pa

    try:
        table, order = _dataset_table(schema, files, base)
    except (OSError, pa.ArrowException) as exc:
        if len(files) > 1:
            return pa.concat_tables([_empty(), *(_scan(schema, [f], base, index, warnings) for f in files)])
        warnings.append(f"{files[0]}: not a readable Parquet file ({short_reason(exc)}); skipped.")
        return _empty()
    return _normalise(table, [index[f] for f in order], list(index), warnings)


def _dataset_table(schema: pa.Schema, files: list[str], base: Path) -> tuple[pa.Table, list[str]]:
    """One scan over ``files``; also the files in fragment order (what ``__fragment_index`` counts)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    partitions = pa.schema([(k, pa.string()) for k in _PARTITIONS])
    partitioning = ds.HivePartitioning(partitions, segment_encoding="none")
    # stage and name repeat on every row: reading them dictionary-encoded is several times faster.
    fields = [f.with_type(pa.dictionary(pa.int32(), f.type)) if f.name in TEXT_COLUMNS else f for f in schema]
    options = ds.ParquetReadOptions(dictionary_columns=list(TEXT_COLUMNS))
    dataset = ds.dataset(
        files,
        schema=pa.schema(fields + list(partitions)),
        format=ds.ParquetFileFormat(read_options=options),
        partitioning=partitioning,
        partition_base_dir=str(base),
    )
    table = dataset.to_table(columns=[*_PARTITIONS, "__fragment_index", *METRIC_COLUMNS])
    return table, [str(f) for f in dataset.files]


def _normalise(table: pa.Table, fragment_runs: list[int], files: list[str], warnings: list[str]) -> pa.Table:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    fragments = table.column("__fragment_index").to_numpy()
    runs = pa.array(np.asarray(fragment_runs, dtype=np.int32)[fragments], type=pa.int32())
    table = table.drop_columns(["__fragment_index"]).append_column("run", runs)
    for name in TEXT_COLUMNS:
        table = _set(table, name, pc.cast(table.column(name), pa.string()))
    table = table.filter(pc.is_valid(table.column("name")))
    table = _set(table, "stage", table.column("stage").fill_null("unknown"))
    value = table.column("value")
    if pa.types.is_string(value.type) or pa.types.is_large_string(value.type):
        table = _parse_text_values(table, files, warnings)
    else:
        table = _set(table, "value", pc.cast(value, pa.float64()))
    table = _set(table, "value", table.column("value").fill_null(float("nan")))
    return table.select(_output_schema().names).cast(_output_schema())


def _set(table: pa.Table, name: str, column: pa.ChunkedArray) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, column)


def _parse_text_values(table: pa.Table, files: list[str], warnings: list[str]) -> pa.Table:
    """Convert a text ``value`` column to float64; a metric with any value that is not a number is dropped."""
    import pyarrow as pa
    import pyarrow.compute as pc

    texts = table.column("value").to_pylist()
    names = table.column("name").to_pylist()
    runs = table.column("run").to_pylist()
    values: list[float] = []
    bad: dict[str, tuple[str, str]] = {}
    for text, name, run in zip(texts, names, runs, strict=True):
        try:
            values.append(float("nan") if text is None else float(text))
        except ValueError:
            values.append(float("nan"))
            bad.setdefault(name, (files[run], text))
    for name, (path, text) in sorted(bad.items()):
        warnings.append(f"{path}: metric `{name}` is not a number (value {text!r}); the metric is skipped.")
    table = _set(table, "value", pa.array(values, type=pa.float64()))
    if bad:
        table = table.filter(pc.invert(pc.is_in(table.column("name"), value_set=pa.array(sorted(bad)))))
    return table


def _output_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            *[(k, pa.string()) for k in _PARTITIONS],
            ("run", pa.int32()),
            ("seq", pa.int64()),
            ("stage", pa.string()),
            ("name", pa.string()),
            ("value", pa.float64()),
        ]
    )


def _empty() -> pa.Table:
    return _output_schema().empty_table()
