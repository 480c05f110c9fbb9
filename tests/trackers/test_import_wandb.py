"""``deviate import wandb`` of runs written by W&B itself (offline): a resumed run, whose sessions each write a log
of the same id, is one replica with its whole history. The round trip of ``deviate export wandb`` is in
``test_export_wandb.py``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from store_readers import manifests

SESSIONS = """
import time

import wandb

for start in (0, 2):  # a run, then the same run resumed: two offline-run-* folders of one id
    time.sleep(1.1 * (start > 0))  # W&B names a session's folder by the second it started: two seconds, two folders
    run = wandb.init(project="p", id="resumed1", resume="allow", dir=".", config={"lr": 0.1, "seed": 7},
                     settings=wandb.Settings(silent=True, console="off", x_disable_stats=True))
    for step in range(start, start + 2):
        run.log({"val_acc": 0.5 + step / 10, "nested": {"loss": 1.0 - step / 10}}, step=step)
    run.finish(exit_code=0)
"""


@pytest.mark.slow
def test_a_resumed_run_is_one_replica_with_its_whole_history(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(textwrap.dedent(SESSIONS))
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    done = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(list((tmp_path / "wandb").glob("offline-run-*-resumed1"))) == 2
    out = tmp_path / "runs"
    imported = subprocess.run([str(Path(sys.executable).with_name("deviate")), "import", "wandb", str(tmp_path),
                               "--group-by", "params.lr", "--out", str(out)], capture_output=True, text=True,
                              timeout=300)  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    (manifest,) = manifests(out)
    assert manifest["status"] == "completed" and manifest["seed"] == 7 and manifest["experiment"].endswith("lr-0.1")
    assert manifest["source"]["run_id"] == "resumed1" and manifest["source"]["tracker"] == "wandb"
    table = pq.read_table(next(out.glob("**/metrics.parquet"))).to_pylist()
    assert [(r["step"], r["value"]) for r in table if r["name"] == "val_acc"] == [(s, 0.5 + s / 10) for s in range(4)]
    assert [r["step"] for r in table if r["name"] == "nested/loss"] == [0, 1, 2, 3]
