"""The replication plan: from variant, base seed and ``n`` to one :class:`ReplicaPlan` per replica.

Replica ``k`` runs in ``<out>/experiment=<e>/variant=<v>/replica=<k>`` with the seed the variant table gives
it (``docs/architecture.md``, "Noise variants"). Re-running the same command resumes: a replica whose manifest says
``completed`` is skipped (unless ``force``), everything else (failed, timeout, killed, or ``running`` left by a
launcher that died) runs again, in an empty run directory: :func:`clear_previous_attempt` moves what the earlier
attempt left into ``.attempts/<n>/``. Planning reads manifests only; it creates, moves and deletes nothing, and
refuses a symbolic link (or a file) where the store expects its own directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from deviate_cb.context import RunContext
from deviate_cb.errors import SchemaVersionError, UsageError
from deviate_cb.launch.outdir import check_store_path
from deviate_cb.store.parts import attempt_number
from deviate_cb.store.run_directory import RunDirectory, run_path
from deviate_cb.variants import get_variant

__all__ = ["ATTEMPTS_DIR", "SEED_LIMIT", "ReplicaPlan", "clear_previous_attempt", "plan_replicas"]

SEED_LIMIT = 2**32
# Where a rerun moves everything an earlier attempt left in the run directory: <replica dir>/.attempts/<n>/.
# A dot-folder, so pyarrow.dataset, the run finder and every reader of the store skip it.
ATTEMPTS_DIR = ".attempts"


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
            (resuming would mix seeds; use the same ``--seed``, ``--force`` or another ``--out``); a symbolic
            link or a file where an experiment, variant or replica directory (or its ``.attempts``) belongs.
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
    variant_dir = run_path(Path(out), experiment, variant, 0).parent
    check_store_path(variant_dir.parent, "an experiment directory", str(out))
    check_store_path(variant_dir, "a variant directory", str(out))
    for replica in range(runs):
        seed = spec.seed_for(base_seed, replica)
        run_dir = run_path(Path(out), experiment, variant, replica)
        check_store_path(run_dir, "a replica directory", str(out))
        check_store_path(run_dir / ATTEMPTS_DIR, "the folder of earlier attempts", str(out))
        ctx = RunContext(
            run_dir=run_dir,
            experiment=experiment,
            variant=variant,
            replica=replica,
            seed=seed,
            deterministic=spec.deterministic,
            trainer=trainer,
            trainer_args=trainer_args,
            keep_project_seeds=keep_project_seeds,
            hash_seed=base_seed,  # one PYTHONHASHSEED per study: warm-start templates fix it when they start
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
        attempt = 1 if manifest is None else (attempt_number(manifest.get("attempt")) or 1)
        if run and manifest is not None:
            attempt += 1
        plans.append(ReplicaPlan(context=ctx, run=run, previous_status=status, attempt=attempt))
    return plans


def clear_previous_attempt(run_dir: Path) -> Optional[Path]:
    """Move everything an earlier attempt left in ``run_dir`` into ``run_dir/.attempts/<n>/``; return that folder.

    The new attempt starts from an empty directory (no stale weights, checkpoints or logs reach its report),
    and nothing is deleted: the manifest, metrics, logs, weights and whatever the project wrote (checkpoints,
    ``lightning_logs/``, ``outputs/``) are kept for the user. ``n`` is the earlier attempt's number from its
    manifest, or the next free number when the manifest has none or that folder exists. Returns ``None`` when
    the directory held nothing but ``.attempts``.

    Raises:
        UsageError: ``run_dir`` or its ``.attempts`` is a symbolic link, or ``.attempts`` is a file (nothing moved).

    Example:
        >>> import json, tempfile
        >>> d = Path(tempfile.mkdtemp()); (d / "run.json").write_text(json.dumps({"attempt": 2}))
        14
        >>> (d / "ckpt.pt").write_text("x")
        1
        >>> clear_previous_attempt(d).relative_to(d).as_posix(), sorted(p.name for p in d.iterdir())
        ('.attempts/2', ['.attempts'])
        >>> sorted(p.name for p in (d / ".attempts" / "2").iterdir())
        ['ckpt.pt', 'run.json']
    """
    run_dir = Path(run_dir)
    check_store_path(run_dir, "a replica directory", str(run_dir.parent.parent.parent))
    attempts = run_dir / ATTEMPTS_DIR
    check_store_path(attempts, "the folder of earlier attempts", str(run_dir.parent.parent.parent))
    leftovers = [entry for entry in run_dir.iterdir() if entry.name != ATTEMPTS_DIR]
    if not leftovers:
        return None
    attempts.mkdir(exist_ok=True)
    number = _previous_attempt(run_dir)
    while True:
        if number is None or (attempts / str(number)).exists():
            taken = [int(p.name) for p in attempts.iterdir() if p.name.isascii() and p.name.isdecimal()]
            number = 1 + max(taken, default=0)
        folder = attempts / str(number)
        try:
            folder.mkdir()
            break
        except FileExistsError:  # taken meanwhile: the next free one
            number = None
    for entry in leftovers:
        os.rename(entry, folder / entry.name)  # a link is moved as the link: nothing outside is touched
    return folder


def _previous_attempt(run_dir: Path) -> Optional[int]:
    """The ``attempt`` the manifest in ``run_dir`` records (``None``: no manifest, unreadable, or none recorded)."""
    try:
        attempt = RunDirectory(run_dir).read_manifest().get("attempt")
    except Exception:
        return None
    return attempt_number(attempt)


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
