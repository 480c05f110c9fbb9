"""Write imported runs as replicas of the run store: planned whole first, then each replica moved in at once.

Example:
    >>> import tempfile
    >>> from deviate_cb.trackers.importing.imported import TrackerRun
    >>> out = Path(tempfile.mkdtemp())
    >>> run = TrackerRun("csv-logs", "logs", "/logs/version_0", "logs", names=["val_acc"], steps=[5], values=[0.5])
    >>> plan = plan_replicas([run], out, groups=["logs"], variants=["imported"], seed_key=None)
    >>> [(p.experiment, p.replica, p.action) for p in plan]
    [('logs', 0, 'new')]
    >>> write_replicas(plan, out)
    >>> [(p.experiment, p.replica, p.action) for p in plan_replicas([run], out, groups=["logs"],
    ...                                                              variants=["imported"], seed_key=None)]
    [('logs', 0, 'unchanged')]
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import UsageError
from deviate_cb.store.atomic import atomic_write
from deviate_cb.store.bounded_read import loads_json
from deviate_cb.store.manifest import ImportRecord
from deviate_cb.store.run_directory import (
    MANIFEST_FILE,
    METRICS_FILE,
    RunDirectory,
    iso_time,
    read_run_manifest,
    run_path,
)
from deviate_cb.trackers.importing.imported import TrackerRun, metric_columns, seed_of

__all__ = [
    "ACTIONS",
    "SOURCE_FIELD",
    "ImportedStore",
    "Placement",
    "options_digest",
    "plan_replicas",
    "write_replicas",
]

#: What an import does with each run.
ACTIONS = ("new", "updated", "unchanged")
#: The manifest field that names where an imported replica came from.
SOURCE_FIELD = "source"
_HIDDEN_PREFIX = ".import-"


@dataclass
class Placement:
    """Where one tracker run goes, and what the import does with it (:data:`ACTIONS`)."""

    run: TrackerRun
    experiment: str
    variant: str
    replica: int
    action: str
    digest: str
    existing: Optional[Path] = None
    seed_key: Optional[str] = None
    options: Optional[str] = None
    #: For an ``unchanged`` run whose listing or options its source does not record yet: the source to record.
    refreshed_source: Optional[dict[str, Any]] = None

    @property
    def path_name(self) -> str:
        return f"experiment={self.experiment}/variant={self.variant}/replica={self.replica}"


@dataclass(frozen=True)
class ImportedStore:
    """What the run store under ``out`` holds of tracker runs, read in one pass over its manifests (an import reads
    it once, before it reads the source).

    Attributes:
        sources: ``(tracker, run id) -> (run directory, its recorded source)`` of every replica an import wrote.
        live: ``(tracker, run id) -> run directory`` of the tracker runs replicas logged to themselves (``run.json``
            ``tracker_runs``): those runs are these replicas already, never to be imported beside them.
    """

    sources: Mapping[tuple[str, str], tuple[Path, Mapping[str, Any]]]
    live: Mapping[tuple[str, str], Path]

    @classmethod
    def read(cls, out: Path) -> ImportedStore:
        """The store under ``out`` (empty where there is none yet)."""
        sources: dict[tuple[str, str], tuple[Path, Mapping[str, Any]]] = {}
        live: dict[tuple[str, str], Path] = {}
        for run_dir in _run_dirs(out):
            try:
                manifest = read_run_manifest(str(run_dir / MANIFEST_FILE))
            except UsageError:
                continue  # not ours to judge here: deviate status names unreadable manifests
            source = manifest.source
            if source is not None and isinstance(source.get("run_id"), str):
                sources[(str(source.get("tracker")), source["run_id"])] = (run_dir, dict(source))
            for link in manifest.tracker_runs or []:
                if isinstance(link, dict) and isinstance(link.get("run_id"), str):
                    live[(str(link.get("tracker")), link["run_id"])] = run_dir
        return cls(sources, live)

    def run_ids(self, tracker: str) -> set[str]:
        """The run ids of ``tracker`` imported into the store."""
        return {run_id for source_tracker, run_id in self.sources if source_tracker == tracker}

    def listings(self, tracker: str, options: str) -> dict[str, str]:
        """``run id -> listing`` recorded by the imports of ``tracker`` made with ``options``
        (:func:`options_digest`): the runs a source need not read again while their listing is the same."""
        found = {}
        for (source_tracker, run_id), (_, source) in self.sources.items():
            listing = source.get("listing")
            if source_tracker == tracker and source.get("options") == options and isinstance(listing, str):
                found[run_id] = listing
        return found


def options_digest(metrics: Sequence[str], seed_key: Optional[str], min_step: Optional[int]) -> str:
    """A hash of the options that change what an import writes of a run (``--metric``, ``--seed-key``,
    ``--min-step``); the grouping options are checked apart (a run is never moved to another group)."""
    return hashlib.sha256(json.dumps([sorted(metrics), seed_key, min_step]).encode()).hexdigest()[:16]


def plan_replicas(
    runs: Sequence[TrackerRun],
    out: Path,
    *,
    groups: Sequence[str],
    variants: Sequence[str],
    seed_key: Optional[str],
    options: Optional[str] = None,
    store: Optional[ImportedStore] = None,
) -> list[Placement]:
    """Where each run goes (``groups[i]`` and ``variants[i]`` are run ``i``'s experiment and variant); nothing is
    written. ``store`` is what ``out`` holds, when read already.

    Raises:
        UsageError: A run imported before into another group.
    """
    known = (store or ImportedStore.read(out)).sources
    taken: dict[Path, set[int]] = {}
    plan: list[Placement] = []
    order = sorted(range(len(runs)), key=lambda i: (runs[i].started or 0.0, runs[i].run_id))
    for i in order:
        run, experiment, variant = runs[i], groups[i], variants[i]
        existing, recorded = known.get((run.tracker, run.run_id), (None, {}))
        if existing is not None:
            where = (existing.parent.parent.name, existing.parent.name)
            if where != (f"experiment={experiment}", f"variant={variant}"):
                raise UsageError(
                    f"run {run.label()} of {run.tracker} was imported before into {'/'.join(where)}, and this import "
                    f"would put it into experiment={experiment}/variant={variant} (another --group-by, --name or "
                    f"--variant, or its deviate.experiment and deviate.variant tags?). Received: --out {out}. "
                    "Expected: the same grouping as before (--name and --variant say it), or another --out."
                )
            replica = int(existing.name.partition("=")[2])
            previous = recorded.get("digest")
            digest = (previous or "") if run.unchanged_since else _digest(run, seed_key)
            action = "unchanged" if run.unchanged_since or previous == digest else "updated"
            placement = Placement(run, experiment, variant, replica, action, digest, existing, seed_key, options)
            if action == "unchanged" and (recorded.get("listing"), recorded.get("options")) != (run.listing, options):
                placement.refreshed_source = {**recorded, "listing": run.listing, "options": options}
            plan.append(placement)
            continue
        if run.unchanged_since:  # a listing recorded for a run no replica holds any more: read it whole next time
            raise UsageError(
                f"run {run.label()} of {run.tracker} was imported into {out} before, and its replica is gone. "
                "Expected: run the same import again (it reads the run whole)."
            )
        digest = _digest(run, seed_key)
        parent = run_path(out, experiment, variant, 0).parent
        used = taken.setdefault(parent, _replica_numbers(parent))
        replica = next(k for k in range(len(used) + 1) if k not in used)
        used.add(replica)
        plan.append(Placement(run, experiment, variant, replica, "new", digest, None, seed_key, options))
    return plan


def write_replicas(plan: Sequence[Placement], out: Path) -> None:
    """Write every ``new`` and ``updated`` placement of ``plan`` (``unchanged`` ones are left alone, but for the
    listing and options of their source, recorded where they were not: the next import need not read them)."""
    for placement in plan:
        if placement.action == "unchanged":
            if placement.refreshed_source is not None and placement.existing is not None:
                RunDirectory(placement.existing).record(ImportRecord(source=placement.refreshed_source))
            continue
        target = run_path(out, placement.experiment, placement.variant, placement.replica)
        parent = target.parent
        parent.mkdir(parents=True, exist_ok=True)
        staging = parent / f"{_HIDDEN_PREFIX}{uuid.uuid4().hex}"
        staging.mkdir()
        try:
            _write_replica(staging, placement)
            aside = None
            if placement.existing is not None and placement.existing.exists():
                aside = parent / f"{_HIDDEN_PREFIX}old-{uuid.uuid4().hex}"
                os.rename(placement.existing, aside)
            os.rename(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)


def _write_replica(folder: Path, placement: Placement) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from deviate_cb.store.footer_summary import SERIES_KEY, with_summary
    from deviate_cb.store.metrics import metrics_schema

    run = placement.run
    columns = metric_columns(run)
    schema = metrics_schema()
    n = len(columns["value"])

    arrays = {
        "seq": pa.array(np.arange(n, dtype=np.int64)),
        "step": pa.array(columns["step"], type=pa.int64()),
        "epoch": pa.array(columns["epoch"], type=pa.float64(), from_pandas=True).cast(pa.int64()),
        "stage": pa.array(columns["stage"], type=pa.string()),
        "scope": pa.array(columns["scope"], type=pa.string()),
        "name": pa.array(columns["name"], type=pa.string()),
        "value": pa.array(columns["value"], type=pa.float64()),
        "finite": pa.array(np.isfinite(columns["value"])),
        "wall_time": pa.array(columns["wall_time"], type=pa.float64(), from_pandas=True),
    }
    table = with_summary(pa.table([arrays[f.name] for f in schema], schema=schema))
    metrics_path = folder / METRICS_FILE
    atomic_write(metrics_path, lambda handle: pq.write_table(table, handle))
    stat = os.stat(metrics_path)
    summary = {
        **loads_json(table.schema.metadata[SERIES_KEY], metrics_path),  # depth-checked, as every footer read
        "file_size": stat.st_size,
        "file_mtime_ns": stat.st_mtime_ns,
    }
    RunDirectory(folder).record(_manifest(placement).with_changes(metrics_summary=summary))


def _manifest(placement: Placement) -> ImportRecord:
    from deviate_cb import __version__

    run = placement.run
    seed, seed_key = seed_of(run, placement.seed_key)
    record = ImportRecord(
        status=run.status,
        experiment=placement.experiment,
        variant=placement.variant,
        replica=placement.replica,
        seed=seed,
        seed_source=seed_key,
        started_at=None if run.started is None else iso_time(run.started),
        ended_at=None if run.ended is None else iso_time(run.ended),
        duration_s=None if run.started is None or run.ended is None else round(run.ended - run.started, 3),
        deviate_version=__version__,
        params=dict(sorted(run.keys.items())),
        source={
            "tracker": run.tracker,
            "uri": run.uri,
            "run_id": run.run_id,
            "experiment": run.experiment,
            "run_name": run.run_name,
            "status": run.tracker_status,
            "imported_at": iso_time(),
            "digest": placement.digest,
            "listing": run.listing,
            "options": placement.options,
        },
    )
    if run.status != "completed":
        said = f"{run.tracker} records this run as {run.tracker_status}" if run.tracker_status else None
        record = record.with_changes(reason=run.reason or said or f"imported as {run.status}")
    return record


def _digest(run: TrackerRun, seed_key: Optional[str]) -> str:
    """What the replica would hold, hashed: equal digests mean a re-import would write the same replica."""
    import numpy as np

    digest = hashlib.sha256()
    head = [
        run.status,
        run.tracker_status,
        run.run_name,
        run.started,
        run.ended,
        run.reason,
        seed_key,
        sorted(run.keys.items()),
        sorted(run.stages.items()),
        sorted(run.scopes.items()),
        list(run.names),
    ]
    digest.update(json.dumps(head, default=str).encode())
    for values, dtype in ((run.steps, np.int64), (run.values, np.float64)):
        digest.update(np.ascontiguousarray(np.asarray(values, dtype=dtype)).tobytes())
    walls = run.wall_times
    digest.update(
        np.asarray(
            [np.nan if w is None else w for w in walls] if not isinstance(walls, np.ndarray) else walls,
            dtype=np.float64,
        ).tobytes()
    )
    return digest.hexdigest()[:32]


def _replica_numbers(variant_dir: Path) -> set[int]:
    try:
        names = os.listdir(variant_dir)
    except (FileNotFoundError, NotADirectoryError):
        return set()
    numbers = set()
    for name in names:
        key, _, number = name.partition("=")
        if key == "replica" and number.isdigit():
            numbers.add(int(number))
    return numbers


def _run_dirs(out: Path) -> list[Path]:
    found = []
    for level_one in _folders(out, "experiment="):
        for level_two in _folders(level_one, "variant="):
            found.extend(_folders(level_two, "replica="))
    return found


def _folders(path: Path, prefix: str) -> list[Path]:
    try:
        with os.scandir(path) as entries:
            return [Path(e.path) for e in entries if e.name.startswith(prefix) and e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []
