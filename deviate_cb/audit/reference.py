"""A kept ``deviate audit`` recording, read as the reference of ``deviate audit --against DIR``.

Example:
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> root = Path(tempfile.mkdtemp())
    >>> run = root / "experiment=mlp" / "variant=control" / "replica=0"
    >>> run.mkdir(parents=True)
    >>> manifest = {"status": "completed", "host": "gpu-node-3", "configuration": {
    ...     "mode": "trainer", "trainer": "/home/a/train.py:main", "variant": "control", "base_seed": 0,
    ...     "audit_steps": 5}}
    >>> _ = (run / "run.json").write_text(json.dumps(manifest))
    >>> reference = open_reference(str(root), out=str(root.parent / "elsewhere"))
    >>> reference.experiment, reference.variant, reference.steps, [r.replica for r in reference.replicas]
    ('mlp', 'control', 5, [0])
    >>> check_comparable(reference, variant="control", seed=0, steps=20, keras_backend=None)
    Traceback (most recent call last):
    ...
    deviate_cb.errors.UsageError: `--steps` must be at most the 5 step(s) the reference recorded ...
    >>> here = {**manifest["configuration"], "trainer": "/srv/b/train.py:main", "trainer_args": ["--lr", "0.1"]}
    >>> configuration_notes(reference, RunManifest.from_json({"configuration": here}))
    ["trainer arguments none (reference) vs ['--lr', '0.1'] (here)"]
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import UsageError
from deviate_cb.store.audit import AUDIT_FILE
from deviate_cb.store.configuration import CONFIGURATION_LABELS, configuration_of, describe_value
from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.run_directory import MANIFEST_FILE, read_run_manifest

__all__ = [
    "ReferenceRecording",
    "ReferenceReplica",
    "check_comparable",
    "configuration_notes",
    "open_reference",
]

_RECORDING = "the --out of an earlier `deviate audit`: experiment=<name>/variant=<variant>/replica=<k>/"
# Keys of the configuration checked by check_comparable (a usage error), or not compared at all.
_CHECKED = ("variant", "base_seed", "keras_backend", "audit_steps")


@dataclass(frozen=True)
class ReferenceReplica:
    """One replica of the reference, shaped as the launcher's ``ReplicaResult`` for ``read_replicas``.

    Attributes:
        replica: Its index in the recording.
        run_dir: Its run directory.
        status: Its manifest's ``status`` (``unknown`` without one).
        note: Always ``""`` (the launcher's note of a recording made elsewhere is not known).
        duration_s: How long it ran, from its manifest.
        manifest: Its manifest (empty when it has none).
    """

    replica: int
    run_dir: Path
    status: str
    note: str = ""
    duration_s: Optional[float] = None
    manifest: RunManifest = field(default_factory=lambda: RunManifest.from_json({}), repr=False, compare=False)


@dataclass(frozen=True)
class ReferenceRecording:
    """The audited group of a kept recording.

    Attributes:
        path: ``--against`` as given.
        experiment: The group's experiment.
        variant: The group's variant.
        group_dir: ``<DIR>/experiment=<e>/variant=<v>``.
        replicas: Its replicas, by index.
        configuration: The launcher's ``configuration`` of its first replica that records one (``{}``: none).
        steps: The training steps it was asked to audit (``None``: not recorded).
        host: The host it ran on (its first replica's ``host``).
    """

    path: str
    experiment: str
    variant: str
    group_dir: Path
    replicas: tuple[ReferenceReplica, ...]
    configuration: Mapping[str, Any]
    steps: Optional[int]
    host: Optional[str]

    @property
    def recorded(self) -> list[ReferenceReplica]:
        """The replicas that left an audit record."""
        return [r for r in self.replicas if (r.run_dir / AUDIT_FILE).is_file()]

    def unusable(self) -> str:
        """Why nothing can be compared with this recording (no replica left an audit record); ``""`` otherwise."""
        if self.recorded:
            return ""
        ended = "; ".join(f"replica {r.replica} {_ending(r.manifest, r.status)}" for r in self.replicas)
        return (
            f"nothing to compare: the reference {self.group_dir} holds no audit record ({ended}); record it "
            "again with `deviate audit --out DIR`"
        )


def open_reference(
    path: str, *, out: str, experiment: Optional[str] = None, variant: Optional[str] = None
) -> ReferenceRecording:
    """The audited group of the recording at ``path``; see docs/design/audit.md.

    ``experiment`` and ``variant`` pick the group when the recording holds several.

    Raises:
        UsageError: ``path`` is missing or not a directory, holds no audit records, overlaps ``out``, or holds
            several audited groups and ``experiment`` (then ``variant``) does not pick one.
    """
    root = Path(path)
    if not root.exists():
        raise UsageError(
            f"`--against` must be a kept recording ({_RECORDING}). Received: --against={path} (no such directory)."
        )
    if not root.is_dir():
        raise UsageError(
            f"`--against` must be a kept recording ({_RECORDING}). Received: --against={path} (not a directory)."
        )
    here, there = Path(out).resolve(), root.resolve()
    if here == there or there in here.parents or here in there.parents:
        raise UsageError(
            "`--out` must be outside the `--against` recording and not hold it: the audit reruns its replicas into "
            f"--out, which would replace the reference's records. Received: --out={out}, --against={path}."
        )
    groups = _groups(root)
    audited = {key: replicas for key, replicas in groups.items() if any(_audited(r) for r in replicas)}
    if not audited:
        found = f"runs of {', '.join(_names(groups))} but no audit record" if groups else "no run"
        raise UsageError(
            f"`--against` must be a kept recording ({_RECORDING}, each with its audit.parquet or an audit in its "
            f"run.json). Received: --against={path}, which holds {found}."
        )
    chosen = {k: v for k, v in audited.items() if experiment is None or k[0] == experiment}
    if not chosen:
        raise UsageError(
            f"`--experiment` must name an audited group of the recording: {', '.join(_names(audited))}. "
            f"Received: --experiment={experiment}."
        )
    if len(chosen) > 1 and variant is not None and any(k[1] == variant for k in chosen):
        chosen = {k: v for k, v in chosen.items() if k[1] == variant}
    if len(chosen) > 1:
        raise UsageError(
            f"`--experiment` must pick one of the recording's audited groups: {', '.join(_names(chosen))}. "
            f"Received: {'none' if experiment is None else f'--experiment={experiment}'}."
        )
    (name, group_variant), replicas = next(iter(chosen.items()))
    configuration: Mapping[str, Any] = next(
        (c for c in (configuration_of(r.manifest) for r in replicas) if c is not None), {}
    )
    steps = configuration.get("audit_steps")
    if not isinstance(steps, int):
        recorded = [r.manifest.audit for r in replicas]
        steps = next((a["steps"] for a in recorded if a is not None and isinstance(a.get("steps"), int)), None)
    host = next((r.manifest.host for r in replicas if r.manifest.host is not None), None)
    group_dir = replicas[0].run_dir.parent
    return ReferenceRecording(path, name, group_variant, group_dir, tuple(replicas), configuration, steps, host)


def check_comparable(
    reference: ReferenceRecording, *, variant: str, seed: int, steps: int, keras_backend: Optional[str]
) -> None:
    """Refuse what makes the recording incomparable with the audit asked, before anything runs.

    Raises:
        UsageError: Another variant, base seed or Keras backend than the reference's, or more ``steps`` than
            it audited.
    """
    where = f"the reference {reference.group_dir}"
    if variant != reference.variant:
        raise UsageError(
            f"`--variant` must be {reference.variant}, as {where} was recorded. Received: --variant={variant}."
        )
    base_seed = reference.configuration.get("base_seed")
    if isinstance(base_seed, int) and base_seed != seed:
        raise UsageError(f"`--seed` must be {base_seed}, as {where} was recorded. Received: --seed={seed}.")
    backend = reference.configuration.get("keras_backend")
    if "keras_backend" in reference.configuration and backend != keras_backend:
        raise UsageError(
            f"`--keras-backend` must be {backend or 'left out'}, as {where} was recorded. "
            f"Received: --keras-backend={keras_backend or '(none)'}."
        )
    if reference.steps is not None and steps > reference.steps:
        raise UsageError(
            f"`--steps` must be at most the {reference.steps} step(s) the reference recorded ({where}). "
            f"Received: --steps={steps}."
        )


def configuration_notes(reference: ReferenceRecording, here: RunManifest) -> list[str]:
    """What differs between the reference's configuration and the one a manifest ``here`` records, one phrase each
    (``"trainer arguments none (reference) vs ['--lr', '0.1'] (here)"``), leaving out what
    :func:`check_comparable` checked and the folders of the trainer's file and of the command's paths (they
    differ from machine to machine); ``[]`` when either records no configuration."""
    mine = configuration_of(here)
    if not reference.configuration or mine is None:
        return []
    notes = []
    for key, label in CONFIGURATION_LABELS.items():
        if key in _CHECKED or (key not in reference.configuration and key not in mine):
            continue
        theirs, ours = _portable(reference.configuration.get(key)), _portable(mine.get(key))
        if (theirs or None) != (ours or None):
            notes.append(f"{label} {describe_value(theirs)} (reference) vs {describe_value(ours)} (here)")
    return notes


def _portable(value: Any) -> Any:
    """A path-like configuration value without its folders (``/home/a/train.py:main`` -> ``train.py:main``)."""
    if isinstance(value, str):
        return value.rsplit("/", 1)[-1] if "/" in value else value
    if isinstance(value, (list, tuple)):
        return [_portable(item) for item in value]
    return value


def _groups(root: Path) -> dict[tuple[str, str], list[ReferenceReplica]]:
    """Every group of ``root`` with its replicas (those with a manifest or an audit record)."""
    if root.name.startswith("variant=") and root.parent.name.startswith("experiment="):
        variants = [root]
    elif root.name.startswith("experiment="):
        variants = sorted(p for p in root.glob("variant=*") if p.is_dir())
    else:
        variants = sorted(p for p in root.glob("experiment=*/variant=*") if p.is_dir())
    groups: dict[tuple[str, str], list[ReferenceReplica]] = {}
    for folder in variants:
        replicas = []
        for run in folder.glob("replica=*"):
            index = run.name.split("=", 1)[1]
            if not index.isdigit() or not run.is_dir():
                continue
            if not (run / MANIFEST_FILE).is_file() and not (run / AUDIT_FILE).is_file():
                continue
            manifest = read_run_manifest(os.path.join(run, MANIFEST_FILE))
            status = manifest.status if manifest.status is not None else "unknown"
            duration = float(manifest.duration_s) if manifest.duration_s is not None else None
            replicas.append(ReferenceReplica(int(index), run, status, "", duration, manifest))
        if replicas:
            key = (folder.parent.name.split("=", 1)[1], folder.name.split("=", 1)[1])
            groups[key] = sorted(replicas, key=lambda r: r.replica)
    return groups


def _audited(replica: ReferenceReplica) -> bool:
    """Whether a replica belongs to an audit: it has a record, its manifest an ``audit``, or audited steps."""
    if (replica.run_dir / AUDIT_FILE).is_file() or replica.manifest.audit is not None:
        return True
    configuration = configuration_of(replica.manifest) or {}
    return isinstance(configuration.get("audit_steps"), int)


def _names(groups: Mapping[tuple[str, str], Any]) -> list[str]:
    return [f"experiment={e} variant={v}" for e, v in sorted(groups)]


def _ending(manifest: RunManifest, status: str) -> str:
    """How a replica of the recording ended, from its manifest, in a few words."""
    for text in (manifest.exception, manifest.reason):
        if text is not None and text.strip():
            return f"{status}: {' '.join(text.split())[:200]}"
    return status
