"""The run context: what a replica needs to know about itself, carried in environment variables.

``deviate-replicate`` starts every replica as a fresh Python process whose environment holds its context;
the bootstrap, the callbacks and the user's function all read it from here. Standard library only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional, Union

__all__ = ["ENV_PREFIX", "RANK_VARIABLES", "Deterministic", "RunContext", "is_rank_zero", "parse_deterministic"]

ENV_PREFIX = "DEVIATE_"
Deterministic = Union[bool, Literal["warn"]]

# Set by torchrun, Lightning and Keras launchers for every process but the first (unset or 0 there).
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK")

_ENV_RUN_DIR = "DEVIATE_RUN_DIR"
_ENV_EXPERIMENT = "DEVIATE_EXPERIMENT"
_ENV_VARIANT = "DEVIATE_VARIANT"
_ENV_REPLICA = "DEVIATE_REPLICA"
_ENV_SEED = "DEVIATE_SEED"
_ENV_DETERMINISTIC = "DEVIATE_DETERMINISTIC"
_ENV_TRAINER = "DEVIATE_TRAINER"
_ENV_TRAINER_ARGS = "DEVIATE_TRAINER_ARGS"
_ENV_KEEP_PROJECT_SEEDS = "DEVIATE_KEEP_PROJECT_SEEDS"
_ENV_KEEP_PROJECT_DETERMINISM = "DEVIATE_KEEP_PROJECT_DETERMINISM"
_ENV_HASH_SEED = "DEVIATE_HASH_SEED"


def parse_deterministic(value: object, name: str = "deterministic") -> Optional[Deterministic]:
    """Normalise a determinism request: ``True``, ``False``, ``"warn"`` or ``None`` (leave as is).

    Example:
        >>> parse_deterministic("warn"), parse_deterministic("1"), parse_deterministic(None)
        ('warn', True, None)
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered == "warn":
            return "warn"
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off"}:
            return False
    raise ValueError(f"`{name}` must be True, False or 'warn'. Received: {name}={value!r}.")


@dataclass(frozen=True)
class RunContext:
    """Everything a replica knows about itself.

    Attributes:
        run_dir: The replica's run directory (``<out>/experiment=<e>/variant=<v>/replica=<k>``).
        experiment: Experiment name.
        variant: Noise variant name (``algo+impl``, ``algo``, ``impl``, ``control``).
        replica: Replica index ``k``, from 0.
        seed: The seed this replica must use.
        deterministic: Whether deterministic tooling is requested (``True``, ``False`` or ``"warn"``).
        trainer: The ``--trainer`` spec that started the replica, if any.
        trainer_args: The arguments after ``--`` with ``--trainer``: the function sees them as ``sys.argv[1:]``.
        keep_project_seeds: ``True`` when the project's own global seeding calls keep their seeds
            (``--keep-project-seeds``); by default they are taken over (:mod:`deviate_cb.capture.seed_takeover`).
        keep_project_determinism: ``True`` when the project's own determinism switches keep their effect
            (``--keep-project-determinism``); by default they are taken over
            (:mod:`deviate_cb.capture.switch_takeover`).
        hash_seed: ``PYTHONHASHSEED`` of the replica's interpreter (str/bytes hashing, set iteration order);
            ``None``: the replica's seed. ``deviate-replicate`` gives every replica of a study its base seed, so a
            replica forked from a warm-start template (whose hash seed is fixed when it starts) and one started
            cold hash alike.

    Example:
        >>> ctx = RunContext(Path("runs/x"), "exp", "algo", 2, 102, True)
        >>> RunContext.from_env(ctx.to_env()) == ctx
        True
    """

    run_dir: Path
    experiment: str
    variant: str
    replica: int
    seed: int
    deterministic: Deterministic
    trainer: Optional[str] = None
    trainer_args: tuple[str, ...] = ()
    keep_project_seeds: bool = False
    hash_seed: Optional[int] = None
    keep_project_determinism: bool = False

    @property
    def python_hash_seed(self) -> int:
        """The ``PYTHONHASHSEED`` this replica runs with: :attr:`hash_seed`, or the seed when that is ``None``.

        Example:
            >>> RunContext(Path("r"), "e", "algo", 3, 13, True, hash_seed=10).python_hash_seed
            10
        """
        return self.seed if self.hash_seed is None else self.hash_seed

    def to_env(self) -> dict[str, str]:
        """The environment variables that carry this context into a child process.

        Besides the ``DEVIATE_*`` variables this sets ``PYTHONHASHSEED`` (:attr:`python_hash_seed`; only
        effective at interpreter start), Lightning's ``PL_GLOBAL_SEED``/``PL_SEED_WORKERS`` (so DataLoader
        workers are seeded) and, when deterministic, ``CUBLAS_WORKSPACE_CONFIG`` (read when CUDA starts).
        """
        env = {
            _ENV_RUN_DIR: str(self.run_dir),
            _ENV_EXPERIMENT: self.experiment,
            _ENV_VARIANT: self.variant,
            _ENV_REPLICA: str(self.replica),
            _ENV_SEED: str(self.seed),
            _ENV_DETERMINISTIC: str(self.deterministic).lower(),
            "PYTHONHASHSEED": str(self.python_hash_seed),
            "PL_GLOBAL_SEED": str(self.seed),
            "PL_SEED_WORKERS": "1",
        }
        if self.trainer is not None:
            env[_ENV_TRAINER] = self.trainer
        if self.trainer_args:
            env[_ENV_TRAINER_ARGS] = json.dumps(list(self.trainer_args))
        if self.keep_project_seeds:
            env[_ENV_KEEP_PROJECT_SEEDS] = "1"
        if self.keep_project_determinism:
            env[_ENV_KEEP_PROJECT_DETERMINISM] = "1"
        if self.hash_seed is not None:
            env[_ENV_HASH_SEED] = str(self.hash_seed)
        if self.deterministic:
            env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        return env

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> Optional[RunContext]:
        """Read the context from the environment; ``None`` when not running under ``deviate-replicate``."""
        environ = os.environ if environ is None else environ
        run_dir = environ.get(_ENV_RUN_DIR)
        if not run_dir:
            return None
        try:
            return cls(
                run_dir=Path(run_dir),
                experiment=environ[_ENV_EXPERIMENT],
                variant=environ[_ENV_VARIANT],
                replica=int(environ[_ENV_REPLICA]),
                seed=int(environ[_ENV_SEED]),
                deterministic=parse_deterministic(environ[_ENV_DETERMINISTIC]) or False,
                trainer=environ.get(_ENV_TRAINER),
                trainer_args=_string_list(environ.get(_ENV_TRAINER_ARGS)),
                keep_project_seeds=environ.get(_ENV_KEEP_PROJECT_SEEDS, "") in ("1", "true"),
                hash_seed=int(environ[_ENV_HASH_SEED]) if environ.get(_ENV_HASH_SEED) else None,
                keep_project_determinism=environ.get(_ENV_KEEP_PROJECT_DETERMINISM, "") in ("1", "true"),
            )
        except (KeyError, ValueError) as exc:
            raise RuntimeError(
                f"{_ENV_RUN_DIR} is set but the run context in the environment is incomplete or invalid ({exc}). "
                "These variables are set by deviate-replicate; unset DEVIATE_RUN_DIR to run standalone."
            ) from exc

    @classmethod
    def current(cls) -> Optional[RunContext]:
        """The context of this process (``None`` when standalone).

        Example:
            >>> RunContext.current() is None or isinstance(RunContext.current(), RunContext)
            True
        """
        return cls.from_env()


def is_rank_zero(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether this process is global rank zero (``RANK``, ``LOCAL_RANK``, ``NODE_RANK`` unset or 0).

    Example:
        >>> is_rank_zero({}), is_rank_zero({"LOCAL_RANK": "1"})
        (True, False)
    """
    environ = os.environ if environ is None else environ
    return all(environ.get(name, "0") in ("0", "") for name in RANK_VARIABLES)


def _string_list(text: Optional[str]) -> tuple[str, ...]:
    """The JSON list of strings in ``DEVIATE_TRAINER_ARGS`` (absent: none)."""
    if not text:
        return ()
    value = json.loads(text)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{_ENV_TRAINER_ARGS} must be a JSON list of strings, not {text!r}")
    return tuple(value)
