"""A study as tracker runs: each replica's identity, tags, params and metric histories, and the study's answers.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from deviate_cb.store.manifest import LaunchEnd, LaunchStart
    >>> from deviate_cb.store.run_directory import RunDirectory, run_path
    >>> root = Path(tempfile.mkdtemp())
    >>> for k, acc in enumerate([0.80, 0.84, 0.82]):
    ...     run = RunDirectory(run_path(root, "mlp", "algo", k))
    ...     _ = run.record(LaunchStart(seed=k, variant="algo", replica=k), LaunchEnd(status="completed"))
    ...     _ = run.metrics().append({"step": [4, 9], "epoch": [0, 1], "stage": ["val"] * 2, "scope": ["epoch"] * 2,
    ...                               "name": ["val_acc"] * 2, "value": [0.5, acc], "wall_time": [1.0, 2.0]})
    >>> study = read_study(root)
    >>> first = study.runs[0]
    >>> first.tags["deviate.variant"], first.tags["deviate.seed"], tracker_status(first.status)
    ('algo', '0', 'FINISHED')
    >>> [(p.step, p.value) for p in first.histories()["val_acc"]]
    [(4, 0.5), (9, 0.8)]
    >>> round(headline_numbers(study.study, "mlp")["val_acc/algo/mean"], 2)
    0.82
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import UsageError
from deviate_cb.report.reading.runs import RunRecord
from deviate_cb.report.study import Study, load
from deviate_cb.store.bounded_read import load_json
from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.run_directory import MANIFEST_FILE, METRICS_FILE, read_run_manifest
from deviate_cb.trackers.export.renaming import fit_value

__all__ = [
    "ExportSummary",
    "Point",
    "ReplicaRun",
    "StudyExport",
    "answers_text",
    "headline_numbers",
    "read_study",
    "tracker_status",
]

_STATUS = {"completed": "FINISHED", "running": "RUNNING", "killed": "KILLED"}
_FINGERPRINT_FILE = "fingerprint.json"
_MAX_VALUE_CHARS = 5000  # tracker param and tag values are bounded (MLflow: 6,000 characters)


@dataclass(frozen=True)
class Point:
    """One recorded value of a series: the global step, the value and its Unix wall time in seconds."""

    step: int
    value: float
    wall_time: float


@dataclass(frozen=True)
class ReplicaRun:
    """One replica of the study as a tracker run.

    Attributes:
        path: The run directory.
        experiment, variant, replica: Its partition values.
        status: Its status as the report reads it (``completed``, ``failed``, ``killed``, ...).
        seed: The seed it ran with, when recorded.
        started_ms, ended_ms: Start and end as Unix milliseconds, when recorded.
        key: Stable identity across exports: a hash of the experiment, variant and replica (where the study lies
            is no part of it: a copied or moved study is the same study).
        version: What this export of it holds: a hash of attempt, start, end, status and the metrics file's size
            and summary (its content, not its time: a copy is the same version).
        tags: ``deviate.*`` tags: experiment, variant, replica, seed, determinism asked and in effect, status,
            the fingerprint's summary (torch, CUDA, device, host), the run directory, ``key`` and ``version``.
        params: The replica's configuration (``run.json`` ``configuration``), seed and the params it was imported
            with (``lr`` of MLflow's ``params.lr``, Lightning's ``hparams.lr``), as text.
        truncated: The keys of ``tags`` and ``params`` whose value was cut (:func:`fit_value`, with a marker).
        linked: ``(tracking URI, run id)`` of the MLflow runs this replica is: the one it was imported from, the
            ones it logged to live (``run.json`` ``tracker_runs``). An export to that URI attaches the study to
            the run instead of copying it.
        legacy_key: The key earlier exports gave it (a hash with the study's path), to find their runs again.
    """

    path: Path
    experiment: str
    variant: str
    replica: str
    status: str
    seed: Optional[int]
    started_ms: Optional[int]
    ended_ms: Optional[int]
    key: str
    version: str
    tags: Mapping[str, str]
    params: Mapping[str, str]
    truncated: tuple[str, ...] = ()
    linked: tuple[tuple[str, str], ...] = ()
    legacy_key: Optional[str] = None

    @property
    def name(self) -> str:
        """The tracker run's name: ``<variant>/replica=<k>``."""
        return f"{self.variant}/replica={self.replica}"

    def histories(self) -> dict[str, list[Point]]:
        """Every recorded series, keyed by the report's metric name (as recorded: a tracker maps it to a name it
        accepts), in recording order.

        Raises:
            UsageError, OSError, ValueError: The metrics file is damaged (corrupt, not Parquet, not a regular file).
        """
        from deviate_cb.report.reading.metrics.names import display_names
        from deviate_cb.store.metrics import MetricsFile

        attempt = _attempt(self.path)
        table = MetricsFile(self.path / METRICS_FILE, attempt=attempt).read()
        if table.num_rows == 0:
            return {}
        rows = table.select(["seq", "step", "stage", "scope", "name", "value", "wall_time"]).to_pylist()
        rows.sort(key=lambda r: r["seq"])
        scopes: dict[tuple[str, str], set[str]] = {}
        for r in rows:
            scopes.setdefault((r["stage"], r["name"]), set()).add(r["scope"])
        names = display_names(scopes)
        out: dict[str, list[Point]] = {}
        for r in rows:
            pair = (r["stage"], r["name"])
            name = names[pair] if len(scopes[pair]) == 1 else f"{names[pair]}/{r['scope']}"
            step = int(r["step"]) if r["step"] is not None else 0
            wall = float(r["wall_time"]) if r["wall_time"] is not None else 0.0
            out.setdefault(name, []).append(Point(step, float(r["value"]), wall))
        return out


@dataclass(frozen=True)
class StudyExport:
    """A study read for export: the report's :class:`~deviate_cb.report.study.Study` and every replica."""

    directory: Path
    study: Study
    runs: tuple[ReplicaRun, ...]

    @property
    def experiments(self) -> list[str]:
        """The experiments of the study, sorted."""
        return sorted({run.experiment for run in self.runs})

    def study_key(self, experiment: str) -> str:
        """Stable identity of the study run of ``experiment``: its name (not where the study lies)."""
        return _digest("study", experiment)

    def legacy_study_key(self, experiment: str) -> str:
        """The study run's key of earlier exports (a hash with the study's path), to find their runs again."""
        return _digest(str(self.directory), experiment)


def read_study(
    directory: os.PathLike[str] | str, *, metrics: Optional[Sequence[str]] = None, effect: Optional[str] = None
) -> StudyExport:
    """Read the study under ``directory`` as ``deviate report`` does, and every replica's tracker facts (a replica
    its tracker deleted after it was imported is left out).

    Raises:
        UsageError: ``directory`` is not a study directory with runs, or ``metrics`` matches nothing.
    """
    path = Path(os.fspath(directory))
    if not path.is_dir():
        raise UsageError(
            f"`DIR` must be a study directory written by deviate-replicate. Received: {os.fspath(directory)!r}, "
            "which is not a directory."
        )
    study = load(path, metrics=metrics, effect=effect)
    base = path.resolve()
    records = sorted((*study.report.completed, *study.report.excluded), key=lambda r: r.sort_key)
    records = [r for r in records if r.status != "deleted"]  # imported, then deleted in its tracker: not sent back
    return StudyExport(base, study, tuple(_replica(base, record) for record in records))


def tracker_status(status: str) -> str:
    """The tracker's run status for a deviate-cb status: only ``completed`` is ``FINISHED``.

    Example:
        >>> [tracker_status(s) for s in ("completed", "killed", "timeout", "incomplete", "running")]
        ['FINISHED', 'KILLED', 'FAILED', 'FAILED', 'RUNNING']
    """
    return _STATUS.get(status, "FAILED")


def headline_numbers(study: Study, experiment: str) -> dict[str, float]:
    """The report's answers for ``experiment`` as numbers keyed ``<metric>/<variant>/<what>``.

    Per metric of interest: each variant's ``n``, ``mean``, ``std``, ``std_ci_low``, ``std_ci_high`` and ``cv``;
    ``<metric>/impl_share`` with ``_ci_low``/``_ci_high`` when the implementation share was measured;
    ``<metric>/runs_needed`` when it could be planned. NaN values are left out.
    """
    out: dict[str, float] = {}
    for headline in study.headlines:
        if headline.experiment != experiment:
            continue
        lines = ([headline.control_line] if headline.control_line is not None else []) + list(headline.noise)
        for line in lines:
            for what in ("n", "mean", "std", "std_ci_low", "std_ci_high", "cv"):
                out[f"{headline.metric}/{line.variant}/{what}"] = float(getattr(line, what))
        share = headline.share
        if share is not None and not share.reason:
            for what, value in (("", share.share), ("_ci_low", share.ci_low), ("_ci_high", share.ci_high)):
                out[f"{headline.metric}/impl_share{what}"] = float(value)
        if headline.runs is not None and headline.runs.runs_per_group is not None:
            out[f"{headline.metric}/runs_needed"] = float(headline.runs.runs_per_group)
    return {key: value for key, value in out.items() if math.isfinite(value)}


@dataclass
class ExportSummary:
    """What an export did: one ``(action, experiment, variant, replica, tracker run id)`` per replica, and the
    parent (study) run of each experiment; ``action`` is ``exported``, ``replaced``, ``unchanged`` or ``linked`` (the
    user's own run tagged as the replica, nothing copied). Also the
    names the tracker refused and that were renamed (``{original: tracker name}``), the keys whose value was cut,
    and the damaged metrics files skipped."""

    replicas: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    parents: dict[str, str] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)
    truncated: set[str] = field(default_factory=set)
    skipped: list[str] = field(default_factory=list)

    def count(self, action: str) -> int:
        return sum(1 for row in self.replicas if row[0] == action)


def answers_text(export: StudyExport, experiment: str) -> str:
    """The report's answers for ``experiment`` in words, as Markdown: a tracker run's description."""
    lines = [f"deviate-cb study `{export.directory}`, experiment `{experiment}`.", ""]
    for headline in export.study.headlines:
        if headline.experiment == experiment:
            lines += [f"**{headline.title()}**", "", *(f"- {s}" for s in headline.sentences), ""]
    return "\n".join(lines)


def _replica(base: Path, record: RunRecord) -> ReplicaRun:
    """The tracker facts of one run, from its manifest and fingerprint (both may be missing)."""
    from deviate_cb.report.reading.runs import switches_on
    from deviate_cb.store.run_directory import unix_time

    manifest = _read_json_manifest(record.path)
    fingerprint = _read_json(record.path / _FINGERPRINT_FILE)
    seed = manifest.seed
    started, ended = manifest.started_at, manifest.ended_at
    started_ms = _ms(unix_time(started)) if started is not None else None
    ended_ms = _ms(unix_time(ended)) if ended is not None else None
    metrics = record.path / METRICS_FILE
    stat = metrics.stat() if metrics.is_file() else None
    key = _digest(record.experiment, record.variant, record.replica)
    summary = {k: v for k, v in (manifest.metrics_summary or {}).items() if k != "file_mtime_ns"}
    version = _digest(
        str(manifest.attempt), str(started), str(ended), record.status, str(stat.st_size if stat else None),
        json.dumps(summary, sort_keys=True, default=str),
    )  # fmt: skip
    requested = (manifest.determinism or {}).get("requested", {})
    asked = requested.get("deterministic") if isinstance(requested, dict) else None
    tags = {
        "deviate.experiment": record.experiment,
        "deviate.variant": record.variant,
        "deviate.replica": record.replica,
        "deviate.seed": "" if seed is None else str(seed),
        "deviate.status": record.status,
        "deviate.determinism": "unknown" if asked is None else str(asked).lower(),
        "deviate.determinism_in_effect": switches_on(manifest) or "none",
        "deviate.run_dir": str(record.path),
        "deviate.key": key,
        "deviate.version": version,
        **_fingerprint_tags(fingerprint),
    }
    if record.error:
        tags["deviate.error"] = record.error
    imported = _imported_keys(manifest)
    tags = {**imported["tags"], **tags}  # ours win over a user's tag of the same name
    params = {**imported["params"], **{f"configuration.{k}": v for k, v in sorted(_configuration(manifest).items())}}
    params["seed"] = tags["deviate.seed"]
    texts = {kind: {k: fit_value(_text(v), _MAX_VALUE_CHARS) for k, v in values.items()}
             for kind, values in (("tags", tags), ("params", params))}  # fmt: skip
    truncated = tuple(sorted(k for values in texts.values() for k, (_, cut) in values.items() if cut))
    return ReplicaRun(
        record.path, record.experiment, record.variant, record.replica, record.status, seed, started_ms, ended_ms,
        key, version, {k: v for k, (v, _) in texts["tags"].items()}, {k: v for k, (v, _) in texts["params"].items()},
        truncated, _linked(manifest), _digest(str(base), record.experiment, record.variant, record.replica),
    )  # fmt: skip


def _imported_keys(manifest: RunManifest) -> dict[str, dict[str, str]]:
    """The params and tags an imported replica came with, by their names in the tracker: ``params.lr`` and
    ``hparams.lr`` are the param ``lr``; ``tags.team`` the tag ``team`` (MLflow's own ``mlflow.*`` tags and our
    ``deviate.*`` ones left out: they describe the old run)."""
    out: dict[str, dict[str, str]] = {"params": {}, "tags": {}}
    for key, value in sorted((manifest.params or {}).items()):
        namespace, _, name = str(key).partition(".")
        if not name or not isinstance(value, str):
            continue
        if namespace in ("params", "hparams"):
            out["params"].setdefault(name, value)
        elif namespace == "tags" and not name.startswith(("mlflow.", "deviate.")):
            out["tags"][name] = value
    return out


def _linked(manifest: RunManifest) -> tuple[tuple[str, str], ...]:
    """``(tracking URI, run id)`` of the MLflow runs the replica is (imported from; logged to live)."""
    found = []
    source = manifest.source or {}
    if (
        source.get("tracker") == "mlflow"
        and isinstance(source.get("uri"), str)
        and isinstance(source.get("run_id"), str)
    ):
        found.append((source["uri"], source["run_id"]))
    for link in manifest.tracker_runs or []:
        if isinstance(link, dict) and link.get("tracker") == "mlflow":
            uri, run_id = link.get("uri"), link.get("run_id")
            if isinstance(uri, str) and isinstance(run_id, str):
                found.append((uri, run_id))
    return tuple(dict.fromkeys(found))


def _fingerprint_tags(fingerprint: Mapping[str, Any]) -> dict[str, str]:
    """The fingerprint's summary: torch, CUDA and cuDNN versions, the device, the host."""

    def get(*path: str) -> Any:
        node: Any = fingerprint
        for part in path:
            node = node.get(part) if isinstance(node, Mapping) else None
        return node

    devices = get("gpus", "devices")
    first = devices[0] if isinstance(devices, list) and devices and isinstance(devices[0], Mapping) else {}
    device = first.get("name") if first else get("cpu", "model")
    found = {
        "deviate.torch": get("packages", "torch") or get("torch", "version"),
        "deviate.cuda": get("cuda", "runtime"),
        "deviate.cudnn": get("cuda", "cudnn"),
        "deviate.device": f"{len(devices)} x {device}" if first else (f"cpu: {device}" if device else None),
        "deviate.host": get("hostname"),
        "deviate.python": get("python", "version"),
    }
    return {k: str(v) for k, v in found.items() if v not in (None, "")}


def _configuration(manifest: RunManifest) -> dict[str, Any]:
    return dict(manifest.configuration or {})


def _attempt(path: Path) -> int:
    attempt = _read_json_manifest(path).attempt
    return attempt if attempt is not None and attempt > 0 else 1


def _read_json_manifest(path: Path) -> RunManifest:
    try:
        return read_run_manifest(str(path / MANIFEST_FILE))
    except (OSError, ValueError):
        return RunManifest.from_json({})


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = load_json(path)  # regular files only: a FIFO planted here would block the export
    except (OSError, ValueError, UsageError):
        return {}
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _ms(seconds: Optional[float]) -> Optional[int]:
    return None if seconds is None else round(seconds * 1000)


def _digest(*parts: str) -> str:
    return hashlib.sha1("\0".join(parts).encode("utf-8")).hexdigest()[:20]
