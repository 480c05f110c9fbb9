"""Backend options in general: the checkers they are built from and the parsing of the options a backend is given.

Example:
    >>> opts = parse_backend_options("slurm", {"partition": "gpu", "time": "1:30:00", "slurm_opt": ["constraint=a100"]})
    >>> opts["partition"], opts["time"], opts["slurm_opt"]
    ('gpu', 90, {'constraint': 'a100'})
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional

from deviate_cb.errors import UsageError
from deviate_cb.launch.backends.base import BUILTIN_BACKENDS, BackendOption, backend_class

__all__ = [
    "CLUSTER_GROUP",
    "REPLICAS_PER_TASK",
    "amount_option",
    "builtin_options",
    "check_options_apply",
    "check_replicas_per_task",
    "integer_option",
    "name_option",
    "parse_backend_options",
]

CLUSTER_GROUP = "slurm and ray backends"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$")


def name_option(flag: str) -> Callable[[Any], str]:
    """A checker of a name option (letters, digits, ``_``, ``-``, ``.``): the name, or a one-line :class:`UsageError`.

    Example:
        >>> name_option("--qos")(" high ")
        'high'
    """

    def check(value: Any) -> str:
        text = str(value).strip()
        if not _NAME.match(text):
            raise UsageError(f"`{flag}` must be a name (letters, digits, '_', '-', '.'). Received: {flag}={value}.")
        return text

    return check


def integer_option(flag: str, minimum: int) -> Callable[[Any], int]:
    """A checker of an integer option: the value as an int, or a one-line :class:`UsageError`.

    Example:
        >>> integer_option("--steps", 1)("20")
        20
    """

    def check(value: Any) -> int:
        try:
            number = int(str(value).strip())
        except ValueError:
            number = minimum - 1
        if number < minimum:
            raise UsageError(f"`{flag}` must be an integer >= {minimum}. Received: {flag}={value}.")
        return number

    return check


def amount_option(flag: str, *, positive: bool) -> Callable[[Any], float]:
    """A checker of an amount (fractions allowed), ``> 0`` when ``positive``, else ``>= 0``.

    Example:
        >>> amount_option("--num-gpus", positive=False)("0.5")
        0.5
    """

    def check(value: Any) -> float:
        try:
            number = float(str(value).strip())
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number < 0 or (positive and number == 0):
            bound = "> 0" if positive else ">= 0"
            raise UsageError(f"`{flag}` must be a number {bound} (fractions allowed). Received: {flag}={value}.")
        return number

    return check


def check_replicas_per_task(value: Any) -> int:
    """``--replicas-per-task``: an integer >= 1 (the replicas one cluster task runs, one after another).

    Example:
        >>> check_replicas_per_task("4")
        4
        >>> try:
        ...     check_replicas_per_task(0)
        ... except UsageError as exc:
        ...     print(exc)
        `--replicas-per-task` must be an integer >= 1. Received: --replicas-per-task=0.
    """
    if isinstance(value, bool):
        value = str(value)
    return integer_option("--replicas-per-task", 1)(value)


# Taken by every cluster backend (slurm, ray): declared once, listed by each.
REPLICAS_PER_TASK = BackendOption(
    "replicas_per_task",
    "--replicas-per-task",
    "replicas each cluster task runs one after another, forked warm from one template per task (default 1: a task "
    "per replica); the resources asked are then a task's",
    CLUSTER_GROUP,
    "K",
    check_replicas_per_task,
)


def builtin_options() -> list[BackendOption]:
    """The options of the built-in backends, each once, in the order the backends declare them.

    Example:
        >>> [option.flag for option in builtin_options()][:2]
        ['--gpus', '--partition']
    """
    found: dict[str, BackendOption] = {}
    for name in BUILTIN_BACKENDS:
        for option in getattr(backend_class(name), "declared", ()):
            found.setdefault(option.name, option)
    return list(found.values())


def check_options_apply(backend: str, given: Mapping[str, Any], accepted: Iterable[str]) -> None:
    """Raise :class:`UsageError` for the first option in ``given`` that ``backend`` does not take.

    Example:
        >>> check_options_apply("ray", {"address": "auto"}, ["address", "num_gpus"])
        >>> try:
        ...     check_options_apply("ray", {"partition": "gpu"}, ["address"])
        ... except UsageError as exc:
        ...     print(exc)
        `--partition` applies to other backends, not to --backend ray. Received: --partition=gpu with --backend ray.
    """
    accepted = set(accepted)
    for name, value in given.items():
        if name not in accepted:
            flags = {option.name: option.flag for option in builtin_options()}
            flag = flags.get(name, f"--{name.replace('_', '-')}")
            raise UsageError(
                f"`{flag}` applies to other backends, not to --backend {backend}. "
                f"Received: {flag}{'' if value is True else f'={value}'} with --backend {backend}."
            )


def parse_backend_options(
    backend: str, raw: Mapping[str, Any], accepted: Optional[Iterable[str]] = None
) -> dict[str, Any]:
    """Check the options given (``None``/empty/False values count as not given) and return them parsed.

    Args:
        backend: The backend's name (:func:`~deviate_cb.launch.backends.base.backend_class` finds it).
        raw: Option name (``partition``, ``num_gpus``, ...) to the value as typed.
        accepted: The option names the backend takes (default: its
            :attr:`~deviate_cb.launch.backends.base.Backend.options`).

    Returns:
        Each option given, through the parser its backend declares for it (as typed when none is declared).

    Example:
        >>> parse_backend_options("ray", {"num_gpus": "0.5", "partition": None})
        {'num_gpus': 0.5}
    """
    given = {k: v for k, v in raw.items() if v is not None and v is not False and v != []}
    factory = backend_class(backend)
    check_options_apply(backend, given, getattr(factory, "options", ()) if accepted is None else accepted)
    parsers = {option.name: option.parse for option in getattr(factory, "declared", ()) if option.parse is not None}
    return {name: parsers[name](value) if name in parsers else value for name, value in given.items()}
