"""What a replication is configured with: :class:`ReplicationSpec`, frozen and validated once.

Built by :func:`~deviate_cb.launch.runner.replicate` from its keyword arguments, by ``deviate-replicate`` from its
flags (:meth:`ReplicationSpec.from_args`), and for a group relaunched from what its run.json records
(:meth:`ReplicationSpec.from_manifest`, ``--until-decided``).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from deviate_cb.errors import UsageError
from deviate_cb.store.configuration import configuration_fields
from deviate_cb.variants import VARIANTS

__all__ = ["MAX_REPLICAS", "ReplicationSpec", "check_replication", "number"]

# The most replicas one launch plans unless `--max-replicas` says more: above it, `-n` is most likely a typo.
MAX_REPLICAS = 10_000
# The fields a relaunched group takes from the launch that relaunches it (where and how it runs, not what).
_RELAUNCH_KEEPS = ("out", "parallel", "timeout", "gpus", "backend", "backend_options", "cold", "argv")


@dataclass(frozen=True)
class ReplicationSpec:
    """One replication's configuration: the keyword arguments of :func:`~deviate_cb.launch.runner.replicate`
    apart from where its progress goes.

    Every field is what ``replicate`` documents under the same name; the constructor checks ``runs``, ``variant``,
    ``seed``, ``parallel``, ``timeout`` and ``max_replicas`` (:func:`check_replication`); the target, the backend
    and its options are checked when the replication starts (they import the project or the backend).

    Example:
        >>> spec = ReplicationSpec(trainer="train.py:main", runs=3, variant="control")
        >>> spec.runs, spec.seed, spec.with_changes(runs=5).runs
        (3, 0, 5)
        >>> ReplicationSpec(trainer="train.py:main", runs=0)
        Traceback (most recent call last):
        ...
        deviate_cb.errors.UsageError: `--runs` must be a positive integer. Received: --runs=0.
    """

    trainer: Optional[str] = None
    command: Optional[Sequence[str]] = None
    trainer_args: Sequence[str] = ()
    keep_project_seeds: bool = False
    keep_project_determinism: bool = False
    cold: bool = False
    metric_regex: Sequence[str] = ()
    runs: int = 1
    variant: str = "algo+impl"
    seed: int = 0
    out: Union[str, Path] = "deviate_runs"
    experiment: Optional[str] = None
    parallel: Optional[int] = None
    timeout: Optional[float] = None
    force: bool = False
    gpus: Union[str, Sequence[str], None] = None
    keras_backend: Optional[str] = None
    backend: str = "local"
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    argv: Optional[Sequence[str]] = None
    kill_grace_s: float = 5.0
    audit: Optional[int] = None
    audit_stop: bool = False
    max_replicas: int = MAX_REPLICAS
    isolate: bool = False

    def __post_init__(self) -> None:
        check_replication(
            runs=self.runs,
            variant=self.variant,
            seed=self.seed,
            parallel=self.parallel,
            timeout=self.timeout,
            limit=self.max_replicas,
        )

    def with_changes(self, **changes: Any) -> ReplicationSpec:
        """A copy with ``changes`` (checked again)."""
        return dataclasses.replace(self, **changes)

    def configuration(
        self, *, trainer: Optional[str], command: Optional[Sequence[str]], keras_backend: Optional[str]
    ) -> dict[str, Any]:
        """The ``configuration`` every replica's run.json records (:func:`~deviate_cb.store.configuration.
        configuration_fields`), the inverse of :meth:`from_manifest`.

        Args:
            trainer: The trainer spec as parsed (``None`` in command mode).
            command: The command as given (``None`` in trainer mode).
            keras_backend: The Keras backend as checked.

        Example:
            >>> spec = ReplicationSpec(trainer="t.py:main", variant="algo", seed=3)
            >>> recorded = spec.configuration(trainer="t.py:main", command=None, keras_backend=None)
            >>> recorded["mode"], recorded["base_seed"]
            ('trainer', 3)
            >>> ReplicationSpec.from_manifest(recorded, experiment="t", variant="algo", base=spec).seed
            3
        """
        return configuration_fields(
            mode="trainer" if trainer is not None else "command",
            variant=self.variant,
            trainer=trainer,
            command=command,
            trainer_args=self.trainer_args,
            base_seed=self.seed,
            keras_backend=keras_backend,
            metric_regex=self.metric_regex,
            keep_project_seeds=self.keep_project_seeds,
            keep_project_determinism=self.keep_project_determinism,
            audit_steps=self.audit,
            isolate=self.isolate,
        )

    @property
    def round_size(self) -> int:
        """The replicas one round of ``--until-decided`` adds: ``parallel``, or one.

        Example:
            >>> ReplicationSpec(parallel=4).round_size, ReplicationSpec().round_size
            (4, 1)
        """
        return self.parallel if isinstance(self.parallel, int) and self.parallel > 0 else 1

    @classmethod
    def from_args(cls, ns: argparse.Namespace, after: Optional[Sequence[str]], argv: Sequence[str]) -> ReplicationSpec:
        """The spec of a parsed ``deviate-replicate`` command line.

        Args:
            ns: The flags, as :func:`~deviate_cb.launch.arguments.add_replication_arguments` declares them.
            after: The words after ``--`` (the command, or the trainer's arguments); ``None`` without ``--``.
            argv: The command line to record in every manifest.
        """
        trainer = ns.trainer
        options = {name: getattr(ns, name) for name in ns.backend_option_names}
        gpus = options.pop("gpus", None)
        return cls(
            trainer=trainer,
            command=after if trainer is None else None,
            trainer_args=(after or ()) if trainer is not None else (),
            keep_project_seeds=ns.keep_project_seeds,
            keep_project_determinism=ns.keep_project_determinism,
            cold=ns.cold,
            isolate=ns.isolate,
            metric_regex=ns.metric_regex,
            runs=number(ns.runs, int),
            variant=ns.variant,
            seed=number(ns.seed, int),
            out=ns.out,
            experiment=ns.experiment,
            parallel=None if ns.parallel is None else number(ns.parallel, int),
            timeout=None if ns.timeout is None else number(ns.timeout, int, float),
            force=ns.force,
            gpus=gpus,
            keras_backend=ns.keras_backend,
            backend=ns.backend,
            backend_options=options,
            argv=list(argv),
            max_replicas=MAX_REPLICAS if ns.max_replicas is None else number(ns.max_replicas, int),
        )

    @classmethod
    def from_manifest(
        cls, configuration: Mapping[str, Any], *, experiment: str, variant: str, base: ReplicationSpec
    ) -> ReplicationSpec:
        """Relaunch the group a recorded ``configuration`` describes (run.json's), as ``base`` runs: its output
        directory, parallelism, timeout, GPUs, backend and ``--cold`` are ``base``'s; never ``force``.

        Example:
            >>> base = ReplicationSpec(trainer="new.py:main", runs=4, parallel=2, force=True)
            >>> recorded = {"mode": "trainer", "trainer": "old.py:main", "variant": "algo", "base_seed": 7}
            >>> b = ReplicationSpec.from_manifest(recorded, experiment="old", variant="algo", base=base)
            >>> b.trainer, b.seed, b.parallel, b.force, b.runs
            ('old.py:main', 7, 2, False, 1)
        """
        kept = {key: getattr(base, key) for key in _RELAUNCH_KEEPS}
        fields: dict[str, Any] = dict(kept, experiment=experiment, variant=configuration.get("variant", variant))
        if configuration.get("mode") == "trainer":
            fields.update(
                trainer=configuration.get("trainer"), trainer_args=tuple(configuration.get("trainer_args") or ())
            )
        else:
            fields.update(command=list(configuration.get("command") or []))
        for key, name in (("base_seed", "seed"), ("keras_backend", "keras_backend"), ("audit_steps", "audit")):
            if configuration.get(key) is not None:
                fields[name] = configuration[key]
        fields["metric_regex"] = tuple(configuration.get("metric_regex") or ())
        for flag in ("keep_project_seeds", "keep_project_determinism", "isolate"):
            if configuration.get(flag):
                fields[flag] = True
        return cls(**fields)


def check_replication(
    *, runs: object, variant: object, seed: object, parallel: object, timeout: object, limit: object = MAX_REPLICAS
) -> None:
    """Raise a one-line :class:`UsageError` for the first of these values that a replication cannot take.

    Example:
        >>> check_replication(runs=2, variant="algo", seed=0, parallel=None, timeout=None)
    """
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise UsageError(f"`--runs` must be a positive integer. Received: --runs={runs}.")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UsageError(f"`--max-replicas` must be a positive integer. Received: --max-replicas={limit}.")
    if runs > limit:
        raise UsageError(
            f"`--runs` must be at most {limit} (the replicas one launch may plan; a guard against a typo): pass "
            f"--max-replicas {runs} to launch that many. Received: --runs={runs}."
        )
    if variant not in VARIANTS:
        raise UsageError(f"`--variant` must be one of {', '.join(VARIANTS)}. Received: --variant={variant}.")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise UsageError(f"`--seed` must be an integer in [0, 2**32). Received: --seed={seed}.")
    if parallel is not None and (isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1):
        raise UsageError(f"`--parallel` must be a positive integer. Received: --parallel={parallel}.")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf")
    ):
        raise UsageError(f"`--timeout` must be a positive number of seconds. Received: --timeout={timeout}.")


def number(raw: str, *kinds: type) -> Any:
    """``raw`` as the first of ``kinds`` that parses it; the raw text when none does (validation then names it).

    Example:
        >>> number("3", int), number("2.5", int, float), number("x", int)
        (3, 2.5, 'x')
    """
    for kind in kinds:
        try:
            return kind(raw.strip())
        except ValueError:
            continue
    return raw
