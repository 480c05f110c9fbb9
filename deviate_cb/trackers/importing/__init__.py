"""``deviate import``: runs of MLflow, TensorBoard event files and Lightning's CSVLogger as replicas of the store.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> run = TrackerRun("csv-logs", "logs", "/logs/version_0", "logs", keys={"hparams.lr": "0.1"},
    ...                  names=["val_acc"], steps=[5], values=[0.5])
    >>> out = Path(tempfile.mkdtemp())
    >>> result = import_runs([run], out, base="mnist", group_by=["hparams.lr"])
    >>> [(p.path_name, p.action) for p in result]
    [('experiment=mnist.lr-0.1/variant=imported/replica=0', 'new')]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from deviate_cb.errors import UsageError
from deviate_cb.store.run_directory import check_partition_value
from deviate_cb.trackers.importing.imported import (
    TrackerRun,
    apply_min_step,
    check_group_keys,
    group_name,
    select_metrics,
)
from deviate_cb.trackers.importing.writing import (
    ImportedStore,
    Placement,
    options_digest,
    plan_replicas,
    write_replicas,
)

__all__ = ["DEFAULT_VARIANT", "OWN_TAGS", "Placement", "TrackerRun", "import_runs"]

#: The variant of imported replicas unless ``--variant`` or the run's ``deviate.variant`` tag says which noise they
#: ran with (``algo+impl``, ...).
DEFAULT_VARIANT = "imported"
#: The tags our callback (live) and ``deviate export`` give a run: its experiment and variant in the run store.
OWN_TAGS = ("tags.deviate.experiment", "tags.deviate.variant")


def import_runs(
    runs: Sequence[TrackerRun],
    out: Path,
    *,
    base: str,
    name: Optional[str] = None,
    group_by: Sequence[str] = (),
    variant: Optional[str] = None,
    metrics: Sequence[str] = (),
    seed_key: Optional[str] = None,
    min_step: Optional[int] = None,
    notes: Optional[list[str]] = None,
    store: Optional[ImportedStore] = None,
) -> list[Placement]:
    """Check, then write ``runs`` under ``out``; return what happened to each run (its :class:`Placement`).

    A run's experiment is ``name`` (``--name``), else its ``deviate.experiment`` tag, else ``base`` (the source's
    name); its variant is ``variant``, else its ``deviate.variant`` tag, else :data:`DEFAULT_VARIANT`. A run the
    tracker deleted is imported only where it was before: that replica is marked ``deleted``. A run a replica
    under ``out`` logged to live (its ``tracker_runs``) is that replica already: left out, with a note. ``store``
    is what ``out`` holds, when the caller read it already (:class:`ImportedStore`).

    Raises:
        UsageError: No run, a bad name or key, a completed run without a metric asked for, a run imported
            before into another group, ``out`` not a folder. Nothing is written then.
    """
    if not runs:
        raise UsageError("the source holds no run to import.")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"`--out` must be a folder (the run store). Received: --out {out}, a file.")
    check_partition_value("--name", base if name is None else name)
    if variant is not None:
        check_partition_value("--variant", variant)
    store = store or ImportedStore.read(out)
    known = store.run_ids(runs[0].tracker)
    runs = [run for run in runs if run.status != "deleted" or run.run_id in known]
    live = store.live
    ours = [run for run in runs if (run.tracker, run.run_id) in live]
    if ours and notes is not None:  # counted once: as the replica that logged it
        notes.append(
            f"{len(ours)} run(s) left out: replicas of {out} logged them live, and are them already "
            f"(e.g. {ours[0].label()}: {live[(ours[0].tracker, ours[0].run_id)]})"
        )
    runs = [run for run in runs if (run.tracker, run.run_id) not in live]
    if not runs:
        raise UsageError(
            f"the source holds no run to import (only runs the tracker deleted, never imported here, or runs the "
            f"replicas of {out} logged live). Received: --out {out}."
        )
    keys = check_group_keys("--group-by", group_by, runs)
    if seed_key is not None:
        check_group_keys("--seed-key", [seed_key], runs)
    select_metrics(runs, metrics)
    if min_step is not None and min_step < 0:
        raise UsageError(f"`--min-step` must be a non-negative step. Received: --min-step {min_step}.")
    apply_min_step(runs, min_step)
    bases = [name or _own_tag(run, OWN_TAGS[0]) or base for run in runs]
    variants = [variant or _own_tag(run, OWN_TAGS[1]) or DEFAULT_VARIANT for run in runs]
    tagged = sum(1 for run in runs if (name is None or variant is None) and any(run.keys.get(k) for k in OWN_TAGS))
    if tagged and notes is not None:
        notes.append(
            f"{tagged} run(s) placed by their deviate.experiment/deviate.variant tags (runs deviate-cb replicated or "
            "exported); --name and --variant place them otherwise"
        )
    groups = [group_name(b, keys, run.keys) for b, run in zip(bases, runs, strict=True)]
    options = options_digest(metrics, seed_key, min_step)
    plan = plan_replicas(runs, out, groups=groups, variants=variants, seed_key=seed_key, options=options, store=store)
    write_replicas(plan, out)
    return plan


def _own_tag(run: TrackerRun, key: str) -> Optional[str]:
    """The run's ``deviate.*`` tag ``key`` as a partition value, ``None`` where the run has none.

    Raises:
        UsageError: A tag that cannot be a folder name (a tampered or foreign run): one line naming the run.
    """
    value = run.keys.get(key)
    if not value:
        return None
    try:
        return check_partition_value(key.removeprefix("tags."), value)
    except UsageError as exc:
        raise UsageError(
            f"run {run.label()} has a {key.removeprefix('tags.')} tag that cannot name a folder ({exc}). "
            "Expected: --name and --variant, which place every run whatever its tags."
        ) from None
