"""Submitting a study's replicas to Slurm: the cluster check, the submitit executor and the array tasks.

Example:
    >>> experiment_name(Path("runs/experiment=mlp/variant=algo"))
    'mlp'
    >>> submitit_folder(Path("runs/experiment=mlp/variant=algo")).parent.as_posix()
    'runs/experiment=mlp/variant=algo/.submitit'
    >>> refusal_reason(RuntimeError("sbatch: error: invalid\\n  account"))
    'sbatch refused the job array: sbatch: error: invalid account'
"""

from __future__ import annotations

import os
import subprocess
import time as _time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import UsageError, require
from deviate_cb.launch.backends.base import Job
from deviate_cb.launch.backends.remote import TaskSpec, node_argv

__all__ = ["array_executor", "check_sinfo", "experiment_name", "refusal_reason", "submitit_folder", "task_specs"]


def check_sinfo(partition: Optional[str]) -> None:
    """``sinfo`` must answer, and know ``partition`` (unless ``None``); else a one-line :class:`UsageError`."""
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(
            f"`--backend slurm` needs Slurm's client commands and a reachable controller, but `sinfo` could not "
            f"run ({exc}). Received: --backend=slurm."
        ) from None
    if out.returncode != 0:
        raise UsageError(
            "`--backend slurm` needs a reachable Slurm controller, but `sinfo` failed: "
            f"{' '.join(out.stderr.split()) or out.returncode}. Received: --backend=slurm."
        )
    partitions = {p.strip().rstrip("*") for p in out.stdout.split()}
    if partition is not None and partition not in partitions:
        raise UsageError(
            f"`--partition` must be one of this cluster's partitions ({', '.join(sorted(partitions))}). "
            f"Received: --partition={partition}."
        )


def submitit_folder(variant_dir: Path) -> Path:
    """A fresh folder for one submission's pickles and logs: ``<variant>/.submitit/<time>-<pid>``."""
    return variant_dir / ".submitit" / f"{_time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"


def experiment_name(variant_dir: Path) -> str:
    """The experiment of a variant directory (``experiment=<name>/variant=<v>``), ``replicas`` if it has none."""
    return variant_dir.parent.name.partition("=")[2] or "replicas"


def array_executor(folder: Path, parameters: Mapping[str, Any]) -> Any:
    """A ``submitit.SlurmExecutor`` writing to ``folder``, set up with ``parameters`` (no automatic requeue)."""
    submitit = require("submitit", extra="slurm")
    executor = submitit.SlurmExecutor(folder=folder, max_num_timeout=0)
    executor.update_parameters(**parameters)
    return executor


def task_specs(jobs: Sequence[Job], kill_grace_s: float, *, warm: bool = False) -> list[TaskSpec]:
    """One spec per job: its run directory (where its logs go), environment and timeout; with ``warm``, the
    modules its task's template imports (a task of several replicas)."""
    return [
        TaskSpec(
            str(Path(j.stdout_path).parent),
            dict(j.env),
            j.timeout_s,
            kill_grace_s,
            "slurm",
            argv=node_argv(j.argv),
            cwd=None if j.cwd is None else str(j.cwd),
            warm_modules=j.warm_modules if warm else None,
        )
        for j in jobs
    ]


def refusal_reason(exc: BaseException) -> str:
    """The launch error of every replica when ``sbatch`` refused the array (bad account, QOS, option...)."""
    return f"sbatch refused the job array: {' '.join(str(exc).split())[-500:]}"
