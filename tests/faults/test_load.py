"""A study of 300 replicas, 8 at a time, through the real ``deviate-replicate`` and ``deviate report``: every
replica completes once with exactly the rows its seed gives, nothing is left half-written or uncompacted, the
launcher's open files stay bounded, and the report's numbers are NumPy's over the values the seeds give.

Each replica is a fresh Python process (bootstrap, metrics writer, fingerprint): about half a CPU-second each,
so the study takes about 80 s on two cores.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from seeded_fn import value_of

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

pytestmark = pytest.mark.slow

RUNS = 300
PARALLEL = 8
BASE_SEED = 900  # seeds 900..1199: the values wrap around at 1000


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _open_files(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def test_300_replicas_complete_once_with_their_own_rows_and_the_report_agrees(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    out = tmp_path / "runs"
    started = time.monotonic()
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "deviate_cb.cli.replicate",
            "--trainer",
            f"{HERE / 'seeded_fn.py'}:main",
            "-n",
            str(RUNS),
            "--parallel",
            str(PARALLEL),
            "--seed",
            str(BASE_SEED),
            "--experiment",
            "load",
            "--out",
            str(out),
        ],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The launcher's open files, sampled while it runs: a leak per replica would grow with the replicas done.
    samples: list[int] = []
    while launcher.poll() is None:
        count = _open_files(launcher.pid)
        if count is not None:
            samples.append(count)
        time.sleep(0.25)
    stdout, stderr = launcher.communicate(timeout=60)
    wall = time.monotonic() - started
    assert launcher.returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert f"{RUNS} completed, 0 failed, 0 skipped" in stdout, stdout[-3000:]
    assert "warning" not in stdout + stderr, stdout[-3000:] + stderr[-3000:]
    if samples:  # /proc is Linux's
        assert max(samples) - min(samples) <= 2 * PARALLEL, f"launcher's open files grew: {samples}"

    variant_dir = out / "experiment=load" / "variant=algo+impl"
    names = sorted(p.name for p in variant_dir.iterdir())
    assert names == sorted(f"replica={k}" for k in range(RUNS)), names[:10]  # and the lock is gone
    leftovers = [p for p in out.rglob("*") if p.name.endswith(".tmp") or (p.is_file() and p.parent.suffix == ".parts")]
    assert leftovers == [], leftovers[:10]  # no half-written file, no part left uncompacted

    expected = []
    seen_replicas, seen_seeds = set(), set()
    for k in range(RUNS):
        run_dir = variant_dir / f"replica={k}"
        manifest = json.loads((run_dir / "run.json").read_text())
        assert manifest["status"] == "completed" and manifest["exit_code"] == 0, (k, manifest.get("error"))
        assert manifest["attempt"] == 1 and manifest["replica"] == k and manifest["seed"] == BASE_SEED + k
        seen_replicas.add(manifest["replica"])
        seen_seeds.add(manifest["seed"])
        assert manifest["final_metrics"] == ["acc", "seed"]
        assert (run_dir / "stderr.log").read_text() == ""
        rows = pq.read_table(run_dir / "metrics.parquet").to_pylist()
        found = sorted((r["stage"], r["scope"], r["name"], r["value"]) for r in rows)
        seed = manifest["seed"]
        assert found == [("final", "final", "acc", value_of(seed)), ("final", "final", "seed", float(seed))], k
        assert sorted(r["seq"] for r in rows) == [0, 1]
        expected.append(value_of(seed))
    assert len(seen_replicas) == RUNS and len(seen_seeds) == RUNS

    report = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "report", str(out), "--format", "json"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    assert not re.search(r"warning", report.stderr), report.stderr
    rows = {row["metric"]: row for row in json.loads(report.stdout)}
    assert set(rows) == {"acc", "seed"}
    acc = rows["acc"]
    assert (acc["experiment"], acc["variant"], acc["n"], acc["n_nonfinite"]) == ("load", "algo+impl", RUNS, 0)
    values = np.array(expected)
    assert acc["mean"] == pytest.approx(float(np.mean(values)), rel=1e-12)
    assert acc["std"] == pytest.approx(float(np.std(values, ddof=1)), rel=1e-12)
    assert (acc["min"], acc["max"]) == (float(values.min()), float(values.max()))
    seeds = np.arange(BASE_SEED, BASE_SEED + RUNS, dtype=float)
    assert rows["seed"]["mean"] == pytest.approx(float(np.mean(seeds)), rel=1e-12)
    assert rows["seed"]["std"] == pytest.approx(float(np.std(seeds, ddof=1)), rel=1e-12)
    print(f"{RUNS} replicas, {PARALLEL} at a time: {wall:.1f} s")
