"""The replication plan: from variant, base seed and ``n`` to one :class:`ReplicaPlan` per replica.

Replica ``k`` runs in ``<out>/experiment=<e>/variant=<v>/replica=<k>`` with the seed the variant table gives
it (``docs/architecture.md``, "Noise variants"). Re-running the same command resumes: a replica whose manifest says
``completed`` is skipped (unless ``force``), everything else (failed, timeout, killed, or ``running`` left by a
launcher that died) runs again. Planning reads manifests only; it creates and deletes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from deviate_cb.context import RunContext
from deviate_cb.errors import SchemaVersionError, UsageError
from deviate_cb.store.run_directory import FINGERPRINT_FILE, MANIFEST_FILE, METRICS_FILE, RunDirectory, run_path
from deviate_cb.variants import get_variant

__all__ = ["SEED_LIMIT", "STALE_FILES", "ReplicaPlan", "clear_previous_attempt", "plan_replicas"]

SEED_LIMIT = 2**32
# What a previous attempt leaves in a run directory; removed before the replica runs again.
STALE_FILES = (
    MANIFEST_FILE,
    METRICS_FILE,
    FINGERPRINT_FILE,
    "timings.parquet",
    "predictions.parquet",
    "stdout.log",
    "stderr.log",
)


@dataclass(frozen=True)
class ReplicaPlan:
    """What to do with one replica.

    Attributes:
        context: The replica's run context (run directory, seed, determinism, trainer spec).
        run: ``True`` to launch it, ``False`` to skip it (already completed).
        previous_status: The status in an existing manifest (``None``: no manifest yet; ``"unreadable"``).
        attempt: 1 for a first run, +1 for each rerun.
    """

    context: RunContext
    run: bool
    previous_status: Optional[str]
    attempt: int

    @property
    def replica(self) -> int:
        return self.context.replica

    @property
    def seed(self) -> int:
        return self.context.seed

    @property
    def run_dir(self) -> Path:
        return self.context.run_dir


def plan_replicas(
    out: Path,
    experiment: str,
    variant: str,
    runs: int,
    base_seed: int = 0,
    *,
    trainer: Optional[str] = None,
    trainer_args: tuple[str, ...] = (),
    keep_project_seeds: bool = False,
    force: bool = False,
) -> list[ReplicaPlan]:
    """Plan ``runs`` replicas of ``variant``, skipping completed ones unless ``force``.

    Raises:
        UsageError: A seed outside ``[0, 2**32)``; a completed replica that was run with another seed
            (resuming would mix seeds; use the same ``--seed``, ``--force`` or another ``--out``).
        SchemaVersionError: A manifest written by a newer deviate-cb.

    Example:
        >>> import tempfile
        >>> plans = plan_replicas(Path(tempfile.mkdtemp()), "mlp", "algo", runs=3, base_seed=10)
        >>> [(p.replica, p.seed, p.context.deterministic, p.run) for p in plans]
        [(0, 10, True, True), (1, 11, True, True), (2, 12, True, True)]
    """
    spec = get_variant(variant)
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise UsageError(f"`--runs` must be a positive integer. Received: --runs={runs!r}.")
    if isinstance(base_seed, bool) or not isinstance(base_seed, int) or not 0 <= base_seed < SEED_LIMIT:
        raise UsageError(f"`--seed` must be an integer in [0, 2**32). Received: --seed={base_seed!r}.")
    if spec.seed_for(base_seed, runs - 1) >= SEED_LIMIT:
        raise UsageError(
            f"`--seed` plus `--runs` must stay below 2**32 (variant {variant} gives replica k the seed --seed + k). "
            f"Received: --seed={base_seed}, --runs={runs}."
        )
    plans = []
    for replica in range(runs):
        seed = spec.seed_for(base_seed, replica)
        ctx = RunContext(
            run_dir=run_path(Path(out), experiment, variant, replica),
            experiment=experiment,
            variant=variant,
            replica=replica,
            seed=seed,
            deterministic=spec.deterministic,
            trainer=trainer,
            trainer_args=trainer_args,
            keep_project_seeds=keep_project_seeds,
        )
        manifest = _read(ctx.run_dir)
        status = _status(manifest)
        if status == "completed" and not force and manifest is not None and manifest.get("seed") != seed:
            raise UsageError(
                f"`--seed` gives replica {replica} seed {seed}, but {ctx.run_dir} completed with seed "
                f"{manifest.get('seed')!r}; resuming would mix seeds. Use the --seed of the first run, --force "
                f"to rerun, or another --out/--experiment. Received: --seed={base_seed}."
            )
        run = force or status != "completed"
        previous = manifest.get("attempt") if manifest else None
        attempt = 1 if manifest is None else (previous if isinstance(previous, int) and previous > 0 else 1)
        if run and manifest is not None:
            attempt += 1
        plans.append(ReplicaPlan(context=ctx, run=run, previous_status=status, attempt=attempt))
    return plans


def clear_previous_attempt(run_dir: Path) -> None:
    """Remove what an earlier attempt left in ``run_dir`` (manifest, metrics, logs, stale temporary files).

    Files the trainer itself wrote there (checkpoints, its own outputs) are left alone.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp()); (d / "stderr.log").write_text("old"); (d / "ckpt.pt").write_text("x")
        3
        1
        >>> clear_previous_attempt(d); sorted(p.name for p in d.iterdir())
        ['ckpt.pt']
    """
    for name in STALE_FILES:
        (run_dir / name).unlink(missing_ok=True)
    for leftover in run_dir.glob(".*.tmp"):  # atomic writes interrupted by a kill
        leftover.unlink(missing_ok=True)


def _status(manifest: Optional[dict[str, Any]]) -> Optional[str]:
    if manifest is None:
        return None
    if not manifest:
        return "unreadable"
    status = manifest.get("status")
    return status if isinstance(status, str) else "unknown"


def _read(run_dir: Path) -> Optional[dict[str, Any]]:
    """The manifest, ``None`` when absent, ``{}`` when unreadable (rerun it); newer schemas raise."""
    run = RunDirectory(run_dir)
    if not run.exists():
        return None
    try:
        return run.read_manifest()
    except SchemaVersionError:
        raise
    except UsageError:
        return {}
