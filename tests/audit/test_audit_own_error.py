"""A plain-loop audit that stops on an error of its own (:mod:`deviate_cb.audit.recording.plain_loop`) writes no record
but its reason, in the manifest's ``audit.error``, and ``deviate audit`` prints that reason rather than "nothing was
hooked". The error is a real one: a module that returns a nested tensor, which the digest cannot flatten."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.replicate_helpers import child_env

pytestmark = pytest.mark.slow

SCRIPT = """
import torch

class Ragged(torch.nn.Module):
    def forward(self, x):
        return torch.nested.nested_tensor([x[0], x[1, :2]])

torch.manual_seed(0)
model, ragged = torch.nn.Linear(3, 3), Ragged()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    out = model(torch.ones(2, 3))
    ragged(out)
    out.sum().backward()
    optimizer.step()
    optimizer.zero_grad()
print("trained")
"""


def test_the_audits_own_error_is_recorded_and_printed_exit_3(tmp_path: Path) -> None:
    (tmp_path / "ragged.py").write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "audit", "--out", "runs", "--steps", "2", "--", "python",
         "ragged.py"],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 3, (done.stdout, done.stderr)
    reason = "the audit stopped at training step 0 on an error in its hooks: RuntimeError("
    run = tmp_path / "runs" / "experiment=ragged" / "variant=control"
    for replica in (0, 1):
        manifest = json.loads((run / f"replica={replica}" / "run.json").read_text())
        assert manifest["status"] == "completed"  # the training went on
        assert manifest["audit"]["error"].startswith(reason) and manifest["audit"]["recorded_steps"] == 0
        assert not (run / f"replica={replica}" / "audit.parquet").exists()
        assert f"error: replica {replica} recorded no audit: {reason}" in done.stderr
    assert "nothing was hooked" not in done.stderr and "nested" in done.stderr
