"""The typed manifest: ``run.json`` read as a :class:`RunManifest`, each field its documented JSON type.

Example:
    >>> manifest = RunManifest.from_json({"status": "completed", "seed": "7", "mine": 1, "schema_version": 1})
    >>> manifest.status, manifest.seed, manifest.malformed, manifest.extra
    ('completed', None, ('seed',), {'mine': 1})
    >>> manifest.to_json() == {"status": "completed", "seed": "7", "mine": 1, "schema_version": 1}
    True
    >>> from deviate_cb.store.manifest.sections import LaunchEnd
    >>> manifest.section(LaunchEnd).status
    'completed'
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, TypeVar, Union

from deviate_cb.store.manifest import sections
from deviate_cb.store.manifest.sections import ManifestSection

__all__ = ["RunManifest"]

JsonObject = dict[str, Any]
JsonList = list[Any]
Section = TypeVar("Section", bound=ManifestSection)


@dataclass(frozen=True)
class RunManifest:
    """A replica's ``run.json`` as read: every field the writers record (:mod:`deviate_cb.store.manifest`),
    ``None`` when absent or not of its documented JSON type (a tampered or foreign store: such fields are named in
    ``malformed``); fields this version does not model are kept in ``extra``. :meth:`to_json` gives back exactly
    what was read.

    Attributes:
        schema_version: The manifest's ``schema_version`` (this version's when it records none).
        extra: Fields no writer of this version records, as read.
        malformed: The modelled fields whose value was not of their type (read as ``None``).
    """

    # LaunchStart
    status: Optional[str] = None
    experiment: Optional[str] = None
    variant: Optional[str] = None
    replica: Optional[int] = None
    seed: Optional[int] = None
    base_seed: Optional[int] = None
    hash_seed: Optional[int] = None
    deterministic: Union[bool, str, None] = None
    mode: Optional[str] = None
    trainer: Optional[str] = None
    trainer_args: Optional[JsonList] = None
    command: Optional[JsonList] = None
    command_run: Optional[JsonList] = None
    keep_project_seeds: Optional[bool] = None
    keep_project_determinism: Optional[bool] = None
    configuration: Optional[JsonObject] = None
    argv: Optional[JsonList] = None
    launch_dir: Optional[str] = None
    started_at: Optional[str] = None
    host: Optional[str] = None
    pid: Optional[int] = None
    launcher_pid: Optional[int] = None
    deviate_version: Optional[str] = None
    cuda_visible_devices: Optional[str] = None
    backend: Optional[str] = None
    slot: Optional[int] = None
    gpu: Optional[str] = None
    attempt: Optional[int] = None
    timeout_s: Optional[float] = None
    isolate: Optional[bool] = None
    workdir: Optional[str] = None
    keras_backend: Optional[str] = None
    cpu_count: Optional[int] = None
    cpus_usable: Optional[int] = None
    load_avg_start: Optional[JsonList] = None
    slurm_job_id: Optional[str] = None
    # ReplicaRecord
    bootstrap: Optional[JsonList] = None
    warm: Optional[JsonObject] = None
    seeding: Optional[JsonObject] = None
    determinism_calls: Optional[JsonObject] = None
    logger_versions: Optional[JsonObject] = None
    pid_start: Optional[int] = None
    python: Optional[str] = None
    trainer_error: Optional[str] = None
    trainer_end: Optional[str] = None
    exception: Optional[str] = None
    final_metrics: Optional[JsonList] = None
    determinism: Optional[JsonObject] = None
    outside_writes: Optional[JsonObject] = None
    outside_reads: Optional[JsonList] = None
    # CaptureRecord
    framework: Optional[str] = None
    callback: Optional[JsonObject] = None
    metrics_summary: Optional[JsonObject] = None
    fit: Optional[str] = None
    fit_steps: Optional[JsonObject] = None
    problems: Optional[JsonList] = None
    tracker_runs: Optional[JsonList] = None
    audit: Optional[JsonObject] = None
    audit_stopped: Optional[JsonObject] = None
    resume: Optional[JsonObject] = None
    seed_source: Optional[str] = None
    seed_note: Optional[str] = None
    ended_at: Optional[str] = None
    # StabilityRecord
    predictions: Optional[JsonObject] = None
    weights: Optional[JsonObject] = None
    # LaunchEnd
    exit_code: Optional[int] = None
    signal: Optional[str] = None
    duration_s: Optional[float] = None
    start_mode: Optional[str] = None
    cold_reason: Optional[str] = None
    warm_lost: Optional[str] = None
    load_avg_end: Optional[JsonList] = None
    error: Optional[str] = None
    reason: Optional[str] = None
    slurm_state: Optional[str] = None
    ray_error: Optional[str] = None
    injection: Optional[str] = None
    injection_note: Optional[str] = None
    output_metrics: Optional[JsonList] = None
    output_metrics_decimals: Optional[JsonObject] = None
    output_metrics_missing: Optional[JsonList] = None
    leftovers_stopped: Optional[int] = None
    survivors: Optional[JsonList] = None
    # ImportRecord
    source: Optional[JsonObject] = None
    params: Optional[JsonObject] = None
    # BenchRecord
    end_time: Optional[str] = None
    bench: Optional[JsonObject] = None

    schema_version: int = 1
    extra: Mapping[str, Any] = field(default_factory=dict)
    malformed: tuple[str, ...] = ()
    _json: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunManifest:
        """Read a manifest's JSON object (``{}``: no manifest yet, :attr:`is_empty`)."""
        values: dict[str, Any] = {}
        malformed = []
        for name, check in _CHECKS.items():
            if name in data:
                value = data[name]
                if value is None or check(value):
                    values[name] = value
                else:
                    malformed.append(name)
        version = data.get("schema_version")
        return cls(
            **values,
            schema_version=version if isinstance(version, int) and not isinstance(version, bool) else 1,
            extra={k: v for k, v in data.items() if k not in _CHECKS and k != "schema_version"},
            malformed=tuple(malformed),
            _json=dict(data),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object this manifest was read from (a copy)."""
        return dict(self._json)

    @property
    def is_empty(self) -> bool:
        """Nothing recorded yet (no ``run.json``, or an empty one)."""
        return not self._json

    def recorded(self, name: str) -> bool:
        """Whether the field ``name`` is in the manifest (``null`` included), as opposed to absent."""
        if name not in _CHECKS:
            raise ValueError(f"`name` must be a field of RunManifest. Received: name={name!r}.")
        return name in self._json

    def section(self, kind: type[Section]) -> Section:
        """The fields of writer section ``kind`` (:data:`~deviate_cb.store.manifest.SECTIONS`) as read;
        absent ones are ``None``."""
        return kind(**{f.name: getattr(self, f.name) for f in dataclasses.fields(kind)})


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_a(value: object, kind: type) -> bool:
    return isinstance(value, kind)


def _check_of(hint: object) -> Callable[[object], bool]:
    """The JSON type check of a field's ``Optional[...]`` hint."""
    kinds = [kind for kind in typing.get_args(hint) if kind is not type(None)]
    checks: list[Callable[[object], bool]] = []
    for kind in kinds:
        origin = typing.get_origin(kind) or kind
        if origin is int:
            checks.append(_is_int)
        elif origin is float:
            checks.append(_is_number)
        elif origin in (str, bool, list, dict):
            checks.append(functools.partial(_is_a, kind=origin))
        else:  # pragma: no cover - a field type this module does not know is a programming error
            raise TypeError(f"RunManifest cannot check a field of type {kind!r}.")
    return lambda value: any(check(value) for check in checks)


def _checks() -> dict[str, Callable[[object], bool]]:
    hints = typing.get_type_hints(RunManifest, {**vars(sections), **globals()})
    own = ("schema_version", "extra", "malformed", "_json")
    names = [f.name for f in dataclasses.fields(RunManifest) if f.name not in own]
    return {name: _check_of(hints[name]) for name in names}


_CHECKS = _checks()
