"""Helpers for the launcher tests: run ``deviate-replicate`` for real and read what it wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pyarrow.parquet as pq

TRAINERS = Path(__file__).resolve().parents[1] / "launch" / "trainers"
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Completed:
    """A finished ``deviate-replicate`` run."""

    returncode: int
    stdout: str
    stderr: str
    out: Path

    def variant_dir(self, experiment: str, variant: str) -> Path:
        return self.out / f"experiment={experiment}" / f"variant={variant}"

    def run_dir(self, experiment: str, variant: str, replica: int) -> Path:
        return self.variant_dir(experiment, variant) / f"replica={replica}"

    def manifest(self, experiment: str, variant: str, replica: int) -> dict[str, Any]:
        return json.loads((self.run_dir(experiment, variant, replica) / "run.json").read_text())


def trainer(spec: str) -> str:
    """``basic.py:echo`` -> an absolute path spec into tests/launch/trainers."""
    return f"{TRAINERS / spec}"


def child_env(extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.pop("CUBLAS_WORKSPACE_CONFIG", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


def start_cli(args: Sequence[str], *, cwd: Path, env: Optional[Mapping[str, str]] = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "deviate_cb.cli.replicate", *args],
        cwd=cwd,
        env=child_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A test run as a background job of a non-interactive shell inherits SIGINT ignored, and so would the
        # launcher: give it the default disposition, as a launcher started from a terminal has.
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "run.json").read_text())


def manifest_or_empty(run_dir: Path) -> dict[str, Any]:
    """The manifest, or ``{}`` while it is missing or being replaced."""
    try:
        return manifest(run_dir)
    except (OSError, ValueError):
        return {}


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0) -> None:
    """Poll ``predicate`` every 0.1 s until it is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting")


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a zombie counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "metrics.parquet"
    return pq.read_table(path).to_pylist() if path.exists() else []


def final_metrics(run_dir: Path) -> dict[str, float]:
    return {row["name"]: row["value"] for row in metrics(run_dir) if row["stage"] == "final"}


def tree(path: Path) -> list[str]:
    """Every path under ``path`` (relative), for 'nothing was created' checks."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []
