"""Under real DDP (2 CPU processes, gloo) only global rank zero writes, and synced epoch metrics work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest


@pytest.mark.slow
def test_only_global_rank_zero_writes(tmp_path: Path) -> None:
    script = Path(__file__).with_name("ddp_train.py")
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "runs")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    replicas = sorted((tmp_path / "runs" / "experiment=ddp" / "variant=standalone").iterdir())
    assert [p.name for p in replicas] == ["replica=0"]  # rank 1 claimed no directory of its own
    rows = pq.read_table(replicas[0] / "metrics.parquet").to_pylist()
    # 96 samples split over 2 ranks in batches of 16: 3 steps per epoch, recorded once (by rank zero)
    assert [r["step"] for r in rows if r["name"] == "train_loss_step"] == [1, 2, 3, 4, 5, 6]
    assert [r["epoch"] for r in rows if r["name"] == "loss_synced"] == [0, 1]
    assert [r["seq"] for r in rows] == list(range(len(rows)))
