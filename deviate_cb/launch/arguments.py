"""The flags of a replication, declared once: what ``deviate-replicate`` parses into a ``ReplicationSpec``, for
a plain study, the rounds of ``--until-decided`` and every backend's own options.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from deviate_cb.errors import UsageError
from deviate_cb.launch.backends.base import BUILTIN_BACKENDS, BackendOption, backend_class
from deviate_cb.launch.backends.options import builtin_options

__all__ = [
    "REPLICATION_FLAGS",
    "add_backend_arguments",
    "add_replication_arguments",
    "add_rounds_arguments",
    "plugin_options",
]


# dest -> (flags, keyword arguments of add_argument): the flags of ReplicationSpec.from_args, in --help's order
_FLAGS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "trainer": (
        ("--trainer",),
        dict(metavar="SPEC", help="module:function or path/to/file.py:function (or give a command after --)"),
    ),
    "runs": (("-n", "--runs"), dict(required=True, metavar="N", help="number of replicas")),
    "variant": (("--variant",), dict(default="algo+impl", help="algo+impl (default), algo, impl or control")),
    "seed": (("--seed",), dict(default="0", metavar="SEED", help="base seed (default 0)")),
    "out": (("--out",), dict(default="deviate_runs", metavar="DIR", help="output directory (default deviate_runs)")),
    "experiment": (
        ("--experiment",),
        dict(metavar="NAME", help="experiment name (default: module name or file stem)"),
    ),
    "parallel": (
        ("--parallel",),
        dict(
            metavar="K",
            help="replicas run at once (default: 1 locally, all on slurm/ray: the cluster queues); each gets cores "
            "// K CPU threads unless OMP_NUM_THREADS is set",
        ),
    ),
    "timeout": (
        ("--timeout",),
        dict(metavar="SECONDS", help="terminate a replica after this long (marked timeout)"),
    ),
    "force": (("--force",), dict(action="store_true", help="rerun replicas that already completed")),
    "max_replicas": (
        ("--max-replicas",),
        dict(
            metavar="N",
            help="the most replicas -n may ask for (default 10000, a guard against a typo); raise it to launch more",
        ),
    ),
    "keep_project_seeds": (
        ("--keep-project-seeds",),
        dict(
            action="store_true",
            help="leave the project's own seeding calls (seed_everything(42), ...) alone; suppresses seed variance",
        ),
    ),
    "keep_project_determinism": (
        ("--keep-project-determinism",),
        dict(
            action="store_true",
            help="leave the project's own determinism switches (torch.use_deterministic_algorithms, "
            "enable_op_determinism, Trainer(deterministic=...)) in effect; the variant may then not measure what it "
            "says",
        ),
    ),
    "isolate": (
        ("--isolate",),
        dict(
            action="store_true",
            help="run each replica in its own working directory <run_dir>/.workdir/<this directory's name>, which "
            "links every top-level entry of this directory (and .. those of its parent), so files the project writes "
            "to relative paths (history.json, ./out/ckpt.pt, a linked file it rewrites) are its own",
        ),
    ),
    "cold": (
        ("--cold",),
        dict(
            action="store_true",
            help="start every replica as a fresh interpreter (default: fork them from a template that has imported "
            "the frameworks once; the numbers are the same)",
        ),
    ),
    "metric_regex": (
        ("--metric-regex",),
        dict(
            action="append",
            default=[],
            metavar="REGEX",
            help="record the last match of each named group in a replica's output as a final metric, "
            "e.g. 'acc=(?P<acc>[0-9.]+)' (repeatable)",
        ),
    ),
    "keras_backend": (
        ("--keras-backend",),
        dict(
            metavar="NAME",
            help="tensorflow, torch or jax: KERAS_BACKEND of every replica (default: the environment's)",
        ),
    ),
}
REPLICATION_FLAGS = tuple(_FLAGS)


def add_replication_arguments(
    parser: argparse.ArgumentParser,
    *,
    only: Optional[Sequence[str]] = None,
    defaults: Optional[Mapping[str, Any]] = None,
    helps: Optional[Mapping[str, str]] = None,
    backends: bool = True,
    plugin: Sequence[BackendOption] = (),
) -> None:
    """Declare the flags :meth:`~deviate_cb.launch.spec.ReplicationSpec.from_args` reads, backend options included.

    Args:
        parser: Where to declare them.
        only: The destinations to declare (names of :data:`REPLICATION_FLAGS`, in its order); default: all.
        defaults: Another default for some of them (``-n`` is then no longer required).
        helps: Another help line for some of them.
        backends: Also declare ``--backend`` and every backend's options (:func:`add_backend_arguments`).
        plugin: The options of the plug-in backend the command line names (:func:`plugin_options`).

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_replication_arguments(parser)
        >>> ns = parser.parse_args(["-n", "3", "--backend", "slurm", "--partition", "gpu"])
        >>> ns.runs, ns.partition, "partition" in ns.backend_option_names
        ('3', 'gpu', True)
        >>> audit = argparse.ArgumentParser()
        >>> add_replication_arguments(audit, only=("runs", "variant"), defaults={"runs": "2"}, backends=False)
        >>> audit.parse_args([]).runs
        '2'
    """
    wanted = REPLICATION_FLAGS if only is None else tuple(only)
    unknown = sorted(set(wanted) - set(_FLAGS))
    if unknown:
        raise ValueError(f"`only` must name flags of {REPLICATION_FLAGS}. Received: {unknown}.")
    defaults, helps = defaults or {}, helps or {}
    for dest in (name for name in REPLICATION_FLAGS if name in wanted):
        flags, declared = _FLAGS[dest]
        kwargs = dict(declared)
        if dest in defaults:
            kwargs.update(default=defaults[dest], required=False)
        if dest in helps:
            kwargs["help"] = helps[dest]
        parser.add_argument(*flags, **kwargs)
    if backends:
        add_backend_arguments(parser, plugin)


def add_backend_arguments(parser: argparse.ArgumentParser, plugin: Sequence[BackendOption] = ()) -> None:
    """Declare ``--backend`` and the flags of every built-in backend's options, and of ``plugin``'s (a plug-in
    backend's :attr:`~deviate_cb.launch.backends.base.Backend.declared`), one help section per backend;
    ``backend_option_names`` (a default of the namespace) lists their destinations.

    Raises:
        UsageError: A plug-in's option has the flag of another option (the plug-in's author must rename it).

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_backend_arguments(parser, [BackendOption("queue", "--queue", "the queue", "inline backend", "Q")])
        >>> ns = parser.parse_args(["--slurm-opt", "a=1", "--slurm-opt", "b=2", "--queue", "fast"])
        >>> ns.slurm_opt, ns.queue, "queue" in ns.backend_option_names
        (['a=1', 'b=2'], 'fast', True)
    """
    parser.add_argument(
        "--backend", default="local", metavar="NAME", help="local (default), slurm, ray, or an installed plug-in"
    )
    groups: dict[str, Any] = {}
    names: list[str] = []
    builtin = builtin_options()
    taken = {option.name for option in builtin}  # a plug-in's option of a built-in's name is the built-in's flag
    for option in (*builtin, *(o for o in plugin if o.name not in taken)):
        group = groups.get(option.group) or groups.setdefault(option.group, parser.add_argument_group(option.group))
        try:
            _add_option(group, option)
        except argparse.ArgumentError as exc:
            raise UsageError(
                f"the backend option `{option.name}` cannot take the flag {option.flag}: {exc}. "
                "Received: a plug-in backend declaring it (its author must rename the flag)."
            ) from None
        names.append(option.name)
    parser.set_defaults(backend_option_names=tuple(names))


def _add_option(group: Any, option: BackendOption) -> None:
    if option.switch:
        group.add_argument(option.flag, dest=option.name, action="store_true", help=option.help)
    else:
        action = "append" if option.repeatable else "store"
        group.add_argument(option.flag, dest=option.name, action=action, metavar=option.metavar, help=option.help)


def plugin_options(words: Sequence[str]) -> tuple[BackendOption, ...]:
    """The options declared by the plug-in backend that ``words`` (a command line) names with ``--backend``; none
    for a built-in backend, or for a name that no backend has or whose plug-in cannot load (running says why).

    Example:
        >>> plugin_options(["-n", "2", "--backend", "slurm"])
        ()
    """
    peek = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)  # prints nothing
    peek.add_argument("--backend", default="local")
    try:
        name = peek.parse_known_args(list(words))[0].backend
    except argparse.ArgumentError:  # `--backend` without a value: the full parser says so, once
        return ()
    if name in BUILTIN_BACKENDS:
        return ()
    try:
        return tuple(getattr(backend_class(name), "declared", ()))
    except UsageError:
        return ()


def add_rounds_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the flags of ``--until-decided`` and ``--until-precision`` (:mod:`deviate_cb.launch.rounds`)."""
    rounds = parser.add_argument_group("replicate until the answer is known (rounds of --parallel replicas, or one)")
    rounds.add_argument(
        "--until-decided",
        action="store_true",
        help="run this group and the --against group in rounds until a group-sequential test decides which is "
        "better on --metric (or, with --effect, that no difference that large exists), or --max-runs",
    )
    rounds.add_argument("--against", action="append", default=[], metavar="KEY=VALUE",
                        help="the group to compare with, e.g. experiment=baseline (repeatable, ANDed)")  # fmt: skip
    rounds.add_argument(
        "--until-precision",
        metavar="REL",
        help="run this group in rounds until its std of --metric is known to +-REL (half-width of the interval over "
        "the std, e.g. 0.25), or --max-runs",
    )
    rounds.add_argument("--metric", metavar="NAME", help="the metric the rounds decide on, e.g. val_acc")
    rounds.add_argument("--max-runs", metavar="N", help="the most runs per group")
    rounds.add_argument("--direction", metavar="max|min", help="whether higher is better (default: from the name)")
    rounds.add_argument("--effect", metavar="X", help="a difference that matters, in the metric's units")
    rounds.add_argument("--alpha", default="0.05", metavar="A", help="error rate over the whole sequence (0.05)")
    rounds.add_argument(
        "--on",
        default="mean",
        choices=("mean", "spread", "improvement"),
        help="decide on the mean, the spread, or improvement: P(A>B) (a run of A beats a run of B, ties half) "
        "against --threshold",
    )
    rounds.add_argument(
        "--threshold",
        metavar="P",
        help="with --on improvement: A better when P(A>B)'s repeated interval is above P, B better below 1 - P, "
        "no improvement either way inside (1 - P, P); in (0.5, 1) (default 0.75, Bouthillier et al. 2021)",
    )
    rounds.add_argument(
        "--boundary",
        metavar="B",
        help="--until-decided: obf (the default: O'Brien-Fleming-type, early looks decide only on a large "
        "difference) or pocock (one level at every look); a sequence under way keeps the one it was planned with",
    )
    rounds.add_argument("--level", default="0.95", metavar="L", help="--until-precision: the std interval's level")
    rounds.add_argument("--yes", action="store_true",
                        help="--until-decided: relaunch the --against group even when its run.json records another "
                        "program or directory than this command's (shown; asked on a terminal otherwise)")  # fmt: skip
