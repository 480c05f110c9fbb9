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
from deviate_cb.trackers.importing.writing import Placement, plan_replicas, write_replicas

__all__ = ["DEFAULT_VARIANT", "Placement", "TrackerRun", "import_runs"]

#: The variant of imported replicas unless ``--variant`` says which noise they ran with (``algo+impl``, ...).
DEFAULT_VARIANT = "imported"


def import_runs(
    runs: Sequence[TrackerRun],
    out: Path,
    *,
    base: str,
    group_by: Sequence[str] = (),
    variant: str = DEFAULT_VARIANT,
    metrics: Sequence[str] = (),
    seed_key: Optional[str] = None,
    min_step: Optional[int] = None,
) -> list[Placement]:
    """Check, then write ``runs`` under ``out``; return what happened to each run (its :class:`Placement`).

    Raises:
        UsageError: No run, a bad name or key, a completed run without a metric asked for, a run imported
            before into another group, ``out`` not a folder. Nothing is written then.
    """
    if not runs:
        raise UsageError("the source holds no run to import.")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"`--out` must be a folder (the run store). Received: --out {out}, a file.")
    check_partition_value("--name", base)
    check_partition_value("--variant", variant)
    keys = check_group_keys("--group-by", group_by, runs)
    if seed_key is not None:
        check_group_keys("--seed-key", [seed_key], runs)
    select_metrics(runs, metrics)
    if min_step is not None and min_step < 0:
        raise UsageError(f"`--min-step` must be a non-negative step. Received: --min-step {min_step}.")
    apply_min_step(runs, min_step)
    groups = [group_name(base, keys, run.keys) for run in runs]
    plan = plan_replicas(runs, out, groups=groups, variant=variant, seed_key=seed_key)
    write_replicas(plan, out)
    return plan
