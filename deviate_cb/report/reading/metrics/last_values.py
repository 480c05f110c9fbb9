"""The value recorded last of every metric of every run, read without holding the whole long table.

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
    >>> table = read_last_values(find_runs(root), partition_base(root), [])
    >>> table.select(["experiment", "variant", "run", "name", "value"]).to_pylist()
    [{'experiment': 'mlp', 'variant': 'algo', 'run': 0, 'name': 'val_acc', 'value': 0.5}]
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from deviate_cb.report.reading.metrics.file_checks import METRIC_COLUMNS, TEXT_COLUMNS, short_reason

# read_last_values looks the file check up under this module's name (tests replace it to show it is not used).
from deviate_cb.report.reading.metrics.file_checks import check_metrics_file as _check_file
from deviate_cb.report.reading.metrics.long_table import read_metrics
from deviate_cb.report.reading.metrics.scan import SeriesScan, duckdb_last, import_duckdb
from deviate_cb.report.reading.runs import RunRecord
from deviate_cb.store.run_directory import METRICS_FILE

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["LAST_COLUMNS", "read_last_values"]

LAST_COLUMNS = ("experiment", "variant", "replica", "run", "stage", "name", "value")


def read_last_values(
    runs: Sequence[RunRecord],
    base: Path,
    warnings: list[str],
    *,
    engine: str = "auto",
    scan: Optional[SeriesScan] = None,
) -> pa.Table:
    """The value recorded last (by ``seq``) of every metric of every run, never holding the whole long table.

    The same result as ``aggregate_table(read_metrics(runs, base, warnings), "last", keys=("run", "stage",
    "name"))`` (and the same warnings). Files the store wrote say it in their footer (one footer read per
    run); other files are scanned, with DuckDB when it is installed (the ``report`` extra: ``arg_max`` by
    ``seq``, then file order) or else in pyarrow batches, each batch reduced at once to its last value per
    (stage, name). Files whose ``value`` column holds text go through :func:`read_metrics`.

    Args:
        runs: The runs to read (those without a ``metrics.parquet`` contribute nothing).
        base: The folder above the Hive partitions (``partition_base_dir``).
        warnings: Where to append one line per skipped file or metric.
        engine: ``"auto"`` (DuckDB when it can be imported, else pyarrow), ``"duckdb"`` or ``"pyarrow"``.
        scan: A :class:`~deviate_cb.report.reading.metrics.scan.SeriesScan` (``reduce="last"``) started earlier over (at
            least) these runs' files, so that the DuckDB query ran while the caller did other work; its
            result is used when the DuckDB engine is.

    Returns:
        Columns ``experiment``, ``variant``, ``replica`` (strings), ``run`` (int32, indexing into ``runs``),
        ``stage``, ``name`` (strings) and ``value`` (float64; NaN where the last value was null or NaN), one row
        per (run, stage, name), sorted by ``run``, ``stage``, ``name``.

    Example:
        >>> import tempfile
        >>> from deviate_cb.store.manifest import LaunchEnd
        >>> from deviate_cb.store.run_directory import RunDirectory, run_path
        >>> from deviate_cb.report.reading.runs import find_runs, partition_base
        >>> root = Path(tempfile.mkdtemp())
        >>> run = RunDirectory(run_path(root, "mlp", "algo", 0))
        >>> _ = run.record(LaunchEnd(status="completed"))
        >>> _ = run.metrics().append({"step": [0, 1], "epoch": [0, 0], "stage": ["val"] * 2, "scope": ["epoch"] * 2,
        ...                           "name": ["val_acc"] * 2, "value": [0.5, 0.6], "wall_time": [0.0, 1.0]})
        >>> read_last_values(find_runs(root), partition_base(root), []).select(["run", "name", "value"]).to_pylist()
        [{'run': 0, 'name': 'val_acc', 'value': 0.6}]
    """
    import pyarrow as pa

    if engine not in ("auto", "duckdb", "pyarrow"):
        raise ValueError(f"`engine` must be 'auto', 'duckdb' or 'pyarrow'. Received: engine={engine!r}.")
    duckdb = None if engine == "pyarrow" else import_duckdb(required=engine == "duckdb")
    index = {os.path.join(run.path, METRICS_FILE): i for i, run in enumerate(runs)}
    present = [path for path in index if os.path.isfile(path)]
    # (run, stage, name) -> (seq, position in the scan, value)
    best: dict[tuple[int, str, str], tuple[int, int, float]] = {}
    groups: dict[tuple[str, ...], tuple[pa.Schema, list[str]]] = {}
    # Fast paths: the footers of the files the store wrote, then one DuckDB query for the others when they
    # all have the store's column types. What is left (a corrupt file, other types) is checked file by file.
    if scan is None or scan.reduce != "last" or not scan.covers(present):
        scan = SeriesScan(present, engine="footers" if duckdb is None else "duckdb")
        warnings += scan.problems  # a caller's scan: its caller warns about them
    _fold(scan.result(), index, best)
    uncovered = set(scan.uncovered)
    for path in present:
        if path in uncovered:
            schema = _check_file(path, warnings)
            if schema is not None:
                groups.setdefault(tuple(str(f.type) for f in schema), (schema, []))[1].append(path)
    text_runs: list[int] = []
    for schema, files in groups.values():
        value_type = schema.field("value").type
        if pa.types.is_string(value_type) or pa.types.is_large_string(value_type):
            text_runs.extend(index[f] for f in files)
        elif duckdb is None or not _fold(duckdb_last(duckdb, files), index, best):
            _stream_last(schema, files, base, index, warnings, best)
    rows = [(run, stage, name, value) for (run, stage, name), (_, _, value) in best.items()]
    if text_runs:
        from deviate_cb.stats.aggregation.arrow import aggregate_table

        text_runs.sort()
        table = read_metrics([runs[i] for i in text_runs], base, warnings)
        last = aggregate_table(table, "last", keys=("run", "stage", "name")).table
        mapped = [text_runs[i] for i in last.column("run").to_pylist()]
        rows += zip(mapped, *(last.column(c).to_pylist() for c in ("stage", "name", "value")), strict=True)
    return _per_run_table(runs, rows)


def _per_run_table(runs: Sequence[RunRecord], rows: list[tuple[int, str, str, float]]) -> pa.Table:
    """``(run, stage, name, value)`` rows as the reader's table, sorted by run, stage, name."""
    import pyarrow as pa

    rows.sort(key=lambda r: r[:3])
    columns = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
    records = [runs[i] for i in columns[0]]
    return pa.table(
        {
            "experiment": pa.array([r.experiment for r in records], pa.string()),
            "variant": pa.array([r.variant for r in records], pa.string()),
            "replica": pa.array([r.replica for r in records], pa.string()),
            "run": pa.array(columns[0], pa.int32()),
            "stage": pa.array(columns[1], pa.string()),
            "name": pa.array(columns[2], pa.string()),
            "value": pa.array(columns[3], pa.float64()),
        }
    )


def _fold(
    found: Optional[dict[tuple[str, str, str], Any]],
    index: dict[str, int],
    best: dict[tuple[int, str, str], tuple[int, int, float]],
) -> bool:
    """Put the last values of the files in ``index`` into ``best``; ``False`` when there are none to put."""
    if found is None:
        return False
    for (path, stage, name), (key, value) in found.items():
        run = index.get(path)
        if run is not None:
            best[(run, stage, name)] = (key, 0, value)
    return True


def _stream_last(
    schema: pa.Schema,
    files: list[str],
    base: Path,
    index: dict[str, int],
    warnings: list[str],
    best: dict[tuple[int, str, str], tuple[int, int, float]],
) -> None:
    """Fold the last value per (run, stage, name) of ``files`` into ``best``; on a read error, one file at a time."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.dataset as ds

    fields = [f.with_type(pa.dictionary(pa.int32(), f.type)) if f.name in TEXT_COLUMNS else f for f in schema]
    options = ds.ParquetReadOptions(dictionary_columns=list(TEXT_COLUMNS))
    found: dict[tuple[int, str, str], tuple[int, int, float]] = {}
    try:
        dataset = ds.dataset(files, schema=pa.schema(fields), format=ds.ParquetFileFormat(read_options=options))
        fragment_runs = np.asarray([index[str(f)] for f in dataset.files], dtype=np.int64)
        position = 0
        positions = np.arange(1 << 17, dtype=np.int64)  # a batch holds at most 131,072 rows by default
        for batch in dataset.to_batches(columns=["__fragment_index", *METRIC_COLUMNS], fragment_readahead=8):
            n = batch.num_rows
            if n == 0:
                continue
            fragment = batch.column(0).to_numpy(zero_copy_only=False)
            seq = batch.column(1).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            stage, name = batch.column(2), batch.column(3)
            value = _float_values(batch.column(4))
            stage_codes = _codes(stage.indices, len(stage.dictionary))
            name_null = len(name.dictionary)
            name_codes = _codes(name.indices, name_null)
            stage_labels = [*stage.dictionary.cast(pa.string()).to_pylist(), "unknown"]
            name_labels = name.dictionary.cast(pa.string()).to_pylist()
            n_stage, n_name = len(stage_labels), name_null + 1
            first = int(fragment[0])
            if fragment[-1] == first and np.all(fragment == first):
                fragment_codes = np.zeros(n, dtype=np.int64)
                fragments = np.asarray([first])
            else:
                fragments, fragment_codes = np.unique(fragment, return_inverse=True)
            keys = (fragment_codes * n_stage + stage_codes) * n_name + name_codes
            if np.all(seq[1:] >= seq[:-1]):
                rows = positions[:n] if n <= positions.size else np.arange(n, dtype=np.int64)
            else:  # the last by seq, ties broken by file order: a stable sort, then the last of each key
                rows = np.argsort(seq, kind="stable")
                keys = keys[rows]
            last = np.full(len(fragments) * n_stage * n_name, -1, dtype=np.int64)
            np.maximum.at(last, keys, positions[:n] if n <= positions.size else np.arange(n, dtype=np.int64))
            for key in np.flatnonzero(last >= 0):
                rest, name_code = divmod(int(key), n_name)
                if name_code == name_null:
                    continue  # rows without a name are not metrics
                fragment_code, stage_code = divmod(rest, n_stage)
                row = int(rows[last[key]])
                ident = (int(fragment_runs[fragments[fragment_code]]), stage_labels[stage_code], name_labels[name_code])
                candidate = (int(seq[row]), position + row, float(value[row]))
                if ident not in found or candidate[:2] >= found[ident][:2]:
                    found[ident] = candidate
            position += n
    except (OSError, pa.ArrowException) as exc:
        if len(files) > 1:
            for f in files:
                _stream_last(schema, [f], base, index, warnings, best)
            return
        warnings.append(f"{files[0]}: not a readable Parquet file ({short_reason(exc)}); skipped.")
        return
    best.update(found)


def _codes(indices: pa.Array, null_code: int) -> np.ndarray:
    """Dictionary indices as int64, nulls as ``null_code``."""
    import numpy as np
    import pyarrow.compute as pc

    if indices.null_count:
        indices = pc.fill_null(indices, null_code)
    return indices.to_numpy(zero_copy_only=False).astype(np.int64)


def _float_values(values: pa.Array) -> np.ndarray:
    """A numeric column as float64, nulls as NaN."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if values.type != pa.float64():
        values = pc.cast(values, pa.float64())
    if values.null_count:
        values = values.fill_null(math.nan)
    return values.to_numpy(zero_copy_only=False)
