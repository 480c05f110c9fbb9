"""What each writer records in ``run.json``: one frozen section per writer, only the fields it was given.

Example:
    >>> LaunchEnd(status="failed", exit_code=None).fields()
    {'status': 'failed', 'exit_code': None}
    >>> LaunchEnd(status="failed").with_changes(reason="exited with code 1").fields()["reason"]
    'exited with code 1'
    >>> LaunchEnd(status="failed", exit_code=1).merged(LaunchEnd(status="completed")).fields()
    {'status': 'completed', 'exit_code': 1}
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional, Union

__all__ = [
    "SECTIONS",
    "UNSET",
    "BenchRecord",
    "CaptureRecord",
    "ImportRecord",
    "LaunchEnd",
    "LaunchStart",
    "ManifestSection",
    "ReplicaRecord",
    "StabilityRecord",
]

JsonObject = dict[str, Any]
JsonList = list[Any]


class _Unset:
    """The default of every section field: left out of the write (``None`` is written as JSON ``null``)."""

    def __repr__(self) -> str:
        return "UNSET"


# Typed `Any` so that a field reads as its own type (`Optional[int] = UNSET`) to type checkers.
UNSET: Any = _Unset()


@dataclass(frozen=True)
class ManifestSection:
    """A writer's part of ``run.json``: the fields given when it was made (the others are ``UNSET``)."""

    def fields(self) -> dict[str, Any]:
        """The fields to merge into ``run.json``, in declaration order, ``UNSET`` ones left out."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not UNSET}

    def with_changes(self, **changes: Any) -> Any:
        """A copy with ``changes`` (section fields: anything else is a ``TypeError``)."""
        return dataclasses.replace(self, **changes)

    def merged(self, other: ManifestSection) -> Any:
        """A copy with the fields ``other`` was given replacing these (its ``UNSET`` ones leave these as they are)."""
        return dataclasses.replace(self, **other.fields())

    def __bool__(self) -> bool:
        return bool(self.fields())


@dataclass(frozen=True)
class LaunchStart(ManifestSection):
    """The launcher's record before a replica starts (``deviate_cb.launch.records.start_fields``), and the node's
    own values a Slurm or Ray task writes over them (``started_at``, ``host``, ``cuda_visible_devices``, ...)."""

    status: Optional[str] = UNSET
    experiment: Optional[str] = UNSET
    variant: Optional[str] = UNSET
    replica: Optional[int] = UNSET
    seed: Optional[int] = UNSET
    base_seed: Optional[int] = UNSET
    hash_seed: Optional[int] = UNSET
    deterministic: Union[bool, str, None] = UNSET
    mode: Optional[str] = UNSET
    trainer: Optional[str] = UNSET
    trainer_args: Optional[JsonList] = UNSET
    command: Optional[JsonList] = UNSET
    command_run: Optional[JsonList] = UNSET
    keep_project_seeds: Optional[bool] = UNSET
    keep_project_determinism: Optional[bool] = UNSET
    configuration: Optional[JsonObject] = UNSET
    argv: Optional[JsonList] = UNSET
    launch_dir: Optional[str] = UNSET
    started_at: Optional[str] = UNSET
    host: Optional[str] = UNSET
    launcher_pid: Optional[int] = UNSET
    deviate_version: Optional[str] = UNSET
    cuda_visible_devices: Optional[str] = UNSET
    backend: Optional[str] = UNSET
    slot: Optional[int] = UNSET
    gpu: Optional[str] = UNSET
    attempt: Optional[int] = UNSET
    timeout_s: Optional[float] = UNSET
    isolate: Optional[bool] = UNSET
    workdir: Optional[str] = UNSET
    keras_backend: Optional[str] = UNSET
    cpu_count: Optional[int] = UNSET
    cpus_usable: Optional[int] = UNSET
    load_avg_start: Optional[JsonList] = UNSET
    slurm_job_id: Optional[str] = UNSET


@dataclass(frozen=True)
class ReplicaRecord(ManifestSection):
    """What the replica's own processes record: the bootstrap (``deviate_cb.launch.replica.bootstrap``) and the
    ``--trainer`` child (``deviate_cb.launch.replica.child``)."""

    bootstrap: Optional[JsonList] = UNSET
    warm: Optional[JsonObject] = UNSET
    seeding: Optional[JsonObject] = UNSET
    determinism_calls: Optional[JsonObject] = UNSET
    logger_versions: Optional[JsonObject] = UNSET
    pid: Optional[int] = UNSET
    pid_start: Optional[int] = UNSET
    python: Optional[str] = UNSET
    trainer_error: Optional[str] = UNSET
    trainer_end: Optional[str] = UNSET
    exception: Optional[str] = UNSET
    final_metrics: Optional[JsonList] = UNSET
    determinism: Optional[JsonObject] = UNSET
    outside_writes: Optional[JsonObject] = UNSET
    outside_reads: Optional[JsonList] = UNSET


@dataclass(frozen=True)
class CaptureRecord(ManifestSection):
    """The capture session's record (``deviate_cb.capture.session.RunSession``, its guard, the audit's recording);
    a standalone run (no launcher) also records who it is and how it ended."""

    framework: Optional[str] = UNSET
    callback: Optional[JsonObject] = UNSET
    determinism: Optional[JsonObject] = UNSET
    metrics_summary: Optional[JsonObject] = UNSET
    exception: Optional[str] = UNSET
    fit: Optional[str] = UNSET
    fit_steps: Optional[JsonObject] = UNSET
    problems: Optional[JsonList] = UNSET
    tracker_runs: Optional[JsonList] = UNSET
    audit: Optional[JsonObject] = UNSET
    audit_stopped: Optional[JsonObject] = UNSET
    resume: Optional[JsonObject] = UNSET
    status: Optional[str] = UNSET
    experiment: Optional[str] = UNSET
    variant: Optional[str] = UNSET
    replica: Optional[int] = UNSET
    seed: Optional[int] = UNSET
    seed_source: Optional[str] = UNSET
    seed_note: Optional[str] = UNSET
    deterministic: Union[bool, str, None] = UNSET
    argv: Optional[JsonList] = UNSET
    host: Optional[str] = UNSET
    pid: Optional[int] = UNSET
    started_at: Optional[str] = UNSET
    ended_at: Optional[str] = UNSET


@dataclass(frozen=True)
class StabilityRecord(ManifestSection):
    """The stability writers' blocks (``deviate_cb.store.predictions``, ``deviate_cb.store.weights``)."""

    predictions: Optional[JsonObject] = UNSET
    weights: Optional[JsonObject] = UNSET


@dataclass(frozen=True)
class LaunchEnd(ManifestSection):
    """The record after a replica ended: the launcher's (``deviate_cb.launch.records.end_fields``), a Slurm or Ray
    task's on its node, the backend's own values, and a run settled as read (``deviate_cb.store.settling``)."""

    status: Optional[str] = UNSET
    exit_code: Optional[int] = UNSET
    signal: Optional[str] = UNSET
    ended_at: Optional[str] = UNSET
    duration_s: Optional[float] = UNSET
    pid: Optional[int] = UNSET
    start_mode: Optional[str] = UNSET
    cold_reason: Optional[str] = UNSET
    warm_lost: Optional[str] = UNSET
    load_avg_end: Optional[JsonList] = UNSET
    error: Optional[str] = UNSET
    reason: Optional[str] = UNSET
    exception: Optional[str] = UNSET
    final_metrics: Optional[JsonList] = UNSET
    slurm_job_id: Optional[str] = UNSET
    slurm_state: Optional[str] = UNSET
    ray_error: Optional[str] = UNSET
    injection: Optional[str] = UNSET
    injection_note: Optional[str] = UNSET
    output_metrics: Optional[JsonList] = UNSET
    output_metrics_decimals: Optional[JsonObject] = UNSET
    output_metrics_missing: Optional[JsonList] = UNSET
    leftovers_stopped: Optional[int] = UNSET
    survivors: Optional[JsonList] = UNSET


@dataclass(frozen=True)
class ImportRecord(ManifestSection):
    """A replica ``deviate import`` wrote from a tracker (``deviate_cb.trackers.importing.writing``)."""

    status: Optional[str] = UNSET
    experiment: Optional[str] = UNSET
    variant: Optional[str] = UNSET
    replica: Optional[int] = UNSET
    seed: Optional[int] = UNSET
    seed_source: Optional[str] = UNSET
    started_at: Optional[str] = UNSET
    ended_at: Optional[str] = UNSET
    duration_s: Optional[float] = UNSET
    deviate_version: Optional[str] = UNSET
    metrics_summary: Optional[JsonObject] = UNSET
    reason: Optional[str] = UNSET
    source: Optional[JsonObject] = UNSET
    params: Optional[JsonObject] = UNSET


@dataclass(frozen=True)
class BenchRecord(ManifestSection):
    """The manifest ``deviate bench --out`` writes (``deviate_cb.bench.results.write_results``)."""

    status: Optional[str] = UNSET
    experiment: Optional[str] = UNSET
    variant: Optional[str] = UNSET
    replica: Optional[int] = UNSET
    seed: Optional[int] = UNSET
    argv: Optional[JsonList] = UNSET
    end_time: Optional[str] = UNSET
    bench: Optional[JsonObject] = UNSET


SECTIONS: tuple[type[ManifestSection], ...] = (
    LaunchStart,
    ReplicaRecord,
    CaptureRecord,
    StabilityRecord,
    LaunchEnd,
    ImportRecord,
    BenchRecord,
)
