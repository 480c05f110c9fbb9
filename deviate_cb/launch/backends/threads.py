"""CPU threads per replica: each replica's share of the cores, so replicas run at once never oversubscribe the CPU.

Example:
    >>> replica_thread_env(cores=2, at_once=2, environ={})["OMP_NUM_THREADS"]
    '1'
    >>> replica_thread_env(cores=8, at_once=2, environ={"OMP_NUM_THREADS": "3"})
    {}
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Optional

from deviate_cb.fingerprint.frameworks import THREAD_BUDGET_ENV

__all__ = [
    "BUDGET_ENV",
    "THREAD_VARIABLES",
    "USER_CHOICE",
    "allocated_cpus",
    "budget_note",
    "replica_thread_env",
    "task_note",
    "task_thread_env",
    "thread_env",
    "threads_per_replica",
    "usable_cpus",
]

#: The variables that size a replica's CPU thread pools: OpenMP (torch's intra-op pool, libgomp, Intel OpenMP),
#: MKL, OpenBLAS, BLIS, Apple's Accelerate, NumExpr, TensorFlow's intra-op and inter-op pools.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
)
#: The variable through which the user chooses the threads of every replica: when set, the launcher sets none.
USER_CHOICE = "OMP_NUM_THREADS"
#: The threads per replica the launcher gave (absent: it gave none), recorded in the fingerprint's ``threads``.
BUDGET_ENV = THREAD_BUDGET_ENV


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity where the platform has one, else ``os.cpu_count()``.

    Example:
        >>> usable_cpus() >= 1
        True
    """
    if hasattr(os, "sched_getaffinity"):
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except OSError:
            pass
    return max(1, os.cpu_count() or 1)


def threads_per_replica(cores: int, at_once: int) -> int:
    """Each replica's share of ``cores`` when ``at_once`` replicas run together: ``cores // at_once``, at least 1.

    Example:
        >>> threads_per_replica(16, 4), threads_per_replica(2, 2), threads_per_replica(2, 8)
        (4, 1, 1)
    """
    return max(1, int(cores) // max(1, int(at_once)))


def thread_env(threads: int, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to add for ``threads`` threads: every one of :data:`THREAD_VARIABLES` that ``environ`` lacks,
    and :data:`BUDGET_ENV`; nothing when ``environ`` sets :data:`USER_CHOICE` (the user chose).

    Example:
        >>> env = thread_env(4, {"MKL_NUM_THREADS": "2"})
        >>> env["OMP_NUM_THREADS"], "MKL_NUM_THREADS" in env, env[BUDGET_ENV]
        ('4', False, '4')
        >>> thread_env(4, {"OMP_NUM_THREADS": "1"})
        {}
    """
    if environ.get(USER_CHOICE):
        return {}
    env = {name: str(threads) for name in THREAD_VARIABLES if not environ.get(name)}
    env[BUDGET_ENV] = str(threads)
    return env


def replica_thread_env(*, cores: int, at_once: int, environ: Mapping[str, str]) -> dict[str, str]:
    """What a local replica's environment gains when ``at_once`` replicas share ``cores``: ``cores // at_once``
    threads (at least 1) where ``environ`` (the launching environment) has not chosen; nothing for a sequential
    study, whose replica keeps every core as before.

    Example:
        >>> replica_thread_env(cores=2, at_once=8, environ={})["TF_NUM_INTRAOP_THREADS"]
        '1'
        >>> replica_thread_env(cores=16, at_once=1, environ={})
        {}
    """
    if at_once <= 1:
        return {}
    return thread_env(threads_per_replica(cores, at_once), environ)


def allocated_cpus(environ: Mapping[str, str], num_cpus: Optional[float] = None) -> int:
    """The CPUs a cluster task was given: ``num_cpus`` (a Ray task's), else Slurm's ``SLURM_CPUS_PER_TASK``
    (``--cpus-per-task``), else the CPUs this process may use (:func:`usable_cpus`; Slurm binds a task to its own).

    Example:
        >>> allocated_cpus({"SLURM_CPUS_PER_TASK": "6"}), allocated_cpus({}, num_cpus=0.5), allocated_cpus({}, 4.0)
        (6, 1, 4)
    """
    if num_cpus is not None:
        return max(1, int(num_cpus))
    try:
        given = int(environ.get("SLURM_CPUS_PER_TASK", ""))
    except ValueError:
        given = 0
    return given if given > 0 else usable_cpus()


def task_thread_env(environ: Mapping[str, str], num_cpus: Optional[float] = None) -> dict[str, str]:
    """What a replica of a Slurm or Ray task gains (its replicas run one after another): the task's CPUs
    (:func:`allocated_cpus`) as its threads, where ``environ`` (the replica's environment so far) has not chosen.

    Example:
        >>> task_thread_env({"SLURM_CPUS_PER_TASK": "4"})["OMP_NUM_THREADS"]
        '4'
        >>> task_thread_env({"OMP_NUM_THREADS": "2"}, num_cpus=8)
        {}
    """
    return thread_env(allocated_cpus(environ, num_cpus), environ)


def budget_note(*, cores: int, at_once: int, environ: Mapping[str, str]) -> str:
    """The launcher's words for the threads of local replicas run ``at_once`` (empty for a sequential study).

    Example:
        >>> budget_note(cores=2, at_once=2, environ={})
        '1 CPU thread each (OMP/MKL/OpenBLAS/torch/TF; set OMP_NUM_THREADS to choose)'
        >>> budget_note(cores=2, at_once=2, environ={"OMP_NUM_THREADS": "2"})
        'CPU threads as OMP_NUM_THREADS=2 says'
    """
    if at_once <= 1:
        return ""
    chosen = environ.get(USER_CHOICE)
    if chosen:
        return f"CPU threads as {USER_CHOICE}={chosen} says"
    threads = threads_per_replica(cores, at_once)
    return f"{threads} CPU thread{'s' * (threads != 1)} each (OMP/MKL/OpenBLAS/torch/TF; set {USER_CHOICE} to choose)"


def task_note(cpus: Optional[float], environ: Mapping[str, str]) -> str:
    """The launcher's words for the threads of a cluster task's replicas: ``cpus`` the task's CPUs when the launcher
    knows them (``--num-cpus``, ``--cpus-per-replica``), else the node says (``SLURM_CPUS_PER_TASK``, affinity).

    Example:
        >>> task_note(2.0, {}), task_note(None, {})
        ('2 CPU threads each', "CPU threads: the task's CPUs")
        >>> task_note(4, {"OMP_NUM_THREADS": "1"})
        'CPU threads as OMP_NUM_THREADS=1 says'
    """
    chosen = environ.get(USER_CHOICE)
    if chosen:
        return f"CPU threads as {USER_CHOICE}={chosen} says"
    if cpus is None:
        return "CPU threads: the task's CPUs"
    threads = max(1, int(cpus))
    return f"{threads} CPU thread{'s' * (threads != 1)} each"
