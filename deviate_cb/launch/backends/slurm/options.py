"""The options of the ``slurm`` backend (``--partition``, ``--time``, ``--slurm-opt``...), with their parsers.

Example:
    >>> [option.flag for option in SLURM_OPTIONS][:3]
    ['--partition', '--gpus-per-replica', '--cpus-per-replica']
"""

from __future__ import annotations

import math
import re
from typing import Any

from deviate_cb.errors import UsageError
from deviate_cb.launch.backends.base import BackendOption
from deviate_cb.launch.backends.options import REPLICAS_PER_TASK, integer_option, name_option

__all__ = ["SLURM_GROUP", "SLURM_OPTIONS", "parse_slurm_time"]

SLURM_GROUP = "slurm backend (submitit job array; needs pip install 'deviate-cb[slurm]')"
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


def _flag(value: Any) -> bool:
    return bool(value)


def _slurm(name: str, flag: str, help: str, metavar: str, parse: Any) -> BackendOption:
    return BackendOption(name, flag, help, SLURM_GROUP, metavar, parse)


SLURM_OPTIONS = (
    _slurm("partition", "--partition", "Slurm partition", "NAME", name_option("--partition")),
    _slurm("gpus_per_replica", "--gpus-per-replica", "GPUs per replica (--gpus-per-node of each task)", "N",
           integer_option("--gpus-per-replica", 0)),
    _slurm("cpus_per_replica", "--cpus-per-replica", "CPUs per replica (--cpus-per-task)", "N",
           integer_option("--cpus-per-replica", 1)),
    _slurm("mem", "--mem", "memory per replica, e.g. 8G", "SIZE", _mem),
    _slurm("time", "--time", "time limit per replica, e.g. 90 or 1:30:00 (default 60 min)", "LIMIT", parse_slurm_time),
    _slurm("account", "--account", "Slurm account to charge", "NAME", name_option("--account")),
    _slurm("qos", "--qos", "Slurm quality of service", "NAME", name_option("--qos")),
    BackendOption("slurm_opt", "--slurm-opt", "any other sbatch option (repeatable)", SLURM_GROUP, "KEY=VALUE",
                  _slurm_opts, repeatable=True),
    BackendOption("no_wait", "--no-wait", "submit and return; follow with `deviate status DIR`", SLURM_GROUP,
                  parse=_flag, switch=True),
    REPLICAS_PER_TASK,
)  # fmt: skip
