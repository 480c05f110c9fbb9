"""CPU threads per replica under ``--parallel``: real ``deviate-replicate`` launches of a tiny torch training.

Each replica of ``--parallel 2`` gets ``max(1, cores // 2)`` threads, ``cores`` being the CPUs this machine lets
the launcher use (its affinity), unless the launching environment sets ``OMP_NUM_THREADS``, which is kept; the
launcher's first line says which, and each replica's fingerprint records the threads in effect. Nothing here
asserts speed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from deviate_cb.launch.backends.threads import THREAD_VARIABLES, threads_per_replica, usable_cpus

pytest.importorskip("torch")

PROJECT = Path(__file__).parent / "projects"
REPO = Path(__file__).resolve().parents[2]


def _replicate(tmp_path: Path, parallel: int, runs: int, env: Optional[dict[str, str]] = None) -> tuple[str, Path]:
    script = Path(sys.executable).parent / "deviate-replicate"
    if not script.exists():
        pytest.fail(f"deviate-replicate is not installed next to {sys.executable} (pip install -e .)")
    child = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_") and k not in THREAD_VARIABLES}
    child["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), child.get("PYTHONPATH")]))
    child.update(env or {})
    out = tmp_path / "runs"
    argv = [str(script), "-n", str(runs), "--parallel", str(parallel), "--out", str(out), "--experiment", "probe"]
    argv += ["--", "python", "thread_probe.py", "{run_dir}"]
    proc = subprocess.run(argv, cwd=PROJECT, env=child, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, out / "experiment=probe" / "variant=algo+impl"


def _recorded(variant_dir: Path, replica: int) -> tuple[dict[str, Any], dict[str, Any]]:
    run_dir = variant_dir / f"replica={replica}"
    probe = json.loads((run_dir / "threads.json").read_text())
    fingerprint = json.loads((run_dir / "fingerprint.json").read_text())
    return probe, fingerprint["threads"]


@pytest.mark.slow
def test_each_parallel_replica_gets_its_share_of_the_cores(tmp_path: Path) -> None:
    expected = threads_per_replica(usable_cpus(), 2)
    stdout, variant_dir = _replicate(tmp_path, parallel=2, runs=2)
    each = "thread" if expected == 1 else "threads"
    assert f"{expected} CPU {each} each" in stdout.splitlines()[0], stdout
    for replica in (0, 1):
        probe, threads = _recorded(variant_dir, replica)
        assert probe["torch_threads"] == expected, probe
        assert probe["env"]["OMP_NUM_THREADS"] == probe["env"]["MKL_NUM_THREADS"] == str(expected), probe
        assert probe["env"]["TF_NUM_INTRAOP_THREADS"] == str(expected), probe
        assert threads["torch_intra_op"] == expected and threads["OMP_NUM_THREADS"] == str(expected), threads
        assert threads["launcher_budget"] == expected, threads


@pytest.mark.slow
def test_a_user_set_omp_num_threads_is_kept(tmp_path: Path) -> None:
    # another count than the launcher's where the machine allows one (torch takes no more threads than cores)
    chosen = 1 if threads_per_replica(usable_cpus(), 2) > 1 else usable_cpus()
    stdout, variant_dir = _replicate(tmp_path, parallel=2, runs=2, env={"OMP_NUM_THREADS": str(chosen)})
    assert f"CPU threads as OMP_NUM_THREADS={chosen} says" in stdout.splitlines()[0], stdout
    for replica in (0, 1):
        probe, threads = _recorded(variant_dir, replica)
        assert probe["env"]["OMP_NUM_THREADS"] == str(chosen) and probe["torch_threads"] <= chosen, probe
        assert probe["torch_threads"] == threads["torch_intra_op"] and threads["OMP_NUM_THREADS"] == str(chosen)
        assert probe["env"]["MKL_NUM_THREADS"] is None and probe["env"]["DEVIATE_THREADS"] is None, probe
        assert threads["launcher_budget"] is None, threads


@pytest.mark.slow
def test_a_sequential_study_keeps_every_core(tmp_path: Path) -> None:
    stdout, variant_dir = _replicate(tmp_path, parallel=1, runs=1)
    assert "CPU thread" not in stdout.splitlines()[0], stdout
    probe, threads = _recorded(variant_dir, 0)
    assert all(value is None for value in probe["env"].values()), probe
    assert threads["launcher_budget"] is None, threads
