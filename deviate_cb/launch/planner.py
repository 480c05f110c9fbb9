"""The replication plan: from variant, base seed and ``n`` to one :class:`ReplicaPlan` per replica."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from deviate_cb.context import RunContext
from deviate_cb.errors import SchemaVersionError, UsageError
from deviate_cb.launch.outdir import check_store_path
from deviate_cb.store.bounded_read import HostileFileError
from deviate_cb.store.configuration import configuration_differences, configuration_of
from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.parts import attempt_number
from deviate_cb.store.run_directory import RunDirectory, run_path
from deviate_cb.variants import get_variant

__all__ = [
    "ATTEMPTS_DIR",
    "SEED_LIMIT",
    "ReplicaPlan",
    "ReplicationPlan",
    "clear_previous_attempt",
    "plan_replicas",
]

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


class ReplicationPlan:
    """The plan of one launch: checked at once, its replicas produced one at a time.

    Building it checks the arguments and every replica directory that already exists (one listing of the variant
    directory, one manifest read per existing replica); iterating yields one :class:`ReplicaPlan` per replica,
    in order, without touching the disk for replicas that do not exist yet. Memory and time before the first
    replica starts therefore grow with the replicas already on disk, not with ``runs``.

    A completed replica is skipped unless ``force``; one whose recorded seed or configuration differs from this
    launch's is refused (pooling them would mix what differs): use the first run's arguments, ``--force`` to
    rerun every replica with these, or a new ``--experiment``. Completed replicas beyond ``runs`` that ran
    another configuration are listed in :attr:`other_configurations` (the report refuses to pool them). A replica
    whose manifest cannot be read (a FIFO, JSON nested too deep, an oversized or corrupt file) is rerun, and
    :attr:`unreadable` says why: the file and what was found, for the launcher's one line.

    Raises:
        UsageError: A seed outside ``[0, 2**32)``; a completed replica that was run with another seed or
            configuration; a symbolic link or a file where an experiment, variant or replica directory (or its
            ``.attempts``) belongs.
        SchemaVersionError: A manifest written by a newer deviate-cb.

    Example:
        >>> import tempfile
        >>> plan = ReplicationPlan(Path(tempfile.mkdtemp()), "mlp", "algo", runs=3, base_seed=10)
        >>> len(plan), plan.seed_range, [(p.replica, p.seed, p.run) for p in plan]
        (3, (10, 12), [(0, 10, True), (1, 11, True), (2, 12, True)])
    """

    def __init__(
        self,
        out: Path,
        experiment: str,
        variant: str,
        runs: int,
        base_seed: int = 0,
        *,
        trainer: Optional[str] = None,
        trainer_args: tuple[str, ...] = (),
        keep_project_seeds: bool = False,
        keep_project_determinism: bool = False,
        force: bool = False,
        configuration: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.spec = get_variant(variant)
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise UsageError(f"`--runs` must be a positive integer. Received: --runs={runs!r}.")
        if isinstance(base_seed, bool) or not isinstance(base_seed, int) or not 0 <= base_seed < SEED_LIMIT:
            raise UsageError(f"`--seed` must be an integer in [0, 2**32). Received: --seed={base_seed!r}.")
        if self.spec.seed_for(base_seed, runs - 1) >= SEED_LIMIT:
            raise UsageError(
                f"`--seed` plus `--runs` must stay below 2**32 (variant {variant} gives replica k the seed --seed + k)."
                f" Received: --seed={base_seed}, --runs={runs}."
            )
        self.out, self.experiment, self.variant, self.runs, self.base_seed = (
            Path(out),
            experiment,
            variant,
            runs,
            base_seed,
        )
        self.trainer, self.trainer_args, self.keep_project_seeds, self.force = (
            trainer,
            tuple(trainer_args),
            keep_project_seeds,
            force,
        )
        self.keep_project_determinism = keep_project_determinism
        self.configuration = None if configuration is None else dict(configuration)
        self.variant_dir = run_path(self.out, experiment, variant, 0).parent
        check_store_path(self.variant_dir.parent, "an experiment directory", str(out))
        check_store_path(self.variant_dir, "a variant directory", str(out))
        self.existing: dict[int, ReplicaPlan] = {}
        self.other_configurations: dict[int, list[str]] = {}
        self.unreadable: dict[int, str] = {}
        for replica in _replica_numbers(self.variant_dir):
            if replica < runs:
                self.existing[replica] = self._plan_existing(replica)
            else:
                self._note_beyond(replica)

    def __len__(self) -> int:
        return self.runs

    def __iter__(self) -> Iterator[ReplicaPlan]:
        for replica in range(self.runs):
            known = self.existing.get(replica)
            yield known if known is not None else ReplicaPlan(self._context(replica), True, None, 1)

    @property
    def seed_range(self) -> tuple[int, int]:
        """The first and the last replica's seeds (equal when the variant gives every replica the same seed)."""
        return self.spec.seed_for(self.base_seed, 0), self.spec.seed_for(self.base_seed, self.runs - 1)

    def _context(self, replica: int) -> RunContext:
        return RunContext(
            run_dir=run_path(self.out, self.experiment, self.variant, replica),
            experiment=self.experiment,
            variant=self.variant,
            replica=replica,
            seed=self.spec.seed_for(self.base_seed, replica),
            deterministic=self.spec.deterministic,
            trainer=self.trainer,
            trainer_args=self.trainer_args,
            keep_project_seeds=self.keep_project_seeds,
            keep_project_determinism=self.keep_project_determinism,
            hash_seed=self.base_seed,  # one PYTHONHASHSEED per study: warm-start templates fix it when they start
        )

    def _plan_existing(self, replica: int) -> ReplicaPlan:
        ctx = self._context(replica)
        check_store_path(ctx.run_dir, "a replica directory", str(self.out))
        check_store_path(ctx.run_dir / ATTEMPTS_DIR, "the folder of earlier attempts", str(self.out))
        manifest = _read(ctx.run_dir, self.unreadable, replica)
        status = _status(manifest)
        if status == "completed" and not self.force and manifest is not None:
            self._check_same(replica, ctx, manifest)
        run = self.force or status != "completed"
        attempt = 1 if manifest is None else (attempt_number(manifest.attempt) or 1)
        if run and manifest is not None:
            attempt += 1
        return ReplicaPlan(context=ctx, run=run, previous_status=status, attempt=attempt)

    def _check_same(self, replica: int, ctx: RunContext, manifest: RunManifest) -> None:
        """Refuse to resume over a completed replica that ran with another seed or configuration."""
        if manifest.seed != ctx.seed:
            raise UsageError(
                f"`--seed` gives replica {replica} seed {ctx.seed}, but {ctx.run_dir} completed with seed "
                f"{manifest.seed!r}; resuming would mix seeds. Use the --seed of the first run, --force "
                f"to rerun, or another --out/--experiment. Received: --seed={self.base_seed}."
            )
        recorded = configuration_of(manifest)
        if self.configuration is None or recorded is None:
            return
        differences = configuration_differences(recorded, self.configuration)
        if differences:
            raise UsageError(
                f"replica {replica} in {ctx.run_dir} completed with another configuration "
                f"({'; '.join(differences)}: recorded vs this launch); resuming would pool two configurations in "
                "one group. Use a new --experiment for this configuration, or --force to rerun every replica with it."
            )

    def _note_beyond(self, replica: int) -> None:
        """Record a completed replica past ``runs`` whose configuration differs from this launch's."""
        if self.configuration is None:
            return
        run_dir = run_path(self.out, self.experiment, self.variant, replica)
        try:
            manifest = _read(run_dir) if not run_dir.is_symlink() else None
        except SchemaVersionError:
            return
        recorded = configuration_of(manifest) if manifest is not None and _status(manifest) == "completed" else None
        if recorded is not None:
            differences = configuration_differences(recorded, self.configuration)
            if differences:
                self.other_configurations[replica] = differences


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
    keep_project_determinism: bool = False,
    force: bool = False,
    configuration: Optional[Mapping[str, Any]] = None,
) -> list[ReplicaPlan]:
    """Plan ``runs`` replicas of ``variant``, skipping completed ones unless ``force``: :class:`ReplicationPlan`
    as a list.

    Raises:
        UsageError: See :class:`ReplicationPlan`.
        SchemaVersionError: A manifest written by a newer deviate-cb.

    Example:
        >>> import tempfile
        >>> plans = plan_replicas(Path(tempfile.mkdtemp()), "mlp", "algo", runs=3, base_seed=10)
        >>> [(p.replica, p.seed, p.context.deterministic, p.run) for p in plans]
        [(0, 10, True, True), (1, 11, True, True), (2, 12, True, True)]
    """
    plan = ReplicationPlan(
        out,
        experiment,
        variant,
        runs,
        base_seed,
        trainer=trainer,
        trainer_args=trainer_args,
        keep_project_seeds=keep_project_seeds,
        keep_project_determinism=keep_project_determinism,
        force=force,
        configuration=configuration,
    )
    return list(plan)


def _replica_numbers(variant_dir: Path) -> list[int]:
    """The replica numbers of the ``replica=<k>`` entries in ``variant_dir`` (one listing), in order."""
    try:
        names = os.listdir(variant_dir)
    except FileNotFoundError:
        return []
    except NotADirectoryError:  # check_store_path refused it already; defensive
        return []
    numbers = []
    for name in names:
        key, sep, value = name.partition("=")
        if sep and key == "replica" and value.isascii() and value.isdecimal() and str(int(value)) == value:
            numbers.append(int(value))
    return sorted(numbers)


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
        attempt = RunDirectory(run_dir).manifest().attempt
    except Exception:
        return None
    return attempt_number(attempt)


def _status(manifest: Optional[RunManifest]) -> Optional[str]:
    if manifest is None:
        return None
    if manifest.is_empty:
        return "unreadable"
    return "unknown" if manifest.status is None else manifest.status


def _read(run_dir: Path, why: Optional[dict[int, str]] = None, replica: int = 0) -> Optional[RunManifest]:
    """The manifest, ``None`` when absent, an empty one when unreadable (rerun it; ``why[replica]`` then names the
    file and what was found); newer schemas raise."""
    run = RunDirectory(run_dir)
    if not os.path.lexists(run.manifest_path):  # a FIFO or a folder there is not "no manifest": it is said below
        return None
    try:
        return run.manifest()
    except SchemaVersionError:
        raise
    except HostileFileError as exc:  # a FIFO, nested too deep, oversized: never parsed
        found = f"is {exc.reason}" if exc.reason.startswith("a ") else f"holds {exc.reason}"
        if why is not None:
            why[replica] = f"its run.json ({exc.path}) {found}"
        return RunManifest()
    except UsageError as exc:  # not JSON, or not an object: "<path>: not a valid run manifest (...)."
        if why is not None:
            said = " ".join(str(exc).split()).removeprefix(f"{run.manifest_path}: ").rstrip(".")
            why[replica] = f"its run.json ({run.manifest_path}) is {said[:300]}"
        return RunManifest()
