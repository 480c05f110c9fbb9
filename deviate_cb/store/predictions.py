"""``predictions.parquet``: the per-sample predictions of a run, written snapshot by snapshot and read back.

Example:
    >>> import tempfile
    >>> import numpy as np
    >>> run = Path(tempfile.mkdtemp())
    >>> probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    >>> block = write_predictions(run, outputs=probs, labels=[0, 1, 1], groups={"sex": ["f", "m", "f"]})
    >>> block["task"], block["score"], block["num_classes"], block["snapshots"]
    ('classification', 'probability', 2, ['final'])
    >>> read_predictions(run).column("predicted").to_pylist()
    [0, 1, 0]
    >>> predictions_metadata(read_predictions(run))["score"]
    'probability'
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from deviate_cb.errors import UsageError
from deviate_cb.store.atomic import atomic_write_parquet
from deviate_cb.store.bounded_read import HostileFileError, check_parquet, loads_json
from deviate_cb.store.manifest import StabilityRecord
from deviate_cb.store.run_directory import RunDirectory
from deviate_cb.store.validation import PathLike, one_line, opt_int, prediction_columns

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["PREDICTIONS_FILE", "predictions_metadata", "predictions_schema", "read_predictions", "write_predictions"]

PREDICTIONS_FILE = "predictions.parquet"
_META_KEY = b"deviate_cb.predictions"


def predictions_schema(groups: Iterable[str] = ()) -> pa.Schema:
    """The Arrow schema of ``predictions.parquet``, with one ``group_<name>`` string column per group.

    Example:
        >>> predictions_schema(["sex"]).names[-3:]
        ['value', 'target', 'group_sex']
    """
    import pyarrow as pa

    fields = [
        ("snapshot", pa.string()),
        ("epoch", pa.int64()),
        ("step", pa.int64()),
        ("sample", pa.int64()),
        ("predicted", pa.int64()),
        ("score", pa.float64()),
        ("label", pa.int64()),
        ("value", pa.float64()),
        ("target", pa.float64()),
    ]
    return pa.schema(fields + [(f"group_{g}", pa.string()) for g in groups])


def write_predictions(
    run_dir: PathLike,
    *,
    outputs: Any,
    labels: Any = None,
    sample: Any = None,
    groups: Optional[Mapping[str, Any]] = None,
    snapshot: str = "final",
    epoch: Optional[int] = None,
    step: Optional[int] = None,
    task: str = "auto",
    num_classes: Optional[int] = None,
    update_manifest: bool = True,
) -> dict[str, Any]:
    """Add one snapshot of per-sample predictions to ``<run_dir>/predictions.parquet``.

    The file is rewritten atomically (temporary file, fsync, rename); rows of an earlier snapshot with the same
    name are replaced, so a resumed run does not duplicate them. Unless ``update_manifest=False``, the returned
    block is also merged into ``run.json`` under the key ``predictions``.

    Args:
        run_dir: The run directory.
        outputs: Model outputs for ``n`` samples (see :mod:`deviate_cb.store.validation` for how each shape
            is read).
        labels: True classes (classification) or targets (regression), one per sample; ``None`` if unknown.
            One-hot labels of shape ``(n, classes)`` are read as their argmax.
        sample: Sample indices (default ``arange(n)``); runs are aligned on them.
        groups: Sub-group labels, ``name -> array of n`` (strings or ints), stored as ``group_<name>``.
        snapshot: ``"final"`` or ``"epoch=<k>"`` (any non-empty name is accepted).
        epoch: Epoch of the snapshot, if known.
        step: Global step of the snapshot, if known.
        task: ``"auto"``, ``"classification"`` or ``"regression"``.
        num_classes: Number of classes when ``outputs`` are class indices (default: inferred).
        update_manifest: Whether to store the block under ``run.json``'s ``predictions`` key.

    Returns:
        The manifest block: task, score kind, num_classes, n_samples, snapshots, groups, file.

    Raises:
        ValueError: Inconsistent shapes or an unknown ``task``, with a one-line message.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    columns, info = prediction_columns(outputs, labels, sample, groups, task, num_classes)
    if not isinstance(snapshot, str) or not snapshot:
        raise ValueError(f"`snapshot` must be a non-empty string such as 'final'. Received: snapshot={snapshot!r}.")
    n = info["n_samples"]
    columns["snapshot"] = pa.array([snapshot] * n, pa.string())
    columns["epoch"] = pa.array([opt_int(epoch, "epoch")] * n, pa.int64())
    columns["step"] = pa.array([opt_int(step, "step")] * n, pa.int64())
    group_names = sorted(groups or {})
    schema = predictions_schema(group_names)
    new = pa.table([columns[name] for name in schema.names], schema=schema)
    path = Path(run_dir) / PREDICTIONS_FILE
    tables = [new]
    meta = {k: info[k] for k in ("task", "score", "num_classes")}
    if path.is_file():
        old = read_predictions(run_dir)
        old_meta = predictions_metadata(old)
        if old_meta.get("task", meta["task"]) != meta["task"]:
            raise ValueError(
                f"{path} holds {old_meta['task']} predictions; a {meta['task']} snapshot cannot be added to it."
            )
        if meta["num_classes"] is not None and old_meta.get("num_classes") is not None:
            meta["num_classes"] = max(int(meta["num_classes"]), int(old_meta["num_classes"]))
        old = old.filter(pc.not_equal(old.column("snapshot"), snapshot))
        tables.insert(0, old)
    table = pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else new
    table = table.replace_schema_metadata({_META_KEY: json.dumps(meta).encode()})
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_parquet(path, table)
    snapshots = pc.unique(table.column("snapshot")).to_pylist()  # in order of first appearance
    block = {
        **meta,
        "n_samples": n,
        "snapshots": snapshots,
        "groups": [name[len("group_") :] for name in table.schema.names if name.startswith("group_")],
        "file": PREDICTIONS_FILE,
    }
    if update_manifest:
        RunDirectory(Path(run_dir)).record(StabilityRecord(predictions=block))
    return block


def read_predictions(run_dir: PathLike) -> pa.Table:
    """The rows of ``<run_dir>/predictions.parquet`` (all snapshots).

    Raises:
        UsageError: The file is missing, unreadable or lacks a required column (one line naming the file).
    """
    import pyarrow.parquet as pq

    path = Path(run_dir) / PREDICTIONS_FILE
    if not path.is_file():
        raise UsageError(f"{path}: no such file (record predictions with DeviateCallback(predictions=...)).")
    try:
        check_parquet(path)  # a FIFO, too many rows or deep footer metadata: one line naming the file
        table = pq.read_table(path)
    except HostileFileError:
        raise
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise UsageError(f"{path}: not a readable Parquet file ({one_line(exc)}).") from exc
    missing = [name for name in predictions_schema().names if name not in table.schema.names]
    if missing:
        raise UsageError(f"{path}: not a predictions file: missing column(s) {', '.join(missing)}.")
    return table


def predictions_metadata(table: pa.Table) -> dict[str, Any]:
    """The task/score/num_classes that :func:`write_predictions` stored in the file's schema metadata.

    Example:
        >>> import pyarrow as pa
        >>> predictions_metadata(pa.table({"a": [1]}))
        {}
    """
    raw = (table.schema.metadata or {}).get(_META_KEY)
    try:
        return dict(loads_json(raw, PREDICTIONS_FILE)) if raw else {}
    except ValueError:
        return {}
