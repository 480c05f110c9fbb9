"""Helpers shared by the Slurm and Ray suites: run ``deviate-replicate`` for real and compare run directories.

"Equal to what the local backend produces" means: for every replica, the same metric rows (step, epoch, stage,
name, value; wall-clock times aside) and the same manifest, except for fields that say when, where and by which
process it ran, warm or cold (:data:`VOLATILE`), and the fields only a cluster backend adds (``slurm_job_id``...).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

import pyarrow.parquet as pq

from tests.helpers.replicate_helpers import Completed

REPO = Path(__file__).resolve().parents[2]
TRAINERS = REPO / "tests" / "launch" / "trainers"
KERAS_TRAINERS = REPO / "integrations" / "keras" / "trainers"
VOLATILE = frozenset(
    {
        "started_at",
        "ended_at",
        "duration_s",
        "host",
        "pid",
        "pid_start",  # the process's start time, recorded to prove it the replica's before a rerun signals it
        "launcher_pid",
        "argv",
        "backend",
        "slot",
        "python",
        "bootstrap",  # pids and interpreter paths of the replica's processes
        "start_mode",  # warm (forked from a template) or cold: how the process started, never what it computed
        "warm",  # the template that forked it and its timings
        "cold_reason",
        "cpu_count",  # the machine it ran on (a node's, a Slurm allocation's) and how loaded it was
        "cpus_usable",
        "load_avg_start",
        "load_avg_end",
        "logger_versions",  # the loggers' folders: paths in the run store it ran in (Lightning's default logger takes
        # the Slurm job id as its version on Slurm)
    }
)
COMMAND_PROJECT = REPO / "tests" / "launch" / "projects" / "self_seeding.py"


def env(extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The test process's environment minus run context and GPU pinning, with the repository importable."""
    result = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    result.pop("CUDA_VISIBLE_DEVICES", None)
    result["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), result.get("PYTHONPATH")]))
    result.update(extra or {})
    return result


def start(args: Sequence[str], out: Path, extra_env: Optional[Mapping[str, str]] = None) -> subprocess.Popen[str]:
    cut = list(args).index("--") if "--" in args else len(args)  # after `--` the words are the command's
    return subprocess.Popen(
        [sys.executable, "-m", "deviate_cb.cli.replicate", *args[:cut], "--out", str(out), *args[cut:]],
        cwd=out.parent,
        env=env(extra_env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def replicate(
    args: Sequence[str], out: Path, extra_env: Optional[Mapping[str, str]] = None, timeout: float = 600
) -> Completed:
    proc = start(args, out, extra_env)
    stdout, stderr = proc.communicate(timeout=timeout)
    return Completed(proc.returncode, stdout, stderr, out)


def metric_rows(run_dir: Path) -> list[tuple[Any, ...]]:
    table = pq.read_table(run_dir / "metrics.parquet").to_pylist()
    return sorted((r["stage"], r["name"], r["step"], r["epoch"], r["value"]) for r in table)


def _without_thread_variables(record: Any) -> Any:
    """A manifest's ``determinism`` without the thread variables of ``in_effect.env``
    (deviate_cb.launch.backends.threads)."""
    from deviate_cb.launch.backends.threads import THREAD_VARIABLES

    env = (record.get("in_effect") or {}).get("env") if isinstance(record, dict) else None
    if not isinstance(env, dict):
        return record
    kept = {k: v for k, v in env.items() if k not in THREAD_VARIABLES}
    return {**record, "in_effect": {**record["in_effect"], "env": kept}}


def assert_same_run_dirs(local: Path, other: Path, extra_fields: Sequence[str] = ()) -> None:
    """The two replicas ran identically: same metrics, same manifest up to :data:`VOLATILE` and ``extra_fields``."""
    assert metric_rows(local) == metric_rows(other), f"metrics differ: {local} vs {other}"
    a = json.loads((local / "run.json").read_text())
    b = json.loads((other / "run.json").read_text())
    assert set(a) - VOLATILE == set(b) - VOLATILE - set(extra_fields), (sorted(a), sorted(b))
    for key in set(a) - VOLATILE:
        if key == "determinism":  # the CPU threads are the machine's share (cores // --parallel, a task's CPUs)
            a[key], b[key] = (_without_thread_variables(d[key]) for d in (a, b))
        if key == "metrics_summary":  # the series summaries must agree; the file's size and mtime are its own
            a[key], b[key] = ({k: v for k, v in d[key].items() if not k.startswith("file_")} for d in (a, b))
        assert a[key] == b[key], (key, a[key], b[key])
    assert (other / "fingerprint.json").is_file()
