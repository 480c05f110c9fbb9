"""Helpers for the Keras end-to-end suite: which backends to run, and ``deviate-replicate`` run for real.

``DEVIATE_KERAS_BACKENDS`` (comma-separated; default ``tensorflow,torch,jax``) selects the backends the tests
are parametrized over; a selected backend whose package is not installed is skipped with the reason (so the
suite never collects zero tests).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["BACKENDS", "EXAMPLES", "TRAINERS", "Replicated", "replicate", "selected_backends", "skip_reason"]

BACKENDS = ("tensorflow", "torch", "jax")
PACKAGES = {"tensorflow": ("tensorflow",), "torch": ("torch",), "jax": ("jax", "jaxlib")}
INSTALL = {"tensorflow": "tensorflow-cpu", "torch": "torch", "jax": "'jax[cpu]'"}
TRAINERS = Path(__file__).resolve().parents[2] / "integrations" / "keras" / "trainers"
REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def selected_backends() -> list[str]:
    raw = os.environ.get("DEVIATE_KERAS_BACKENDS", ",".join(BACKENDS))
    names = [name.strip() for name in raw.split(",") if name.strip()]
    unknown = sorted(set(names) - set(BACKENDS))
    if unknown or not names:
        raise pytest.UsageError(
            f"DEVIATE_KERAS_BACKENDS must name some of {', '.join(BACKENDS)}. Received: DEVIATE_KERAS_BACKENDS={raw}."
        )
    return names


def skip_reason(backend: str) -> str | None:
    """Why ``backend`` cannot run here (Keras or the backend's package is not installed), or ``None``."""
    if importlib.util.find_spec("keras") is None:
        return "Keras 3 is not installed (pip install 'deviate-cb[keras]')"
    missing = [m for m in PACKAGES[backend] if importlib.util.find_spec(m) is None]
    if missing:
        return f"Keras backend {backend} needs {', '.join(missing)}, not installed (pip install {INSTALL[backend]})"
    return None


@dataclass
class Replicated:
    """A finished ``deviate-replicate`` run."""

    returncode: int
    stdout: str
    stderr: str
    out: Path
    experiment: str
    variant: str

    def run_dir(self, replica: int) -> Path:
        return self.out / f"experiment={self.experiment}" / f"variant={self.variant}" / f"replica={replica}"

    def manifest(self, replica: int) -> dict[str, Any]:
        return json.loads((self.run_dir(replica) / "run.json").read_text())

    def fingerprint(self, replica: int) -> dict[str, Any]:
        return json.loads((self.run_dir(replica) / "fingerprint.json").read_text())

    def rows(self, replica: int) -> list[dict[str, Any]]:
        import pyarrow.parquet as pq

        path = self.run_dir(replica) / "metrics.parquet"
        return pq.read_table(path).to_pylist() if path.exists() else []

    def logged(self, replica: int) -> list[tuple[Any, ...]]:
        """What training recorded (``final`` rows left out): stage, scope, name, step, epoch, value."""
        keys = ("stage", "scope", "name", "step", "epoch", "value")
        return [tuple(row[key] for key in keys) for row in self.rows(replica) if row["stage"] != "final"]

    def final(self, replica: int) -> dict[str, float]:
        return {r["name"]: r["value"] for r in self.rows(replica) if r["stage"] == "final"}


def child_env() -> dict[str, str]:
    """The test process's environment without a run context or a Keras backend of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    for name in ("CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG", "KERAS_BACKEND", "XLA_FLAGS"):
        env.pop(name, None)
    env["CUDA_VISIBLE_DEVICES"] = ""  # CPU only, as on CI: no GPU placement, no CUDA start-up
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def replicate(tmp: Path, spec: str, args: Sequence[str], *, variant: str, timeout: float = 420) -> Replicated:
    """Run ``deviate-replicate --trainer SPEC --variant V ARGS --out <tmp>/runs`` for real (cwd: ``tmp``)."""
    out = tmp / "runs"
    argv = ["--trainer", spec, "--variant", variant, *args, "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.replicate", *argv],
        cwd=tmp,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    experiment = Path(spec.split(":")[0]).stem
    return Replicated(proc.returncode, proc.stdout, proc.stderr, out, experiment, variant)
