"""Helpers that write real run directories (manifest + Parquet) through deviate_cb.store."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deviate_cb.store import RunDirectory, run_path

_REPO = Path(__file__).resolve().parents[2]
_MORIN_CANDIDATES = [
    Path(os.environ.get("DEVIATE_REFERENCE_DATA", _REPO / "shared" / "reference-data")) / "morin2020",
    _REPO / "shared" / "reference-data" / "morin2020",
    _REPO.parent / "shared" / "reference-data" / "morin2020",
]
MORIN = next((p for p in _MORIN_CANDIDATES if p.is_dir()), _MORIN_CANDIDATES[-1])
MORIN_FILES = {"impl": "resnet_same_seed.csv", "algo+impl": "resnet_different_seeds.csv"}

Row = tuple[str, str, float]  # (stage, name, value), in recording order


def write_run(
    root: Path,
    experiment: str,
    variant: str,
    replica: int,
    rows: Sequence[Row] = (),
    status: str = "completed",
    **manifest: Any,
) -> Path:
    """Write one run: its manifest and, when ``rows`` is not empty, its metrics.parquet."""
    run = RunDirectory(run_path(root, experiment, variant, replica))
    run.update_manifest(status=status, seed=replica, variant=variant, replica=replica, **manifest)
    if rows:
        n = len(rows)
        run.metrics().append(
            {
                "step": list(range(n)),
                "epoch": [0] * n,
                "stage": [r[0] for r in rows],
                "scope": ["epoch"] * n,
                "name": [r[1] for r in rows],
                "value": [r[2] for r in rows],
                "wall_time": [float(i) for i in range(n)],
            }
        )
    return run.path


def morin_data(variant: str) -> np.ndarray:
    """The 50 x 2 table (test loss, test accuracy) of one Morin & Willetts (2020) file."""
    if not MORIN.is_dir():
        pytest.skip(f"reference data not found (looked in {', '.join(map(str, _MORIN_CANDIDATES))})")
    return np.loadtxt(MORIN / MORIN_FILES[variant], delimiter=",")
