"""Helpers that write real run directories (manifest + Parquet) through deviate_cb.store.run_directory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deviate_cb.store.run_directory import RunDirectory, run_path
from tests.helpers.morin_data import FILES, morin

MORIN_FILES = FILES

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
    return morin(variant)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``deviate ARGS`` in-process; return (exit status, stdout, stderr)."""
    from deviate_cb.cli.main import main

    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err
