"""The run directory: manifest JSON and Parquet files, written atomically, with a schema version.

Example:
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> replica, path = claim_replica(out, "mlp", "algo")
    >>> replica, path.relative_to(out).as_posix()
    (0, 'experiment=mlp/variant=algo/replica=0')
    >>> from deviate_cb.store.manifest import LaunchEnd
    >>> RunDirectory(path).record(LaunchEnd(status="completed")).status
    'completed'
    >>> read_manifest_file(str(path / MANIFEST_FILE))["schema_version"] == SCHEMA_VERSION
    True
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, Union

from deviate_cb.errors import SchemaVersionError, UsageError
from deviate_cb.store.atomic import atomic_write_bytes
from deviate_cb.store.bounded_read import HostileFileError, loads_json, read_regular
from deviate_cb.store.manifest import ManifestSection, RunManifest
from deviate_cb.store.manifest.in_place import write_in_place
from deviate_cb.store.metrics import MetricsFile
from deviate_cb.store.parts import recorded_attempt
from deviate_cb.store.safe_paths import make_folders

__all__ = [
    "FINGERPRINT_FILE",
    "MANIFEST_FILE",
    "METRICS_FILE",
    "SCHEMA_VERSION",
    "STAGES",
    "STATUSES",
    "RunDirectory",
    "check_partition_value",
    "claim_replica",
    "iso_time",
    "merge_manifest",
    "read_manifest_file",
    "read_run_manifest",
    "run_path",
    "unix_time",
]

SCHEMA_VERSION = 1
MANIFEST_FILE = "run.json"
METRICS_FILE = "metrics.parquet"
FINGERPRINT_FILE = "fingerprint.json"
STAGES = ("train", "val", "test", "final")
# The longest experiment or variant name (characters, and bytes in UTF-8: folder names are limited to 255 bytes)
_MAX_PARTITION_LENGTH = 100
_MAX_PARTITION_BYTES = 200
STATUSES = ("running", "completed", "incomplete", "failed", "timeout", "killed", "audited", "deleted")


def iso_time(timestamp: Optional[float] = None) -> str:
    """ISO 8601 UTC time of a Unix timestamp (default: now), as manifests record times.

    Example:
        >>> iso_time(0)
        '1970-01-01T00:00:00+00:00'
    """
    if timestamp is None:
        return _dt.datetime.now(_dt.timezone.utc).isoformat()
    return _dt.datetime.fromtimestamp(timestamp, _dt.timezone.utc).isoformat()


def unix_time(text: Any) -> Optional[float]:
    """The Unix timestamp of a manifest's ISO 8601 time (:func:`iso_time`), ``None`` when it is not one.

    Example:
        >>> unix_time("1970-01-01T00:01:00+00:00"), unix_time(None), unix_time("soon")
        (60.0, None, None)
    """
    try:
        return _dt.datetime.fromisoformat(str(text)).timestamp()
    except (TypeError, ValueError):
        return None


def check_partition_value(name: str, value: str) -> str:
    """Validate a value used as a Hive partition (``experiment``, ``variant``): 1 to 100 printable characters (at
    most 200 bytes in UTF-8, so that ``experiment=<value>`` is a valid folder name), no ``/``, ``\\`` or ``=``, not
    ``.`` or ``..``.

    Printable is :meth:`str.isprintable`: no newline, tab, terminal escape (``\\x1b``) or other control character,
    which would end up in folder names and, from there, in every report. A name that is blank or starts or ends
    with whitespace (``' '``, ``'mlp '``) is refused too: it looks empty, or like another name, in every listing.

    Example:
        >>> check_partition_value("experiment", "resnet")
        'resnet'
        >>> check_partition_value("experiment", "a\\nb")
        Traceback (most recent call last):
        ...
        deviate_cb.errors.UsageError: `experiment` must be a name of 1 to 100 printable characters ...
        >>> check_partition_value("experiment", "  ")
        Traceback (most recent call last):
        ...
        deviate_cb.errors.UsageError: `experiment` must not be blank or start or end with whitespace ...
    """
    if (
        not isinstance(value, str)
        or not value
        or any(c in value for c in "/\\=")
        or value in {".", ".."}
        or not value.isprintable()
        or len(value) > _MAX_PARTITION_LENGTH
        or len(value.encode("utf-8", "surrogatepass")) > _MAX_PARTITION_BYTES
    ):
        shown = (
            repr(value)
            if not isinstance(value, str) or len(value) <= 60
            else f"{value[:60]!r}... ({len(value)} characters)"
        )
        raise UsageError(
            f"`{name}` must be a name of 1 to {_MAX_PARTITION_LENGTH} printable characters (at most "
            f"{_MAX_PARTITION_BYTES} bytes in UTF-8) without '/', '\\' or '=', other than '.' and '..'. "
            f"Received: {name}={shown}."
        )
    if value != value.strip():  # printable whitespace is the ASCII space: the others were refused above
        blank = f" ({len(value)} space{'s' * (len(value) > 1)})" if not value.strip() else ""
        raise UsageError(
            f"`{name}` must not be blank or start or end with whitespace (such a folder name looks empty, or like "
            f"another name, in every listing). Received: {name}={value!r}{blank}."
        )
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
    """Create and return the lowest-numbered free replica directory (safe against concurrent claims).

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp())
        >>> for k in (0, 2):
        ...     run_path(out, "mlp", "standalone", k).mkdir(parents=True)
        >>> [claim_replica(out, "mlp", "standalone")[0] for _ in range(2)]
        [1, 3]
    """
    parent = run_path(out, experiment, variant, 0).parent
    make_folders(out, parent)  # never into a link planted at experiment= or variant= (PlantedLinkError)
    taken = set()  # one listing instead of a failed mkdir per replica before the free one
    for name in os.listdir(parent):
        prefix, _, number = name.partition("=")
        if prefix == "replica" and number.isdigit():
            taken.add(int(number))
    replica = 0
    while True:
        while replica in taken:
            replica += 1
        path = parent / f"replica={replica}"
        try:
            path.mkdir()
            return replica, path
        except FileExistsError:  # claimed since the listing (another process), or a file of that name
            replica += 1


class RunDirectory:
    """One replica's run directory: read and update its manifest, fingerprint and metrics.

    Example:
        >>> import tempfile
        >>> run = RunDirectory(Path(tempfile.mkdtemp()) / "replica=0")
        >>> from deviate_cb.store.manifest import LaunchStart
        >>> run.record(LaunchStart(status="running", seed=1)).status
        'running'
        >>> run.manifest().schema_version == SCHEMA_VERSION
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

    def manifest(self) -> RunManifest:
        """The manifest, typed (:class:`~deviate_cb.store.manifest.RunManifest`; empty if there is none yet).

        Raises:
            SchemaVersionError: The manifest was written by a newer deviate-cb.
            UsageError: The manifest is not valid JSON.
        """
        return RunManifest.from_json(self.read_manifest())

    def record(self, *sections: ManifestSection) -> RunManifest:
        """Merge the writers' ``sections`` (:mod:`deviate_cb.store.manifest`), in order, into the manifest
        in one atomic write (nested objects merged one level deep); return the manifest written."""
        return RunManifest.from_json(self.update_manifest(**_section_fields(sections)))

    def record_in_place(self, *sections: ManifestSection) -> bool:
        """Merge ``sections`` into the manifest without new space, the last resort when the disk is full
        (:func:`~deviate_cb.store.manifest.in_place.write_in_place`); ``False`` when it could not be written.

        Example:
            >>> import tempfile
            >>> from deviate_cb.store.manifest import LaunchEnd, LaunchStart
            >>> run = RunDirectory(Path(tempfile.mkdtemp()))
            >>> _ = run.record(LaunchStart(status="running", seed=3))
            >>> run.record_in_place(LaunchEnd(status="failed", error="the disk is full"))
            True
            >>> manifest = run.manifest(); manifest.status, manifest.seed
            ('failed', 3)
        """
        try:  # the raw JSON object: the whole manifest is written back, fields this version does not model included
            recorded = self.read_manifest()
        except Exception:  # unreadable: what the writer knows now is all there is
            recorded = {}
        return write_in_place(self.path, MANIFEST_FILE, merge_manifest(recorded, _section_fields(sections)))

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        """Merge ``fields`` into the manifest (nested dicts are merged one level deep) and write it atomically.

        Only for the store and for tests that write a store by hand: writers record their section (:meth:`record`).
        """
        manifest = merge_manifest(self.read_manifest(), fields)
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.manifest_path, _dumps(manifest))
        return manifest

    def write_fingerprint(self, fingerprint: Mapping[str, Any]) -> None:
        """Write ``fingerprint.json`` atomically: sorted keys, on one line (a tool reads it, not a person; less than
        half the time of the indented form, which Python's JSON writes in pure Python; ``deviate fingerprint``
        shows a machine's)."""
        self.path.mkdir(parents=True, exist_ok=True)
        text = json.dumps(fingerprint, sort_keys=True, default=str)
        atomic_write_bytes(self.fingerprint_path, (text + "\n").encode("utf-8"))

    def metrics(self) -> MetricsFile:
        """The run's :class:`~deviate_cb.store.metrics.MetricsFile`, for the attempt its manifest records."""
        return MetricsFile(self.metrics_path, attempt=self.attempt())

    def compact_parts(self) -> int:
        """Merge the parts a run left (:mod:`deviate_cb.store.parts`: a replica that died before its end) into
        ``metrics.parquet`` and ``timings.parquet``; return the number of metric rows merged. Only for a run
        whose processes are gone: a live run compacts itself when it ends."""
        from deviate_cb.store.timings import compact_timings

        attempt = self.attempt()
        compact_timings(self.path, attempt=attempt)
        return MetricsFile(self.metrics_path, attempt=attempt).compact()

    def attempt(self) -> int:
        """The manifest's ``attempt`` (1 when there is none, or no readable manifest)."""
        return recorded_attempt(self.path)


def merge_manifest(manifest: dict[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``fields`` into ``manifest`` in place, as every manifest write does: top-level keys replaced, nested
    dicts merged one level deep, ``schema_version`` set to this version's; return ``manifest``.

    Example:
        >>> merge_manifest({"status": "running", "seeding": {"a": 1}}, {"status": "failed", "seeding": {"b": 2}})
        {'status': 'failed', 'seeding': {'a': 1, 'b': 2}, 'schema_version': 1}
    """
    for key, value in fields.items():
        if isinstance(value, Mapping) and isinstance(manifest.get(key), dict):
            manifest[key] = {**manifest[key], **value}
        else:
            manifest[key] = value
    manifest["schema_version"] = SCHEMA_VERSION
    return manifest


def _section_fields(sections: tuple[ManifestSection, ...]) -> dict[str, Any]:
    """The fields of ``sections`` as one write: a later section's value of a field replaces an earlier one's."""
    fields: dict[str, Any] = {}
    for section in sections:
        fields.update(section.fields())
    return fields


def read_manifest_file(path: str) -> dict[str, Any]:
    """The manifest at ``path`` (a ``run.json``), ``{}`` if there is none: :meth:`RunDirectory.read_manifest`
    for a plain string path, as reports read thousands of these.

    Raises:
        SchemaVersionError: The manifest was written by a newer deviate-cb.
        UsageError: The manifest is not valid JSON.
        HostileFileError: Not a regular file (a FIFO), too large or nested too deep
            (:mod:`deviate_cb.store.bounded_read`).
    """
    try:
        data = read_regular(path)  # a FIFO, a device or a huge file is a HostileFileError (a UsageError)
    except FileNotFoundError:
        return {}
    try:
        manifest = loads_json(data, path)  # never a RecursionError: the depth is checked first
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
    except HostileFileError:
        raise
    except ValueError as exc:
        raise UsageError(f"{path}: not a valid run manifest ({exc}).") from exc
    check_schema_version(manifest.get("schema_version", SCHEMA_VERSION), path)
    return manifest


def read_run_manifest(path: str) -> RunManifest:
    """The manifest at ``path`` (a ``run.json``), typed; empty if there is none (:func:`read_manifest_file`).

    Example:
        >>> read_run_manifest("/nonexistent/run.json").is_empty
        True
    """
    return RunManifest.from_json(read_manifest_file(path))


def check_schema_version(version: object, source: Union[str, os.PathLike[str]]) -> None:
    """Raise :class:`SchemaVersionError` if ``version`` is newer than this reader understands."""
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{source}: written with schema_version={version!r}, but this deviate-cb reads up to "
            f"schema_version={SCHEMA_VERSION}. Upgrade deviate-cb (pip install -U deviate-cb)."
        )


def _dumps(obj: Mapping[str, Any]) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")
