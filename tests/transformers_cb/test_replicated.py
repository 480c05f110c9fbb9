"""A trainer function that builds a transformers Trainer, replicated with ``deviate-replicate --trainer``: the callback
is injected, the function's returned metrics are recorded beside the Trainer's own logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_a_trainer_function_is_replicated_with_the_callback_injected(tmp_path: Path) -> None:
    (tmp_path / "finetune.py").write_text(
        textwrap.dedent(
            """
            import os
            from pathlib import Path

            from tests.transformers_cb import models


            def main(epochs: int = 1) -> dict:
                hf = models.trainer(Path(os.environ["DEVIATE_RUN_DIR"]), [], num_train_epochs=epochs)
                hf.train()
                return {"accuracy": 0.5}
            """
        )
    )
    script = Path(sys.executable).with_name("deviate-replicate")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env["PYTHONPATH"] = str(ROOT)
    argv = [
        str(script),
        "-n",
        "2",
        "--variant",
        "algo",
        "--out",
        str(tmp_path / "runs"),
        "--trainer",
        "finetune.py:main",
    ]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    losses = []
    for replica in (0, 1):
        run = tmp_path / "runs" / "experiment=finetune" / "variant=algo" / f"replica={replica}"
        rows = pq.read_table(run / "metrics.parquet").to_pylist()
        assert [r["step"] for r in rows if r["name"] == "loss"] == [1, 2, 3, 4]  # one callback, every step
        assert [(r["stage"], r["value"]) for r in rows if r["name"] == "accuracy"] == [("final", 0.5)]
        losses.append([r["value"] for r in rows if r["name"] == "loss"])
        manifest = json.loads((run / "run.json").read_text())
        assert (manifest["status"], manifest["framework"], manifest["fit"]) == ("completed", "transformers", "ended")
    assert losses[0] != losses[1]  # algo: each replica its own seed
