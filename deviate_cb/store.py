"""The run directory: manifest JSON and Parquet files, written atomically, with a schema version.

Layout (Hive-style, so ``pyarrow.dataset``, pandas, polars and DuckDB read a whole study in one call)::

    <out>/experiment=<name>/variant=<variant>/replica=<k>/
        run.json          manifest (status, seed, variant, determinism requested/in effect, ...)
        metrics.parquet   long format, one row per recorded value (see :func:`metrics_schema`)
        fingerprint.json  hardware/software fingerprint

Every write goes to a temporary file in the same directory, is flushed and fsynced, then renamed over
the target, so a reader (or a replica killed mid-write) never sees a half-written file.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Optional, Union

from deviate_cb.errors import SchemaVersionError, UsageError
from deviate_cb.series_summary import SERIES_KEY, with_summary

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "FINGERPRINT_FILE",
    "MANIFEST_FILE",
    "METRICS_FILE",
    "SCHEMA_VERSION",
    "STAGES",
    "STATUSES",
    "MetricsFile",
    "RunDirectory",
    "atomic_write",
    "atomic_write_bytes",
    "check_partition_value",
    "claim_replica",
    "iso_time",
    "metrics_schema",
    "read_manifest_file",
    "run_path",
]

SCHEMA_VERSION = 1
MANIFEST_FILE = "run.json"
METRICS_FILE = "metrics.parquet"
FINGERPRINT_FILE = "fingerprint.json"
STAGES = ("train", "val", "test", "final")
STATUSES = ("running", "completed", "failed", "timeout", "killed")


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


def iso_time(timestamp: Optional[float] = None) -> str:
    """ISO 8601 UTC time of a Unix timestamp (default: now), as manifests record times.

    Example:
        >>> iso_time(0)
        '1970-01-01T00:00:00+00:00'
    """
    if timestamp is None:
        return _dt.datetime.now(_dt.timezone.utc).isoformat()
    return _dt.datetime.fromtimestamp(timestamp, _dt.timezone.utc).isoformat()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, flush, fsync, rename)."""
    atomic_write(path, lambda handle: handle.write(data))


def atomic_write(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Call ``write`` on a temporary file next to ``path``, flush and fsync it, then rename it over ``path``.

    A reader sees the old file or the new one, never a partial one; on an error the temporary file is removed
    and the old file is left as it was.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "x.bin"
        >>> atomic_write(path, lambda handle: handle.write(b"new"))
        >>> path.read_bytes()
        b'new'
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_partition_value(name: str, value: str) -> str:
    """Validate a value used as a Hive partition (``experiment``, ``variant``): non-empty, no ``/`` or ``=``.

    Example:
        >>> check_partition_value("experiment", "resnet")
        'resnet'
    """
    if not isinstance(value, str) or not value or any(c in value for c in "/\\=") or value in {".", ".."}:
        raise UsageError(f"`{name}` must be a non-empty name without '/', '\\' or '='. Received: {name}={value!r}.")
    return value


def run_path(out: Path, experiment: str, variant: str, replica: int) -> Path:
    """The run directory of one replica.

    Example:
        >>> run_path(Path("runs"), "mlp", "algo", 3).as_posix()
        'runs/experiment=mlp/variant=algo/replica=3'
    """
    check_partition_value("experiment", experiment)
    check_partition_value("variant", variant)
    return Path(out) / f"experiment={experiment}" / f"variant={variant}" / f"replica={replica}"


def claim_replica(out: Path, experiment: str, variant: str) -> tuple[int, Path]:
    """Create and return the lowest-numbered free replica directory (safe against concurrent claims)."""
    parent = run_path(out, experiment, variant, 0).parent
    parent.mkdir(parents=True, exist_ok=True)
    replica = 0
    while True:
        path = parent / f"replica={replica}"
        try:
            path.mkdir()
            return replica, path
        except FileExistsError:
            replica += 1


class RunDirectory:
    """One replica's run directory: read and update its manifest, fingerprint and metrics.

    Example:
        >>> import tempfile
        >>> run = RunDirectory(Path(tempfile.mkdtemp()) / "replica=0")
        >>> run.update_manifest(status="running", seed=1)["status"]
        'running'
        >>> run.read_manifest()["schema_version"] == SCHEMA_VERSION
        True
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST_FILE

    @property
    def metrics_path(self) -> Path:
        return self.path / METRICS_FILE

    @property
    def fingerprint_path(self) -> Path:
        return self.path / FINGERPRINT_FILE

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def read_manifest(self) -> dict[str, Any]:
        """Return the manifest, ``{}`` if there is none yet.

        Raises:
            SchemaVersionError: The manifest was written by a newer deviate-cb.
            UsageError: The manifest is not valid JSON.
        """
        return read_manifest_file(os.path.join(self.path, MANIFEST_FILE))

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        """Merge ``fields`` into the manifest (nested dicts are merged one level deep) and write it atomically."""
        manifest = self.read_manifest()
        for key, value in fields.items():
            if isinstance(value, Mapping) and isinstance(manifest.get(key), dict):
                manifest[key] = {**manifest[key], **value}
            else:
                manifest[key] = value
        manifest["schema_version"] = SCHEMA_VERSION
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.manifest_path, _dumps(manifest))
        return manifest

    def write_fingerprint(self, fingerprint: Mapping[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.fingerprint_path, _dumps(fingerprint))

    def metrics(self) -> MetricsFile:
        return MetricsFile(self.metrics_path)


def read_manifest_file(path: str) -> dict[str, Any]:
    """The manifest at ``path`` (a ``run.json``), ``{}`` if there is none: :meth:`RunDirectory.read_manifest`
    for a plain string path, as reports read thousands of these.

    Raises:
        SchemaVersionError: The manifest was written by a newer deviate-cb.
        UsageError: The manifest is not valid JSON.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return {}
    try:
        manifest = json.loads(text)
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        raise UsageError(f"{path}: not a valid run manifest ({exc}).") from exc
    check_schema_version(manifest.get("schema_version", SCHEMA_VERSION), path)
    return manifest


def check_schema_version(version: object, source: Union[str, os.PathLike[str]]) -> None:
    """Raise :class:`SchemaVersionError` if ``version`` is newer than this reader understands."""
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{source}: written with schema_version={version!r}, but this deviate-cb reads up to "
            f"schema_version={SCHEMA_VERSION}. Upgrade deviate-cb (pip install -U deviate-cb)."
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
        # The per-series summary in the footer lets reports skip the values (deviate_cb.series_summary).
        table = with_summary(table)
        atomic_write(self.path, lambda handle: pq.write_table(table, handle))
        self.summary = table.schema.metadata[SERIES_KEY]


def _dumps(obj: Mapping[str, Any]) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")
