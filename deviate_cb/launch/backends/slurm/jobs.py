"""Slurm job states without submitit's watcher: ``squeue`` for live jobs, ``sacct`` for how they ended.

Example:
    >>> parse_squeue("12_0|RUNNING\\n12_1|PENDING\\n")
    {'12_0': 'RUNNING', '12_1': 'PENDING'}
    >>> parse_sacct("12_0|COMPLETED|0:0\\n12_1|CANCELLED by 0|0:15\\n12_1.batch|CANCELLED|0:15\\n")
    {'12_0': 'COMPLETED', '12_1': 'CANCELLED'}
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Optional

from deviate_cb.store.atomic import atomic_write_bytes
from deviate_cb.store.bounded_read import HostileFileError, load_json

__all__ = [
    "ACTIVE_STATES",
    "JOBS_FILE",
    "SlurmQueryError",
    "live_states",
    "parse_sacct",
    "parse_squeue",
    "query_sacct",
    "query_squeue",
    "read_jobs_file",
    "write_jobs_file",
]

JOBS_FILE = ".deviate-jobs.json"
# States of a job that is not over yet (squeue's long names).
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "SUSPENDED",
        "STOPPED",
        "SIGNALING",
        "STAGE_OUT",
        "RESV_DEL_HOLD",
        "SPECIAL_EXIT",
        "PREEMPTED",
    }
)


class SlurmQueryError(RuntimeError):
    """``squeue``/``sacct`` is missing or failed; the message says which and why."""


def _run(argv: list[str], timeout_s: float) -> str:
    if shutil.which(argv[0]) is None:
        raise SlurmQueryError(f"`{argv[0]}` is not on PATH")
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise SlurmQueryError(f"`{' '.join(argv)}` did not answer within {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        detail = " ".join(proc.stderr.split()) or f"exit status {proc.returncode}"
        raise SlurmQueryError(f"`{argv[0]}` failed: {detail}")
    return proc.stdout


def _base_ids(job_ids: Iterable[str]) -> list[str]:
    return sorted({str(j).split("_")[0] for j in job_ids})


def parse_squeue(text: str) -> dict[str, str]:
    """``squeue -h -r -o '%i|%T'`` output -> {job id: state}."""
    states: dict[str, str] = {}
    for line in text.splitlines():
        job, sep, state = line.strip().partition("|")
        if sep and job:
            states[job] = state.strip().split(" ")[0].upper()
    return states


def parse_sacct(text: str) -> dict[str, str]:
    """``sacct -n -P -X -o JobID,State,ExitCode`` output -> {job id: state}; job steps (``12_1.batch``) skipped."""
    states: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 2 or not parts[0] or "." in parts[0]:
            continue
        states[parts[0]] = parts[1].strip().split(" ")[0].upper()
    return states


def query_squeue(job_ids: Iterable[str], timeout_s: float = 30.0) -> dict[str, str]:
    """States of the queued/running ones among ``job_ids`` (array elements one by one); finished ones are absent."""
    bases = _base_ids(job_ids)
    if not bases:
        return {}
    try:
        text = _run(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(bases)], timeout_s)
    except SlurmQueryError as exc:
        if "invalid job id" in str(exc).lower():  # every one of them has left the controller: none is live
            return {}
        raise
    return parse_squeue(text)


def query_sacct(job_ids: Iterable[str], timeout_s: float = 30.0) -> dict[str, str]:
    """Final (or current) states of ``job_ids`` from accounting; raises :class:`SlurmQueryError` without it."""
    bases = _base_ids(job_ids)
    if not bases:
        return {}
    text = _run(["sacct", "-n", "-P", "-X", "-o", "JobID,State,ExitCode", "-j", ",".join(bases)], timeout_s)
    return parse_sacct(text)


def write_jobs_file(variant_dir: Path, backend: str, jobs: Mapping[str, str], **info: Any) -> None:
    """Record (merging with what is there) which job runs which replica, keyed by the run directory's name.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> write_jobs_file(d, "slurm", {"replica=0": "12_0"}); write_jobs_file(d, "slurm", {"replica=1": "13_0"})
        >>> read_jobs_file(d)["replicas"]
        {'replica=0': '12_0', 'replica=1': '13_0'}
    """
    current = read_jobs_file(variant_dir, program="deviate-replicate")
    replicas = {**current.get("replicas", {}), **{str(k): v for k, v in jobs.items()}}
    data = {**current, **info, "backend": backend, "replicas": replicas}
    atomic_write_bytes(variant_dir / JOBS_FILE, json.dumps(data, indent=1, sort_keys=True).encode())


def read_jobs_file(variant_dir: Path, program: str = "deviate") -> dict[str, Any]:
    """The job record of a variant directory (``{}`` when there is none or it is unreadable).

    The store is untrusted: a FIFO, an oversized file or JSON nested too deep there is never parsed
    (:mod:`deviate_cb.store.bounded_read`) and counts as no record, after one warning line naming it
    (``program: warning: ...`` on stderr).

    Example:
        >>> import os, tempfile
        >>> d = Path(tempfile.mkdtemp()); os.mkfifo(d / JOBS_FILE)
        >>> read_jobs_file(d, program="doctest")  # never blocks; one warning line on stderr names the FIFO
        {}
    """
    path = Path(variant_dir) / JOBS_FILE
    try:
        data = load_json(path)
    except HostileFileError as exc:
        sys.stderr.write(f"{program}: warning: {exc}\n")
        return {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def live_states(job_ids: Iterable[str]) -> Optional[dict[str, str]]:
    """``squeue`` states of the live ones among ``job_ids``; ``None`` when Slurm cannot be asked."""
    ids = list(job_ids)
    try:
        states = query_squeue(ids, timeout_s=10.0)
    except SlurmQueryError:
        return None
    return {j: states[j] for j in ids if states.get(j) in ACTIVE_STATES}
