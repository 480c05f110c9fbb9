"""Backend options of ``deviate-replicate`` (``--partition``, ``--address``, ...), checked without any engine.

Every option belongs to the backends that declare it in :attr:`~deviate_cb.launch.base.Backend.options`; an
option given for a backend that does not take it is a usage error (``--partition`` with ``--backend ray``),
and so is a malformed value. Nothing here imports submitit or Ray: the checks are pure string parsing, so a
typo is reported in milliseconds, before any job is submitted.

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

__all__ = [
    "OPTION_FLAGS",
    "RAY_OPTIONS",
    "SLURM_OPTIONS",
    "check_options_apply",
    "check_replicas_per_task",
    "integer_option",
    "parse_backend_options",
    "parse_slurm_time",
]

# option name (keyword) -> command-line flag
OPTION_FLAGS = {
    "partition": "--partition",
    "gpus_per_replica": "--gpus-per-replica",
    "cpus_per_replica": "--cpus-per-replica",
    "mem": "--mem",
    "time": "--time",
    "account": "--account",
    "qos": "--qos",
    "slurm_opt": "--slurm-opt",
    "no_wait": "--no-wait",
    "address": "--address",
    "num_gpus": "--num-gpus",
    "num_cpus": "--num-cpus",
    "gpus": "--gpus",
    "replicas_per_task": "--replicas-per-task",
}

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$")
_MEM = re.compile(r"^\d+[KMGT]?$", re.IGNORECASE)
_SLURM_KEY = re.compile(r"^[a-z][a-z0-9-]*$")
# Options deviate-replicate sets itself: passing them through --slurm-opt would fight the array it submits.
_RESERVED_SLURM_KEYS = frozenset({"array", "output", "error", "open-mode", "signal", "job-name"})


def parse_slurm_time(text: str) -> int:
    """Slurm's ``--time`` formats (``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``) in whole minutes.

    Example:
        >>> parse_slurm_time("30"), parse_slurm_time("2:00:00"), parse_slurm_time("1-12"), parse_slurm_time("0:30")
        (30, 120, 2160, 1)
    """
    text = str(text).strip()
    days = 0
    rest = text
    if "-" in text:
        head, _, rest = text.partition("-")
        if not head.isdigit():
            raise _time_error(text)
        days = int(head)
        parts = rest.split(":")
        if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
            raise _time_error(text)
        hours, minutes, seconds = ([int(p) for p in parts] + [0, 0])[:3]
    else:
        parts = rest.split(":")
        if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
            raise _time_error(text)
        values = [int(p) for p in parts]
        hours, minutes, seconds = {1: (0, values[0], 0), 2: (0, *values), 3: tuple(values)}[len(values)]
    total = math.ceil((((days * 24 + hours) * 60 + minutes) * 60 + seconds) / 60)
    if total < 1:
        raise _time_error(text)
    return total


def _time_error(text: str) -> UsageError:
    return UsageError(
        "`--time` must be a Slurm time limit: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (at least one "
        f"minute). Received: --time={text}."
    )


def _name(flag: str) -> Callable[[Any], str]:
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


def _amount(flag: str, *, positive: bool) -> Callable[[Any], float]:
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


def _mem(value: Any) -> str:
    text = str(value).strip()
    if not _MEM.match(text) or int(re.sub(r"\D", "", text)) == 0:
        raise UsageError(f"`--mem` must be a positive size like 4G, 500M or 16000 (MB). Received: --mem={value}.")
    return text.upper()


def _slurm_opts(values: Any) -> dict[str, str]:
    items = [values] if isinstance(values, str) else list(values)
    result: dict[str, str] = {}
    for item in items:
        key, sep, val = str(item).partition("=")
        key = key.strip().lstrip("-")
        if not sep or not _SLURM_KEY.match(key) or not val.strip():
            raise UsageError(
                "`--slurm-opt` must be KEY=VALUE with an sbatch option name (e.g. constraint=a100, "
                f"mail-type=END). Received: --slurm-opt={item}."
            )
        if key in _RESERVED_SLURM_KEYS:
            raise UsageError(
                f"`--slurm-opt` cannot set {key}: deviate-replicate sets it for the job array. "
                f"Received: --slurm-opt={item}."
            )
        result[key] = val.strip()
    return result


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


def _address(value: Any) -> str:
    text = str(value).strip()
    if not text or any(c.isspace() for c in text):
        raise UsageError(
            f"`--address` must be a Ray cluster address (host:port, ray://host:port, 'auto' or 'local'). "
            f"Received: --address={value}."
        )
    return text


def _flag(value: Any) -> bool:
    return bool(value)


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "partition": _name("--partition"),
    "gpus_per_replica": integer_option("--gpus-per-replica", 0),
    "cpus_per_replica": integer_option("--cpus-per-replica", 1),
    "mem": _mem,
    "time": parse_slurm_time,
    "account": _name("--account"),
    "qos": _name("--qos"),
    "slurm_opt": _slurm_opts,
    "no_wait": _flag,
    "address": _address,
    "num_gpus": _amount("--num-gpus", positive=False),
    "num_cpus": _amount("--num-cpus", positive=True),
    "replicas_per_task": check_replicas_per_task,
}


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
            flag = OPTION_FLAGS.get(name, f"--{name.replace('_', '-')}")
            raise UsageError(
                f"`{flag}` applies to other backends, not to --backend {backend}. "
                f"Received: {flag}{'' if value is True else f'={value}'} with --backend {backend}."
            )


def parse_backend_options(
    backend: str, raw: Mapping[str, Any], accepted: Optional[Iterable[str]] = None
) -> dict[str, Any]:
    """Check the options given (``None``/empty/False values count as not given) and return them parsed.

    Args:
        backend: The backend's name (for messages).
        raw: Option name (``partition``, ``num_gpus``, ...) to the value as typed.
        accepted: The option names the backend takes (default: the built-in backends' lists, looked up by name).

    Example:
        >>> parse_backend_options("ray", {"num_gpus": "0.5", "partition": None})
        {'num_gpus': 0.5}
    """
    given = {k: v for k, v in raw.items() if v is not None and v is not False and v != []}
    if accepted is None:
        accepted = _BUILTIN_OPTIONS.get(backend, ())
    check_options_apply(backend, given, accepted)
    return {name: _PARSERS[name](value) if name in _PARSERS else value for name, value in given.items()}


SLURM_OPTIONS = (
    "partition",
    "gpus_per_replica",
    "cpus_per_replica",
    "mem",
    "time",
    "account",
    "qos",
    "slurm_opt",
    "no_wait",
    "replicas_per_task",
)
RAY_OPTIONS = ("address", "num_gpus", "num_cpus", "replicas_per_task")
_BUILTIN_OPTIONS: dict[str, tuple[str, ...]] = {
    "local": ("gpus",),
    "slurm": SLURM_OPTIONS,
    "ray": RAY_OPTIONS,
}
